//! Bit-for-bit comparison with llama.cpp: `golden/ggml_mul_mat.bin` holds the
//! outputs of ggml's own CPU `ggml_mul_mat` (AVX2/FMA/F16C build, repacked and
//! plain weights; batches of 1, 6 and 9 rows, which meet its K-quant tiled,
//! `vec_dot` and repacked gemm and gemv kernels) for small matrices of every
//! type from Q4_0 to Q6_K. Regenerate it with `python3
//! golden/ggml_mul_mat.py LIB_DIR`, `LIB_DIR` holding the `libggml-*.so` of
//! a llama.cpp build (llama-cpp-python's by default).

use std::collections::BTreeSet;

use tl_gguf::GgmlType;

use super::{QuantizedMatrix, WeightType};

const GOLDEN: &[u8] = include_bytes!("golden/ggml_mul_mat.bin");

/// One recorded `ggml_mul_mat`.
struct Case {
    ggml_type: GgmlType,
    rows: usize,
    cols: usize,
    m: usize,
    repacked: bool,
    weights: Vec<u8>,
    x: Vec<f32>,
    out: Vec<f32>,
}

/// Reads little-endian values off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        head.to_vec()
    }

    fn u32(&mut self) -> u32 {
        let bytes = self.bytes(4);
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    fn f32s(&mut self, len: usize) -> Vec<f32> {
        self.bytes(4 * len)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

fn read_cases() -> Vec<Case> {
    let mut reader = Reader(GOLDEN);
    assert_eq!(reader.bytes(4), b"TLGG");
    assert_eq!(reader.u32(), 1, "golden file version");
    let count = reader.u32();
    (0..count)
        .map(|_| {
            let ggml_type = reader.u32();
            let [rows, cols, m] = [(); 3].map(|_| reader.u32() as usize);
            let repacked = reader.u32() == 1;
            let ggml_type = GgmlType::from_id(ggml_type).expect("a ggml type");
            let (block_values, block_bytes) = (ggml_type.block_elements(), ggml_type.block_bytes());
            let weights = reader.bytes(rows * cols / block_values as usize * block_bytes as usize);
            let x = reader.f32s(m * cols);
            let out = reader.f32s(m * rows);
            Case {
                ggml_type,
                rows,
                cols,
                m,
                repacked,
                weights,
                x,
                out,
            }
        })
        .collect()
}

/// The types in the golden file that our kernels do not run yet (candle's
/// matmul runs them, without llama.cpp's rounding).
const NOT_YET_OURS: [&str; 0] = [];

#[test]
fn matches_ggml_bit_for_bit() {
    let cases = read_cases();
    assert_eq!(cases.len(), 36);
    let mut not_ours = BTreeSet::new();
    for case in cases {
        let Some(weight_type) = WeightType::from_gguf(case.ggml_type) else {
            not_ours.insert(case.ggml_type.name());
            continue;
        };
        let what = format!(
            "{weight_type} {}×{} m={} repacked={}",
            case.rows, case.cols, case.m, case.repacked
        );
        let matrix = QuantizedMatrix::new(weight_type, case.rows, case.cols, case.weights.clone())
            .expect("valid matrix")
            .with_repacking(case.repacked);
        for threads in [1, 2] {
            let mut out = vec![f32::NAN; case.m * case.rows];
            matrix
                .matmul(&case.x, case.m, &mut out, threads)
                .expect("matmul");
            for (i, (ours, ggml)) in out.iter().zip(&case.out).enumerate() {
                assert_eq!(
                    ours.to_bits(),
                    ggml.to_bits(),
                    "{what}, {threads} threads: output {i}: {ours} vs ggml {ggml}"
                );
            }
        }
    }
    assert_eq!(not_ours, BTreeSet::from(NOT_YET_OURS));
}
