//! The f16 vector operations of llama.cpp's CPU flash attention — dot product,
//! multiply-add into an f16 accumulator, scale — with the same lane layout and
//! rounding as ggml's AVX2/F16C code, so results are bit-identical to it. With
//! AVX2, FMA and F16C enabled at build time these run on 8-wide vectors; other
//! builds run the scalar version, which performs the same operations in the same
//! order (and which the vector version is tested against).

use half::f16;

const LANES: usize = 8;
const ACCUMULATORS: usize = 4;
const STEP: usize = LANES * ACCUMULATORS;

/// `Σ x·y` as `ggml_vec_dot_f16`: four 8-lane f32 accumulators over 32-element
/// steps with fused multiply-adds, ggml's reduction order, the tail in f64.
pub fn dot(x: &[f16], y: &[f16]) -> f32 {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    {
        simd::dot(x, y)
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    )))]
    {
        scalar::dot(x, y)
    }
}

/// `acc = f16(acc + x·weight)` element-wise, as `ggml_vec_mad_f16`.
pub fn multiply_add(acc: &mut [f16], x: &[f16], weight: f32) {
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    {
        simd::multiply_add(acc, x, weight)
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    )))]
    {
        scalar::multiply_add(acc, x, weight)
    }
}

/// `acc = f16(acc·factor)` element-wise, as `ggml_vec_scale_f16`.
pub fn scale(acc: &mut [f16], factor: f32) {
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * factor);
    }
}

mod scalar {
    use super::*;

    // The reference for SIMD builds, where only the tests call it.
    #[cfg_attr(
        all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "fma",
            target_feature = "f16c"
        ),
        allow(dead_code)
    )]
    pub fn dot(x: &[f16], y: &[f16]) -> f32 {
        let whole = x.len() - x.len() % STEP;
        let mut acc = [[0.0f32; LANES]; ACCUMULATORS];
        for i in (0..whole).step_by(STEP) {
            for (j, lanes) in acc.iter_mut().enumerate() {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    let at = i + j * LANES + l;
                    *lane = x[at].to_f32().mul_add(y[at].to_f32(), *lane);
                }
            }
        }
        let [a0, a1, a2, a3] = acc;
        let half: [[f32; LANES]; 2] = [
            std::array::from_fn(|l| a0[l] + a2[l]),
            std::array::from_fn(|l| a1[l] + a3[l]),
        ];
        let all: [f32; LANES] = std::array::from_fn(|l| half[0][l] + half[1][l]);
        let quad: [f32; 4] = std::array::from_fn(|l| all[l] + all[l + 4]);
        let mut total = ((quad[0] + quad[1]) + (quad[2] + quad[3])) as f64;
        for i in whole..x.len() {
            total += (x[i].to_f32() * y[i].to_f32()) as f64;
        }
        total as f32
    }

    pub fn multiply_add(acc: &mut [f16], x: &[f16], weight: f32) {
        for (a, v) in acc.iter_mut().zip(x) {
            *a = f16::from_f32(v.to_f32().mul_add(weight, a.to_f32()));
        }
    }
}

#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
))]
mod simd {
    use std::arch::x86_64::*;

    use super::*;

    /// Loads 8 f16 values at `p[at..at + 8]` as f32 lanes.
    ///
    /// # Safety
    /// `at + 8 <= p.len()`.
    #[inline(always)]
    unsafe fn load8(p: &[f16], at: usize) -> __m256 {
        // SAFETY: the caller guarantees 8 values from `at` are in bounds; the load is
        // unaligned, and AVX2/F16C are enabled at build time (this module's cfg).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.as_ptr().add(at) as *const __m128i)) }
    }

    pub fn dot(x: &[f16], y: &[f16]) -> f32 {
        let n = x.len().min(y.len());
        let whole = n - n % STEP;
        // SAFETY: every load reads 8 values below `whole <= n`, within both slices.
        let head = unsafe {
            let mut acc = [_mm256_setzero_ps(); ACCUMULATORS];
            for i in (0..whole).step_by(STEP) {
                for (j, a) in acc.iter_mut().enumerate() {
                    let at = i + j * LANES;
                    *a = _mm256_fmadd_ps(load8(x, at), load8(y, at), *a);
                }
            }
            let low = _mm256_add_ps(acc[0], acc[2]);
            let high = _mm256_add_ps(acc[1], acc[3]);
            let all = _mm256_add_ps(low, high);
            let quad = _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1));
            let pairs = _mm_hadd_ps(quad, quad);
            _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
        };
        let mut total = head as f64;
        for i in whole..n {
            total += (x[i].to_f32() * y[i].to_f32()) as f64;
        }
        total as f32
    }

    pub fn multiply_add(acc: &mut [f16], x: &[f16], weight: f32) {
        let n = acc.len().min(x.len());
        let whole = n - n % LANES;
        // SAFETY: loads and stores touch 8 values below `whole <= n`, within both
        // slices; `acc` is exclusively borrowed.
        unsafe {
            let w = _mm256_set1_ps(weight);
            for i in (0..whole).step_by(LANES) {
                let sum = _mm256_fmadd_ps(load8(x, i), w, load8(acc, i));
                let rounded = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(sum);
                _mm_storeu_si128(acc.as_mut_ptr().add(i) as *mut __m128i, rounded);
            }
        }
        super::scalar::multiply_add(&mut acc[whole..n], &x[whole..n], weight);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_values::pseudo_random;

    /// Values in `[-2, 2)` as f16.
    fn values(n: usize, seed: u32) -> Vec<f16> {
        pseudo_random(n, seed)
            .iter()
            .map(|&v| f16::from_f32(v * 2.0))
            .collect()
    }

    #[test]
    fn dispatched_dot_is_bit_identical_to_scalar() {
        for n in [0, 7, 32, 64, 70, 128] {
            let (x, y) = (values(n, 1), values(n, 2));
            assert_eq!(
                dot(&x, &y).to_bits(),
                scalar::dot(&x, &y).to_bits(),
                "n = {n}"
            );
            let plain: f64 = x.iter().zip(&y).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
            assert!((dot(&x, &y) as f64 - plain).abs() < 1e-4, "n = {n}");
        }
    }

    #[test]
    fn dispatched_multiply_add_is_bit_identical_to_scalar() {
        for n in [5, 64, 70] {
            let x = values(n, 3);
            let (mut a, mut b) = (values(n, 4), values(n, 4));
            multiply_add(&mut a, &x, 0.37);
            scalar::multiply_add(&mut b, &x, 0.37);
            assert_eq!(a, b, "n = {n}");
        }
    }
}
