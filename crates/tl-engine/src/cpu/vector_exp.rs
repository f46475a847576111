//! The vectorised `exp` of ggml's CPU code (`ggml_v_expf`, the AVX2/FMA
//! version: Arm's optimized-routines algorithm), which llama.cpp's SwiGLU and
//! tiled attention use instead of libm's `expf` — so ours must too, operation
//! for operation, for the same bits (checked against ggml's own function on
//! all 2³² inputs; see docs/perf.md). `exp(x) = 2ⁿ · (1 + p(b))` with `n = round(x / ln 2)`, `b`
//! the reduced argument and `p` a degree-5 polynomial; when `|n| > 126` the
//! power of two is applied in two factors so results near the ends of the
//! range neither overflow nor flush early. Inputs below about -103.97 give 0
//! (−∞ included), above about 88.38 +∞.
//!
//! [`exp_lane`] is one lane of it in scalar arithmetic (every multiply-add
//! fused, as the vector code's); the AVX2 version, [`exp8`], is tested
//! against it.

/// `0x1.8p23`: adding it rounds to an integer in the low mantissa bits.
const SHIFT: u32 = 0x4b40_0000;
/// `1/ln 2`.
const LOG2_E: u32 = 0x3fb8_aa3b;
/// `ln 2` split in two parts, the first with trailing zero bits.
const LN2_HIGH: u32 = 0x3f31_7200;
const LN2_LOW: u32 = 0x35bf_be8e;
/// The polynomial's coefficients, highest degree first.
const P: [u32; 5] = [
    0x3c07_2010,
    0x3d2b_9f17,
    0x3e2a_af33,
    0x3eff_fedb,
    0x3f7f_fff6,
];

fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// One lane of ggml's vector `exp`.
pub fn exp_lane(x: f32) -> f32 {
    let shift = c(SHIFT);
    let z = x.mul_add(c(LOG2_E), shift);
    let n = z - shift;
    // `fnmadd(a, b, c)` is `c - a·b`, fused.
    let b = (-n).mul_add(c(LN2_LOW), (-n).mul_add(c(LN2_HIGH), x));
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1.0f32.to_bits()));
    let u = b * b;
    let j = c(P[0])
        .mul_add(b, c(P[1]))
        .mul_add(u, c(P[2]).mul_add(b, c(P[3])))
        .mul_add(u, c(P[4]) * b);
    if n.abs() <= 126.0 || n.is_nan() {
        return k.mul_add(j, k);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    }
}

/// Eight lanes of ggml's vector `exp` with AVX2 and FMA.
#[cfg(x86_simd)]
pub fn exp8(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: register-only intrinsics of AVX2 and FMA, which the build
    // enables (this function's cfg).
    unsafe {
        let shift = _mm256_set1_ps(c(SHIFT));
        let z = _mm256_fmadd_ps(x, _mm256_set1_ps(c(LOG2_E)), shift);
        let n = _mm256_sub_ps(z, shift);
        let b = _mm256_fnmadd_ps(
            n,
            _mm256_set1_ps(c(LN2_LOW)),
            _mm256_fnmadd_ps(n, _mm256_set1_ps(c(LN2_HIGH)), x),
        );
        let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
        let k = _mm256_castsi256_ps(_mm256_add_epi32(
            e,
            _mm256_castps_si256(_mm256_set1_ps(1.0)),
        ));
        let magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
        let scaled = _mm256_cmp_ps::<_CMP_GT_OQ>(magnitude, _mm256_set1_ps(126.0));
        let u = _mm256_mul_ps(b, b);
        let coefficient = |i: usize| _mm256_set1_ps(c(P[i]));
        let high = _mm256_fmadd_ps(coefficient(0), b, coefficient(1));
        let low = _mm256_fmadd_ps(coefficient(2), b, coefficient(3));
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(high, u, low),
            u,
            _mm256_mul_ps(coefficient(4), b),
        );
        let plain = _mm256_fmadd_ps(j, k, k);
        if _mm256_movemask_ps(scaled) == 0 {
            return plain;
        }
        let g = _mm256_and_si256(
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())),
            _mm256_set1_epi32(0x8200_0000u32 as i32),
        );
        let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
        let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
        let huge = _mm256_cmp_ps::<_CMP_GT_OQ>(magnitude, _mm256_set1_ps(192.0));
        let two_factors = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
        let in_range = _mm256_blendv_ps(plain, two_factors, scaled);
        _mm256_blendv_ps(in_range, _mm256_mul_ps(s1, s1), huge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Only the vector test needs them.
    #[cfg(x86_simd)]
    /// Inputs across the whole range: ±0, around the ends, the special values
    /// and a dense sweep of the softmax's arguments (≤ 0).
    fn inputs() -> Vec<f32> {
        let mut xs = vec![
            0.0,
            -0.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            -87.3,
            -88.5,
            -100.0,
            -103.9,
            -104.0,
            -150.0,
            88.0,
            88.5,
            1.0,
            -1.0,
        ];
        xs.extend((0..200_000).map(|i| -(i as f32) * 0.000_53));
        xs.extend((0..20_000).map(|i| (i as f32) * 0.004 - 40.0));
        xs
    }

    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_lane_is_within_two_ulps_of_libm() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, libm) = (exp_lane(x), x.exp());
            assert!(ulps(ours, libm) <= 2, "x = {x}: {ours} vs {libm}");
            x += 0.0137;
        }
    }

    #[test]
    fn exp_lane_handles_range_ends() {
        assert_eq!(exp_lane(0.0), 1.0);
        assert_eq!(exp_lane(-200.0), 0.0);
        assert_eq!(exp_lane(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_lane(200.0), f32::INFINITY);
        assert!(exp_lane(f32::NAN).is_nan());
    }

    #[cfg(x86_simd)]
    #[test]
    fn exp8_is_exp_lane_in_every_lane() {
        use std::arch::x86_64::*;
        let xs = inputs();
        // Shifted windows, so special values meet every lane and both paths.
        for window in xs.windows(8).step_by(3) {
            let lanes: [f32; 8] = window.try_into().unwrap();
            // SAFETY: unaligned loads and stores of 8 floats from and to arrays
            // of 8; AVX2 is enabled at build time (this test's cfg).
            let got: [f32; 8] = unsafe {
                let mut out = [0.0f32; 8];
                _mm256_storeu_ps(out.as_mut_ptr(), exp8(_mm256_loadu_ps(lanes.as_ptr())));
                out
            };
            for (x, g) in lanes.iter().zip(got) {
                assert_eq!(g.to_bits(), exp_lane(*x).to_bits(), "exp({x})");
            }
        }
    }
}
