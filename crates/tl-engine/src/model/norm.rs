//! RMS normalisation as llama.cpp computes it: squares summed in f64, the scale
//! `1/sqrt(mean + eps)` in f32, applied, then multiplied by the weight.

/// Normalises each row of `x` (rows of `weight.len()` values) into `out`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let width = weight.len();
    for (row, out_row) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let sum: f64 = row.iter().map(|&v| (v * v) as f64).sum();
        let mean = (sum / width as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for ((o, &v), &w) in out_row.iter_mut().zip(row).zip(weight) {
            *o = (v * scale) * w;
        }
    }
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
    fn weight_scales_each_column() {
        let mut out = [0.0; 2];
        rms_norm(&[3.0, 4.0], &[2.0, 0.5], 0.0, &mut out);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 6.0 / rms).abs() < 1e-6 && (out[1] - 2.0 / rms).abs() < 1e-6);
    }
}
