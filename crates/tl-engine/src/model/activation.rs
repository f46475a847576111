//! SwiGLU, `silu(gate) · up`, computed as llama.cpp's AVX2 build computes it:
//! groups of eight use ggml's vectorised `expf` (a polynomial with at most ~2 ulp
//! of error, evaluated with the same fused multiply-adds), the tail uses libm's
//! `expf`. The model is sensitive enough that an ulp here can flip a greedy token.

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
        *v /= 1.0 + ggml_expf(0.0 - *v);
    }
    for v in &mut x[vectorised..] {
        *v /= 1.0 + (-*v).exp();
    }
}

/// One lane of ggml's AVX2 `ggml_v_expf` (adapted there from Arm's optimized
/// routines): `2^n · p(b)` with `n = round(x / ln 2)` and a degree-5 polynomial.
pub fn ggml_expf(x: f32) -> f32 {
    let c = |bits: u32| f32::from_bits(bits);
    let shift = c(0x4B40_0000); // 0x1.8p23: rounds to an integer when added
    let z = x.mul_add(c(0x3FB8_AA3B), shift); // x · log2(e) + shift
    let n = z - shift;
    let b = (-n).mul_add(c(0x35BF_BE8E), (-n).mul_add(c(0x3F31_7200), x)); // x - n·ln2, in two parts
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1.0f32.to_bits()));
    let u = b * b;
    let j = c(0x3C07_2010)
        .mul_add(b, c(0x3D2B_9F17))
        .mul_add(u, c(0x3E2A_AF33).mul_add(b, c(0x3EFF_FEDB)))
        .mul_add(u, c(0x3F7F_FFF6) * b);
    if n.abs() <= 126.0 {
        return j.mul_add(k, k);
    }
    // Results near the ends of the f32 range: split the scale in two.
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7F00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn ggml_expf_is_within_two_ulps_of_libm() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, libm) = (ggml_expf(x), x.exp());
            assert!(ulps(ours, libm) <= 2, "x = {x}: {ours} vs {libm}");
            x += 0.0137;
        }
    }

    #[test]
    fn ggml_expf_handles_range_ends() {
        assert_eq!(ggml_expf(0.0), 1.0);
        assert_eq!(ggml_expf(-200.0), 0.0);
        assert_eq!(ggml_expf(200.0), f32::INFINITY);
    }

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
