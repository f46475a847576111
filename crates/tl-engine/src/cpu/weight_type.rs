//! The weight types the CPU matmul runs, with their GGUF block layouts, and the
//! activation format llama.cpp pairs with each (`vec_dot_type` in ggml-cpu).

use std::fmt;

/// Values per quantization block, for every type here and for the activations.
pub const BLOCK_VALUES: usize = 32;

/// A quantized weight type, stored exactly as GGUF stores it: blocks of 32 values,
/// a row being `cols / 32` consecutive blocks.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightType {
    /// `f16 d` then 16 bytes of nibbles; value = d·(nibble − 8).
    Q4_0,
    /// `f16 d`, `f16 m` then 16 bytes of nibbles; value = d·nibble + m.
    Q4_1,
    /// `f16 d`, 32 fifth bits, 16 bytes of nibbles; value = d·(q − 16).
    Q5_0,
    /// `f16 d`, `f16 m`, 32 fifth bits, 16 bytes of nibbles; value = d·q + m.
    Q5_1,
    /// `f16 d` then 32 `i8`; value = d·q.
    Q8_0,
}

impl WeightType {
    /// Bytes of one block of 32 values.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightType::Q4_0 => 18,
            WeightType::Q4_1 => 20,
            WeightType::Q5_0 => 22,
            WeightType::Q5_1 => 24,
            WeightType::Q8_0 => 34,
        }
    }

    /// The type for a GGUF tensor type, if the CPU matmul runs it.
    pub fn from_gguf(ty: tl_gguf::GgmlType) -> Option<Self> {
        match ty {
            tl_gguf::GgmlType::Q4_0 => Some(WeightType::Q4_0),
            tl_gguf::GgmlType::Q4_1 => Some(WeightType::Q4_1),
            tl_gguf::GgmlType::Q5_0 => Some(WeightType::Q5_0),
            tl_gguf::GgmlType::Q5_1 => Some(WeightType::Q5_1),
            tl_gguf::GgmlType::Q8_0 => Some(WeightType::Q8_0),
            _ => None,
        }
    }
}

impl fmt::Display for WeightType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
