//! The gated activations `act(gate) · up`, as llama.cpp's AVX2 build computes
//! them. SwiGLU, `silu(gate) · up`:
//! groups of eight use ggml's vectorised `expf` ([`exp_lane`]: a polynomial with
//! at most ~2 ulp of error, evaluated with the same fused multiply-adds), the
//! tail uses libm's `expf`. The model is sensitive enough that an ulp here can
//! flip a greedy token.

use crate::cpu::vector_exp::exp_lane;
use crate::model::arch::Activation;
use crate::model::gelu::{gelu_table, gelu_tabulated};

/// `gate[i] = act(gate[i]) * up[i]` for the architecture's activation.
pub fn gated_in_place(activation: Activation, gate: &mut [f32], up: &[f32]) {
    match activation {
        Activation::Silu => swiglu_in_place(gate, up),
        Activation::GeluTanh => geglu_in_place(gate, up),
    }
}

/// GeGLU, `gelu(gate) · up`, with ggml's tabulated GELU.
pub fn geglu_in_place(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, u) in gate.iter_mut().zip(up) {
        *g = gelu_tabulated(table, *g) * u;
    }
}

/// `gate[i] = silu(gate[i]) * up[i]`, with `silu(x) = x / (1 + e^-x)`.
pub fn swiglu_in_place(gate: &mut [f32], up: &[f32]) {
    silu_in_place(gate);
    for (g, u) in gate.iter_mut().zip(up) {
        *g *= u;
    }
}

/// `x[i] = x[i] / (1 + e^-x[i])`, with SwiGLU's arithmetic (the language's `silu`
/// uses it, so a script's MLP computes the engine's numbers).
pub fn silu_in_place(x: &mut [f32]) {
    let vectorised = x.len() - x.len() % 8;
    for v in &mut x[..vectorised] {
        *v /= 1.0 + exp_lane(0.0 - *v);
    }
    for v in &mut x[vectorised..] {
        *v /= 1.0 + (-*v).exp();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swiglu_matches_the_definition() {
        let mut gate: Vec<f32> = (0..11).map(|i| i as f32 * 0.7 - 3.0).collect();
        let up: Vec<f32> = (0..11).map(|i| 1.0 + i as f32 * 0.1).collect();
        let expected: Vec<f32> = gate
            .iter()
            .zip(&up)
            .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
            .collect();
        swiglu_in_place(&mut gate, &up);
        for (g, e) in gate.iter().zip(&expected) {
            assert!((g - e).abs() <= 1e-6 * e.abs().max(1.0), "{g} vs {e}");
        }
    }
}
