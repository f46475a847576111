//! Weight matrices on the GPU, in their GGUF quantized form. Each row's blocks
//! are split on upload into the quants (back to back) and the per-block scales,
//! so the kernels load quants as aligned 8- and 16-byte vectors; the bits are the
//! file's bits, nothing is dequantized or re-quantized.

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
            | GgmlType::Q8_0
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
        GgmlType::Q8_0 => "q8_0",
        _ => "unsupported",
    }
}

/// Bytes at the front of a block that hold its scale(s): `d`, or `d` and `m`.
fn scale_bytes(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q8_0 => 2,
        GgmlType::Q4_1 => 4,
        _ => 0,
    }
}

/// Bytes of a `rows × cols` matrix of this type in the GGUF layout (`None`
/// when a row is not a whole number of blocks).
pub fn gguf_bytes(ty: GgmlType, rows: usize, cols: usize) -> Option<usize> {
    let row = ty.bytes_for(cols as u64)?;
    usize::try_from(row).ok()?.checked_mul(rows)
}

/// Splits GGUF blocks into (quants, scales): for each block in order, its scale
/// bytes go to `scales` and the rest to `quants`.
pub fn split_blocks(weight_type: GgmlType, gguf: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (block_bytes, scale_bytes) = (weight_type.block_bytes() as usize, scale_bytes(weight_type));
    if scale_bytes == 0 {
        return (gguf.to_vec(), Vec::new());
    }
    let blocks = gguf.len() / block_bytes;
    let mut quants = Vec::with_capacity(blocks * (block_bytes - scale_bytes));
    let mut scales = Vec::with_capacity(blocks * scale_bytes);
    for block in gguf.chunks_exact(block_bytes) {
        scales.extend_from_slice(&block[..scale_bytes]);
        quants.extend_from_slice(&block[scale_bytes..]);
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
}

impl SummationOrder {
    /// The CPU backend's order for a matrix of `rows` rows of this type.
    pub fn of(weight_type: GgmlType, rows: usize) -> Self {
        if weight_type == GgmlType::Q4_0 && rows.is_multiple_of(8) {
            SummationOrder::WholeBlocks
        } else {
            SummationOrder::Lanes
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
        if cols == 0 || !cols.is_multiple_of(32) {
            return Err(CudaError::Unsupported(format!(
                "the CUDA kernels need rows whose length is a multiple of 32; this matrix has {cols}"
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

    /// The suffix of this matrix's GEMV kernels: its type's, and for the
    /// whole-block order `_blocks`.
    pub(crate) fn gemv_suffix(&self) -> String {
        let order = match self.summation {
            SummationOrder::Lanes => "",
            SummationOrder::WholeBlocks => "_blocks",
        };
        format!("{}{order}", kernel_suffix(self.weight_type))
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
        assert!(!supports(GgmlType::Q4_K));
    }
}
