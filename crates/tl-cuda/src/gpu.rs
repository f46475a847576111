//! One GPU, opened for use: its context and the stream all work goes to, the
//! compiled kernel module, a cuBLAS handle, and a count of the times the host
//! waited for the device.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::{
    CUdevice_attribute, CUfunction_attribute, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchConfig,
};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::buffer::Span;
use crate::compile;
use crate::error::{CudaError, Result};
use crate::libraries;
use crate::options::GpuOptions;
use crate::profile::{KernelTime, Profile};

/// Shared memory a block may use without its kernel opting in to more.
pub const DEFAULT_SHARED_LIMIT: usize = 48 * 1024;

/// What the device reports about itself.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Multiprocessors.
    pub multiprocessors: usize,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// L2 cache in bytes.
    pub l2_bytes: usize,
    /// The most shared memory one block may use when its kernel opts in
    /// (bytes; 48 KiB without opting in).
    pub shared_per_block_optin: usize,
    /// Driver version as CUDA encodes it (13000 = 13.0).
    pub driver_version: i32,
}

impl DeviceInfo {
    /// The NVRTC architecture name, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// A kernel argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg {
    Ptr(u64),
    U64(u64),
    I32(i32),
    F32(f32),
}

impl<T> From<Span<'_, T>> for Arg {
    fn from(span: Span<'_, T>) -> Self {
        Arg::Ptr(span.address())
    }
}

/// An opened GPU.
pub struct Gpu {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The kernel units' modules (see `compile`).
    modules: Vec<Arc<CudaModule>>,
    functions: std::sync::Mutex<HashMap<String, CudaFunction>>,
    /// The dynamic shared memory each kernel has opted in to (bytes), for
    /// those launched with more than 48 KiB.
    shared_opted_in: std::sync::Mutex<HashMap<String, u32>>,
    blas: CudaBlas,
    info: DeviceInfo,
    syncs: AtomicU64,
    /// Open while `tl bench --profile` times kernels one by one.
    profile: std::sync::Mutex<Option<Profile>>,
    /// Whether `launch_dependent` uses programmatic dependent launch.
    dependent_launches: bool,
    options: GpuOptions,
    /// Where the tensor-core batched GEMVs stage x (`ops::gemv_mma`),
    /// reserved by the caller: the last is in use; a larger reservation
    /// adds one and keeps the older ones, which captured graphs may name.
    gemv_workspaces: std::sync::Mutex<Vec<crate::Buffer<u8>>>,
}

impl Gpu {
    /// Opens GPU `ordinal` with `options` (checked first): loads the
    /// libraries, creates the context and stream, and compiles (or loads from
    /// the cache) the kernels.
    pub fn open(ordinal: usize, options: GpuOptions) -> Result<Gpu> {
        options.validate()?;
        libraries::check_present()?;
        let count =
            CudaContext::device_count().map_err(|e| CudaError::driver("counting GPUs", e))?;
        if count <= 0 {
            return Err(CudaError::NoDevice);
        }
        if ordinal >= count as usize {
            return Err(CudaError::Unsupported(format!(
                "GPU {ordinal} was asked for; this machine has {count}"
            )));
        }
        let context =
            CudaContext::new(ordinal).map_err(|e| CudaError::driver("creating a context", e))?;
        // SAFETY: the backend orders all work itself on one stream it owns, so
        // cudarc's per-buffer events are not needed; they would also break graph
        // capture (cross-stream waits inside a capture are illegal).
        unsafe { context.disable_event_tracking() };
        let (info, arch) = presented_card(device_info(&context)?, options.older_card)?;
        let stream = context
            .new_stream()
            .map_err(|e| CudaError::driver("creating a stream", e))?;
        let modules = compile::cached_cubins(&arch, info.driver_version, &options)?
            .into_iter()
            .map(|(name, image)| {
                let image = if arch.starts_with("compute_") {
                    Ptx::from_src(String::from_utf8_lossy(&image).into_owned())
                } else {
                    Ptx::from_binary(image)
                };
                context
                    .load_module(image)
                    .map_err(|e| CudaError::driver(format!("loading the {name} kernels"), e))
            })
            .collect::<Result<Vec<_>>>()?;
        let blas =
            CudaBlas::new(stream.clone()).map_err(|e| CudaError::blas("creating a handle", e))?;
        Ok(Gpu {
            context,
            stream,
            modules,
            functions: Default::default(),
            shared_opted_in: Default::default(),
            blas,
            info: info.clone(),
            syncs: AtomicU64::new(0),
            profile: Default::default(),
            dependent_launches: info.compute_capability.0 >= 9 && options.dependent_launches,
            options,
            gemv_workspaces: Default::default(),
        })
    }

    /// Makes the batched GEMVs' workspace hold at least `bytes` (see
    /// [`crate::ops::gemv_mma::workspace_bytes`]); without one they take the
    /// CUDA-core kernels. A larger reservation moves the workspace but keeps
    /// the old one allocated, so a graph captured before still runs.
    pub fn reserve_gemv_workspace(&self, bytes: usize) -> Result<()> {
        let mut workspaces = self
            .gemv_workspaces
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if workspaces.last().is_none_or(|w| w.len() < bytes) {
            workspaces.push(crate::Buffer::zeros(self, bytes)?);
        }
        Ok(())
    }

    /// The address of the batched GEMVs' workspace when it holds `bytes`
    /// (it lives as long as this `Gpu`).
    pub(crate) fn gemv_workspace(&self, bytes: usize) -> Option<u64> {
        let workspaces = self
            .gemv_workspaces
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        workspaces
            .last()
            .filter(|w| w.len() >= bytes)
            .map(|w| w.all().address())
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The options it was opened with.
    pub fn options(&self) -> &GpuOptions {
        &self.options
    }

    /// The stream all work is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn blas(&self) -> &CudaBlas {
        &self.blas
    }

    /// Times the host has waited for the device so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Waits for all queued work; counted as a sync.
    pub fn synchronize(&self) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("waiting for the GPU", e))
    }

    /// Copies `src` into `dst` once queued work is done (one sync).
    pub fn download<T: DeviceRepr>(&self, src: Span<'_, T>, dst: &mut [T]) -> Result<()> {
        src.require(dst.len(), "download")?;
        let view = src.sub(0, dst.len())?;
        // SAFETY: `view` lies inside a live buffer (Span's invariant) and holds
        // `dst.len()` values of T; the copy is on our stream, after the work
        // that produced the values, and `synchronize` below completes it before
        // `dst` is used.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(dst, view.address(), self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("copying from the GPU", e))?;
        self.synchronize()
    }

    /// Queues a copy of `src` into `dst` (no wait; `src` must stay unchanged
    /// until the copy has run, which the next sync guarantees).
    pub fn upload<T: DeviceRepr>(&self, src: &[T], dst: Span<'_, T>) -> Result<()> {
        dst.require(src.len(), "upload")?;
        // SAFETY: `dst` lies inside a live buffer and holds at least `src.len()`
        // values. From pageable memory the driver stages the bytes before
        // returning, so `src` may change afterwards.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dst.address(), src, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("copying to the GPU", e))
    }

    /// Queues a copy of `src` into `dst` on the device; the two must not
    /// overlap.
    pub fn copy<T: DeviceRepr>(&self, src: Span<'_, T>, dst: Span<'_, T>) -> Result<()> {
        dst.require(src.len(), "copy")?;
        let bytes = (src.len() * std::mem::size_of::<T>()) as u64;
        let (from, to) = (src.address(), dst.address());
        if from < to + bytes && to < from + bytes {
            return Err(CudaError::Unsupported(
                "a device copy between overlapping spans".into(),
            ));
        }
        // SAFETY: both spans lie inside live buffers (Span's invariant), `dst`
        // holds at least `src.len()` values (checked above) and they do not
        // overlap; the copy is queued on our stream after the work before it.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                to,
                from,
                bytes as usize,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| CudaError::driver("copying on the GPU", e))
    }

    /// Device memory not in use (bytes).
    pub fn memory_free(&self) -> Result<usize> {
        let (free, _total) = self
            .context
            .mem_get_info()
            .map_err(|e| CudaError::driver("reading free memory", e))?;
        Ok(free)
    }

    /// Device memory in use on the whole device (bytes).
    pub fn memory_used(&self) -> Result<usize> {
        let (free, total) = self
            .context
            .mem_get_info()
            .map_err(|e| CudaError::driver("reading free memory", e))?;
        Ok(total - free)
    }

    /// Starts timing every launch on its own (see `profile`); graph capture
    /// is not possible while a profile is open.
    pub fn start_profile(&self) {
        *self.profile.lock().unwrap_or_else(|p| p.into_inner()) = Some(Profile::default());
    }

    /// Whether a profile is open.
    pub fn is_profiling(&self) -> bool {
        self.profile
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Closes the profile and returns its kernel times, longest first (empty
    /// when none was open).
    pub fn finish_profile(&self) -> Vec<KernelTime> {
        let profile = self
            .profile
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        profile.map(Profile::into_times).unwrap_or_default()
    }

    /// Runs `queue`, which queues one kernel named `kernel`, timing it when a
    /// profile is open.
    pub(crate) fn timed(
        &self,
        kernel: impl FnOnce() -> String,
        queue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut guard = self.profile.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(profile) => {
                self.queue_spin()?;
                profile.time(&self.stream, kernel(), queue)
            }
            None => {
                drop(guard);
                queue()
            }
        }
    }

    /// Queues `profile_spin` for long enough that the host queues the timed
    /// kernel and its events before the GPU gets to them.
    fn queue_spin(&self) -> Result<()> {
        const SPIN_NANOSECONDS: i64 = 50_000;
        let function = self.function("profile_spin")?;
        let mut builder = self.stream.launch_builder(&function);
        builder.arg(&SPIN_NANOSECONDS);
        // SAFETY: profile_spin takes one long long and touches no memory.
        unsafe { builder.launch(LaunchConfig::for_num_elems(1)) }
            .map(|_| ())
            .map_err(|e| CudaError::driver("launching profile_spin", e))
    }

    /// Lets `function` (named `kernel`) launch with `bytes` of dynamic shared
    /// memory: when they and its static shared memory pass 48 KiB, a kernel
    /// must opt in, once for the largest size it uses (within
    /// `shared_per_block_optin`, which the caller checked).
    fn opt_in_shared(&self, kernel: &str, function: &CudaFunction, bytes: u32) -> Result<()> {
        let mut opted = self
            .shared_opted_in
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if opted.get(kernel).is_some_and(|&done| done >= bytes) {
            return Ok(());
        }
        let static_bytes = function
            .shared_size_bytes()
            .map_err(|e| CudaError::driver("reading a kernel's shared memory", e))?;
        if bytes as usize + static_bytes.max(0) as usize <= DEFAULT_SHARED_LIMIT {
            opted.insert(kernel.to_owned(), bytes);
            return Ok(());
        }
        function
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(|e| CudaError::driver("raising a kernel's shared memory", e))?;
        opted.insert(kernel.to_owned(), bytes);
        Ok(())
    }

    fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut functions = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = functions.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .modules
            .iter()
            .find_map(|module| module.load_function(name).ok())
            .ok_or_else(|| CudaError::Unsupported(format!("no kernel named {name}")))?;
        functions.insert(name.to_owned(), f.clone());
        Ok(f)
    }

    /// Launches `kernel` as a programmatic dependent of the kernel before it
    /// (sm_90+, unless [`GpuOptions::dependent_launches`] is off): it may start while that one finishes,
    /// which hides most of the gap between two kernels of a decode step. The
    /// kernel must call `wait_for_previous_kernel()` before touching any memory
    /// but its read-only inputs. Elsewhere this is [`Gpu::launch`].
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    pub(crate) unsafe fn launch_dependent(
        &self,
        kernel: &str,
        grid: (u32, u32),
        block: u32,
        shared_bytes: u32,
        args: &[Arg],
    ) -> Result<()> {
        let dependent = self.dependent_launches;
        // SAFETY: the caller upholds `launch`'s contract.
        unsafe { self.launch_with(kernel, grid, block, shared_bytes, args, dependent) }
    }

    /// Launches `kernel` on the stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and type,
    /// every pointer must address device memory that stays allocated until the
    /// kernel has run, and the sizes passed must keep the kernel's accesses
    /// inside that memory.
    pub(crate) unsafe fn launch(
        &self,
        kernel: &str,
        grid: (u32, u32),
        block: u32,
        shared_bytes: u32,
        args: &[Arg],
    ) -> Result<()> {
        // SAFETY: the caller upholds this function's contract.
        unsafe { self.launch_with(kernel, grid, block, shared_bytes, args, false) }
    }

    /// Launches `kernel` through cuLaunchKernelEx, with the programmatic
    /// serialization attribute when `dependent`.
    ///
    /// # Safety
    /// As [`Gpu::launch`]; with `dependent`, as [`Gpu::launch_dependent`].
    unsafe fn launch_with(
        &self,
        kernel: &str,
        grid: (u32, u32),
        block: u32,
        shared_bytes: u32,
        args: &[Arg],
        dependent: bool,
    ) -> Result<()> {
        let function = self.function(kernel)?;
        if shared_bytes > 0 {
            self.opt_in_shared(kernel, &function, shared_bytes)?;
        }
        // Each argument's bytes in an 8-byte slot; the kernel reads 4 or 8.
        let mut slots: Vec<u64> = args
            .iter()
            .map(|arg| match *arg {
                Arg::Ptr(p) | Arg::U64(p) => p,
                Arg::I32(v) => u64::from(v as u32),
                Arg::F32(v) => u64::from(v.to_bits()),
            })
            .collect();
        let mut params: Vec<*mut std::ffi::c_void> = slots
            .iter_mut()
            .map(|slot| slot as *mut u64 as *mut std::ffi::c_void)
            .collect();
        let mut attribute = CUlaunchAttribute {
            id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            // SAFETY: an all-zero union is a valid value for every member.
            value: unsafe { std::mem::zeroed() },
        };
        attribute.value.programmaticStreamSerializationAllowed = 1;
        let config = CUlaunchConfig {
            gridDimX: grid.0.max(1),
            gridDimY: grid.1.max(1),
            gridDimZ: 1,
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: u32::from(dependent),
        };
        let name = || {
            format!(
                "{kernel} <<<{}x{}, {block}>>>",
                config.gridDimX, config.gridDimY
            )
        };
        self.context
            .bind_to_thread()
            .map_err(|e| CudaError::driver("binding the context", e))?;
        self.timed(name, || {
            // SAFETY: `params` points at one live slot per kernel parameter, in
            // order, holding the values the caller vouched for (this function's
            // contract); the config and its attribute outlive the call.
            unsafe {
                cudarc::driver::sys::cuLaunchKernelEx(
                    &config,
                    function.cu_function(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
            .result()
            .map_err(|e| {
                let what = format!(
                    "launching {kernel} (grid {}x{}, {block} threads, {shared_bytes} bytes of shared memory)",
                    config.gridDimX, config.gridDimY
                );
                CudaError::driver(what, e)
            })
        })
    }
}

/// The card the runtime works with and the architecture its kernels are
/// compiled for: the device itself, or with `older` (GpuOptions::older_card)
/// that compute capability, compiled to PTX the driver translates.
fn presented_card(mut info: DeviceInfo, older: Option<(i32, i32)>) -> Result<(DeviceInfo, String)> {
    let Some(older) = older else {
        let arch = info.arch();
        return Ok((info, arch));
    };
    if older > info.compute_capability {
        return Err(CudaError::Unsupported(format!(
            "kernels for compute capability {}.{} cannot run on {} ({}.{})",
            older.0, older.1, info.name, info.compute_capability.0, info.compute_capability.1
        )));
    }
    info.compute_capability = older;
    // That card's opt-in shared memory per block (A100: 163 KiB; 8.6 and
    // 8.9: 99 KiB), so tile shapes are the ones it would get.
    let shared = match older {
        (8, 0) => 163 * 1024,
        (8, _) => 99 * 1024,
        _ => info.shared_per_block_optin,
    };
    info.shared_per_block_optin = info.shared_per_block_optin.min(shared);
    Ok((info, format!("compute_{}{}", older.0, older.1)))
}

fn device_info(context: &Arc<CudaContext>) -> Result<DeviceInfo> {
    let attribute = |a| {
        context
            .attribute(a)
            .map_err(|e| CudaError::driver("reading device attributes", e))
    };
    let mut driver_version = 0;
    // SAFETY: cuDriverGetVersion writes one int through the pointer, a live local.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
    Ok(DeviceInfo {
        name: context
            .name()
            .map_err(|e| CudaError::driver("reading the device name", e))?,
        compute_capability: context
            .compute_capability()
            .map_err(|e| CudaError::driver("reading the compute capability", e))?,
        multiprocessors: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as usize,
        total_memory: context
            .total_mem()
            .map_err(|e| CudaError::driver("reading the memory size", e))?,
        l2_bytes: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
        shared_per_block_optin: attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )? as usize,
        driver_version,
    })
}
