//! The f32 product kernels of `cpu::gemm`: each output element one fused
//! multiply-add chain over k in order, as the portable loop.

use std::arch::x86_64::{
    __m256, __m256i, _mm256_broadcast_ss, _mm256_castps_si256, _mm256_castsi256_ps,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_maskload_ps, _mm256_set1_ps, _mm256_setr_epi32,
    _mm256_setr_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};
use std::ops::Range;

use super::simd::transpose_8x8;
use super::OutputColumns;

/// A tile of the wide kernel: 6 rows × 16 columns, 12 accumulators.
const TILE_ROWS: usize = 6;
const TILE_COLS: usize = 16;

/// Rows in the lanes of the narrow kernel, and columns it carries at once.
const LANE_ROWS: usize = 8;
const NARROW_COLS: usize = 4;

/// Rows a share needs before it copies b into panels ([`blocked`]): fewer
/// rows do not pay for the copy.
const PANEL_ROWS: usize = 24;

/// Rows of b a blocked share copies at a time: its panels of them stay in
/// L2 while every row tile runs over them.
const K_BLOCK: usize = 256;

/// The share `out` (its columns of all its rows) of the rows of one product
/// that `a` holds (`out.rows()` rows of `k` values) times `b` (`k × n`).
pub(crate) fn f32_product_block(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut OutputColumns) {
    let m = out.rows();
    assert!(a.len() >= m * k && b.len() >= k * n && k > 0 && out.columns().end <= n);
    if n < TILE_COLS {
        narrow_rows(a, b, k, n, m, out)
    } else if m < PANEL_ROWS {
        in_place(a, b, k, n, m, out)
    } else {
        blocked(a, b, k, n, m, out)
    }
}

/// Few rows: b read where it lies, 16 columns at a time.
fn in_place(a: &[f32], b: &[f32], k: usize, n: usize, m: usize, out: &mut OutputColumns) {
    for col in out.columns().step_by(TILE_COLS) {
        let cols = (out.columns().end - col).min(TILE_COLS);
        for row in (0..m).step_by(TILE_ROWS) {
            let rows = (m - row).min(TILE_ROWS);
            let mut acc = [[0.0f32; TILE_COLS]; TILE_ROWS];
            // SAFETY: the caller's assert keeps rows `row..row + rows` of `a`
            // and columns `col..col + cols` of b's k rows in bounds; a partial
            // tile loads b under masks.
            unsafe {
                if cols == TILE_COLS {
                    tile::<true>(&a[row * k..], k, rows, &b[col..], n, k, cols, &mut acc)
                } else {
                    tile::<false>(&a[row * k..], k, rows, &b[col..], n, k, cols, &mut acc)
                }
            }
            store_tile(out, row, rows, col, cols, &acc);
        }
    }
}

/// The first `rows` × `cols` values of a tile into `out` at (row, col).
fn store_tile(
    out: &mut OutputColumns,
    row: usize,
    rows: usize,
    col: usize,
    cols: usize,
    tile: &[[f32; TILE_COLS]; TILE_ROWS],
) {
    for (r, values) in tile.iter().enumerate().take(rows) {
        if cols == TILE_COLS {
            out.set_run(row + r, col, values);
        } else {
            for (c, &value) in values.iter().enumerate().take(cols) {
                out.set(row + r, col + c, value);
            }
        }
    }
}

/// Rows and columns a blocked share computes at a time: its running sums
/// (4 MB) and b's panels (1 MB) stay bounded whatever the product's size.
const ROW_BLOCK: usize = 1024;
const COLUMN_BLOCK: usize = 1024;

/// Many rows: the share in blocks of ROW_BLOCK rows × COLUMN_BLOCK columns.
fn blocked(a: &[f32], b: &[f32], k: usize, n: usize, m: usize, out: &mut OutputColumns) {
    let columns = out.columns();
    for first_row in (0..m).step_by(ROW_BLOCK) {
        let rows = first_row..(first_row + ROW_BLOCK).min(m);
        for first_col in columns.clone().step_by(COLUMN_BLOCK) {
            let cols = first_col..(first_col + COLUMN_BLOCK).min(columns.end);
            blocked_part(a, b, k, n, rows.clone(), cols, out);
        }
    }
}

/// Rows `rows` × columns `columns` of a blocked share: k in blocks of
/// K_BLOCK; for each, b's rows of the block and these columns are copied into
/// panels of 16 columns (zeros past the last), read in order by every row
/// tile. The chains run on across blocks through `acc`, f32 as in
/// registers, so the bits are those of one chain.
fn blocked_part(
    a: &[f32],
    b: &[f32],
    k: usize,
    n: usize,
    rows: Range<usize>,
    columns: Range<usize>,
    out: &mut OutputColumns,
) {
    let m = rows.len();
    let panels = columns.len().div_ceil(TILE_COLS);
    let width = panels * TILE_COLS;
    let mut acc = vec![[[0.0f32; TILE_COLS]; TILE_ROWS]; m.div_ceil(TILE_ROWS) * panels];
    let mut packed = vec![0.0f32; K_BLOCK.min(k) * width];
    for k0 in (0..k).step_by(K_BLOCK) {
        let depth = (k - k0).min(K_BLOCK);
        for (kk, b_row) in b.chunks_exact(n).skip(k0).take(depth).enumerate() {
            for (p, values) in b_row[columns.clone()].chunks(TILE_COLS).enumerate() {
                let at = (p * depth + kk) * TILE_COLS;
                packed[at..at + values.len()].copy_from_slice(values);
            }
        }
        for (p, panel) in packed
            .chunks_exact(depth * TILE_COLS)
            .take(panels)
            .enumerate()
        {
            for row in (0..m).step_by(TILE_ROWS) {
                let tile_rows = (m - row).min(TILE_ROWS);
                let tile_acc = &mut acc[(row / TILE_ROWS) * panels + p];
                // SAFETY: rows `rows.start + row..` of `a` (`tile_rows` of
                // them) hold k values each (the caller's assert), so `k0 +
                // depth` of them are in bounds; the panel holds `depth` rows
                // of 16.
                unsafe {
                    tile::<true>(
                        &a[(rows.start + row) * k + k0..],
                        k,
                        tile_rows,
                        panel,
                        TILE_COLS,
                        depth,
                        TILE_COLS,
                        tile_acc,
                    )
                }
            }
        }
    }
    for (t, tile_acc) in acc.iter().enumerate() {
        let (row, p) = ((t / panels) * TILE_ROWS, t % panels);
        let col = columns.start + p * TILE_COLS;
        let cols = (columns.end - col).min(TILE_COLS);
        let tile_rows = (m - row).min(TILE_ROWS);
        store_tile(out, rows.start + row, tile_rows, col, cols, tile_acc);
    }
}

/// The product for fewer than 16 columns: 8 rows at a time in vector lanes,
/// 4 columns at a time, then one.
fn narrow_rows(a: &[f32], b: &[f32], k: usize, n: usize, m: usize, out: &mut OutputColumns) {
    let mut first = out.columns().start;
    while first < out.columns().end {
        let cols = if out.columns().end - first >= NARROW_COLS {
            NARROW_COLS
        } else {
            1
        };
        for row in (0..m).step_by(LANE_ROWS) {
            let rows = (m - row).min(LANE_ROWS);
            // SAFETY: the caller's assert keeps rows `row..row + rows` of `a`
            // and columns `first..first + cols` of `b` in bounds.
            unsafe {
                if cols == NARROW_COLS {
                    narrow::<NARROW_COLS>(a, b, k, n, row, rows, first, out)
                } else {
                    narrow::<1>(a, b, k, n, row, rows, first, out)
                }
            }
        }
        first += cols;
    }
}

/// Lane masks for the first `cols` (≤ 16) of 16 columns, as two halves.
#[target_feature(enable = "avx")]
fn column_masks(cols: usize) -> (__m256i, __m256i) {
    let lane = |i: usize| if i < cols { -1 } else { 0 };
    (
        _mm256_setr_epi32(
            lane(0),
            lane(1),
            lane(2),
            lane(3),
            lane(4),
            lane(5),
            lane(6),
            lane(7),
        ),
        _mm256_setr_epi32(
            lane(8),
            lane(9),
            lane(10),
            lane(11),
            lane(12),
            lane(13),
            lane(14),
            lane(15),
        ),
    )
}

/// A 6 × 16 tile, its chains continued from `acc` for `depth` more terms:
/// rows `0..rows` of `a` (their values `a_stride` apart; rows past `rows`
/// repeat the last one) times the first `cols` columns (at most 16; all 16
/// when FULL; the rest load as zeros) of `depth` rows of `b`, `b_stride`
/// values apart.
///
/// # Safety
/// `depth` values of each of `rows` rows of `a` and `cols` values at each of
/// `depth` rows of `b` must be in bounds.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const FULL: bool>(
    a: &[f32],
    a_stride: usize,
    rows: usize,
    b: &[f32],
    b_stride: usize,
    depth: usize,
    cols: usize,
    acc: &mut [[f32; TILE_COLS]; TILE_ROWS],
) {
    // SAFETY: the caller keeps every row and column read in bounds (see
    // # Safety); masked lanes are not read.
    unsafe {
        let a_rows: [*const f32; TILE_ROWS] =
            std::array::from_fn(|r| a.as_ptr().add(r.min(rows - 1) * a_stride));
        let (mask_low, mask_high) = column_masks(cols);
        let mut sums: [[__m256; 2]; TILE_ROWS] = std::array::from_fn(|r| {
            [
                _mm256_loadu_ps(acc[r].as_ptr()),
                _mm256_loadu_ps(acc[r].as_ptr().add(8)),
            ]
        });
        let mut b_row = b.as_ptr();
        for kk in 0..depth {
            let (low, high) = if FULL {
                (_mm256_loadu_ps(b_row), _mm256_loadu_ps(b_row.add(8)))
            } else {
                (
                    _mm256_maskload_ps(b_row, mask_low),
                    _mm256_maskload_ps(b_row.add(8), mask_high),
                )
            };
            for (sums, a_row) in sums.iter_mut().zip(&a_rows) {
                let x = _mm256_broadcast_ss(&*a_row.add(kk));
                sums[0] = _mm256_fmadd_ps(x, low, sums[0]);
                sums[1] = _mm256_fmadd_ps(x, high, sums[1]);
            }
            b_row = b_row.add(b_stride);
        }
        for (acc, sums) in acc.iter_mut().zip(&sums) {
            _mm256_storeu_ps(acc.as_mut_ptr(), sums[0]);
            _mm256_storeu_ps(acc.as_mut_ptr().add(8), sums[1]);
        }
    }
}

/// Rows `row..row + rows` (at most 8, in the lanes of one register; rows past
/// `rows` repeat the last and are not stored) × columns `first..first + N`
/// of the product, for products too narrow for `tile`: a's rows are read 8
/// values at a time and transposed, so that lane r of vector s holds
/// a[row + r][kk + s].
///
/// # Safety
/// As for `tile`, with `first + N <= n`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn narrow<const N: usize>(
    a: &[f32],
    b: &[f32],
    k: usize,
    n: usize,
    row: usize,
    rows: usize,
    first: usize,
    out: &mut OutputColumns,
) {
    // SAFETY: the caller keeps every row and column read or stored in bounds
    // (see # Safety).
    unsafe {
        let a_rows: [*const f32; LANE_ROWS] =
            std::array::from_fn(|r| a.as_ptr().add((row + r.min(rows - 1)) * k));
        let b = b.as_ptr().add(first);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut kk = 0;
        while kk + LANE_ROWS <= k {
            let rows =
                std::array::from_fn(|r| _mm256_castps_si256(_mm256_loadu_ps(a_rows[r].add(kk))));
            let columns = transpose_8x8(rows).map(|c| _mm256_castsi256_ps(c));
            for (s, column) in columns.iter().enumerate() {
                let b_row = b.add((kk + s) * n);
                for (j, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(*column, _mm256_set1_ps(*b_row.add(j)), *acc);
                }
            }
            kk += LANE_ROWS;
        }
        for kk in kk..k {
            let at = |r: usize| *a_rows[r].add(kk);
            let column = _mm256_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
            let b_row = b.add(kk * n);
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(column, _mm256_set1_ps(*b_row.add(j)), *acc);
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            let mut lanes = [0.0f32; LANE_ROWS];
            _mm256_storeu_ps(lanes.as_mut_ptr(), *acc);
            for (r, &value) in lanes.iter().enumerate().take(rows) {
                out.set(row + r, first + j, value);
            }
        }
    }
}
