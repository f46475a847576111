//! Running matmul and attention work on several threads, on the backend's
//! persistent [pool](super::pool): a decode step's ~200 back-to-back products
//! each start in well under a microsecond, where waking rayon's workers
//! measured 10-20 µs a call here. The calling thread works too. The output is
//! split by columns (weight rows), each share writing only its own.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Mutex;

/// Runs `work` on every item, on the calling thread and up to `threads - 1` of
/// the pool's threads, and returns when all are done.
pub(crate) fn for_each<T: Send>(
    items: impl Iterator<Item = T> + Send,
    threads: usize,
    work: impl Fn(T) + Sync,
) {
    let mut items = items.peekable();
    let Some(first) = items.next() else {
        return;
    };
    let pool = super::pool::pool();
    if items.peek().is_none() || threads <= 1 || pool.solo_turn() {
        std::iter::once(first).chain(items).for_each(work);
        return;
    }
    let queue = Mutex::new(std::iter::once(first).chain(items));
    // A poisoned queue means another item's work panicked; the pool re-raises
    // that panic on this thread once every worker has stopped.
    let next = || queue.lock().ok().and_then(|mut items| items.next());
    // The pool numbers its workers 0.. and the calling thread last.
    let caller = pool.workers();
    pool.execute(&|thread| {
        if thread == caller || thread + 1 < threads {
            while let Some(item) = next() {
                work(item);
            }
        }
    });
}

/// The ranges `0..len` is cut into for `parts` workers: contiguous, in order,
/// each starting at a multiple of `align`.
pub(crate) fn partition(len: usize, parts: usize, align: usize) -> Partition {
    let align = align.max(1);
    let share = len.div_ceil(parts.max(1)).div_ceil(align).max(1) * align;
    Partition {
        next: 0,
        len,
        share,
    }
}

/// The ranges of `partition`, in order.
pub(crate) struct Partition {
    next: usize,
    len: usize,
    share: usize,
}

impl Iterator for Partition {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        let start = self.next;
        if start >= self.len {
            return None;
        }
        self.next = (start + self.share).min(self.len);
        Some(start..self.next)
    }
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

    /// The output's rows (every share has them all).
    pub fn rows(&self) -> usize {
        self.rows
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

    /// Sets elements `(row, first..first + N)` to `values`; those columns must
    /// lie in `self.columns()`. One check and one copy for the run, where
    /// [`Self::set`] per element checked each (a tenth of a batched step).
    // Called only by the x86-64 kernels.
    #[cfg_attr(not(x86_simd), allow(dead_code))]
    pub fn set_run<const N: usize>(&mut self, row: usize, first: usize, values: &[f32; N]) {
        assert!(
            row < self.rows && self.columns.start <= first && first + N <= self.columns.end,
            "output ({row}, {first}..{}) outside rows 0..{} columns {:?}",
            first + N,
            self.rows,
            self.columns
        );
        // SAFETY: the assert keeps the `N` elements from `row * width + first`
        // inside row `row` of the `rows × width` buffer that `split_columns`
        // borrowed for `'a`, in columns no other share owns; `values` is a
        // separate borrow, so the two cannot overlap.
        unsafe {
            let start = self.base.add(row * self.width + first);
            std::ptr::copy_nonoverlapping(values.as_ptr(), start, N);
        }
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
) -> ColumnShares<'_> {
    assert_eq!(out.len(), rows * width, "output is not {rows} × {width}");
    ColumnShares {
        base: out.as_mut_ptr(),
        rows,
        width,
        ranges: partition(width, parts, align),
        _borrow: PhantomData,
    }
}

/// The column shares of one output, in order.
pub(crate) struct ColumnShares<'a> {
    base: *mut f32,
    rows: usize,
    width: usize,
    ranges: Partition,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: the iterator only creates `OutputColumns` of disjoint ranges of the
// buffer it borrows exclusively; which thread creates them does not matter.
unsafe impl Send for ColumnShares<'_> {}

impl<'a> Iterator for ColumnShares<'a> {
    type Item = OutputColumns<'a>;

    fn next(&mut self) -> Option<OutputColumns<'a>> {
        let columns = self.ranges.next()?;
        Some(OutputColumns {
            base: self.base,
            rows: self.rows,
            width: self.width,
            columns,
            _borrow: PhantomData,
        })
    }
}
