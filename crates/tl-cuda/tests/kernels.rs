//! Every kernel against a CPU reference on random inputs: outputs are poisoned
//! (NaN) before each launch so an unwritten element fails, sizes include odd
//! ones, and errors are relative (‖gpu − ref‖ / ‖ref‖). Where no GPU exists each
//! test prints why it skips; `scripts/gpu_checks.sh` runs them on a GPU.

use half::{bf16, f16};
use tl_cuda::ops::attention::{
    attention_f16_accumulator, attention_f16_accumulator_rope, attention_f32, attention_flash,
    attention_flash_to_f16, chunk_slots, flash_supported, rope_store_kv, rope_store_kv_batched,
    AttentionBatch, CacheTables, Heads, LayerCache, QkNorm, Rotation, SplitBuffers,
};
use tl_cuda::ops::gemv::{gemv, Epilogue};
use tl_cuda::ops::rows::Rounding;
use tl_cuda::ops::sample::{self, SampleBuffers, SampleJob, SampleSettings};
use tl_cuda::ops::{blas, rows};
use tl_cuda::{Buffer, CudaError, DeviceMatrix, GgmlType, Gpu, Graph};

fn gpu() -> Option<Gpu> {
    tl_testdata::hold_gpu();
    match Gpu::open(0, Default::default()) {
        Ok(gpu) => Some(gpu),
        Err(e @ (CudaError::LibraryMissing { .. } | CudaError::NoDevice)) => {
            eprintln!("skipped: no usable GPU here ({e})");
            None
        }
        Err(e) => panic!("a GPU is present but could not be opened: {e}"),
    }
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit()).collect()
    }
}

/// An attention geometry: `heads` query heads on `kv_heads` key/value heads
/// of `head_dim` values.
fn heads(heads: usize, kv_heads: usize, head_dim: usize) -> Heads {
    Heads {
        heads,
        kv_heads,
        head_dim,
    }
}

fn relative_error(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        assert!(
            g.is_finite(),
            "non-finite output {g} (unwritten or overflow)"
        );
        diff += (g as f64 - w as f64).powi(2);
        norm += (w as f64).powi(2);
    }
    (diff / norm.max(1e-30)).sqrt()
}

fn download<T: cudarc::driver::DeviceRepr + Default + Clone>(
    gpu: &Gpu,
    b: &Buffer<T>,
    n: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); n];
    gpu.download(b.span(0, n).unwrap(), &mut out).unwrap();
    out
}

fn poisoned_f32(gpu: &Gpu, n: usize) -> Buffer<f32> {
    Buffer::from_host(gpu, &vec![f32::NAN; n]).unwrap()
}

fn poisoned_f16(gpu: &Gpu, n: usize) -> Buffer<u16> {
    Buffer::from_host(gpu, &vec![f16::NAN.to_bits(); n]).unwrap()
}

const TYPES: [GgmlType; 13] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn is_k_quant(t: GgmlType) -> bool {
    t.block_elements() == 256
}

/// Random bytes for one block of a K-quant (any bytes are a valid block once
/// its f16 factors are finite): the factors set to `d` (and `dmin`), small
/// enough that values stay near ±1.
fn random_k_block(rng: &mut Rng, t: GgmlType) -> Vec<u8> {
    let mut block: Vec<u8> = (0..t.block_bytes()).map(|_| rng.next() as u8).collect();
    let (d, dmin) = (
        f16::from_f32(rng.unit() * 2e-3),
        f16::from_f32(rng.unit() * 2e-3),
    );
    let at = match t {
        GgmlType::Q2_K => vec![(80, d), (82, dmin)],
        GgmlType::Q3_K => vec![(108, d)],
        GgmlType::Q4_K | GgmlType::Q5_K => vec![(0, d), (2, dmin)],
        _ => vec![(208, d)],
    };
    for (offset, factor) in at {
        block[offset..offset + 2].copy_from_slice(&factor.to_le_bytes());
    }
    block
}

/// The 256 values of a K-quant block as the CPU backend dequantizes them
/// (candle's `to_float`: products rounded one at a time, in this order).
fn k_block_values(t: GgmlType, b: &[u8]) -> Vec<f32> {
    let half = |at: usize| f16::from_le_bytes([b[at], b[at + 1]]).to_f32();
    (0..256)
        .map(|v| {
            let (j, k, i) = (v / 128, (v / 32) % 4, v % 32);
            match t {
                GgmlType::Q2_K => {
                    let s = b[v / 16];
                    let q = (b[16 + 32 * j + i] >> (2 * k)) & 3;
                    let (dl, ml) = (half(80) * (s & 0xf) as f32, half(82) * (s >> 4) as f32);
                    dl * q as f32 - ml
                }
                GgmlType::Q3_K => {
                    let s = &b[96..108];
                    let (p, t) = (v / 64, (v / 16) % 4);
                    let low = (s[(p % 2) * 4 + t] >> ((p / 2) * 4)) & 0xf;
                    let scale = (low | ((s[8 + t] >> (2 * p)) & 3) << 4) as i32 - 32;
                    let q = ((b[32 + 32 * j + i] >> (2 * k)) & 3) as i32;
                    let q = q - if (b[i] >> (4 * j + k)) & 1 == 1 { 0 } else { 4 };
                    half(108) * scale as f32 * q as f32
                }
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    let (pair, high) = (v / 64, (v / 32) % 2);
                    let s = &b[4..16];
                    let sub = 2 * pair + high;
                    let (scale, min) = if sub < 4 {
                        (s[sub] & 63, s[sub + 4] & 63)
                    } else {
                        (
                            (s[sub + 4] & 0xf) | ((s[sub - 4] >> 6) << 4),
                            (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4),
                        )
                    };
                    let nibbles = if t == GgmlType::Q5_K { 48 } else { 16 };
                    let byte = b[nibbles + 32 * pair + i];
                    let mut q = if high == 1 { byte >> 4 } else { byte & 0xf };
                    if t == GgmlType::Q5_K {
                        q |= ((b[16 + i] >> (2 * pair + high)) & 1) << 4;
                    }
                    let (d1, m1) = (half(0) * scale as f32, half(2) * min as f32);
                    d1 * q as f32 - m1
                }
                _ => {
                    let low = b[64 * j + 32 * (k % 2) + i];
                    let nibble = if k >= 2 { low >> 4 } else { low & 0xf };
                    let q = (nibble | ((b[128 + 32 * j + i] >> (2 * k)) & 3) << 4) as i32 - 32;
                    half(208) * b[192 + v / 16] as i8 as f32 * q as f32
                }
            }
        })
        .collect()
}

/// Random GGUF bytes of a rows × cols matrix and the values they stand for.
fn random_matrix(rng: &mut Rng, t: GgmlType, rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = Vec::new();
    let mut values = Vec::new();
    for _ in 0..rows {
        match t {
            GgmlType::F32 => {
                for _ in 0..cols {
                    let v = rng.unit();
                    bytes.extend_from_slice(&v.to_le_bytes());
                    values.push(v);
                }
            }
            GgmlType::F16 => {
                for _ in 0..cols {
                    let v = f16::from_f32(rng.unit());
                    bytes.extend_from_slice(&v.to_le_bytes());
                    values.push(v.to_f32());
                }
            }
            GgmlType::BF16 => {
                for _ in 0..cols {
                    let v = bf16::from_f32(rng.unit());
                    bytes.extend_from_slice(&v.to_le_bytes());
                    values.push(v.to_f32());
                }
            }
            GgmlType::Q4_0 | GgmlType::Q4_1 => {
                for _ in 0..cols / 32 {
                    let d = f16::from_f32(rng.unit() * 0.1);
                    let m = f16::from_f32(rng.unit() * 0.5);
                    bytes.extend_from_slice(&d.to_le_bytes());
                    if t == GgmlType::Q4_1 {
                        bytes.extend_from_slice(&m.to_le_bytes());
                    }
                    let quants: Vec<u8> = (0..32).map(|_| (rng.next() % 16) as u8).collect();
                    for j in 0..16 {
                        bytes.push(quants[j] | (quants[j + 16] << 4));
                    }
                    for &q in &quants {
                        values.push(if t == GgmlType::Q4_0 {
                            (q as f32 - 8.0) * d.to_f32()
                        } else {
                            q as f32 * d.to_f32() + m.to_f32()
                        });
                    }
                }
            }
            GgmlType::Q5_0 | GgmlType::Q5_1 => {
                for _ in 0..cols / 32 {
                    let d = f16::from_f32(rng.unit() * 0.05);
                    let m = f16::from_f32(rng.unit() * 0.5);
                    bytes.extend_from_slice(&d.to_le_bytes());
                    if t == GgmlType::Q5_1 {
                        bytes.extend_from_slice(&m.to_le_bytes());
                    }
                    let quants: Vec<u8> = (0..32).map(|_| (rng.next() % 32) as u8).collect();
                    let fifths = (0..32).fold(0u32, |h, j| h | u32::from(quants[j] >> 4) << j);
                    bytes.extend_from_slice(&fifths.to_le_bytes());
                    for j in 0..16 {
                        bytes.push((quants[j] & 0xf) | ((quants[j + 16] & 0xf) << 4));
                    }
                    for &q in &quants {
                        values.push(if t == GgmlType::Q5_0 {
                            (q as f32 - 16.0) * d.to_f32()
                        } else {
                            q as f32 * d.to_f32() + m.to_f32()
                        });
                    }
                }
            }
            GgmlType::Q8_0 => {
                for _ in 0..cols / 32 {
                    let d = f16::from_f32(rng.unit() * 0.02);
                    bytes.extend_from_slice(&d.to_le_bytes());
                    for _ in 0..32 {
                        let q = (rng.next() % 256) as u8 as i8;
                        bytes.push(q as u8);
                        values.push(q as f32 * d.to_f32());
                    }
                }
            }
            t if is_k_quant(t) => {
                for _ in 0..cols / 256 {
                    let block = random_k_block(rng, t);
                    values.extend(k_block_values(t, &block));
                    bytes.extend(block);
                }
            }
            other => panic!("no test data for {}", other.name()),
        }
    }
    (bytes, values)
}

fn reference_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let scale = 1.0 / ((sum / x.len() as f64) as f32 + eps).sqrt();
    x.iter().zip(weight).map(|(&v, &w)| v * scale * w).collect()
}

fn reference_matvec(w: &[f32], x: &[f32], rows: usize) -> Vec<f32> {
    let cols = x.len();
    (0..rows)
        .map(|r| {
            w[r * cols..(r + 1) * cols]
                .iter()
                .zip(x)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

/// x as the GEMV kernels see it for quantized weights: llama.cpp's Q8 blocks
/// (d = amax/127 rounded to f16, values rounded half to even), dequantized.
fn q8_dequantized(x: &[f32]) -> Vec<f32> {
    x.chunks(32)
        .flat_map(|block| {
            let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let inverse = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let d = f16::from_f32(amax / 127.0).to_f32();
            block
                .iter()
                .map(move |&v| (v * inverse).round_ties_even() * d)
        })
        .collect()
}

/// x as the GEMV kernels see it for K-quant weights: llama.cpp's Q8_K
/// super-blocks (iscale = -127/max for the first value of largest magnitude,
/// quants rounded half to even, d = 1/iscale), dequantized.
fn q8_k_dequantized(x: &[f32]) -> Vec<f32> {
    x.chunks(256)
        .flat_map(|block| {
            let max = block
                .iter()
                .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
            let iscale = if max != 0.0 { -127.0 / max } else { 0.0 };
            let d = if max != 0.0 { 1.0 / iscale } else { 0.0 };
            block
                .iter()
                .map(move |&v| (iscale * v).round_ties_even().min(127.0) * d)
        })
        .collect()
}

/// x as the GEMV kernels see it for weights of type `t`.
fn activations_for(t: GgmlType, x: &[f32]) -> Vec<f32> {
    if is_k_quant(t) {
        q8_k_dequantized(x)
    } else {
        q8_dequantized(x)
    }
}

fn is_quantized(t: GgmlType) -> bool {
    t.is_quantized()
}

fn silu(g: f32) -> f32 {
    g / (1.0 + (-g).exp())
}

#[test]
fn gemv_matches_the_reference_for_every_type_epilogue_and_size() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(1);
    for t in TYPES {
        // K-quant shapes (whole super-blocks), odd and even row counts, for
        // the quantized types (the float tolerance suits longer sums).
        let block_shapes: &[(usize, usize)] = if t.is_quantized() {
            // 17,408 values: x staged in rounds (more than one pass holds).
            &[
                (1, 256),
                (6, 512),
                (9, 1536),
                (64, 2048),
                (7, 5632),
                (2, 17408),
            ]
        } else {
            &[]
        };
        let shapes = [
            (1usize, 32usize),
            (7, 96),
            (33, 576),
            (300, 2048),
            (1031, 160),
            (2, 5632),
            // More columns than staging holds in registers: x staged in rounds.
            (3, 8224),
            // More rows than one sweep of the grid: blocks loop, prefetching.
            (20000, 64),
            (9000, 2048),
        ];
        for &(rows, cols) in shapes.iter().chain(block_shapes) {
            if !cols.is_multiple_of(t.block_elements() as usize) {
                continue;
            }
            let (bytes, w) = random_matrix(&mut rng, t, rows, cols);
            let m = DeviceMatrix::upload(&gpu, t, rows, cols, &bytes).unwrap();
            let x = rng.vec(cols);
            let norm_weight = rng.vec(cols);
            let xb = Buffer::from_host(&gpu, &x).unwrap();
            let nb = Buffer::from_host(&gpu, &norm_weight).unwrap();
            let eps = 1e-5;
            let mut normed = reference_norm(&x, &norm_weight, eps);
            // Quantized weights meet Q8 activations. Q4_1 also uses each
            // block's sum rounded to f16 (llama.cpp's Q8_1 `s`), which moves a
            // lone output (the 2-row gate/up pair) by up to a few 1e-3.
            let (x, tolerance) = if is_quantized(t) {
                normed = activations_for(t, &normed);
                let with_s = matches!(t, GgmlType::Q4_1 | GgmlType::Q5_1);
                let tolerance = if with_s { 5e-3 } else { 1e-3 };
                (activations_for(t, &x), tolerance)
            } else {
                (x, 1e-5)
            };
            // plain
            let y = poisoned_f32(&gpu, rows);
            gemv(&gpu, &m, xb.all(), y.all(), Epilogue::Plain).unwrap();
            let err = relative_error(&download(&gpu, &y, rows), &reference_matvec(&w, &x, rows));
            assert!(err < tolerance, "{t:?} {rows}x{cols} plain: {err}");
            // residual
            let start = rng.vec(rows);
            let y = Buffer::from_host(&gpu, &start).unwrap();
            gemv(&gpu, &m, xb.all(), y.all(), Epilogue::Residual).unwrap();
            let want: Vec<f32> = reference_matvec(&w, &x, rows)
                .iter()
                .zip(&start)
                .map(|(a, b)| a + b)
                .collect();
            let err = relative_error(&download(&gpu, &y, rows), &want);
            assert!(err < tolerance, "{t:?} {rows}x{cols} residual: {err}");
            // norm
            let y = poisoned_f32(&gpu, rows);
            gemv(
                &gpu,
                &m,
                xb.all(),
                y.all(),
                Epilogue::Norm {
                    weight: nb.all(),
                    eps,
                },
            )
            .unwrap();
            let err = relative_error(
                &download(&gpu, &y, rows),
                &reference_matvec(&w, &normed, rows),
            );
            assert!(err < tolerance, "{t:?} {rows}x{cols} norm: {err}");
            // norm + swiglu (rows split into gate and up)
            if rows % 2 == 0 {
                let half = rows / 2;
                let y = poisoned_f32(&gpu, half);
                gemv(
                    &gpu,
                    &m,
                    xb.all(),
                    y.all(),
                    Epilogue::NormGated {
                        weight: nb.all(),
                        eps,
                        gelu_table: None,
                    },
                )
                .unwrap();
                let full = reference_matvec(&w, &normed, rows);
                let want: Vec<f32> = (0..half).map(|r| silu(full[r]) * full[r + half]).collect();
                let err = relative_error(&download(&gpu, &y, half), &want);
                assert!(err < tolerance, "{t:?} {rows}x{cols} swiglu: {err}");
            }
        }
    }
}

#[test]
fn dequantize_and_embed_give_the_blocks_values() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(2);
    for t in TYPES {
        let (rows, cols) = (37, if is_k_quant(t) { 512 } else { 96 });
        let (bytes, w) = random_matrix(&mut rng, t, rows, cols);
        let m = DeviceMatrix::upload(&gpu, t, rows, cols, &bytes).unwrap();
        let out = poisoned_f16(&gpu, rows * cols);
        rows::dequantize_f16(&gpu, &m, out.all()).unwrap();
        let got: Vec<f32> = download(&gpu, &out, rows * cols)
            .iter()
            .map(|&h| f16::from_bits(h).to_f32())
            .collect();
        let want: Vec<f32> = w.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        assert_eq!(relative_error(&got, &want), 0.0, "{t:?} dequantize");
        let ids = [5u32, 0, 36, 5, 1000];
        let idb = Buffer::from_host(&gpu, &ids).unwrap();
        let out = poisoned_f32(&gpu, ids.len() * cols);
        rows::embed(&gpu, &m, idb.all(), ids.len(), out.all(), 1.0).unwrap();
        let got = download(&gpu, &out, ids.len() * cols);
        for (i, &id) in ids.iter().enumerate() {
            let row = &got[i * cols..(i + 1) * cols];
            if (id as usize) < rows {
                assert_eq!(
                    row,
                    &w[id as usize * cols..(id as usize + 1) * cols],
                    "{t:?} embed {id}"
                );
            } else {
                assert!(
                    row.iter().all(|&v| v == 0.0),
                    "{t:?}: an id outside the table gives zeros"
                );
            }
        }
    }
}

#[test]
fn row_kernels_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(3);
    let as_f32 =
        |bits: Vec<u16>| -> Vec<f32> { bits.iter().map(|&h| f16::from_bits(h).to_f32()).collect() };
    for (n_rows, cols) in [(1, 64), (5, 576), (3, 2048)] {
        let x = rng.vec(n_rows * cols);
        let weight = rng.vec(cols);
        let xb = Buffer::from_host(&gpu, &x).unwrap();
        let wb = Buffer::from_host(&gpu, &weight).unwrap();
        let normed: Vec<f32> = x
            .chunks(cols)
            .flat_map(|r| reference_norm(r, &weight, 1e-6))
            .collect();
        let run = |norm: bool, rounding: Rounding| {
            let out = poisoned_f16(&gpu, n_rows * cols);
            let norm = norm.then_some((wb.all(), 1e-6));
            rows::to_f16(&gpu, xb.all(), norm, rounding, out.all(), n_rows, cols).unwrap();
            as_f32(download(&gpu, &out, n_rows * cols))
        };
        // Plain conversion rounds each value to the nearest f16.
        let plain: Vec<f32> = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        assert_eq!(run(false, Rounding::None), plain);
        assert!(relative_error(&run(true, Rounding::None), &normed) < 1e-3);
        // Q8 rounding gives the values the CPU's quantized matmul uses.
        let q8 = Rounding::Q8Blocks;
        assert!(relative_error(&run(false, q8), &q8_dequantized(&x)) < 1e-3);
        assert!(relative_error(&run(true, q8), &q8_dequantized(&normed)) < 1e-3);
        if cols % 256 == 0 {
            let q8_k = Rounding::Q8KSuperBlocks;
            let want: Vec<f32> = q8_k_dequantized(&x)
                .iter()
                .map(|&v| f16::from_f32(v).to_f32())
                .collect();
            assert_eq!(run(false, q8_k), want, "Q8_K rounding of {n_rows}x{cols}");
            let err = relative_error(&run(true, q8_k), &q8_k_dequantized(&normed));
            assert!(err < 1e-3, "normed Q8_K rounding: {err}");
        }
    }
    let (n_rows, width) = (3, 77);
    let gate_up = rng.vec(n_rows * 2 * width);
    let gb = Buffer::from_host(&gpu, &gate_up).unwrap();
    let out = poisoned_f32(&gpu, n_rows * width);
    rows::swiglu(&gpu, gb.all(), out.all(), n_rows, width).unwrap();
    let want: Vec<f32> = (0..n_rows * width)
        .map(|i| {
            let (r, c) = (i / width, i % width);
            silu(gate_up[r * 2 * width + c]) * gate_up[r * 2 * width + width + c]
        })
        .collect();
    assert!(relative_error(&download(&gpu, &out, n_rows * width), &want) < 1e-6);
    // SwiGLU straight into an f16 GEMM input: the bits of swiglu then to_f16,
    // with and without rounding (widths of whole blocks for Q8 and Q8_K, and
    // odd).
    for (n_rows, width, rounding) in [
        (3, 77, Rounding::None),
        (4, 96, Rounding::Q8Blocks),
        (2, 5632, Rounding::Q8Blocks),
        (2, 5632, Rounding::None),
        (3, 512, Rounding::Q8KSuperBlocks),
        (2, 5632, Rounding::Q8KSuperBlocks),
    ] {
        let gate_up = rng.vec(n_rows * 2 * width);
        let gb = Buffer::from_host(&gpu, &gate_up).unwrap();
        let hidden = poisoned_f32(&gpu, n_rows * width);
        rows::swiglu(&gpu, gb.all(), hidden.all(), n_rows, width).unwrap();
        let two_steps = poisoned_f16(&gpu, n_rows * width);
        rows::to_f16(
            &gpu,
            hidden.all(),
            None,
            rounding,
            two_steps.all(),
            n_rows,
            width,
        )
        .unwrap();
        let fused = poisoned_f16(&gpu, n_rows * width);
        rows::swiglu_to_f16(&gpu, gb.all(), fused.all(), (n_rows, width), rounding, None).unwrap();
        assert_eq!(
            download(&gpu, &fused, n_rows * width),
            download(&gpu, &two_steps, n_rows * width),
            "{n_rows}x{width}, {rounding:?}"
        );
    }
}

#[test]
fn argmax_picks_the_lowest_index_of_the_largest() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(4);
    for n in [1usize, 31, 1000, 49152, 151_936] {
        let mut x = rng.vec(n);
        let at = (rng.next() as usize) % n;
        x[at] = 5.0;
        // Ties later on, near and (for long inputs) in another block: the
        // lower index wins.
        for later in [at + 7, at + n / 2] {
            if later < n && later > at {
                x[later] = 5.0;
            }
        }
        if n > 3 {
            x[(at + 1) % n] = f32::NAN;
        }
        let xb = Buffer::from_host(&gpu, &x).unwrap();
        let mut initial = vec![0u32; rows::argmax_output_len(&gpu)];
        initial[0] = u32::MAX;
        let out = Buffer::from_host(&gpu, &initial).unwrap();
        rows::argmax(&gpu, xb.all(), n, out.all()).unwrap();
        assert_eq!(download(&gpu, &out, 1)[0] as usize, at, "n = {n}");
        // The kernel reset its scratch: a second call on new values works.
        x[at] = 0.0;
        let second = (at + 3) % n;
        x[second] = 9.0;
        gpu.upload(&x, xb.all()).unwrap();
        rows::argmax(&gpu, xb.all(), n, out.all()).unwrap();
        assert_eq!(
            download(&gpu, &out, 1)[0] as usize,
            second,
            "n = {n}, again"
        );
    }
}

#[test]
fn argmax_rows_picks_each_rows_own_largest_in_one_launch() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(5);
    let stride = rows::argmax_output_len(&gpu);
    for (n, count) in [(7usize, 3usize), (49152, 5), (151_936, 2)] {
        let mut x = rng.vec(n * count);
        let mut want = Vec::new();
        for r in 0..count {
            let at = (rng.next() as usize) % n;
            // Each row's maximum ties with a later value of its own row, and
            // beats every value of the other rows' maxima (larger by row).
            x[r * n + at] = 5.0 + r as f32;
            if at + n / 2 < n && n > 1 {
                x[r * n + at + n / 2] = 5.0 + r as f32;
            }
            want.push(at as u32);
        }
        let xb = Buffer::from_host(&gpu, &x).unwrap();
        let out = Buffer::from_host(&gpu, &vec![0u32; stride * count]).unwrap();
        for round in 0..2 {
            if round == 1 {
                // Scratch was reset: new maxima in every row are found again.
                for (r, w) in want.iter_mut().enumerate() {
                    x[r * n + *w as usize] = 0.0;
                    *w = ((*w as usize + 3) % n) as u32;
                    x[r * n + *w as usize] = 9.0;
                }
                gpu.upload(&x, xb.all()).unwrap();
            }
            rows::argmax_rows(&gpu, xb.all(), n, count, out.all()).unwrap();
            let all = download(&gpu, &out, stride * count);
            let got: Vec<u32> = (0..count).map(|r| all[r * stride]).collect();
            assert_eq!(got, want, "n = {n}, {count} rows, round {round}");
        }
    }
}

#[test]
fn gemm_matches_the_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(5);
    for (tokens, out_f, in_f) in [(1, 32, 64), (7, 96, 576), (130, 577, 256)] {
        let w: Vec<u16> = rng
            .vec(out_f * in_f)
            .iter()
            .map(|&v| f16::from_f32(v).to_bits())
            .collect();
        let x: Vec<u16> = rng
            .vec(tokens * in_f)
            .iter()
            .map(|&v| f16::from_f32(v).to_bits())
            .collect();
        let start = rng.vec(tokens * out_f);
        let wf: Vec<f32> = w.iter().map(|&h| f16::from_bits(h).to_f32()).collect();
        let xf: Vec<f32> = x.iter().map(|&h| f16::from_bits(h).to_f32()).collect();
        let mut want = Vec::new();
        for t in 0..tokens {
            want.extend(reference_matvec(&wf, &xf[t * in_f..(t + 1) * in_f], out_f));
        }
        let (wb, xb) = (
            Buffer::from_host(&gpu, &w).unwrap(),
            Buffer::from_host(&gpu, &x).unwrap(),
        );
        let y = poisoned_f32(&gpu, tokens * out_f);
        blas::gemm_f16(
            &gpu,
            wb.all(),
            xb.all(),
            y.all(),
            tokens,
            out_f,
            in_f,
            false,
        )
        .unwrap();
        assert!(relative_error(&download(&gpu, &y, tokens * out_f), &want) < 1e-5);
        let y = Buffer::from_host(&gpu, &start).unwrap();
        blas::gemm_f16(&gpu, wb.all(), xb.all(), y.all(), tokens, out_f, in_f, true).unwrap();
        let summed: Vec<f32> = want.iter().zip(&start).map(|(a, b)| a + b).collect();
        assert!(relative_error(&download(&gpu, &y, tokens * out_f), &summed) < 1e-5);
    }
}

/// Reference causal attention for rows at positions start.., f64, over f16 K/V.
#[allow(clippy::too_many_arguments)]
fn reference_attention(
    h: Heads,
    q: &[f32],
    q_stride: usize,
    keys: &[Vec<f32>],
    values: &[Vec<f32>],
    start: usize,
    rows: usize,
) -> Vec<f32> {
    let scale = 1.0 / (h.head_dim as f64).sqrt();
    let group = h.heads / h.kv_heads;
    let mut out = Vec::new();
    for r in 0..rows {
        for head in 0..h.heads {
            let kvh = head / group;
            let qh = &q[r * q_stride + head * h.head_dim..][..h.head_dim];
            let visible = start + r + 1;
            let scores: Vec<f64> = (0..visible)
                .map(|p| {
                    qh.iter()
                        .zip(&keys[kvh][p * h.head_dim..][..h.head_dim])
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = weights.iter().sum();
            for d in 0..h.head_dim {
                let v: f64 = (0..visible)
                    .map(|p| weights[p] * values[kvh][p * h.head_dim + d] as f64)
                    .sum();
                out.push((v / sum) as f32);
            }
        }
    }
    out
}

fn rope_reference(x: &mut [f32], head_dim: usize, table: &[f32], pos: usize) {
    for head in x.chunks_mut(head_dim) {
        for pair in 0..head_dim / 2 {
            let (c, s) = (
                table[(pos * head_dim / 2 + pair) * 2],
                table[(pos * head_dim / 2 + pair) * 2 + 1],
            );
            let (x0, x1) = (head[2 * pair], head[2 * pair + 1]);
            head[2 * pair] = x0.mul_add(c, -(x1 * s));
            head[2 * pair + 1] = x0.mul_add(s, x1 * c);
        }
    }
}

/// Llama's rotation: adjacent pairs, no per-head norms.
fn adjacent(cos_sin: tl_cuda::Span<'_, f32>) -> Rotation<'_> {
    Rotation {
        cos_sin,
        halves: false,
        qk_norm: None,
        query_scale: 1.0,
    }
}

/// A made-up (cos, sin) table of `positions` rows for heads of `head_dim`.
fn test_rope_table(positions: usize, head_dim: usize, speed: f32) -> Vec<f32> {
    (0..positions * head_dim / 2)
        .flat_map(|i| {
            let angle = (i / (head_dim / 2)) as f32 * speed / (1 + i % (head_dim / 2)) as f32;
            [angle.cos(), angle.sin()]
        })
        .collect()
}

/// One head as Qwen3 prepares it on the CPU: RMS-normalised (squares summed
/// in f64) times `weight`, then rotated with pairs half a head apart.
fn qwen3_head_reference(head: &mut [f32], weight: &[f32], table: &[f32], pos: usize) {
    let sum: f64 = head.iter().map(|&v| (v * v) as f64).sum();
    let scale = 1.0 / ((sum / head.len() as f64) as f32 + 1e-6).sqrt();
    for (v, w) in head.iter_mut().zip(weight) {
        *v = (*v * scale) * w;
    }
    let pairs = head.len() / 2;
    for pair in 0..pairs {
        let at = (pos * pairs + pair) * 2;
        let (c, s) = (table[at], table[at + 1]);
        let (x0, x1) = (head[pair], head[pair + pairs]);
        head[pair] = x0.mul_add(c, -(x1 * s));
        head[pair + pairs] = x0.mul_add(s, x1 * c);
    }
}

/// Qwen3's preparation (per-head norms, pairs half a head apart) against the
/// CPU's arithmetic, for a prompt's rows and for a batched decode step whose
/// rows belong to different sequences at different positions: the batched
/// launch gives each sequence exactly what a launch for it alone gives.
#[test]
fn qk_norms_and_half_head_pairs_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(10);
    let qwen3_heads = heads(16, 8, 128);
    let small_heads = heads(4, 2, 32);
    // 5 rows take a warp per head, 70 a block per row: both kernels.
    for (h, rows) in [
        (qwen3_heads, 5),
        (qwen3_heads, 70),
        (small_heads, 5),
        (small_heads, 70),
    ] {
        let capacity = 128;
        let (q_width, kv_width) = (h.heads * h.head_dim, h.kv_heads * h.head_dim);
        let qkv_width = q_width + 2 * kv_width;
        let table = test_rope_table(capacity, h.head_dim, 0.41);
        let tb = Buffer::from_host(&gpu, &table).unwrap();
        let (q_weight, k_weight) = (rng.vec(h.head_dim), rng.vec(h.head_dim));
        let (qwb, kwb) = (
            Buffer::from_host(&gpu, &q_weight).unwrap(),
            Buffer::from_host(&gpu, &k_weight).unwrap(),
        );
        let rotation = Rotation {
            cos_sin: tb.all(),
            halves: true,
            qk_norm: Some(QkNorm {
                query: qwb.all(),
                key: kwb.all(),
                eps: 1e-6,
            }),
            query_scale: 1.0,
        };
        let qkv = rng.vec(rows * qkv_width);
        let start = 9;
        let mut want = qkv.clone();
        for (r, row) in want.chunks_exact_mut(qkv_width).enumerate() {
            for (i, head) in row[..q_width + kv_width]
                .chunks_exact_mut(h.head_dim)
                .enumerate()
            {
                let weight = if i < h.heads { &q_weight } else { &k_weight };
                qwen3_head_reference(head, weight, &table, start + r);
            }
        }
        // A prompt of `rows` rows from position `start`.
        let prompt_caches = [0, 1].map(|_| poisoned_f16(&gpu, h.cache_len(capacity)));
        let cache = LayerCache {
            keys: prompt_caches[0].all(),
            values: prompt_caches[1].all(),
            capacity,
            tables: None,
        };
        let qb = Buffer::from_host(&gpu, &qkv).unwrap();
        let sb = Buffer::from_host(&gpu, &[start as i32]).unwrap();
        rope_store_kv(&gpu, h, qb.all(), rows, rotation, sb.all(), cache).unwrap();
        let got = download(&gpu, &qb, rows * qkv_width);
        let (keys, values) = (
            download(&gpu, &prompt_caches[0], h.cache_len(capacity)),
            download(&gpu, &prompt_caches[1], h.cache_len(capacity)),
        );
        for r in 0..rows {
            let (got_row, want_row) = (&got[r * qkv_width..], &want[r * qkv_width..]);
            let err = relative_error(&got_row[..q_width], &want_row[..q_width]);
            assert!(
                err < 1e-6,
                "heads of {}: queries of row {r}: {err}",
                h.head_dim
            );
            for kvh in 0..h.kv_heads {
                let at = (kvh * capacity + start + r) * h.head_dim;
                let key: Vec<f32> = keys[at..at + h.head_dim]
                    .iter()
                    .map(|&b| f16::from_bits(b).to_f32())
                    .collect();
                let want_key = &want_row[q_width + kvh * h.head_dim..][..h.head_dim];
                assert!(
                    relative_error(&key, want_key) < 1e-3,
                    "key head {kvh} of row {r}"
                );
                let value = &values[at..at + h.head_dim];
                let want_value =
                    &qkv[r * qkv_width + q_width + kv_width + kvh * h.head_dim..][..h.head_dim];
                let want_value: Vec<u16> = want_value
                    .iter()
                    .map(|&v| f16::from_f32(v).to_bits())
                    .collect();
                assert_eq!(value, want_value, "value head {kvh} of row {r}");
            }
        }
        // The same rows as one decode step of `rows` sequences, each with its
        // own cache and position: the same queries, keys and values.
        let seq_caches: Vec<Buffer<u16>> = (0..2 * rows)
            .map(|_| poisoned_f16(&gpu, h.cache_len(capacity)))
            .collect();
        let addresses = |part: usize| -> Vec<u64> {
            (0..rows)
                .map(|s| seq_caches[2 * s + part].all().address())
                .collect()
        };
        let (key_table, value_table) = (
            Buffer::from_host(&gpu, &addresses(0)).unwrap(),
            Buffer::from_host(&gpu, &addresses(1)).unwrap(),
        );
        let batched = LayerCache {
            keys: seq_caches[0].all(),
            values: seq_caches[1].all(),
            capacity,
            tables: Some(CacheTables {
                keys: key_table.all(),
                values: value_table.all(),
            }),
        };
        let positions: Vec<i32> = (0..rows).map(|r| (start + r) as i32).collect();
        let pb = Buffer::from_host(&gpu, &positions).unwrap();
        let qb = Buffer::from_host(&gpu, &qkv).unwrap();
        rope_store_kv_batched(&gpu, h, qb.all(), rows, rotation, pb.all(), batched).unwrap();
        assert_eq!(
            download(&gpu, &qb, rows * qkv_width),
            got,
            "batched queries"
        );
        for s in 0..rows {
            let (k, v) = (
                download(&gpu, &seq_caches[2 * s], h.cache_len(capacity)),
                download(&gpu, &seq_caches[2 * s + 1], h.cache_len(capacity)),
            );
            for kvh in 0..h.kv_heads {
                let at = (kvh * capacity + start + s) * h.head_dim;
                let span = at..at + h.head_dim;
                assert_eq!(k[span.clone()], keys[span.clone()], "sequence {s} key");
                assert_eq!(v[span.clone()], values[span], "sequence {s} value");
            }
        }
    }
}

/// A lone decode step's rotation and attention in one launch
/// (`attention_f16_accumulator_rope`) against `rope_store_kv` then
/// `attention_f16_accumulator`: the same output, keys and values bit for bit,
/// for Gemma 3's heads (per-head norms, a window), Qwen3's (per-head norms,
/// half-head pairs), plain ones with scaled queries and TinyLlama's (32 on
/// 4, whose blocks serve two query heads at depth 4100), after caches of
/// several depths.
#[test]
fn rotation_in_the_attention_launch_equals_its_own_launch() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(12);
    let gemma = heads(4, 1, 256);
    let qwen3 = heads(16, 8, 128);
    let plain = heads(6, 2, 64);
    // TinyLlama's heads: at depth 4100, blocks of two query heads.
    let grouped = heads(32, 4, 64);
    // (heads, per-head norms, half-head pairs, query scale, window)
    let cases = [
        (gemma, true, true, 0.0625, Some(32)),
        (gemma, true, true, 0.0625, None),
        (qwen3, true, true, 1.0, None),
        (plain, false, false, 0.125, None),
        (plain, false, true, 1.0, Some(100)),
        (grouped, true, false, 1.0, None),
    ];
    for (h, norms, halves, query_scale, window) in cases {
        let capacity = 4200;
        let (q_width, kv_width) = (h.heads * h.head_dim, h.kv_heads * h.head_dim);
        let qkv_width = q_width + 2 * kv_width;
        let table = test_rope_table(capacity, h.head_dim, 0.29);
        let tb = Buffer::from_host(&gpu, &table).unwrap();
        let (q_weight, k_weight) = (rng.vec(h.head_dim), rng.vec(h.head_dim));
        let (qwb, kwb) = (
            Buffer::from_host(&gpu, &q_weight).unwrap(),
            Buffer::from_host(&gpu, &k_weight).unwrap(),
        );
        let rotation = Rotation {
            cos_sin: tb.all(),
            halves,
            qk_norm: norms.then(|| QkNorm {
                query: qwb.all(),
                key: kwb.all(),
                eps: 1e-6,
            }),
            query_scale,
        };
        // Earlier positions: random f16 keys and values, the same in both.
        let earlier: Vec<u16> = rng
            .vec(2 * h.cache_len(capacity))
            .iter()
            .map(|&v| f16::from_f32(v).to_bits())
            .collect();
        let (earlier_keys, earlier_values) = earlier.split_at(h.cache_len(capacity));
        for position in [0usize, 9, 130, 333, 4100] {
            let qkv = rng.vec(qkv_width);
            let start = Buffer::from_host(&gpu, &[position as i32]).unwrap();
            let run = |fused: bool| {
                let keys = Buffer::from_host(&gpu, earlier_keys).unwrap();
                let values = Buffer::from_host(&gpu, earlier_values).unwrap();
                let cache = LayerCache {
                    keys: keys.all(),
                    values: values.all(),
                    capacity,
                    tables: None,
                };
                let qb = Buffer::from_host(&gpu, &qkv).unwrap();
                let out = poisoned_f32(&gpu, q_width);
                let batch = AttentionBatch {
                    heads: h,
                    scale: 1.0,
                    window,
                    queries: qb.all(),
                    query_stride: qkv_width,
                    rows: 1,
                    cache,
                    start: start.all(),
                    out: out.all(),
                };
                let slots = chunk_slots(position, window);
                let split = SplitBuffers::new(&gpu, h, 1, slots).unwrap();
                let split = split.view(slots).unwrap();
                if fused {
                    attention_f16_accumulator_rope(&gpu, &batch, rotation, split).unwrap();
                } else {
                    rope_store_kv(&gpu, h, qb.all(), 1, rotation, start.all(), cache).unwrap();
                    attention_f16_accumulator(&gpu, &batch, split).unwrap();
                }
                (
                    download(&gpu, &out, q_width),
                    download(&gpu, &keys, h.cache_len(capacity)),
                    download(&gpu, &values, h.cache_len(capacity)),
                )
            };
            let (want, fused) = (run(false), run(true));
            let what = format!("heads of {} at position {position}", h.head_dim);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fused.0), bits(&want.0), "output, {what}");
            assert!(want.0.iter().all(|v| v.is_finite()), "output, {what}");
            assert_eq!(fused.1, want.1, "keys, {what}");
            assert_eq!(fused.2, want.2, "values, {what}");
        }
    }
}

#[test]
fn rope_cache_write_and_attention_match_the_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(6);
    for h in [heads(6, 2, 64), heads(4, 4, 128)] {
        let capacity = 700;
        let (q_width, kv_width) = (h.heads * h.head_dim, h.kv_heads * h.head_dim);
        let qkv_width = q_width + 2 * kv_width;
        let table = test_rope_table(capacity, h.head_dim, 0.37);
        let tb = Buffer::from_host(&gpu, &table).unwrap();
        let keys_b: Buffer<u16> = Buffer::zeros(&gpu, h.cache_len(capacity)).unwrap();
        let values_b: Buffer<u16> = Buffer::zeros(&gpu, h.cache_len(capacity)).unwrap();
        let cache = LayerCache {
            keys: keys_b.all(),
            values: values_b.all(),
            capacity,
            tables: None,
        };
        let mut host_keys = vec![vec![0.0f32; capacity * h.head_dim]; h.kv_heads];
        let mut host_values = host_keys.clone();
        let mut position = 0;
        // A prefill of 37 rows, one of 200, then single decode steps.
        for rows_now in [37usize, 200, 1, 400, 1] {
            let qkv = rng.vec(rows_now * qkv_width);
            let mut roped = qkv.clone();
            for r in 0..rows_now {
                let row = &mut roped[r * qkv_width..(r + 1) * qkv_width];
                rope_reference(
                    &mut row[..q_width + kv_width],
                    h.head_dim,
                    &table,
                    position + r,
                );
                for kvh in 0..h.kv_heads {
                    for d in 0..h.head_dim {
                        let k = row[q_width + kvh * h.head_dim + d];
                        let v = row[q_width + kv_width + kvh * h.head_dim + d];
                        host_keys[kvh][(position + r) * h.head_dim + d] = f16::from_f32(k).to_f32();
                        host_values[kvh][(position + r) * h.head_dim + d] =
                            f16::from_f32(v).to_f32();
                    }
                }
            }
            let qb = Buffer::from_host(&gpu, &qkv).unwrap();
            let start = Buffer::from_host(&gpu, &[position as i32]).unwrap();
            let rotation = adjacent(tb.all());
            rope_store_kv(&gpu, h, qb.all(), rows_now, rotation, start.all(), cache).unwrap();
            let roped_q: Vec<f32> = download(&gpu, &qb, rows_now * qkv_width);
            for r in 0..rows_now {
                let got = &roped_q[r * qkv_width..][..q_width];
                let want = &roped[r * qkv_width..][..q_width];
                assert!(relative_error(got, want) < 1e-6, "rope of row {r}");
            }
            let want = reference_attention(
                h,
                &roped,
                qkv_width,
                &host_keys,
                &host_values,
                position,
                rows_now,
            );
            // Every path on every batch: f32 within float rounding of the
            // reference, the others within f16 rounding (tensor cores: f16
            // query and softmax weights; the accumulator path: f16 output).
            type Attend = fn(&Gpu, &AttentionBatch<'_>) -> tl_cuda::Result<()>;
            let mut paths: Vec<(&str, Attend, f64)> = vec![
                ("f32", attention_f32, 1e-4),
                ("f16 accumulator", f16_accumulator_with_every_slot, 5e-3),
            ];
            if flash_supported(&gpu, h.head_dim) {
                paths.push(("tensor cores", attention_flash, 2e-3));
            } else {
                eprintln!(
                    "skipping tensor-core attention for heads of {}: needs compute capability 8.0+",
                    h.head_dim
                );
            }
            for (name, attend, tolerance) in paths {
                let out = poisoned_f32(&gpu, rows_now * q_width);
                let batch = AttentionBatch {
                    heads: h,
                    scale: h.score_scale(),
                    window: None,
                    queries: qb.all(),
                    query_stride: qkv_width,
                    rows: rows_now,
                    cache,
                    start: start.all(),
                    out: out.all(),
                };
                attend(&gpu, &batch).unwrap();
                let err = relative_error(&download(&gpu, &out, rows_now * q_width), &want);
                eprintln!(
                    "attention, {name}, heads of {}: {rows_now} rows at {position}: relative error {err:.2e}",
                    h.head_dim
                );
                assert!(
                    err < tolerance,
                    "{name}: {rows_now} rows at {position}: {err}"
                );
                if name == "tensor cores" {
                    // Straight to f16: the f32 output's bits rounded as
                    // to_f16 rounds them, and batch.out left alone.
                    let f32_out = download(&gpu, &out, rows_now * q_width);
                    let untouched = poisoned_f32(&gpu, rows_now * q_width);
                    let f16_out = poisoned_f16(&gpu, rows_now * q_width);
                    let batch = AttentionBatch {
                        out: untouched.all(),
                        ..batch
                    };
                    attention_flash_to_f16(&gpu, &batch, f16_out.all()).unwrap();
                    let want: Vec<u16> = f32_out
                        .iter()
                        .map(|&v| f16::from_f32(v).to_bits())
                        .collect();
                    assert_eq!(download(&gpu, &f16_out, rows_now * q_width), want);
                    let left = download(&gpu, &untouched, rows_now * q_width);
                    assert!(left.iter().all(|v| v.to_bits() == f32::NAN.to_bits()));
                }
            }
            position += rows_now;
        }
    }
}

/// attention_f16_accumulator with as many chunk slots as the cache could
/// need (a lone row; slots past a row's chunks stay idle).
fn f16_accumulator_with_every_slot(gpu: &Gpu, batch: &AttentionBatch<'_>) -> tl_cuda::Result<()> {
    let slots = if batch.rows == 1 {
        chunk_slots(batch.cache.capacity - 1, None)
    } else {
        1
    };
    let split = SplitBuffers::new(gpu, batch.heads, 1, slots)?;
    attention_f16_accumulator(gpu, batch, split.view(slots)?)
}

#[test]
fn a_recorded_graph_replays_the_same_work() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(7);
    let (rows, cols) = (64, 256);
    let (bytes, w) = random_matrix(&mut rng, GgmlType::Q4_0, rows, cols);
    let m = DeviceMatrix::upload(&gpu, GgmlType::Q4_0, rows, cols, &bytes).unwrap();
    let xb: Buffer<f32> = Buffer::zeros(&gpu, cols).unwrap();
    let y = poisoned_f32(&gpu, rows);
    let graph =
        Graph::capture(&gpu, || gemv(&gpu, &m, xb.all(), y.all(), Epilogue::Plain)).unwrap();
    for _ in 0..3 {
        let x = rng.vec(cols);
        gpu.upload(&x, xb.all()).unwrap();
        graph.replay().unwrap();
        let err = relative_error(
            &download(&gpu, &y, rows),
            &reference_matvec(&w, &q8_dequantized(&x), rows),
        );
        assert!(err < 1e-3, "replay: {err}");
    }
}

/// The QKV projection with RoPE and the cache write folded in gives what the
/// separate steps give: the projection with its norm, then `rope_store_kv`;
/// and so does the projection split in two (queries and keys, then values,
/// as where the values have another weight type), each part rotating and
/// storing its own rows.
#[test]
fn qkv_projection_with_rope_matches_the_separate_steps() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(8);
    let h = heads(6, 2, 64);
    let (q_width, kv_width) = (h.heads * h.head_dim, h.kv_heads * h.head_dim);
    let (rows, capacity) = (q_width + 2 * kv_width, 40);
    let table = test_rope_table(capacity, h.head_dim, 0.29);
    let tb = Buffer::from_host(&gpu, &table).unwrap();
    for t in TYPES {
        let cols = if is_k_quant(t) { 512 } else { 320 };
        let (bytes, _) = random_matrix(&mut rng, t, rows, cols);
        let m = DeviceMatrix::upload(&gpu, t, rows, cols, &bytes).unwrap();
        let x = Buffer::from_host(&gpu, &rng.vec(cols)).unwrap();
        let norm = Buffer::from_host(&gpu, &rng.vec(cols)).unwrap();
        let position = Buffer::from_host(&gpu, &[(rng.next() % capacity as u64) as i32]).unwrap();
        let caches: Vec<Buffer<u16>> = (0..6)
            .map(|_| poisoned_f16(&gpu, h.cache_len(capacity)))
            .collect();
        let layer = |i: usize| LayerCache {
            keys: caches[2 * i].all(),
            values: caches[2 * i + 1].all(),
            capacity,
            tables: None,
        };
        let (separate, fused) = (poisoned_f32(&gpu, rows), poisoned_f32(&gpu, rows));
        let weight = norm.all();
        gemv(
            &gpu,
            &m,
            x.all(),
            separate.all(),
            Epilogue::Norm { weight, eps: 1e-5 },
        )
        .unwrap();
        let rotation = adjacent(tb.all());
        rope_store_kv(
            &gpu,
            h,
            separate.all(),
            1,
            rotation,
            position.all(),
            layer(0),
        )
        .unwrap();
        let norm_rope = |cache, first_row| Epilogue::NormRope {
            weight,
            eps: 1e-5,
            heads: h,
            cos_sin: tb.all(),
            position: position.all(),
            cache,
            first_row,
        };
        gemv(&gpu, &m, x.all(), fused.all(), norm_rope(layer(1), 0)).unwrap();
        let want = download(&gpu, &separate, q_width);
        let got = download(&gpu, &fused, q_width);
        assert!(relative_error(&got, &want) < 1e-6, "{t:?}: queries");
        // The same rows in two matrices: queries and keys, then values.
        let split = poisoned_f32(&gpu, rows);
        let row_bytes = bytes.len() / rows;
        let top = q_width + kv_width;
        for (first_row, part_rows) in [(0, top), (top, kv_width)] {
            let part_bytes = &bytes[first_row * row_bytes..(first_row + part_rows) * row_bytes];
            let part = DeviceMatrix::upload(&gpu, t, part_rows, cols, part_bytes).unwrap();
            let y = split.all().sub(first_row, rows - first_row).unwrap();
            gemv(&gpu, &part, x.all(), y, norm_rope(layer(2), first_row)).unwrap();
        }
        let got_split = download(&gpu, &split, q_width);
        assert_eq!(got_split, got, "{t:?}: queries of the split projection");
        for i in 0..2 {
            let (a, b, c) = (
                download(&gpu, &caches[i], h.cache_len(capacity)),
                download(&gpu, &caches[2 + i], h.cache_len(capacity)),
                download(&gpu, &caches[4 + i], h.cache_len(capacity)),
            );
            // Same bits everywhere: the written position in all, NaN elsewhere.
            assert_eq!(a, b, "{t:?}: cache {i}");
            assert_eq!(a, c, "{t:?}: cache {i} of the split projection");
        }
    }
}

/// The k largest usable values: every value above the k-th and every value
/// tied with it, NaN and -inf never, against a sort on the host (the device
/// sampler's first step; tl-engine's GPU tests check the whole sampler
/// against the host's).
#[test]
fn top_k_select_returns_the_largest_values_and_their_ties() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng(9);
    let buffers = SampleBuffers::new(&gpu, 1).unwrap();
    let window_tokens = [3u32, 0, 3, 1_000_000];
    let params = SampleSettings {
        top_k: 1,
        greedy: false,
        temperature: 1.0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        presence_penalty: 0.0,
        frequency_penalty: 0.0,
        draw: 0.5,
    };
    // (n, top-k): the selection holds top-k + window length values.
    for (n, top_k) in [
        (1usize, 1usize),
        (50, 40),
        (1000, 1),
        (49152, 40),
        (151_936, 256),
        (3000, 5),
    ] {
        let window_len = if n > 3 { window_tokens.len() } else { 0 };
        let k = top_k + window_len;
        let mut x = rng.vec(n);
        if n > 100 {
            x[7] = f32::NAN;
            x[8] = f32::NEG_INFINITY;
            x[9] = f32::INFINITY;
            // Ties at what will be near the k-th value, and a signed zero.
            let mut sorted: Vec<f32> = x.iter().copied().filter(|v| v.is_finite()).collect();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let kth = sorted[k.min(sorted.len()) - 1];
            x[20] = kth;
            x[21] = kth;
            x[22] = -0.0;
        }
        let xb = Buffer::from_host(&gpu, &x).unwrap();
        let job = SampleJob {
            row: 0,
            params: SampleSettings { top_k, ..params },
            window: &window_tokens[..window_len],
        };
        let prepared = sample::prepare(&gpu, &[job], &buffers).unwrap();
        sample::select_candidates(&gpu, xb.all(), n, prepared, &buffers).unwrap();
        let mut got = vec![0u32; sample::SELECTION_LEN];
        gpu.download(buffers.selection(0).unwrap(), &mut got)
            .unwrap();
        // The window's values, NaN for the token outside x.
        let at = 2 + 2 * sample::TOP_K_CAPACITY;
        for (j, &token) in window_tokens[..window_len].iter().enumerate() {
            let want = x.get(token as usize).copied().unwrap_or(f32::NAN);
            let got = f32::from_bits(got[at + j]);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "n {n}: window {j}"
            );
        }
        let (written, selected) = (got[0] as usize, got[1] as usize);
        assert_eq!(written, selected, "n {n}: no overflow expected");
        let mut pairs: Vec<(u32, f32)> = (0..written)
            .map(|i| (got[2 + 2 * i], f32::from_bits(got[3 + 2 * i])))
            .collect();
        for &(i, v) in &pairs {
            assert_eq!(v.to_bits(), x[i as usize].to_bits(), "n {n}: value of {i}");
        }
        pairs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut want: Vec<(u32, f32)> = (0u32..).zip(x.iter().copied()).collect();
        want.retain(|(_, v)| *v > f32::NEG_INFINITY);
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let kth = want[k.min(want.len()) - 1].1;
        let expected: Vec<(u32, f32)> = want
            .iter()
            .copied()
            .filter(|(_, v)| v.total_cmp(&kth).is_ge())
            .collect();
        assert_eq!(pairs, expected, "n {n}, k {k}");
    }
}
