//! How fast the batched kernel's inner loop could run: the same instructions
//! per block pair as `vec_dot::group_tile` (2 weight rows × 4 activation rows:
//! `maddubs`, `madd`, `cvt`, a broadcast scale and an `fma`; Q8_0 adds a
//! `sign`) over data that stays in L1, with no unpacking, scale products or
//! stores around it. The real kernel's time per pair against this is its
//! efficiency, and pairs × this time is a floor under a batched step's matrix
//! products; the variant without the integer and conversion steps shows what
//! loads and FMAs alone cost. Ignored by default; run with
//! `cargo test --release -p tl-engine --lib loop_peak -- --ignored --nocapture`.

use std::arch::x86_64::*;
use std::time::Instant;

use super::simd::{load_i8x32, load_u8x32};

const BLOCKS: usize = 18;
const ROWS: usize = 2;
const GROUP: usize = 4;

/// Data of one tile: weights `[block][row]`, activations `[block][c]`, scale
/// products `[block][row][c]`.
struct Tile {
    weights: Vec<[u8; 32]>,
    acts: Vec<[i8; 32]>,
    products: Vec<f32>,
}

/// What each block pair runs.
#[derive(Clone, Copy, PartialEq)]
enum Pair {
    /// The Q4_0 / Q4_1 tile: `maddubs`, `madd`, `cvt`, broadcast scale, `fma`.
    Full,
    /// As `Full` with Q8_0's `sign` of the activations by the weights first.
    FullSigned,
    /// Loads, the broadcast scale and the `fma` only.
    LoadsAndFma,
}

#[target_feature(enable = "avx2,fma,f16c")]
fn run(tile: &Tile, reps: usize, pair: Pair) -> f32 {
    let mut acc = [_mm256_setzero_ps(); ROWS * GROUP];
    let ones = _mm256_set1_epi16(1);
    for _ in 0..reps {
        for b in 0..BLOCKS {
            let weights: [__m256i; ROWS] =
                std::array::from_fn(|r| load_u8x32(&tile.weights[b * ROWS + r]));
            for c in 0..GROUP {
                let act = load_i8x32(&tile.acts[b * GROUP + c]);
                for (r, weight) in weights.iter().enumerate() {
                    let lanes = match pair {
                        Pair::Full | Pair::FullSigned => {
                            let act = if pair == Pair::FullSigned {
                                // The other row's bytes stand in for the signs.
                                _mm256_sign_epi8(act, weights[(r + 1) % ROWS])
                            } else {
                                act
                            };
                            let pairs = _mm256_maddubs_epi16(*weight, act);
                            _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones))
                        }
                        Pair::LoadsAndFma => _mm256_castsi256_ps(_mm256_add_epi32(*weight, act)),
                    };
                    let k = r * GROUP + c;
                    let scale = _mm256_broadcast_ss(&tile.products[b * ROWS * GROUP + k]);
                    acc[k] = _mm256_fmadd_ps(scale, lanes, acc[k]);
                }
            }
        }
    }
    let total = acc
        .iter()
        .fold(_mm256_setzero_ps(), |t, a| _mm256_add_ps(t, *a));
    _mm256_cvtss_f32(total)
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn batched_kernel_loop_peak() {
    let tile = Tile {
        weights: (0..BLOCKS * ROWS).map(|i| [(i % 15) as u8; 32]).collect(),
        acts: (0..BLOCKS * GROUP)
            .map(|i| [(i % 100) as i8 - 50; 32])
            .collect(),
        products: (0..BLOCKS * ROWS * GROUP)
            .map(|i| 1.0 + i as f32 * 1e-6)
            .collect(),
    };
    let reps = 200_000;
    let pairs = (reps * BLOCKS * ROWS * GROUP) as f64;
    for pair in [Pair::Full, Pair::FullSigned, Pair::LoadsAndFma] {
        let fastest = (0..9)
            .map(|_| {
                let start = Instant::now();
                // SAFETY: this module is compiled only when the build enables
                // AVX2, FMA and F16C (see `cpu/mod.rs`).
                std::hint::black_box(unsafe { run(&tile, reps, pair) });
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min);
        let what = match pair {
            Pair::Full => "maddubs + madd + cvt + broadcast + fma",
            Pair::FullSigned => "Q8_0: sign + maddubs + madd + cvt + broadcast + fma",
            Pair::LoadsAndFma => "loads, broadcast and fma only",
        };
        println!(
            "{what}: {:.3} ns per block pair (one thread)",
            fastest / pairs * 1e9
        );
    }
}
