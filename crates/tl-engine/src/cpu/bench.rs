//! Throughput of the CPU matmul against candle's `QMatMul` on the same weights,
//! for the shapes of a 135M-parameter model. Ignored by default; run with
//! `cargo test --release -p tl-engine --lib cpu::bench -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QMatMul};
use candle_core::{Device, Module, Tensor};

use super::test_support::{quantize_weights, Rng};
use super::{QuantizedMatrix, WeightType};

const THREADS: usize = 2;

/// Seconds per call of `f`: the fastest of many batches, since other processes on
/// a shared machine only ever add time.
fn seconds_per_call(mut f: impl FnMut()) -> f64 {
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

/// CPU seconds this process has used (user + system), from `/proc/self/stat`.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of the file (utime, stime), counted after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds per call of `f`: unlike wall time, not inflated by other processes
/// sharing the cores (meaningful with one thread).
fn cpu_seconds_per_call(mut f: impl FnMut()) -> f64 {
    f();
    let (wall, cpu) = (Instant::now(), process_cpu_seconds());
    let mut calls = 0u32;
    while wall.elapsed() < Duration::from_secs(2) {
        f();
        calls += 1;
    }
    (process_cpu_seconds() - cpu) / f64::from(calls)
}

fn candle_dtype(ty: WeightType) -> GgmlDType {
    match ty {
        WeightType::Q4_0 => GgmlDType::Q4_0,
        WeightType::Q4_1 => GgmlDType::Q4_1,
        WeightType::Q8_0 => GgmlDType::Q8_0,
    }
}

fn bench_case(
    ty: WeightType,
    rows: usize,
    cols: usize,
    m: usize,
    threads: usize,
    with_candle: bool,
) {
    let mut rng = Rng::new(1);
    let values: Vec<f32> = (0..rows * cols).map(|_| rng.normal(0.05)).collect();
    let bytes = quantize_weights(ty, &values);
    let x = rng.activations(m * cols);
    let weight_bytes = bytes.len() as f64;
    let flops = 2.0 * (m * rows * cols) as f64;

    let matrix = QuantizedMatrix::new(ty, rows, cols, bytes.clone()).expect("matrix");
    let mut out = vec![0.0f32; m * rows];
    let run = || matrix.matmul(&x, m, &mut out, threads).expect("matmul");
    let ours = if with_candle {
        seconds_per_call(run)
    } else {
        cpu_seconds_per_call(run)
    };

    let qtensor = qtensor_from_ggml(candle_dtype(ty), &bytes, vec![rows, cols], &Device::Cpu)
        .expect("qtensor");
    let qmatmul = QMatMul::from_qtensor(qtensor).expect("qmatmul");
    let input = Tensor::from_slice(&x, (m, cols), &Device::Cpu).expect("tensor");
    let mut candle_out: Vec<f32> = Vec::new();
    if !with_candle {
        println!(
            "| {ty} {cols}→{rows} | {m:>3} | {:>9.1} | {:>7.1} | {:>6.1} |",
            ours * 1e6,
            flops / ours * 1e-9,
            weight_bytes / ours * 1e-9
        );
        return;
    }
    let theirs = seconds_per_call(|| {
        candle_out = qmatmul
            .forward(&input)
            .expect("forward")
            .flatten_all()
            .expect("flat")
            .to_vec1()
            .expect("vec");
    });
    let worst = out
        .iter()
        .zip(&candle_out)
        .fold(0.0f32, |w, (a, b)| w.max((a - b).abs()));
    let largest = out.iter().fold(0.0f32, |w, a| w.max(a.abs()));

    println!(
        "| {ty} {cols}→{rows} | {m:>3} | {:>9.1} | {:>7.1} | {:>6.1} | {:>9.1} | {:>7.1} | {:>6.1} | {:>5.2}× | {:.1e} |",
        ours * 1e6,
        flops / ours * 1e-9,
        weight_bytes / ours * 1e-9,
        theirs * 1e6,
        flops / theirs * 1e-9,
        weight_bytes / theirs * 1e-9,
        theirs / ours,
        worst / largest,
    );
}

#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn matmul_benchmark() {
    println!("{THREADS} threads; GB/s counts weight bytes once per call");
    println!("| matrix | m | ours µs | GFLOP/s | GB/s | candle µs | GFLOP/s | GB/s | speedup | max diff / max |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let cases = [
        (WeightType::Q4_1, 1536, 576),
        (WeightType::Q4_1, 576, 1536),
        (WeightType::Q8_0, 49152, 576),
        (WeightType::Q4_0, 1536, 576),
        (WeightType::Q8_0, 1536, 576),
    ];
    // TL_BENCH_ONLY="Q4_1 576→1536 512" runs one case, without candle, while tuning.
    let only = std::env::var("TL_BENCH_ONLY").ok();
    let threads = std::env::var("TL_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(THREADS);
    for m in [1, 512] {
        for (ty, rows, cols) in cases {
            let name = format!("{ty} {cols}→{rows} {m}");
            match &only {
                Some(only) if *only != name => {}
                Some(_) => bench_case(ty, rows, cols, m, threads, false),
                None => bench_case(ty, rows, cols, m, threads, true),
            }
        }
    }
}

#[test]
#[ignore = "tuning probe"]
fn tile_probe() {
    use super::activations::QuantizedActivations;
    let (cols, m) = (576, 4);
    let mut rng = Rng::new(3);
    let values: Vec<f32> = (0..2 * cols).map(|_| rng.normal(0.05)).collect();
    let bytes = quantize_weights(WeightType::Q4_1, &values);
    let blocks: &[[u8; 20]] = bytes.as_chunks().0;
    let x = rng.activations(m * cols);
    let mut acts = QuantizedActivations::default();
    acts.quantize(x.as_chunks().0, cols, 1);
    let rows = [&blocks[..18], &blocks[18..36]];
    let act_rows = [acts.row(0), acts.row(1), acts.row(2), acts.row(3)];
    let mut sink = 0.0f32;
    let calls = 2_000_000;
    let start = Instant::now();
    for _ in 0..calls {
        // SAFETY: AVX2/FMA/F16C are enabled at build time.
        let t = unsafe { super::avx2::probe_tile(std::hint::black_box(rows), act_rows) };
        sink += t[0][0];
    }
    let per_pair = start.elapsed().as_secs_f64() / (calls as f64 * 8.0 * 18.0);
    println!(
        "{sink} {:.3} ns per pair-block = {:.2} cycles at 3.05 GHz",
        per_pair * 1e9,
        per_pair * 3.05e9
    );
}
