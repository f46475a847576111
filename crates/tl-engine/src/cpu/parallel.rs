//! Running matmul work on several threads: rayon's global pool (persistent, so a
//! decode step's ~60 matmuls pay no thread start), with the calling thread taking
//! the first share instead of waiting idle. The output matrix is split by columns
//! (weight rows), each share writing only its own.

use std::marker::PhantomData;
use std::ops::Range;

/// Runs `work` on every item, the first on the calling thread and the others on
/// rayon's pool, and returns when all are done.
pub(crate) fn for_each<T: Send>(mut items: impl Iterator<Item = T>, work: impl Fn(T) + Sync) {
    let Some(first) = items.next() else {
        return;
    };
    let mut rest = items.peekable();
    if rest.peek().is_none() {
        work(first);
        return;
    }
    let work = &work;
    rayon::in_place_scope(|scope| {
        for item in rest {
            scope.spawn(move |_| work(item));
        }
        work(first);
    });
}

/// The ranges `0..len` is cut into for `parts` workers: contiguous, in order,
/// each starting at a multiple of `align`.
pub(crate) fn partition(
    len: usize,
    parts: usize,
    align: usize,
) -> impl Iterator<Item = Range<usize>> {
    let align = align.max(1);
    let share = len.div_ceil(parts.max(1)).div_ceil(align).max(1) * align;
    (0..len)
        .step_by(share)
        .map(move |start| start..(start + share).min(len))
}

/// The columns `columns` of a row-major `rows × width` output matrix, writable
/// from one thread while other threads write other columns.
pub(crate) struct OutputColumns<'a> {
    base: *mut f32,
    rows: usize,
    width: usize,
    columns: Range<usize>,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: an `OutputColumns` writes only inside its own column range, and
// `split_columns` hands out disjoint ranges of one exclusively borrowed buffer, so
// moving one to another thread cannot race with any other access.
unsafe impl Send for OutputColumns<'_> {}

impl OutputColumns<'_> {
    /// The columns this share may write.
    pub fn columns(&self) -> Range<usize> {
        self.columns.clone()
    }

    /// Sets element `(row, column)`; `column` must lie in `self.columns()`.
    pub fn set(&mut self, row: usize, column: usize, value: f32) {
        assert!(
            row < self.rows && self.columns.contains(&column),
            "output ({row}, {column}) outside rows 0..{} columns {:?}",
            self.rows,
            self.columns
        );
        // SAFETY: the assert keeps `row * width + column` inside the `rows × width`
        // buffer that `split_columns` borrowed for `'a`, and no other share owns
        // this column.
        unsafe { self.base.add(row * self.width + column).write(value) }
    }
}

/// Splits a `rows × width` output into column shares, one per range of
/// `partition(width, parts, align)`.
pub(crate) fn split_columns(
    out: &mut [f32],
    rows: usize,
    width: usize,
    parts: usize,
    align: usize,
) -> impl Iterator<Item = OutputColumns<'_>> {
    assert_eq!(out.len(), rows * width, "output is not {rows} × {width}");
    let base = out.as_mut_ptr();
    partition(width, parts, align).map(move |columns| OutputColumns {
        base,
        rows,
        width,
        columns,
        _borrow: PhantomData,
    })
}
