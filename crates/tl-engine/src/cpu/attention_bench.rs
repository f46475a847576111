//! Time of one decode row's attention for a key/value head shared by 3 query
//! heads of 64 (the default model's shape), on the f16 path, at a few depths.
//! Ignored by default; run with
//! `cargo test --release -p tl-engine --lib attention::bench -- --ignored --nocapture`.

use super::attend_heads;
use crate::cpu::bench::seconds_per_call;
use crate::cpu::test_values::{pseudo_random, pseudo_random_f16};

const HEAD_DIM: usize = 64;
const SHARING_HEADS: usize = 3;

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn attention_benchmark() {
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    // Queries a few times larger than the keys, so scores vary as in a
    // model and new maxima (which rescale the running output) are rare.
    let queries: Vec<f32> = pseudo_random(SHARING_HEADS * HEAD_DIM, 1)
        .into_iter()
        .map(|q| q * 4.0)
        .collect();
    let mut out = vec![0.0f32; SHARING_HEADS * HEAD_DIM];
    for depth in [64, 128, 512, 2048] {
        let keys = pseudo_random_f16(depth * HEAD_DIM, 2, 1.0);
        let values = pseudo_random_f16(depth * HEAD_DIM, 3, 1.0);
        let seconds = seconds_per_call(|| {
            attend_heads(
                (&queries, HEAD_DIM),
                (&keys, &values, 0),
                (scale, 1),
                &mut out,
            );
        });
        println!(
            "attention, {SHARING_HEADS} heads of {HEAD_DIM} sharing keys, depth {depth}: {:.2} µs ({:.1} ns a position)",
            seconds * 1e6,
            seconds * 1e9 / depth as f64
        );
    }
}
