//! Device memory: a [`Buffer`] owns an allocation; a [`Span`] is a checked window
//! of one, borrowed for a launch. Kernels take spans, and every launch wrapper
//! checks the spans' lengths against the sizes it passes, so a kernel never
//! indexes past the memory it was given.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};

use crate::error::{CudaError, Result};
use crate::gpu::Gpu;

/// An allocation of `len` values of `T` on the GPU.
pub struct Buffer<T> {
    slice: CudaSlice<T>,
    ptr: u64,
}

/// `len` values of `T` at `ptr`, inside a [`Buffer`] that outlives `'a`.
#[derive(Debug)]
pub struct Span<'a, T> {
    ptr: u64,
    len: usize,
    _buffer: PhantomData<&'a T>,
}

impl<T> Clone for Span<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Span<'_, T> {}

impl<T: DeviceRepr + ValidAsZeroBits> Buffer<T> {
    /// `len` zeroed values.
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<Self> {
        let slice = gpu.stream().alloc_zeros::<T>(len.max(1)).map_err(|e| {
            CudaError::driver(format!("allocating {} bytes", len * size_of::<T>()), e)
        })?;
        Ok(Self::wrap(gpu.stream(), slice))
    }

    /// A copy of `values`.
    pub fn from_host(gpu: &Gpu, values: &[T]) -> Result<Self> {
        if values.is_empty() {
            return Self::zeros(gpu, 0);
        }
        let slice = gpu.stream().clone_htod(values).map_err(|e| {
            CudaError::driver(
                format!("copying {} bytes to the GPU", std::mem::size_of_val(values)),
                e,
            )
        })?;
        Ok(Self::wrap(gpu.stream(), slice))
    }
}

impl<T> Buffer<T> {
    fn wrap(stream: &CudaStream, slice: CudaSlice<T>) -> Self {
        let ptr = {
            let (ptr, _record) = slice.device_ptr(stream);
            ptr
        };
        Buffer { ptr, slice }
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.slice.num_bytes()
    }

    /// The whole buffer.
    pub fn all(&self) -> Span<'_, T> {
        Span {
            ptr: self.ptr,
            len: self.len(),
            _buffer: PhantomData,
        }
    }

    /// Values `start..start + len`, or an error if that leaves the buffer.
    pub fn span(&self, start: usize, len: usize) -> Result<Span<'_, T>> {
        self.all().sub(start, len)
    }
}

impl<'a, T> Span<'a, T> {
    /// Values `start..start + len` of this span.
    pub fn sub(self, start: usize, len: usize) -> Result<Span<'a, T>> {
        let end = start.checked_add(len);
        if end.is_none_or(|end| end > self.len) {
            return Err(CudaError::Unsupported(format!(
                "device span {start}..{start}+{len} is outside a buffer of {}",
                self.len
            )));
        }
        Ok(Span {
            ptr: self.ptr + (start * size_of::<T>()) as u64,
            len,
            _buffer: PhantomData,
        })
    }

    /// Values in the span.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the span is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same bytes seen as values of `U` (as many whole ones as fit).
    pub(crate) fn reinterpret<U>(self) -> Span<'a, U> {
        Span {
            ptr: self.ptr,
            len: self.len * size_of::<T>() / size_of::<U>().max(1),
            _buffer: PhantomData,
        }
    }

    /// The device address, for a kernel argument or a table of addresses
    /// (batched decode passes each sequence's cache through one).
    pub fn address(&self) -> u64 {
        self.ptr
    }

    /// Errors unless the span holds at least `needed` values.
    pub(crate) fn require(&self, needed: usize, what: &str) -> Result<()> {
        if self.len < needed {
            return Err(CudaError::Unsupported(format!(
                "{what}: {needed} values needed, the buffer holds {}",
                self.len
            )));
        }
        Ok(())
    }
}
