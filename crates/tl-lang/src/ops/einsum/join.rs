//! The contraction of two bool tensors, the join of two relations:
//! `out[b, i, j]` is true when `a[b, i, k]` and `c[b, k, j]` are both true for
//! some `k`. Each row of `c` is packed into 64-bit words, and a row of the
//! result is the OR of the packed rows its true `a[b, i, k]` select: the work
//! is the number of true elements of `a` times `j / 64` words, not `i·k·j`
//! multiplications, and rows are spread over the threads.

use candle_core::{Device, Tensor as CandleTensor};
use rayon::prelude::*;

use crate::error::Result;

/// `a[nb, m, k]` joined with `c[nb, k, n]` over `k`, as `u8` 0/1 `[nb, m, n]`.
pub fn bool_matmul(a: &CandleTensor, c: &CandleTensor) -> Result<CandleTensor> {
    let (batches, m, k) = a.dims3()?;
    let (_, _, n) = c.dims3()?;
    let mut out = vec![0u8; batches * m * n];
    if out.is_empty() || k == 0 {
        return Ok(CandleTensor::from_vec(out, (batches, m, n), &Device::Cpu)?);
    }
    let a = a.flatten_all()?.to_vec1::<u8>()?;
    let words = n.div_ceil(64);
    let packed = pack_rows(&c.flatten_all()?.to_vec1::<u8>()?, n, words);
    out.par_chunks_mut(n)
        .enumerate()
        .for_each(|(row, out_row)| {
            let batch = row / m;
            let mut acc = vec![0u64; words];
            for (kk, &selected) in a[row * k..(row + 1) * k].iter().enumerate() {
                if selected != 0 {
                    let at = (batch * k + kk) * words;
                    for (w, bits) in acc.iter_mut().zip(&packed[at..at + words]) {
                        *w |= bits;
                    }
                }
            }
            for (j, slot) in out_row.iter_mut().enumerate() {
                *slot = ((acc[j / 64] >> (j % 64)) & 1) as u8;
            }
        });
    Ok(CandleTensor::from_vec(out, (batches, m, n), &Device::Cpu)?)
}

/// Each row of `n` bools as `words` 64-bit words, bit `j % 64` of word `j / 64`.
fn pack_rows(values: &[u8], n: usize, words: usize) -> Vec<u64> {
    let rows = values.len() / n;
    let mut packed = vec![0u64; rows * words];
    for (row, chunk) in values.chunks_exact(n).enumerate() {
        for (j, &v) in chunk.iter().enumerate() {
            if v != 0 {
                packed[row * words + j / 64] |= 1 << (j % 64);
            }
        }
    }
    packed
}
