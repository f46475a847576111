//! RMS normalisation as llama.cpp computes it: squares summed in f64, the scale
//! `1/sqrt(mean + eps)` in f32, applied, then multiplied by the weight.

/// Normalises each row of `x` (rows of `weight.len()` values) into `out`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let width = weight.len();
    for (row, out_row) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let scale = rms_scale(row, eps);
        for ((o, &v), &w) in out_row.iter_mut().zip(row).zip(weight) {
            *o = (v * scale) * w;
        }
    }
}

/// [`rms_norm`] in place (per-head norms of queries and keys).
pub fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(weight.len()) {
        let scale = rms_scale(row, eps);
        for (v, &w) in row.iter_mut().zip(weight) {
            *v = (*v * scale) * w;
        }
    }
}

/// `1/sqrt(mean(row²) + eps)`, the squares summed in f64.
fn rms_scale(row: &[f32], eps: f32) -> f32 {
    let sum: f64 = row.iter().map(|&v| (v * v) as f64).sum();
    let mean = (sum / row.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

#[cfg(test)]
mod tests {
    use super::rms_norm;

    #[test]
    fn unit_rms_rows_keep_their_values() {
        let x = [1.0, -1.0, 1.0, -1.0, 2.0, 2.0, 2.0, 2.0];
        let mut out = [0.0; 8];
        rms_norm(&x, &[1.0; 4], 0.0, &mut out);
        assert_eq!(&out[..4], &[1.0, -1.0, 1.0, -1.0]);
        assert_eq!(&out[4..], &[1.0; 4]);
    }

    #[test]
    fn in_place_equals_the_copying_form() {
        let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.7).sin()).collect();
        let weight = [0.5, 1.5, -2.0, 1.0, 0.25, 3.0];
        let mut out = vec![0.0; 12];
        rms_norm(&x, &weight, 1e-6, &mut out);
        let mut in_place = x.clone();
        super::rms_norm_in_place(&mut in_place, &weight, 1e-6);
        assert_eq!(in_place, out);
    }

    #[test]
    fn weight_scales_each_column() {
        let mut out = [0.0; 2];
        rms_norm(&[3.0, 4.0], &[2.0, 0.5], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 6.0 / rms).abs() < 1e-6 && (out[1] - 2.0 / rms).abs() < 1e-6);
    }
}
