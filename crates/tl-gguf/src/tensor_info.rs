//! Tensor descriptors from the GGUF header: name, dimensions, element type and the
//! location of the data, validated against the file when it is opened.

use crate::ggml_type::GgmlType;

/// Largest number of dimensions GGML tensors have.
pub const MAX_DIMS: usize = 4;

/// The byte size of a tensor of `dims` (GGML order) and type `ty`, or why GGML
/// cannot hold such a tensor. Shared by the reader and the writer so that what one
/// writes the other accepts.
pub(crate) fn data_size(dims: &[u64], ty: GgmlType) -> Result<u64, String> {
    let row_length = match dims {
        [] => return Err(format!("no dimensions (expected 1 to {MAX_DIMS})")),
        _ if dims.len() > MAX_DIMS => {
            return Err(format!(
                "{} dimensions (expected 1 to {MAX_DIMS})",
                dims.len()
            ))
        }
        [first, ..] => *first,
    };
    // GGML stores dimensions as `int64_t`.
    if let Some(dim) = dims.iter().find(|&&d| d > i64::MAX as u64) {
        return Err(format!("dimension {dim} exceeds i64::MAX"));
    }
    if row_length % ty.block_elements() != 0 {
        return Err(format!(
            "row length {row_length} is not a multiple of the {ty} block size {}",
            ty.block_elements()
        ));
    }
    dims.iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .and_then(|elements| ty.bytes_for(elements))
        .ok_or_else(|| format!("dimensions {dims:?} overflow the size of a {ty} tensor"))
}

/// One tensor's descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions in GGML order: `dims[0]` varies fastest (the row length).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset of the data, relative to the start of the data section.
    pub offset: u64,
    /// Size of the data in bytes.
    pub size_bytes: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn element_count(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The shape in row-major order, slowest dimension first (`[rows, cols]` for a
    /// matrix), as candle and most Rust code expect it.
    pub fn shape(&self) -> Vec<usize> {
        // Dimensions were checked at open time to multiply to a byte size that fits
        // in the mapped file, so each fits a usize.
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }
}
