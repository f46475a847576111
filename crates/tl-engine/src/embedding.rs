//! Embeddings from a loaded generative model, as llama.cpp's
//! `llama-embedding --pooling mean --embd-normalize 2` computes them: the
//! prompt runs through the model schedule ending in the final norm (the
//! output head skipped, [`Wanted::HiddenStates`]), the final hidden states
//! of every prompt token are averaged, and the mean is scaled to unit
//! Euclidean length.
//!
//! A shorter vector (`dimensions`, as OpenAI's API asks for one) is the
//! mean's first `dimensions` values, scaled to unit length: the same as
//! cutting the full unit vector and normalising again, which is what
//! OpenAI documents for its models. A generative model was not trained for
//! such cuts, so their quality is whatever the first features carry.

use crate::backend::{Backend, Wanted};
use crate::error::{Error, Result};
use crate::session::Session;

/// The running mean of a prompt's final hidden states, fed chunk by chunk.
#[derive(Debug, Clone)]
pub struct MeanPool {
    /// Per feature, the sum over the rows so far (in f64, so a long prompt's
    /// sum does not depend on where its chunks were cut).
    sums: Vec<f64>,
    rows: usize,
}

impl MeanPool {
    /// An empty pool of rows of `width` features (the model's
    /// `embedding_length`).
    pub fn new(width: usize) -> Self {
        MeanPool {
            sums: vec![0.0; width],
            rows: 0,
        }
    }

    /// Adds hidden states, `rows × width` values, row-major.
    pub fn add(&mut self, hidden: &[f32]) -> Result<()> {
        let width = self.sums.len();
        if width == 0 || !hidden.len().is_multiple_of(width) {
            return Err(Error::InvalidRequest(format!(
                "{} hidden-state values are not whole rows of {width}",
                hidden.len()
            )));
        }
        for row in hidden.chunks_exact(width) {
            for (sum, &v) in self.sums.iter_mut().zip(row) {
                *sum += f64::from(v);
            }
        }
        self.rows += hidden.len() / width;
        Ok(())
    }

    /// Rows pooled so far (the prompt's tokens).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The embedding: the mean, cut to its first `dimensions` values when
    /// asked, scaled to unit length.
    pub fn finish(self, dimensions: Option<usize>) -> Result<Vec<f32>> {
        if self.rows == 0 {
            return Err(Error::InvalidRequest("an embedding of no tokens".into()));
        }
        let kept = check_dimensions(dimensions, self.sums.len())?;
        let count = self.rows as f64;
        let mut mean: Vec<f32> = self.sums[..kept]
            .iter()
            .map(|&s| (s / count) as f32)
            .collect();
        normalize(&mut mean);
        Ok(mean)
    }
}

/// How many leading values an embedding keeps: all `width` when `dimensions`
/// is `None`, else `dimensions`, which must be 1 to `width`.
pub fn check_dimensions(dimensions: Option<usize>, width: usize) -> Result<usize> {
    match dimensions {
        None => Ok(width),
        Some(d) if (1..=width).contains(&d) => Ok(d),
        Some(d) => Err(Error::InvalidRequest(format!(
            "dimensions must be between 1 and the model's {width}, got {d}"
        ))),
    }
}

/// Scales `values` to unit Euclidean length, as llama.cpp's
/// `common_embd_normalize` (norm 2) does: the squares summed in f64, each
/// value multiplied by the reciprocal. An all-zero vector stays zero.
pub fn normalize(values: &mut [f32]) {
    let sum: f64 = values.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let norm = sum.sqrt();
    let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
    values.iter_mut().for_each(|v| *v *= scale);
}

/// The embedding of `tokens`, run from an empty `session` in chunks of
/// `chunk_tokens` (0: all at once), cut to `dimensions` when given. The
/// session is left empty.
pub fn embed(
    model: &Backend,
    session: &mut Session,
    tokens: &[u32],
    chunk_tokens: usize,
    dimensions: Option<usize>,
) -> Result<Vec<f32>> {
    let width = model.config().embedding_length;
    check_dimensions(dimensions, width)?;
    session.reset();
    session.begin(tokens)?;
    let chunk = if chunk_tokens == 0 {
        tokens.len()
    } else {
        chunk_tokens
    };
    let mut pool = MeanPool::new(width);
    let pooled = tokens.chunks(chunk).try_for_each(|piece| {
        let hidden = session
            .advance_one(model, piece, Wanted::HiddenStates)?
            .into_row()?;
        pool.add(&hidden)
    });
    session.reset();
    pooled?;
    pool.finish(dimensions)
}

/// `1 − cos(a, b)`, in f64: how far apart two embeddings point (0 for the
/// same direction). Vectors of different lengths, or a zero vector, are
/// infinitely far.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return f64::INFINITY;
    }
    1.0 - dot / (aa.sqrt() * bb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_of_rows_is_scaled_to_unit_length() {
        let mut pool = MeanPool::new(2);
        pool.add(&[3.0, 0.0, 3.0, 8.0]).unwrap();
        assert_eq!(pool.rows(), 2);
        let v = pool.finish(None).unwrap();
        // mean (3, 4) → (0.6, 0.8)
        assert!(
            (v[0] - 0.6).abs() < 1e-7 && (v[1] - 0.8).abs() < 1e-7,
            "{v:?}"
        );
    }

    #[test]
    fn chunks_pool_as_one_pass() {
        let rows: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut whole = MeanPool::new(3);
        whole.add(&rows).unwrap();
        let mut parts = MeanPool::new(3);
        parts.add(&rows[..3]).unwrap();
        parts.add(&rows[3..]).unwrap();
        assert_eq!(whole.finish(None).unwrap(), parts.finish(None).unwrap());
    }

    #[test]
    fn dimensions_cut_then_renormalise() {
        let mut pool = MeanPool::new(3);
        pool.add(&[3.0, 4.0, 12.0]).unwrap();
        let v = pool.finish(Some(2)).unwrap();
        assert_eq!(v.len(), 2);
        assert!(
            (v[0] - 0.6).abs() < 1e-7 && (v[1] - 0.8).abs() < 1e-7,
            "{v:?}"
        );
    }

    #[test]
    fn bad_shapes_and_dimensions_are_errors_not_panics() {
        let mut pool = MeanPool::new(3);
        assert!(pool.add(&[1.0, 2.0]).is_err());
        assert!(MeanPool::new(3).finish(None).is_err());
        pool.add(&[1.0, 2.0, 3.0]).unwrap();
        assert!(pool.clone().finish(Some(0)).is_err());
        assert!(pool.clone().finish(Some(4)).is_err());
        assert!(MeanPool::new(0).add(&[]).is_err());
    }

    #[test]
    fn a_zero_vector_stays_zero() {
        let mut v = [0.0f32; 4];
        normalize(&mut v);
        assert_eq!(v, [0.0; 4]);
    }

    #[test]
    fn cosine_distance_of_directions() {
        assert!(cosine_distance(&[1.0, 0.0], &[2.0, 0.0]).abs() < 1e-12);
        assert!((cosine_distance(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!(cosine_distance(&[1.0], &[1.0, 0.0]).is_infinite());
        assert!(cosine_distance(&[0.0], &[1.0]).is_infinite());
    }
}
