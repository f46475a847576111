//! Finding the CUDA libraries before touching them: cudarc loads libcuda,
//! libnvrtc and libcublas on first use and panics when one is missing, so the
//! backend asks first and turns a missing library into a clear error.

use crate::error::{CudaError, Result};

/// Checks that the driver, NVRTC and cuBLAS libraries can be loaded.
pub fn check_present() -> Result<()> {
    // SAFETY: `is_culib_present` only tries to dlopen the library by its usual
    // names and reports whether that worked; it calls nothing inside it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::LibraryMissing {
            library: "libcuda",
            hint: "is the NVIDIA driver installed?",
        });
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CudaError::LibraryMissing {
            library: "libnvrtc",
            hint: "install the CUDA toolkit's NVRTC (e.g. `pip install nvidia-cuda-nvrtc`) and put its lib folder on LD_LIBRARY_PATH",
        });
    }
    // SAFETY: as above.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err(CudaError::LibraryMissing {
            library: "libcublas",
            hint: "install the CUDA toolkit's cuBLAS (e.g. `pip install nvidia-cublas`) and put its lib folder on LD_LIBRARY_PATH",
        });
    }
    Ok(())
}

/// Whether NVRTC alone can be loaded (enough to compile kernels, with no GPU).
pub fn nvrtc_present() -> bool {
    // SAFETY: see `check_present`.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
