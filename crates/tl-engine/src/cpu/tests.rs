//! Tests of the CPU matmul: the SIMD path against the scalar path bit for bit,
//! both against an f64 reference within 8-bit-activation error, every output
//! written, and results independent of batching and thread count.

use super::activations::QuantizedActivations;
use super::matrix::{Arithmetic, WeightRows};
use super::test_support::{
    quantize_weights, random_blocks, random_super_blocks, reference_matmul, Rng,
};
use super::{parallel, scalar, QuantizedMatrix, WeightType, BLOCK_VALUES};

/// A NaN no kernel produces, to spot outputs left unwritten.
const POISON: u32 = 0x7fc0_dead;

fn poisoned(len: usize) -> Vec<f32> {
    vec![f32::from_bits(POISON); len]
}

fn assert_all_written(out: &[f32], what: &str) {
    let unwritten = out.iter().filter(|v| v.to_bits() == POISON).count();
    assert_eq!(unwritten, 0, "{what}: {unwritten} outputs not written");
}

/// Weights of one test case: quantized from normal values, or random blocks.
fn make_weights(ty: WeightType, rows: usize, cols: usize, random: bool, rng: &mut Rng) -> Vec<u8> {
    if random {
        random_blocks(ty, rows * cols / BLOCK_VALUES, rng)
    } else {
        let values: Vec<f32> = (0..rows * cols).map(|_| rng.normal(0.05)).collect();
        quantize_weights(ty, &values)
    }
}

/// The portable path end to end: scalar activation quantization and dot products.
fn scalar_matmul(
    ty: WeightType,
    bytes: &[u8],
    (rows, cols): (usize, usize),
    arithmetic: Arithmetic,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let mut acts = QuantizedActivations::default();
    acts.quantize_with(x.as_chunks().0, cols, 1, scalar::quantize_block);
    let weights = WeightRows {
        weight_type: ty,
        bytes,
        blocks_per_row: cols / BLOCK_VALUES,
        arithmetic,
        tiled: false,
        vnni: false,
    };
    let mut out = poisoned(m * rows);
    for mut share in parallel::split_columns(&mut out, m, rows, 1, 8) {
        scalar::compute_rows(&weights, &acts, m, &mut share);
    }
    out
}

fn assert_bitwise_equal(simd: &[f32], scalar: &[f32], what: &str) {
    for (i, (a, b)) in simd.iter().zip(scalar).enumerate() {
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "{what}: output {i}: {a} vs scalar {b}"
        );
    }
}

fn assert_near_reference(out: &[f32], reference: &(Vec<f64>, Vec<f64>), what: &str) {
    let (expected, tolerance) = reference;
    let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut worst = 0.0f64;
    for (i, ((&got, want), tol)) in out.iter().zip(expected).zip(tolerance).enumerate() {
        let error = (f64::from(got) - want).abs();
        assert!(
            error <= *tol,
            "{what}: output {i}: {got} vs f64 {want} (error {error:e} > {tol:e})"
        );
        worst = worst.max(error);
    }
    // Outlier activations coarsen their blocks' steps, so the worst error reaches
    // about 1.5% of the largest output here; the per-output bound above is the
    // precise check.
    assert!(
        worst <= 3e-2 * scale,
        "{what}: worst error {worst:e} against outputs up to {scale:e}"
    );
    if std::env::var_os("TL_PRINT_ERRORS").is_some() {
        println!(
            "{what}: worst error / largest output = {:.2e}",
            worst / scale
        );
    }
}

/// Runs one configuration through every check.
fn check_case(ty: WeightType, rows: usize, cols: usize, repacked: bool, random: bool) {
    let mut rng = Rng::new((rows * 7919 + cols) as u64 ^ u64::from(random));
    let bytes = make_weights(ty, rows, cols, random, &mut rng);
    let matrix = QuantizedMatrix::new(ty, rows, cols, bytes.clone())
        .expect("valid matrix")
        .with_repacking(repacked);
    let avx2_only = QuantizedMatrix::new(ty, rows, cols, bytes.clone())
        .expect("valid matrix")
        .with_repacking(repacked)
        .with_vnni(false);
    let arithmetic = if ty == WeightType::Q4_0 && repacked && rows.is_multiple_of(8) {
        Arithmetic::RepackedQ4_0
    } else {
        Arithmetic::VecDot
    };
    // 21 rows: 6 groups of 4, the last partial, past one run of interleaved
    // `Σ m·s` chains.
    for m in [1, 3, 7, 21, 64] {
        let what = format!("{ty} {rows}×{cols} m={m} repacked={repacked} random={random}");
        let x = rng.activations(m * cols);
        let mut out = poisoned(m * rows);
        matrix.matmul(&x, m, &mut out, 2).expect("matmul");
        assert_all_written(&out, &what);
        let scalar = scalar_matmul(ty, &bytes, (rows, cols), arithmetic, &x, m);
        assert_all_written(&scalar, &what);
        assert_bitwise_equal(&out, &scalar, &what);
        // Without VNNI, where this CPU has it (otherwise the same kernels again).
        let mut avx2_out = poisoned(m * rows);
        avx2_only.matmul(&x, m, &mut avx2_out, 2).expect("matmul");
        assert_bitwise_equal(&avx2_out, &scalar, &format!("{what} without VNNI"));
        let reference = reference_matmul(ty, &bytes, rows, cols, &x, m);
        assert_near_reference(&out, &reference, &what);
    }
}

#[test]
fn q4_0_matches_scalar_and_reference() {
    for random in [false, true] {
        check_case(WeightType::Q4_0, 40, 576, true, random);
        check_case(WeightType::Q4_0, 40, 1536, false, random);
        check_case(WeightType::Q4_0, 37, 576, true, random);
    }
}

#[test]
fn q4_1_matches_scalar_and_reference() {
    for random in [false, true] {
        check_case(WeightType::Q4_1, 40, 576, true, random);
        check_case(WeightType::Q4_1, 37, 1536, true, random);
    }
}

#[test]
fn q8_0_matches_scalar_and_reference() {
    for random in [false, true] {
        check_case(WeightType::Q8_0, 40, 576, true, random);
        check_case(WeightType::Q8_0, 37, 1536, true, random);
    }
}

/// Step-by-step decode and batched prefill must agree exactly, whatever the
/// thread count.
#[test]
fn batching_and_threads_do_not_change_results() {
    let cases = [
        (WeightType::Q4_0, true),
        (WeightType::Q4_0, false),
        (WeightType::Q4_1, true),
        (WeightType::Q8_0, true),
    ];
    for (ty, repacked) in cases {
        let (rows, cols, m) = (264, 576, 7);
        let mut rng = Rng::new(42);
        let bytes = make_weights(ty, rows, cols, false, &mut rng);
        let matrix = QuantizedMatrix::new(ty, rows, cols, bytes)
            .expect("valid matrix")
            .with_repacking(repacked);
        let x = rng.activations(m * cols);
        let mut batched = poisoned(m * rows);
        matrix.matmul(&x, m, &mut batched, 2).expect("matmul");
        for threads in [1, 3] {
            let mut other = poisoned(m * rows);
            matrix.matmul(&x, m, &mut other, threads).expect("matmul");
            assert_bitwise_equal(&other, &batched, &format!("{ty} threads={threads}"));
        }
        for a in 0..m {
            let mut single = poisoned(rows);
            matrix
                .matmul(&x[a * cols..(a + 1) * cols], 1, &mut single, 2)
                .expect("matmul");
            let row = &batched[a * rows..(a + 1) * rows];
            assert_bitwise_equal(&single, row, &format!("{ty} repacked={repacked} row {a}"));
        }
    }
}

/// Matrices multiplied together over one input give each what it gets alone.
#[test]
fn shared_input_products_equal_separate_ones() {
    let mut rng = Rng::new(9);
    let shapes = [
        (WeightType::Q4_1, 72),
        (WeightType::Q8_0, 24),
        (WeightType::Q4_0, 40),
        (WeightType::Q4_1, 5),
    ];
    let cols = 576;
    let matrices: Vec<QuantizedMatrix> = shapes
        .iter()
        .map(|&(ty, rows)| {
            let bytes = make_weights(ty, rows, cols, true, &mut rng);
            QuantizedMatrix::new(ty, rows, cols, bytes).expect("valid matrix")
        })
        .collect();
    for m in [1, 6] {
        let x = rng.activations(m * cols);
        let mut outs: Vec<Vec<f32>> = matrices.iter().map(|w| poisoned(m * w.rows())).collect();
        let mut products: Vec<(&QuantizedMatrix, &mut [f32])> = matrices
            .iter()
            .zip(outs.iter_mut())
            .map(|(w, out)| (w, out.as_mut_slice()))
            .collect();
        QuantizedMatrix::matmul_shared_input(&mut products, &x, m, 2).expect("matmul");
        for (matrix, out) in matrices.iter().zip(&outs) {
            let what = format!("{} {}×{cols} m={m}", matrix.weight_type(), matrix.rows());
            assert_all_written(out, &what);
            let mut alone = poisoned(m * matrix.rows());
            matrix.matmul(&x, m, &mut alone, 2).expect("matmul");
            assert_bitwise_equal(out, &alone, &what);
        }
    }
    let narrow = QuantizedMatrix::new(WeightType::Q8_0, 8, 64, vec![0; 8 * 2 * 34]).unwrap();
    let (mut a, mut b) = (vec![0.0; 576], vec![0.0; 8]);
    let err = QuantizedMatrix::matmul_shared_input(
        &mut [(&matrices[0], &mut a[..72]), (&narrow, &mut b)],
        &rng.activations(cols),
        1,
        2,
    );
    assert!(err.is_err(), "matrices of different widths must be refused");
}

#[cfg(x86_simd)]
#[test]
fn simd_quantization_matches_scalar() {
    let mut rng = Rng::new(7);
    let mut blocks: Vec<[f32; BLOCK_VALUES]> = (0..4096)
        .map(|i| {
            let scale = [1.0, 1e-3, 1e4, 1e-30, 0.0][i % 5];
            std::array::from_fn(|_| rng.normal(scale))
        })
        .collect();
    // Exact ties: with amax = 127 the multiplier is 1.
    blocks.push(std::array::from_fn(|j| {
        if j == 0 {
            127.0
        } else {
            j as f32 - 15.5
        }
    }));
    for x in &blocks {
        let simd = super::avx2::quantize_block(x);
        let plain = scalar::quantize_block(x);
        assert_eq!(simd.quants, plain.quants, "{x:?}");
        assert_eq!(simd.scale.to_bits(), plain.scale.to_bits(), "{x:?}");
        assert_eq!(simd.quant_sum, plain.quant_sum, "{x:?}");
    }
}

/// llama.cpp's AVX2 quantizer rounds half to even (`_mm256_round_ps`), not half
/// away from zero like `roundf`.
#[test]
fn activation_ties_round_to_even() {
    let mut x = [0.0f32; BLOCK_VALUES];
    x[..6].copy_from_slice(&[127.0, 2.5, -3.5, 0.5, -0.5, 1.5]);
    let block = scalar::quantize_block(&x);
    assert_eq!(block.quants[..6], [127, 2, -4, 0, 0, 2]);
    assert_eq!(block.quant_sum, 127);
}

#[test]
fn rejects_bad_shapes() {
    assert!(QuantizedMatrix::new(WeightType::Q8_0, 2, 32, vec![0; 67]).is_err());
    assert!(QuantizedMatrix::new(WeightType::Q8_0, 2, 48, vec![0; 102]).is_err());
    let matrix = QuantizedMatrix::new(WeightType::Q4_1, 2, 64, vec![0; 80]).expect("valid");
    let mut out = vec![0.0; 2];
    assert!(matrix.matmul(&[0.0; 63], 1, &mut out, 1).is_err());
    assert!(matrix.matmul(&[0.0; 64], 1, &mut out[..1], 1).is_err());
    assert!(matrix.matmul(&[], 0, &mut [], 1).is_ok());
}

/// K-quant batches take whole groups of eight weight rows through the lanes
/// kernels and the rows left over one at a time: a 13-row matrix's outputs
/// (one group and five rows alone) equal those of the same rows inside a
/// 16-row matrix (two groups), for each type, with one thread and two.
#[test]
fn k_quant_rows_left_over_equal_rows_in_lane_groups() {
    let types = [
        WeightType::Q2_K,
        WeightType::Q3_K,
        WeightType::Q4_K,
        WeightType::Q5_K,
        WeightType::Q6_K,
    ];
    for ty in types {
        let (cols, m) = (512, 9);
        let mut rng = Rng::new(7);
        let row_bytes = cols / ty.block_values() * ty.block_bytes();
        let bytes = random_super_blocks(ty, 16 * cols / ty.block_values(), &mut rng);
        let x = rng.activations(m * cols);
        let product = |rows: usize, threads: usize| {
            // Not repacked: llama.cpp repacks Q4_K only at a multiple of 8
            // rows, and its repacked gemm rounds otherwise.
            let matrix = QuantizedMatrix::new(ty, rows, cols, bytes[..rows * row_bytes].to_vec())
                .expect("valid matrix")
                .with_repacking(false);
            let mut out = poisoned(m * rows);
            matrix.matmul(&x, m, &mut out, threads).expect("matmul");
            out
        };
        let whole = product(16, 2);
        for threads in [1, 2] {
            let part = product(13, threads);
            for i in 0..m {
                let what = format!("{ty} row {i}, {threads} threads");
                assert_bitwise_equal(
                    &part[i * 13..(i + 1) * 13],
                    &whole[i * 16..i * 16 + 13],
                    &what,
                );
            }
        }
    }
}
