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

#[cfg(not(x86_simd))]
use scalar as kernels;
#[cfg(x86_simd)]
use simd as kernels;

/// `Σ x·y` as `ggml_vec_dot_f16`: four 8-lane f32 accumulators over 32-element
/// steps with fused multiply-adds, ggml's reduction order, the tail in f64.
// Single-vector forms: the reference the batched ones are tested against.
#[cfg(test)]
pub fn dot(x: &[f16], y: &[f16]) -> f32 {
    kernels::dot(x, y)
}

/// `acc = f16(acc + x·weight)` element-wise, as `ggml_vec_mad_f16`.
// Single-vector forms: the reference the batched ones are tested against.
#[cfg(test)]
pub fn multiply_add(acc: &mut [f16], x: &[f16], weight: f32) {
    kernels::multiply_add(acc, x, weight)
}

/// [`dot`]`(x, q)` for `N` vectors `q` at once, given as f32 (each value an
/// f16 widened exactly), sharing the conversion of `x`: the same lanes,
/// multiply-adds and reduction as `N` calls, so the same bits.
pub fn dots<const N: usize>(x: &[f16], ys: [&[f32]; N]) -> [f32; N] {
    kernels::dots(x, ys)
}

/// [`multiply_add`]`(acc, x, weight)` for `N` accumulators and weights at once,
/// sharing the conversion of `x`; the same bits as `N` calls.
pub fn multiply_adds<const N: usize>(accs: [&mut [f16]; N], x: &[f16], weights: [f32; N]) {
    kernels::multiply_adds(accs, x, weights)
}

/// `acc = f16(acc·factor)` element-wise, as `ggml_vec_scale_f16`.
pub fn scale(acc: &mut [f16], factor: f32) {
    kernels::scale(acc, factor)
}

mod scalar {
    // The reference for SIMD builds, where only the tests call it.
    #![cfg_attr(x86_simd, allow(dead_code))]

    use super::*;

    // Single-vector forms: the reference the batched ones are tested against.
    #[cfg(test)]
    pub fn dot(x: &[f16], y: &[f16]) -> f32 {
        dot_widened(x, y)
    }

    /// [`dot`] with `y` as f16 or already widened to f32 (exactly, so the
    /// same values).
    pub fn dot_widened<Y: Copy>(x: &[f16], y: &[Y]) -> f32
    where
        f32: From<Y>,
    {
        let whole = x.len() - x.len() % STEP;
        let mut acc = [[0.0f32; LANES]; ACCUMULATORS];
        for i in (0..whole).step_by(STEP) {
            for (j, lanes) in acc.iter_mut().enumerate() {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    let at = i + j * LANES + l;
                    *lane = x[at].to_f32().mul_add(f32::from(y[at]), *lane);
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
            total += (x[i].to_f32() * f32::from(y[i])) as f64;
        }
        total as f32
    }

    pub fn multiply_add(acc: &mut [f16], x: &[f16], weight: f32) {
        for (a, v) in acc.iter_mut().zip(x) {
            *a = f16::from_f32(v.to_f32().mul_add(weight, a.to_f32()));
        }
    }

    pub fn dots<const N: usize>(x: &[f16], ys: [&[f32]; N]) -> [f32; N] {
        ys.map(|y| dot_widened(x, y))
    }

    pub fn scale(acc: &mut [f16], factor: f32) {
        for a in acc.iter_mut() {
            *a = f16::from_f32(a.to_f32() * factor);
        }
    }

    pub fn multiply_adds<const N: usize>(accs: [&mut [f16]; N], x: &[f16], weights: [f32; N]) {
        for (acc, weight) in accs.into_iter().zip(weights) {
            multiply_add(acc, x, weight);
        }
    }
}

#[cfg(x86_simd)]
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

    // Single-vector forms: the reference the batched ones are tested against.
    #[cfg(test)]
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
            acc
        };
        let mut total = reduce(head) as f64;
        for i in whole..n {
            total += (x[i].to_f32() * y[i].to_f32()) as f64;
        }
        total as f32
    }

    /// Horizontal sum of the four accumulators in `ggml_vec_dot_f16`'s order.
    #[inline(always)]
    fn reduce(acc: [__m256; ACCUMULATORS]) -> f32 {
        // SAFETY: register-only intrinsics; AVX2 is enabled at build time (this
        // module's cfg).
        unsafe {
            let low = _mm256_add_ps(acc[0], acc[2]);
            let high = _mm256_add_ps(acc[1], acc[3]);
            let all = _mm256_add_ps(low, high);
            let quad = _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1));
            let pairs = _mm_hadd_ps(quad, quad);
            _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs))
        }
    }

    pub fn dots<const N: usize>(x: &[f16], ys: [&[f32]; N]) -> [f32; N] {
        let n = ys.iter().fold(x.len(), |n, y| n.min(y.len()));
        let whole = n - n % STEP;
        // SAFETY: every load reads 8 values below `whole <= n`, within `x` and
        // every `y`.
        let acc = unsafe {
            let mut acc = [[_mm256_setzero_ps(); ACCUMULATORS]; N];
            for i in (0..whole).step_by(STEP) {
                for j in 0..ACCUMULATORS {
                    let at = i + j * LANES;
                    let key = load8(x, at);
                    for (acc, y) in acc.iter_mut().zip(&ys) {
                        let y = _mm256_loadu_ps(y.as_ptr().add(at));
                        acc[j] = _mm256_fmadd_ps(key, y, acc[j]);
                    }
                }
            }
            acc
        };
        std::array::from_fn(|h| {
            let mut total = reduce(acc[h]) as f64;
            for i in whole..n {
                total += (x[i].to_f32() * ys[h][i]) as f64;
            }
            total as f32
        })
    }

    pub fn multiply_adds<const N: usize>(mut accs: [&mut [f16]; N], x: &[f16], weights: [f32; N]) {
        let n = accs.iter().fold(x.len(), |n, acc| n.min(acc.len()));
        let whole = n - n % LANES;
        // SAFETY: loads and stores touch 8 values below `whole <= n`, within `x`
        // and every accumulator; each accumulator is exclusively borrowed.
        unsafe {
            let ws = weights.map(|w| _mm256_set1_ps(w));
            for i in (0..whole).step_by(LANES) {
                let value = load8(x, i);
                for (acc, w) in accs.iter_mut().zip(&ws) {
                    let sum = _mm256_fmadd_ps(value, *w, load8(acc, i));
                    let rounded = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(sum);
                    _mm_storeu_si128(acc.as_mut_ptr().add(i) as *mut __m128i, rounded);
                }
            }
        }
        for (acc, weight) in accs.into_iter().zip(weights) {
            super::scalar::multiply_add(&mut acc[whole..n], &x[whole..n], weight);
        }
    }

    // Single-vector forms: the reference the batched ones are tested against.
    #[cfg(test)]
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

    /// The same widening, product and rounding as the scalar version, 8 at a
    /// time (it runs at every new maximum of a head's scores; one value at a
    /// time it was a tenth of the attention of 16 server streams).
    pub fn scale(acc: &mut [f16], factor: f32) {
        let whole = acc.len() - acc.len() % LANES;
        // SAFETY: loads and stores touch 8 values below `whole <= acc.len()`;
        // `acc` is exclusively borrowed.
        unsafe {
            let f = _mm256_set1_ps(factor);
            for i in (0..whole).step_by(LANES) {
                let product = _mm256_mul_ps(load8(acc, i), f);
                let rounded = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(product);
                _mm_storeu_si128(acc.as_mut_ptr().add(i) as *mut __m128i, rounded);
            }
        }
        super::scalar::scale(&mut acc[whole..], factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_values::pseudo_random;

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
    fn shared_dots_and_multiply_adds_equal_one_at_a_time() {
        for n in [7, 64, 70, 128] {
            let x = values(n, 5);
            let ys: [Vec<f16>; 3] = std::array::from_fn(|h| values(n, 6 + h as u32));
            let widened = ys
                .each_ref()
                .map(|y| y.iter().map(|v| v.to_f32()).collect::<Vec<_>>());
            let shared = dots::<3>(&x, widened.each_ref().map(|w| w.as_slice()));
            for (y, shared) in ys.iter().zip(shared) {
                assert_eq!(shared.to_bits(), dot(&x, y).to_bits(), "n = {n}");
                assert_eq!(
                    shared.to_bits(),
                    scalar::dot_widened(&x, y).to_bits(),
                    "n = {n}"
                );
            }
            let weights = [0.37, -1.5, 2.25];
            let mut together: [Vec<f16>; 3] = std::array::from_fn(|h| values(n, 9 + h as u32));
            let mut apart = together.clone();
            multiply_adds::<3>(together.each_mut().map(|a| a.as_mut_slice()), &x, weights);
            for (acc, weight) in apart.iter_mut().zip(weights) {
                multiply_add(acc, &x, weight);
            }
            assert_eq!(together, apart, "n = {n}");
        }
    }

    #[test]
    fn dispatched_scale_is_bit_identical_to_scalar() {
        for n in [0, 5, 64, 70] {
            for factor in [0.37, 1.0, 1e-3, 0.0] {
                let (mut a, mut b) = (values(n, 7), values(n, 7));
                scale(&mut a, factor);
                scalar::scale(&mut b, factor);
                assert_eq!(
                    a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "n = {n}, factor {factor}"
                );
            }
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
