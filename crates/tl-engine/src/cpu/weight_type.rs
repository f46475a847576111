//! The weight types the CPU matmul runs, with their GGUF block layouts, and the
//! activation format llama.cpp pairs with each (`vec_dot_type` in ggml-cpu).

use std::fmt;

/// Values per quantization block of the 32-value types and of their Q8_0 and
/// Q8_1 activations.
pub const BLOCK_VALUES: usize = 32;

/// A quantized weight type, stored exactly as GGUF stores it: a row is
/// `cols / block_values()` consecutive blocks.
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
    /// 256 values: 16 sub-blocks of 2 bits with 4-bit scales and minimums.
    Q2_K,
    /// 256 values: 16 sub-blocks of 3 bits with 6-bit scales.
    Q3_K,
    /// 256 values: 8 sub-blocks of 4 bits with 6-bit scales and minimums.
    Q4_K,
    /// 256 values: 8 sub-blocks of 5 bits with 6-bit scales and minimums.
    Q5_K,
    /// 256 values: 16 sub-blocks of 6 bits with 8-bit scales.
    Q6_K,
}

impl WeightType {
    /// Bytes of one block.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightType::Q4_0 => 18,
            WeightType::Q4_1 => 20,
            WeightType::Q5_0 => 22,
            WeightType::Q5_1 => 24,
            WeightType::Q8_0 => 34,
            WeightType::Q2_K => 84,
            WeightType::Q3_K => 110,
            WeightType::Q4_K => 144,
            WeightType::Q5_K => 176,
            WeightType::Q6_K => 210,
        }
    }

    /// Values in one block.
    pub const fn block_values(self) -> usize {
        if self.is_k_quant() {
            super::kquants::SUPER_BLOCK_VALUES
        } else {
            BLOCK_VALUES
        }
    }

    /// Whether the type is a K-quant, multiplied with Q8_K activations.
    pub const fn is_k_quant(self) -> bool {
        matches!(
            self,
            WeightType::Q2_K
                | WeightType::Q3_K
                | WeightType::Q4_K
                | WeightType::Q5_K
                | WeightType::Q6_K
        )
    }

    /// The type for a GGUF tensor type, if the CPU matmul runs it.
    pub fn from_gguf(ty: tl_gguf::GgmlType) -> Option<Self> {
        use tl_gguf::GgmlType as G;
        Some(match ty {
            G::Q4_0 => WeightType::Q4_0,
            G::Q4_1 => WeightType::Q4_1,
            G::Q5_0 => WeightType::Q5_0,
            G::Q5_1 => WeightType::Q5_1,
            G::Q8_0 => WeightType::Q8_0,
            G::Q2_K => WeightType::Q2_K,
            G::Q3_K => WeightType::Q3_K,
            G::Q4_K => WeightType::Q4_K,
            G::Q5_K => WeightType::Q5_K,
            G::Q6_K => WeightType::Q6_K,
            _ => return None,
        })
    }
}

impl fmt::Display for WeightType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
