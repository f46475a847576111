//! Weight matrices on the GPU, in their GGUF quantized form. Each row's blocks
//! are split on upload into the quants (back to back) and the per-block scales,
//! so the kernels load quants as aligned 8- and 16-byte vectors; the bits are the
//! file's bits, nothing is dequantized or re-quantized.

use std::ops::Range;

use crate::buffer::{Buffer, Span};
use crate::error::{CudaError, Result};
use crate::gpu::Gpu;

pub use tl_gguf::GgmlType;

/// Whether the kernels read weights of this type (the GGUF type enum every
/// backend shares; each answers for itself).
pub fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
    ) || is_k_quant(ty)
}

/// Whether the type is a K-quant (super-blocks of 256 values, met by Q8_K
/// activations).
pub fn is_k_quant(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K
    )
}

/// The suffix of a type's kernels (`gemv_q4_0`, ...): its name in lower case
/// (none exist for an unsupported type, whose matrices are refused at
/// upload).
pub(crate) fn kernel_suffix(ty: GgmlType) -> &'static str {
    match ty {
        GgmlType::F32 => "f32",
        GgmlType::F16 => "f16",
        GgmlType::BF16 => "bf16",
        GgmlType::Q4_0 => "q4_0",
        GgmlType::Q4_1 => "q4_1",
        GgmlType::Q5_0 => "q5_0",
        GgmlType::Q5_1 => "q5_1",
        GgmlType::Q8_0 => "q8_0",
        GgmlType::Q2_K => "q2_k",
        GgmlType::Q3_K => "q3_k",
        GgmlType::Q4_K => "q4_k",
        GgmlType::Q5_K => "q5_k",
        GgmlType::Q6_K => "q6_k",
        _ => "unsupported",
    }
}

/// How a type's GGUF blocks are split on upload (`Weight layouts` in
/// quants.cuh): `quants`, the block's quantized bits, go to the quants array
/// (a multiple of 16 bytes, so the kernels load them as aligned vectors), and
/// the `header` pieces (source range, offset in the record) to a record of
/// `header_bytes` (zero-padded, a whole number of the widest value the kernels
/// read from it) in the scales array.
struct BlockSplit {
    quants: Range<usize>,
    header: &'static [(Range<usize>, usize)],
    header_bytes: usize,
}

/// The split of a quantized type's blocks (`None` for float types, uploaded
/// as they are).
fn block_split(ty: GgmlType) -> Option<BlockSplit> {
    let split = |quants, header, header_bytes| {
        Some(BlockSplit {
            quants,
            header,
            header_bytes,
        })
    };
    match ty {
        GgmlType::Q4_0 => split(2..18, &[(0..2, 0)], 2),
        GgmlType::Q4_1 => split(4..20, &[(0..4, 0)], 4),
        GgmlType::Q8_0 => split(2..34, &[(0..2, 0)], 2),
        // d (and m), then the 32 fifth bits at 4 bytes, read as one 8-byte
        // record.
        GgmlType::Q5_0 => split(6..22, &[(0..2, 0), (2..6, 4)], 8),
        GgmlType::Q5_1 => split(8..24, &[(0..8, 0)], 8),
        // The sub-block scales, then d (and dmin).
        GgmlType::Q2_K => split(16..80, &[(0..16, 0), (80..84, 16)], 20),
        GgmlType::Q3_K => split(0..96, &[(96..110, 0)], 16),
        GgmlType::Q4_K => split(16..144, &[(0..16, 0)], 16),
        GgmlType::Q5_K => split(16..176, &[(0..16, 0)], 16),
        GgmlType::Q6_K => split(0..192, &[(192..210, 0)], 20),
        _ => None,
    }
}

/// Bytes of a `rows × cols` matrix of this type in the GGUF layout (`None`
/// when a row is not a whole number of blocks).
pub fn gguf_bytes(ty: GgmlType, rows: usize, cols: usize) -> Option<usize> {
    let row = ty.bytes_for(cols as u64)?;
    usize::try_from(row).ok()?.checked_mul(rows)
}

/// Bytes a `rows × cols` matrix of this type takes on the device (its split
/// layout pads some headers), `None` when a row is not a whole number of
/// blocks.
pub fn device_bytes(ty: GgmlType, rows: usize, cols: usize) -> Option<usize> {
    let gguf = gguf_bytes(ty, rows, cols)?;
    let Some(split) = block_split(ty) else {
        return Some(gguf);
    };
    let blocks = gguf / ty.block_bytes() as usize;
    blocks.checked_mul(split.quants.len() + split.header_bytes)
}

/// Splits GGUF blocks into (quants, scales) as [`block_split`] says: for each
/// block in order, its quantized bits go to `quants` and its header record to
/// `scales`. Float types pass through whole.
pub fn split_blocks(weight_type: GgmlType, gguf: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let Some(split) = block_split(weight_type) else {
        return (gguf.to_vec(), Vec::new());
    };
    let block_bytes = weight_type.block_bytes() as usize;
    let blocks = gguf.len() / block_bytes;
    let mut quants = Vec::with_capacity(blocks * split.quants.len());
    let mut scales = vec![0u8; blocks * split.header_bytes];
    for (block, record) in gguf
        .chunks_exact(block_bytes)
        .zip(scales.chunks_exact_mut(split.header_bytes))
    {
        quants.extend_from_slice(&block[split.quants.clone()]);
        for (source, at) in split.header {
            record[*at..*at + source.len()].copy_from_slice(&block[source.clone()]);
        }
    }
    (quants, scales)
}

/// The order in which a quantized row's block products are summed in f32:
/// the CPU backend's (llama.cpp's AVX2 kernels), so that the GEMVs compute
/// its bits (`ORDER_*` in gemv.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummationOrder {
    /// `ggml_vec_dot_*`: eight chains of 4-value lane sums, then
    /// `hsum_float_8`.
    Lanes,
    /// The repacked Q4_0 kernels, which llama.cpp and the CPU backend use for
    /// Q4_0 matrices with a multiple of 8 rows: one chain of whole-block sums.
    WholeBlocks,
    /// ggml's tiled K-quant kernels (the CPU backend's for every K-quant but
    /// repacked Q4_K): per super-block `r = d·S − dmin·M`, then one chain
    /// `acc = fma(r, d_a, acc)`.
    SuperBlocks,
    /// The repacked Q4_K gemm (Q4_K matrices with a multiple of 8 rows): per
    /// 64 values `acc = fma(S, d·d_a, acc)` and `acc_min = fma(M, dmin·d_a,
    /// acc_min)`, then `acc − acc_min`.
    RepackedQ4K,
    /// The repacked Q4_K gemv, for the rows llama.cpp runs alone or leaves
    /// over after the gemm's groups of 4: per super-block
    /// `acc = fma(ΣS, d·d_a, acc)` and `acc_min = fma(ΣM, dmin·d_a, acc_min)`.
    RepackedQ4KGemv,
    /// `ggml_vec_dot_*_q8_K`, for the K-quant rows llama.cpp runs in batches
    /// of fewer than 8: eight chains of lane sums per super-block, then
    /// `hsum_float_8` (the CPU backend's `KArithmetic::VecDot`).
    KLanes,
}

impl SummationOrder {
    /// The CPU backend's order for a matrix of `rows` rows of this type.
    pub fn of(weight_type: GgmlType, rows: usize) -> Self {
        let repacked = rows.is_multiple_of(8);
        match weight_type {
            GgmlType::Q4_0 if repacked => SummationOrder::WholeBlocks,
            GgmlType::Q4_K if repacked => SummationOrder::RepackedQ4K,
            ty if is_k_quant(ty) => SummationOrder::SuperBlocks,
            _ => SummationOrder::Lanes,
        }
    }

    /// The order of the rows llama.cpp runs alone (decode steps) for a
    /// matrix of this order.
    pub fn alone(self) -> Self {
        match self {
            SummationOrder::SuperBlocks => SummationOrder::KLanes,
            SummationOrder::RepackedQ4K => SummationOrder::RepackedQ4KGemv,
            other => other,
        }
    }

    /// The orders of `rows` rows llama.cpp runs together in one batch, for a
    /// matrix of this order, as consecutive runs `(rows, order)`: the
    /// repacked Q4_K gemm takes groups of 4 and leaves the rest to its gemv;
    /// the tiled kernels take batches of 8 or more (the CPU backend's
    /// `kquants::row_arithmetic`).
    pub fn together(self, rows: usize) -> [(usize, Self); 2] {
        match self {
            SummationOrder::RepackedQ4K => {
                let grouped = rows - rows % 4;
                [(grouped, self), (rows - grouped, self.alone())]
            }
            SummationOrder::SuperBlocks if rows < 8 => [(rows, self.alone()), (0, self)],
            _ => [(rows, self), (0, self)],
        }
    }

    /// The suffix its GEMV kernels add to the type's.
    pub(crate) fn kernel_suffix(self) -> &'static str {
        match self {
            SummationOrder::Lanes | SummationOrder::SuperBlocks => "",
            SummationOrder::WholeBlocks | SummationOrder::RepackedQ4K => "_blocks",
            SummationOrder::RepackedQ4KGemv => "_gemv",
            SummationOrder::KLanes => "_lanes",
        }
    }
}

/// A `rows × cols` weight matrix on the GPU.
pub struct DeviceMatrix {
    weight_type: GgmlType,
    /// The CPU's order for the stacked parts (all of one order; a stack whose
    /// parts differ takes its first part's, and then only those rows match
    /// the CPU bit for bit: no real model's shapes differ).
    summation: SummationOrder,
    rows: usize,
    cols: usize,
    quants: Buffer<u8>,
    scales: Buffer<u8>,
    /// The matrix dequantized to f16 for prompt GEMMs, when kept (see
    /// [`DeviceMatrix::keep_f16_copy`]).
    f16_copy: Option<Buffer<u16>>,
}

impl DeviceMatrix {
    /// Uploads matrices of one type stacked by rows (`[a; b; ...]`), each given
    /// as (rows, GGUF bytes). Stacking lets one launch compute Q, K and V, or the
    /// gate and up projections, together.
    pub fn upload_stacked(
        gpu: &Gpu,
        weight_type: GgmlType,
        cols: usize,
        parts: &[(usize, &[u8])],
    ) -> Result<DeviceMatrix> {
        if !supports(weight_type) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA kernels cannot read {} weights",
                weight_type.name()
            )));
        }
        let block_values = (weight_type.block_elements() as usize).max(32);
        if cols == 0 || !cols.is_multiple_of(block_values) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA kernels need {} rows whose length is a multiple of {block_values}; this matrix has {cols}",
                weight_type.name()
            )));
        }
        let mut quants = Vec::new();
        let mut scales = Vec::new();
        let mut rows = 0;
        let summation = parts
            .first()
            .map_or(SummationOrder::Lanes, |&(part_rows, _)| {
                SummationOrder::of(weight_type, part_rows)
            });
        for &(part_rows, bytes) in parts {
            let expected = gguf_bytes(weight_type, part_rows, cols);
            if Some(bytes.len()) != expected {
                let expected = expected.map_or("no whole number".into(), |n| n.to_string());
                return Err(CudaError::Unsupported(format!(
                    "a {} matrix of {part_rows}×{cols} has {} bytes, expected {expected}",
                    weight_type.name(),
                    bytes.len()
                )));
            }
            let (q, s) = split_blocks(weight_type, bytes);
            quants.extend_from_slice(&q);
            scales.extend_from_slice(&s);
            rows += part_rows;
        }
        if !scales.is_empty() {
            // The tensor-core GEMVs copy two-byte scales in aligned 4-byte
            // words: the last may reach 2 bytes past the records.
            scales.extend_from_slice(&[0; 4]);
        }
        Ok(DeviceMatrix {
            weight_type,
            summation,
            rows,
            cols,
            quants: Buffer::from_host(gpu, &quants)?,
            scales: Buffer::from_host(gpu, &scales)?,
            f16_copy: None,
        })
    }

    /// Uploads one matrix.
    pub fn upload(
        gpu: &Gpu,
        weight_type: GgmlType,
        rows: usize,
        cols: usize,
        gguf: &[u8],
    ) -> Result<Self> {
        Self::upload_stacked(gpu, weight_type, cols, &[(rows, gguf)])
    }

    pub fn weight_type(&self) -> GgmlType {
        self.weight_type
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn summation(&self) -> SummationOrder {
        self.summation
    }

    /// The suffix of this matrix's GEMV kernels in `order`: its type's, then
    /// the order's.
    pub(crate) fn gemv_suffix(&self, order: SummationOrder) -> String {
        format!(
            "{}{}",
            kernel_suffix(self.weight_type),
            order.kernel_suffix()
        )
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held on the device (without the f16 copy).
    pub fn bytes(&self) -> usize {
        self.quants.bytes() + self.scales.bytes()
    }

    /// The matrix as row-major f16 values, when available without work: an
    /// F16 matrix's own values, or the copy [`DeviceMatrix::keep_f16_copy`] made.
    pub fn f16_values(&self) -> Option<Span<'_, u16>> {
        match (&self.f16_copy, self.weight_type) {
            (Some(copy), _) => Some(copy.all()),
            (None, GgmlType::F16) => Some(self.quants.all().reinterpret()),
            (None, _) => None,
        }
    }

    /// Bytes an f16 copy of this matrix would take (0 for F16 matrices, which
    /// need none).
    pub fn f16_copy_bytes(&self) -> usize {
        match self.weight_type {
            GgmlType::F16 => 0,
            _ => self.rows * self.cols * 2,
        }
    }

    /// Dequantizes the matrix once into a kept f16 copy, so prompt GEMMs need
    /// not dequantize it every time (memory for speed; nothing for F16).
    pub fn keep_f16_copy(&mut self, gpu: &Gpu) -> Result<()> {
        if self.f16_copy_bytes() == 0 || self.f16_copy.is_some() {
            return Ok(());
        }
        let copy = Buffer::zeros(gpu, self.rows * self.cols)?;
        crate::ops::rows::dequantize_f16(gpu, self, copy.all())?;
        self.f16_copy = Some(copy);
        Ok(())
    }

    pub(crate) fn quants(&self) -> Span<'_, u8> {
        self.quants.all()
    }

    pub(crate) fn scales(&self) -> Span<'_, u8> {
        self.scales.all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_1_blocks_split_into_scales_and_quants() {
        let mut gguf = Vec::new();
        for block in 0..3u8 {
            gguf.extend_from_slice(&[block, 0xa0, block, 0xb0]);
            gguf.extend((0..16).map(|i| block * 16 + i));
        }
        let (quants, scales) = split_blocks(GgmlType::Q4_1, &gguf);
        assert_eq!(
            scales,
            [0, 0xa0, 0, 0xb0, 1, 0xa0, 1, 0xb0, 2, 0xa0, 2, 0xb0]
        );
        assert_eq!(quants, (0..48).collect::<Vec<u8>>());
    }

    #[test]
    fn plain_types_pass_through() {
        let bytes: Vec<u8> = (0..64).collect();
        let (quants, scales) = split_blocks(GgmlType::F16, &bytes);
        assert_eq!(quants, bytes);
        assert!(scales.is_empty());
    }

    #[test]
    fn gguf_sizes_follow_the_block_layouts() {
        assert_eq!(gguf_bytes(GgmlType::Q4_0, 2, 64), Some(2 * 2 * 18));
        assert_eq!(gguf_bytes(GgmlType::Q8_0, 1, 32), Some(34));
        assert_eq!(gguf_bytes(GgmlType::F32, 3, 32), Some(384));
        assert_eq!(gguf_bytes(GgmlType::Q8_0, 1, 33), None);
        assert_eq!(gguf_bytes(GgmlType::Q6_K, 2, 512), Some(2 * 2 * 210));
        assert!(supports(GgmlType::Q4_K) && supports(GgmlType::Q5_0));
        // Q6_K's 210-byte blocks take 192 + 20 on the device.
        assert_eq!(device_bytes(GgmlType::Q6_K, 2, 512), Some(2 * 2 * 212));
        assert_eq!(device_bytes(GgmlType::F16, 2, 64), Some(256));
        assert!(!supports(GgmlType::Q8_K) && !supports(GgmlType::I32));
    }

    /// Blocks numbered 0, 1, ...: byte `i` of block `b` is `b + i` (mod 256).
    fn numbered_blocks(ty: GgmlType, blocks: usize) -> Vec<u8> {
        let size = ty.block_bytes() as usize;
        (0..blocks * size)
            .map(|at| (at / size + at % size) as u8)
            .collect()
    }

    #[test]
    fn q5_0_blocks_move_their_fifth_bits_beside_d() {
        let gguf = numbered_blocks(GgmlType::Q5_0, 2);
        let (quants, scales) = split_blocks(GgmlType::Q5_0, &gguf);
        // d, two bytes of padding, the four bytes of fifth bits.
        assert_eq!(scales, [0, 1, 0, 0, 2, 3, 4, 5, 1, 2, 0, 0, 3, 4, 5, 6]);
        let nibbles = |b: u8| (6..22).map(move |i| b + i);
        assert_eq!(quants, nibbles(0).chain(nibbles(1)).collect::<Vec<u8>>());
    }

    #[test]
    fn k_quant_records_hold_the_scales_then_the_factors() {
        for ty in [
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            let gguf = numbered_blocks(ty, 3);
            let (quants, scales) = split_blocks(ty, &gguf);
            let split = block_split(ty).unwrap();
            assert_eq!(quants.len(), 3 * split.quants.len(), "{ty:?}");
            assert!(split.quants.len().is_multiple_of(16), "{ty:?}");
            assert_eq!(scales.len(), 3 * split.header_bytes, "{ty:?}");
            // Every byte of a block lands once: quants and header pieces
            // cover it without overlap.
            let mut covered = vec![0; ty.block_bytes() as usize];
            for i in split.quants.clone() {
                covered[i] += 1;
            }
            for (source, _) in split.header {
                for i in source.clone() {
                    covered[i] += 1;
                }
            }
            assert!(covered.iter().all(|&c| c == 1), "{ty:?}: {covered:?}");
        }
        // Q6_K: 16 scales, then d, then two bytes of padding.
        let (_, scales) = split_blocks(GgmlType::Q6_K, &numbered_blocks(GgmlType::Q6_K, 1));
        assert_eq!(scales, (192..210).chain([0, 0]).collect::<Vec<u8>>());
    }

    #[test]
    fn summation_follows_the_cpu_backends_choice() {
        use SummationOrder::*;
        assert_eq!(SummationOrder::of(GgmlType::Q4_K, 16), RepackedQ4K);
        assert_eq!(SummationOrder::of(GgmlType::Q4_K, 12), SuperBlocks);
        assert_eq!(SummationOrder::of(GgmlType::Q6_K, 16), SuperBlocks);
        assert_eq!(SummationOrder::of(GgmlType::Q5_0, 16), Lanes);
        assert_eq!(SummationOrder::of(GgmlType::Q4_0, 16), WholeBlocks);
    }
}
