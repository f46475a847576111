//! Throughput of the CPU matmul against candle's `QMatMul` on the same weights,
//! for the shapes of a 135M-parameter model. Ignored by default; run with
//! `cargo test --release -p tl-engine --lib cpu::bench -- --ignored --nocapture`.
//! `TL_BENCH_ONLY="Q4_1 576→1536 512"` times one case (or a comma-separated
//! list) without candle, and
//! `TL_BENCH_THREADS` changes the thread count (default 2), and `TL_BENCH_VNNI=0`
//! keeps batches on the AVX2 kernels where the CPU has AVX-512 VNNI;
//! `TL_BENCH_REPACK=0` runs Q4_0 and Q4_K with `vec_dot`'s arithmetic.

use std::time::{Duration, Instant};

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};

use super::test_support::{quantize_weights, random_super_blocks, Rng};
use super::{QuantizedMatrix, WeightType};

/// Seconds per call of `f`: the fastest of many batches, since other processes on
/// a shared machine only ever add time.
pub(crate) fn seconds_per_call(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut calls = 0u32;
    while calls < 3 || start.elapsed() < Duration::from_millis(100) {
        f();
        calls += 1;
    }
    let batch = (calls / 10).max(1);
    (0..30)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_secs_f64() / f64::from(batch)
        })
        .fold(f64::INFINITY, f64::min)
}

pub(crate) fn candle_dtype(ty: WeightType) -> GgmlDType {
    match ty {
        WeightType::Q4_0 => GgmlDType::Q4_0,
        WeightType::Q4_1 => GgmlDType::Q4_1,
        WeightType::Q5_0 => GgmlDType::Q5_0,
        WeightType::Q5_1 => GgmlDType::Q5_1,
        WeightType::Q8_0 => GgmlDType::Q8_0,
        WeightType::Q2_K => GgmlDType::Q2K,
        WeightType::Q3_K => GgmlDType::Q3K,
        WeightType::Q4_K => GgmlDType::Q4K,
        WeightType::Q5_K => GgmlDType::Q5K,
        WeightType::Q6_K => GgmlDType::Q6K,
    }
}

/// Seconds per call of candle's `QMatMul::forward`, and its output.
fn candle_matmul(
    ty: WeightType,
    bytes: &[u8],
    (rows, cols): (usize, usize),
    x: &[f32],
    m: usize,
) -> (f64, Vec<f32>) {
    let qtensor = qtensor_from_ggml(candle_dtype(ty), bytes, vec![rows, cols], &Device::Cpu)
        .expect("qtensor");
    let qmatmul = QMatMul::from_qtensor(qtensor).expect("qmatmul");
    let input = Tensor::from_slice(x, (m, cols), &Device::Cpu).expect("tensor");
    let run = || qmatmul.forward(&input).expect("forward");
    let seconds = seconds_per_call(|| drop(run()));
    let out = run()
        .flatten_all()
        .and_then(|t| t.to_vec1())
        .expect("output");
    (seconds, out)
}

fn bench_case(
    ty: WeightType,
    (rows, cols): (usize, usize),
    m: usize,
    threads: usize,
    with_candle: bool,
) {
    let mut rng = Rng::new(1);
    let bytes = if ty.is_k_quant() {
        random_super_blocks(ty, rows * cols / ty.block_values(), &mut rng)
    } else {
        let values: Vec<f32> = (0..rows * cols).map(|_| rng.normal(0.05)).collect();
        quantize_weights(ty, &values)
    };
    let x = rng.activations(m * cols);
    let weight_bytes = bytes.len() as f64;
    let flops = 2.0 * (m * rows * cols) as f64;
    let rates = |seconds: f64| {
        format!(
            "{:>9.1} | {:>7.1} | {:>6.1}",
            seconds * 1e6,
            flops / seconds * 1e-9,
            weight_bytes / seconds * 1e-9
        )
    };

    let vnni = std::env::var("TL_BENCH_VNNI").map_or(true, |v| v != "0");
    let matrix = QuantizedMatrix::new(ty, rows, cols, bytes.clone())
        .expect("matrix")
        .with_vnni(vnni)
        .with_repacking(std::env::var("TL_BENCH_REPACK").map_or(true, |v| v != "0"));
    let mut out = vec![0.0f32; m * rows];
    let ours = seconds_per_call(|| matrix.matmul(&x, m, &mut out, threads).expect("matmul"));
    if !with_candle {
        println!("| {ty} {cols}→{rows} | {m:>3} | {} |", rates(ours));
        return;
    }
    let (theirs, candle_out) = candle_matmul(ty, &bytes, (rows, cols), &x, m);
    let worst = out
        .iter()
        .zip(&candle_out)
        .fold(0.0f32, |w, (a, b)| w.max((a - b).abs()));
    let largest = out.iter().fold(0.0f32, |w, a| w.max(a.abs()));
    println!(
        "| {ty} {cols}→{rows} | {m:>3} | {} | {} | {:>5.2}× | {:.1e} |",
        rates(ours),
        rates(theirs),
        theirs / ours,
        worst / largest,
    );
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn matmul_benchmark() {
    let only = std::env::var("TL_BENCH_ONLY").ok();
    let threads = std::env::var("TL_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    println!("{threads} threads; GB/s counts the weight bytes once per call");
    println!("| matrix | m | ours µs | GFLOP/s | GB/s | candle µs | GFLOP/s | GB/s | speedup | max diff / max |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let cases = [
        (WeightType::Q4_1, 1536, 576),
        (WeightType::Q4_1, 576, 1536),
        (WeightType::Q8_0, 49152, 576),
        (WeightType::Q4_0, 1536, 576),
        (WeightType::Q8_0, 1536, 576),
        (WeightType::Q4_1, 128, 64),
        (WeightType::Q4_K, 576, 1536),
        (WeightType::Q6_K, 576, 1536),
        (WeightType::Q4_0, 2048, 2048),
        (WeightType::Q8_0, 2048, 2048),
        (WeightType::Q4_K, 2048, 2048),
        (WeightType::Q6_K, 2048, 5632),
        (WeightType::Q5_K, 2048, 2048),
        (WeightType::Q4_K, 2044, 2048),
        // Larger than the caches: decode streams these from memory.
        (WeightType::Q4_0, 32000, 2048),
        (WeightType::Q8_0, 32000, 2048),
        (WeightType::Q4_K, 32000, 2048),
        (WeightType::Q6_K, 32000, 2048),
    ];
    for m in [1, 4, 16, 64, 512] {
        for (ty, rows, cols) in cases {
            let name = format!("{ty} {cols}→{rows} {m}");
            match &only {
                Some(only) if !only.split(',').any(|o| o.trim() == name) => {}
                Some(_) => bench_case(ty, (rows, cols), m, threads, false),
                None => bench_case(ty, (rows, cols), m, threads, true),
            }
        }
    }
}
