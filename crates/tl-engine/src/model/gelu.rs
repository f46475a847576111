//! GELU (tanh approximation) as ggml evaluates it: through a table of its
//! value, rounded to f16, at every f16 input. Inputs are rounded to f16 to
//! index it; at or below −10 GELU gives 0 and at or above 10 the input
//! itself. Both backends use this one table, so their GeGLU bits agree with
//! each other and with llama.cpp's CPU build.

use std::sync::OnceLock;

use half::f16;

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_COEF_A: f32 = 0.044_715;

/// GELU of one f32, with ggml's rounding: its compiled expression fuses
/// `1 + a·x·x` into one multiply-add, and `tanh` is libm's `tanhf`.
fn gelu(x: f32) -> f32 {
    let inner = (GELU_COEF_A * x).mul_add(x, 1.0);
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * inner).tanh())
}

/// GELU's f16 value at each f16 input, indexed by the input's bits.
pub fn gelu_table() -> &'static [f16] {
    static TABLE: OnceLock<Vec<f16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu(f16::from_bits(bits).to_f32())))
            .collect()
    })
}

/// GELU of `x` as ggml's CPU backend computes it (see the module comment).
pub fn gelu_tabulated(table: &[f16], x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        table[usize::from(f16::from_f32(x).to_bits())].to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_follows_gelu() {
        let table = gelu_table();
        for x in [-9.5f32, -3.0, -1.0, -0.1, 0.0, 0.3, 1.0, 2.5, 9.0] {
            let exact = 0.5 * x as f64 * (1.0 + libm_erf_free_gelu(x as f64));
            let got = gelu_tabulated(table, x) as f64;
            assert!(
                (got - exact).abs() <= 2e-3 * exact.abs().max(0.05),
                "{x}: {got} vs {exact}"
            );
        }
        assert_eq!(gelu_tabulated(table, -10.0), 0.0);
        assert_eq!(gelu_tabulated(table, 12.5), 12.5);
    }

    /// The table equals the one llama.cpp 0c1e570's CPU backend builds
    /// (`ggml_table_gelu_f16`, dumped from its AVX2 build here), compared by
    /// an FNV-1a hash of its entries in order, NaN inputs left out.
    #[test]
    fn table_equals_ggml_s() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (bits, value) in gelu_table().iter().enumerate() {
            if f16::from_bits(bits as u16).is_nan() {
                continue;
            }
            for byte in value.to_bits().to_le_bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        assert_eq!(hash, 0x097b_67b4_465d_8b6c);
    }

    /// `tanh(√(2/π)·(x + 0.044715·x³))` in f64.
    fn libm_erf_free_gelu(x: f64) -> f64 {
        ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()
    }
}
