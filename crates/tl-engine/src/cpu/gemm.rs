//! Dense f32 matrix products, batched, for programs that contract float
//! tensors (the language's index equations and `einsum`). Every output
//! element is one fused multiply-add chain over `k` in order, starting from
//! zero, so its bits depend only on its own row of `a` and column of `b`:
//! not on the product's other rows or columns, its batch, the thread count or
//! whether the SIMD kernels ran. The x86-64 build computes tiles of 6 rows ×
//! 16 columns in vector registers, or for products of fewer than 16 columns
//! 8 rows in the lanes of a register; other builds run the portable loop.

use super::parallel::{self, OutputColumns};
use crate::error::{Error, Result};

/// The sizes of a batched product: `batches` pairs of a row-major `m × k`
/// matrix and a row-major `k × n` matrix, giving `batches` `m × n` matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatmulShape {
    pub batches: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

/// Products smaller than this many multiply-adds run on the calling thread
/// alone: handing them to the pool costs more than it saves.
const SOLO_WORK: usize = 1 << 16;

/// Shares of the work are whole tiles: rows of the wide kernel (6 × 16) or
/// of the narrow one (8 rows, products of fewer than 16 columns).
const TILE_ROWS: usize = 6;
const COLUMN_UNIT: usize = 16;
const NARROW_ROWS: usize = 8;

/// `out[b] = a[b] · b[b]` for every batch `b` (see the module comment for
/// the order of the sums), on up to `threads` threads.
pub fn matmul_f32(
    a: &[f32],
    b: &[f32],
    shape: MatmulShape,
    threads: usize,
    out: &mut [f32],
) -> Result<()> {
    let MatmulShape { batches, m, k, n } = shape;
    let size = |dims: [usize; 3]| dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let wanted = [
        ("a", size([batches, m, k]), a.len()),
        ("b", size([batches, k, n]), b.len()),
        ("out", size([batches, m, n]), out.len()),
    ];
    for (name, want, got) in wanted {
        if want != Some(got) {
            return Err(Error::InvalidRequest(format!(
                "matmul_f32 of {batches} × ({m} × {k}) · ({k} × {n}): `{name}` holds {got} values"
            )));
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    if k == 0 {
        out.fill(0.0);
        return Ok(());
    }
    let work = size([batches * m, k, n]).unwrap_or(usize::MAX);
    let threads = if work < SOLO_WORK { 1 } else { threads.max(1) };
    // Shares of rows, and when they are too few to go round, of columns
    // too (a short, wide product reads each column of b in one share).
    let row_unit = if n < COLUMN_UNIT {
        NARROW_ROWS
    } else {
        TILE_ROWS
    };
    let rows_per_share = m.div_ceil(threads).next_multiple_of(row_unit);
    let row_shares = batches * m.div_ceil(rows_per_share);
    let column_parts = if n >= 2 * COLUMN_UNIT {
        (2 * threads).div_ceil(row_shares).min(n / COLUMN_UNIT)
    } else {
        1
    };
    let shares = (a.chunks_exact(m * k))
        .zip(b.chunks_exact(k * n))
        .zip(out.chunks_exact_mut(m * n))
        .flat_map(|((a, b), out)| {
            (a.chunks(rows_per_share * k))
                .zip(out.chunks_mut(rows_per_share * n))
                .flat_map(move |(a, out)| {
                    let rows = out.len() / n;
                    parallel::split_columns(out, rows, n, column_parts, COLUMN_UNIT)
                        .map(move |share| (a, b, share))
                })
        });
    parallel::for_each(shares, threads, |(a, b, mut share)| {
        product_block(a, b, k, n, &mut share)
    });
    Ok(())
}

/// One share's part of a product: its columns of the rows `a` holds.
fn product_block(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut OutputColumns) {
    #[cfg(x86_simd)]
    super::avx2::f32_product_block(a, b, k, n, out);
    #[cfg(not(x86_simd))]
    portable_block(a, b, k, n, out);
}

/// [`product_block`] one element at a time: the order every kernel keeps.
#[cfg_attr(x86_simd, allow(dead_code))]
fn portable_block(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut OutputColumns) {
    for (i, row) in a.chunks_exact(k).take(out.rows()).enumerate() {
        for j in out.columns() {
            let terms = row.iter().zip(b[j..].iter().step_by(n));
            out.set(i, j, terms.fold(0.0f32, |sum, (&x, &y)| x.mul_add(y, sum)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with many distinct roundings: products and sums that do not
    /// come out exact, so any change of order shows in the bits.
    fn values(count: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(12_345);
        (0..count)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    fn product(shape: MatmulShape, threads: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let MatmulShape { batches, m, k, n } = shape;
        let a = values(batches * m * k, 1);
        let b = values(batches * k * n, 2);
        let mut out = vec![f32::NAN; batches * m * n];
        matmul_f32(&a, &b, shape, threads, &mut out).unwrap();
        (a, b, out)
    }

    /// The order every kernel keeps, one element at a time.
    fn portable_rows(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
        for (row, out_row) in a.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            for (j, slot) in out_row.iter_mut().enumerate() {
                let terms = row.iter().zip(b[j..].iter().step_by(n));
                *slot = terms.fold(0.0f32, |sum, (&x, &y)| x.mul_add(y, sum));
            }
        }
    }

    #[test]
    fn every_shape_gives_the_portable_loops_bits() {
        // Full and partial tiles of both kernels, long and empty sums.
        for (batches, m, k, n) in [
            (1, 1, 1, 1),
            (1, 7, 13, 1),
            (2, 9, 40, 3),
            (1, 33, 64, 15),
            (1, 6, 16, 16),
            (3, 13, 31, 17),
            (1, 50, 300, 70),
            (2, 100, 257, 33),
            // Few rows, many columns: shares of columns.
            (1, 3, 70, 200),
            (1, 30, 40, 130),
            // Shares larger than the blocked kernel's row and column blocks.
            (1, 1030, 9, 2100),
        ] {
            let shape = MatmulShape { batches, m, k, n };
            for threads in [1, 3] {
                let (a, b, out) = product(shape, threads);
                let mut want = vec![0.0; batches * m * n];
                for ((a, b), want) in (a.chunks_exact(m * k))
                    .zip(b.chunks_exact(k * n))
                    .zip(want.chunks_exact_mut(m * n))
                {
                    portable_rows(a, b, k, n, want);
                }
                let same = out
                    .iter()
                    .zip(&want)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{shape:?} on {threads} threads");
            }
        }
    }

    #[test]
    fn a_row_does_not_depend_on_the_rows_beside_it() {
        let (k, n) = (129, 40);
        let (a, b, all) = product(
            MatmulShape {
                batches: 1,
                m: 37,
                k,
                n,
            },
            2,
        );
        for row in [0, 5, 36] {
            let mut alone = vec![0.0; n];
            let shape = MatmulShape {
                batches: 1,
                m: 1,
                k,
                n,
            };
            matmul_f32(&a[row * k..(row + 1) * k], &b, shape, 1, &mut alone).unwrap();
            assert_eq!(alone, all[row * n..(row + 1) * n], "row {row}");
        }
    }

    #[test]
    fn sums_are_fused_chains_in_order() {
        // In order, each 2^-24 added to 1 rounds away (a tie, to even); the
        // two added first would make 2^-23, which 1 keeps.
        let a = [1.0f32, 2.0f32.powi(-24), 2.0f32.powi(-24)];
        let b = [1.0f32, 1.0, 1.0];
        let mut out = [0.0];
        let shape = MatmulShape {
            batches: 1,
            m: 1,
            k: 3,
            n: 1,
        };
        matmul_f32(&a, &b, shape, 1, &mut out).unwrap();
        assert_eq!(out[0], 1.0);
    }

    #[test]
    fn wrong_lengths_and_empty_sums() {
        let shape = MatmulShape {
            batches: 1,
            m: 2,
            k: 3,
            n: 2,
        };
        let mut out = [0.0; 4];
        let err = matmul_f32(&[0.0; 5], &[0.0; 6], shape, 1, &mut out).unwrap_err();
        assert!(err.to_string().contains("`a` holds 5 values"), "{err}");
        let mut out = [f32::NAN; 4];
        let empty = MatmulShape { k: 0, ..shape };
        matmul_f32(&[], &[], empty, 1, &mut out).unwrap();
        assert_eq!(out, [0.0; 4]);
    }
}
