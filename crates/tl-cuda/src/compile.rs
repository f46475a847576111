//! Kernel sources and their compilation: the `.cu` files are embedded in the
//! binary and grouped into translation units (the row, attention and lookup
//! kernels; then the GEMV kernels of each weight type), which NVRTC compiles to
//! machine code (CUBIN) for the GPU's architecture on first use, all units at
//! once on separate threads. Each unit's CUBIN is cached on disk keyed by a hash
//! of its source, the architecture and the NVRTC and driver versions, so later
//! runs skip the compile.

use std::ffi::{c_char, CString};
use std::path::PathBuf;

use cudarc::nvrtc::sys::nvrtcResult;
use sha2::{Digest, Sha256};

use crate::error::{CudaError, Result};
use crate::options::GpuOptions;

const PRELUDE: (&str, &str) = ("prelude.cuh", include_str!("../kernels/prelude.cuh"));
const QUANTS: (&str, &str) = ("quants.cuh", include_str!("../kernels/quants.cuh"));
const GEMV: (&str, &str) = ("gemv.cu", include_str!("../kernels/gemv.cu"));
const GEMV_MMA: (&str, &str) = ("gemv_mma.cu", include_str!("../kernels/gemv_mma.cu"));

/// The kernels that are not GEMVs, in one unit.
const COMMON: &[(&str, &str)] = &[
    PRELUDE,
    QUANTS,
    ("rows.cu", include_str!("../kernels/rows.cu")),
    ("sample.cu", include_str!("../kernels/sample.cu")),
    ("attention.cu", include_str!("../kernels/attention.cu")),
    ("program.cu", include_str!("../kernels/program.cu")),
    (
        "flash_attention.cu",
        include_str!("../kernels/flash_attention.cu"),
    ),
];

/// GEMV instantiations, one unit per weight type and summation order (units
/// compile in parallel): (unit suffix, kernel name suffix, the type's `TYPE_*`
/// constant, the order's `ORDER_*` constant; see gemv.cu and
/// `SummationOrder`). Float kernels take a warp per row (`_l32`); quantized
/// ones take tiles of rows.
const GEMV_UNITS: &[(&str, &str, &str, &str)] = &[
    ("f32", "f32_l32", "TYPE_F32", "ORDER_LANES"),
    ("f16", "f16_l32", "TYPE_F16", "ORDER_LANES"),
    ("bf16", "bf16_l32", "TYPE_BF16", "ORDER_LANES"),
    ("q4_0", "q4_0", "TYPE_Q4_0", "ORDER_LANES"),
    ("q4_0_blocks", "q4_0_blocks", "TYPE_Q4_0", "ORDER_BLOCKS"),
    ("q4_1", "q4_1", "TYPE_Q4_1", "ORDER_LANES"),
    ("q5_0", "q5_0", "TYPE_Q5_0", "ORDER_LANES"),
    ("q5_1", "q5_1", "TYPE_Q5_1", "ORDER_LANES"),
    ("q8_0", "q8_0", "TYPE_Q8_0", "ORDER_LANES"),
    ("q2_k", "q2_k", "TYPE_Q2_K", "ORDER_SUPER_BLOCKS"),
    ("q3_k", "q3_k", "TYPE_Q3_K", "ORDER_SUPER_BLOCKS"),
    ("q4_k", "q4_k", "TYPE_Q4_K", "ORDER_SUPER_BLOCKS"),
    ("q4_k_blocks", "q4_k_blocks", "TYPE_Q4_K", "ORDER_K_GROUPS"),
    ("q5_k", "q5_k", "TYPE_Q5_K", "ORDER_SUPER_BLOCKS"),
    ("q6_k", "q6_k", "TYPE_Q6_K", "ORDER_SUPER_BLOCKS"),
    ("q2_k_lanes", "q2_k_lanes", "TYPE_Q2_K", "ORDER_K_LANES"),
    ("q3_k_lanes", "q3_k_lanes", "TYPE_Q3_K", "ORDER_K_LANES"),
    ("q4_k_lanes", "q4_k_lanes", "TYPE_Q4_K", "ORDER_K_LANES"),
    ("q4_k_gemv", "q4_k_gemv", "TYPE_Q4_K", "ORDER_K_GEMV"),
    ("q5_k_lanes", "q5_k_lanes", "TYPE_Q5_K", "ORDER_K_LANES"),
    ("q6_k_lanes", "q6_k_lanes", "TYPE_Q6_K", "ORDER_K_LANES"),
];

/// A translation unit: its name and full source.
#[derive(Debug, Clone)]
pub struct Unit {
    pub name: String,
    pub source: String,
}

/// Files concatenated with `#line` markers, so compiler messages name the
/// original file and line.
fn concatenated(files: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (name, text) in files {
        out.push_str(&format!("#line 1 \"{name}\"\n"));
        out.push_str(text);
        out.push('\n');
    }
    out
}

/// Every translation unit, each starting with `defines` (`#define` lines:
/// variants of the kernels for measurements, see
/// [`GpuOptions::kernel_defines`]).
pub fn units(defines: &str) -> Vec<Unit> {
    let mut units = vec![Unit {
        name: "common".into(),
        source: format!("{defines}{}", concatenated(COMMON)),
    }];
    for (suffix, kernels, type_constant, order) in GEMV_UNITS {
        let mut source = defines.to_owned();
        source.push_str(&concatenated(&[PRELUDE, QUANTS, GEMV, GEMV_MMA]));
        source.push_str(&format!(
            "GEMV_KERNELS({kernels}, {type_constant}, {order})\n"
        ));
        // The tensor-core batched kernels (gemv_mma.cu) of the types and
        // orders that have them.
        if crate::ops::gemv_mma::unit_has_kernels(kernels) {
            source.push_str(&format!(
                "GEMV_MMA_KERNELS({kernels}, {type_constant}, {order})\n"
            ));
        }
        units.push(Unit {
            name: format!("gemv_{suffix}"),
            source,
        });
    }
    units
}

/// The NVRTC version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints through the pointers, which point at
    // live locals. The library's presence was checked by the caller.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::driver("nvrtcVersion", status));
    }
    Ok((major, minor))
}

/// Compiles one unit to CUBIN for `arch` (e.g. `sm_90`), or to PTX text for
/// a virtual one (`compute_80`), with no cache.
pub fn compile_cubin(unit: &Unit, arch: &str) -> Result<Vec<u8>> {
    let failed = |log: String| CudaError::Compile {
        arch: arch.into(),
        log: format!("{}: {log}", unit.name),
    };
    let source = CString::new(unit.source.as_str()).map_err(|e| failed(e.to_string()))?;
    let name = CString::new(format!("{}.cu", unit.name)).map_err(|e| failed(e.to_string()))?;
    let program = cudarc::nvrtc::result::create_program(&source, Some(&name))
        .map_err(|e| failed(format!("{e:?}")))?;
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".into()];
    // SAFETY: `program` is a live program created above and destroyed below,
    // used by this thread only; the options are owned strings.
    let compiled = unsafe { cudarc::nvrtc::result::compile_program(program, &options) };
    let result = match compiled {
        // SAFETY: as above; the program compiled.
        Ok(()) if arch.starts_with("compute_") => {
            // SAFETY: as above; the program compiled.
            unsafe { cudarc::nvrtc::result::get_ptx(program) }
                .map(|ptx| {
                    ptx.iter()
                        .take_while(|&&c| c != 0)
                        .map(|&c| c as u8)
                        .collect()
                })
                .map_err(|e| failed(format!("{e:?}")))
        }
        // SAFETY: as above; the program compiled.
        Ok(()) => unsafe { cubin_of(program) }.map_err(|e| failed(format!("{e:?}"))),
        // SAFETY: as above; the log of a failed compile.
        Err(_) => Err(failed(unsafe { program_log(program) })),
    };
    // SAFETY: the program is not used after this.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(program) };
    result
}

/// The CUBIN of a compiled program.
///
/// # Safety
/// `program` must be a live, successfully compiled NVRTC program.
unsafe fn cubin_of(program: cudarc::nvrtc::sys::nvrtcProgram) -> Result<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: the caller guarantees a compiled program; `size` is a live local.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcGetCUBINSize(program, &mut size) };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::driver("nvrtcGetCUBINSize", status));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds the `size` bytes NVRTC reported.
    let status =
        unsafe { cudarc::nvrtc::sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr() as *mut c_char) };
    if status != nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::driver("nvrtcGetCUBIN", status));
    }
    Ok(cubin)
}

/// The compiler's messages for `program`.
///
/// # Safety
/// `program` must be a live NVRTC program that was compiled.
unsafe fn program_log(program: cudarc::nvrtc::sys::nvrtcProgram) -> String {
    // SAFETY: the caller guarantees a live, compiled program.
    match unsafe { cudarc::nvrtc::result::get_program_log(program) } {
        Ok(log) => {
            let bytes: Vec<u8> = log
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) => format!("(no compiler log: {e:?})"),
    }
}

/// Every unit's CUBIN for `arch`, with the options' kernel defines, each from
/// the disk cache (the options' folder) when a matching entry exists, else
/// compiled (all missing units at once, one thread each) and stored. A cache
/// that cannot be read or written only costs time (and says so at debug level).
pub fn cached_cubins(
    arch: &str,
    driver_version: i32,
    options: &GpuOptions,
) -> Result<Vec<(String, Vec<u8>)>> {
    let (major, minor) = nvrtc_version()?;
    let versions = format!("|{arch}|nvrtc {major}.{minor}|driver {driver_version}");
    let dir = cache_dir(options);
    std::thread::scope(|scope| {
        let jobs: Vec<_> = units(&options.define_lines())
            .into_iter()
            .map(|unit| {
                let path = dir.as_ref().map(|d| {
                    d.join(format!(
                        "{}-{}.cubin",
                        unit.name,
                        cache_key(&unit, &versions)
                    ))
                });
                scope.spawn(move || -> Result<(String, Vec<u8>)> {
                    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
                        return Ok((unit.name, bytes));
                    }
                    let started = std::time::Instant::now();
                    let cubin = compile_cubin(&unit, arch)?;
                    tracing::debug!(
                        "compiled the {} kernels for {arch} in {:.0} ms",
                        unit.name,
                        started.elapsed().as_secs_f64() * 1e3
                    );
                    if let Some(path) = &path {
                        if let Err(e) = store(path, &cubin) {
                            tracing::debug!("cannot cache kernels in {}: {e}", path.display());
                        }
                    }
                    Ok((unit.name, cubin))
                })
            })
            .collect();
        jobs.into_iter()
            .map(|job| {
                job.join().unwrap_or_else(|_| {
                    Err(CudaError::Unsupported(
                        "a kernel compile thread panicked".into(),
                    ))
                })
            })
            .collect()
    })
}

fn cache_key(unit: &Unit, versions: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(unit.source.as_bytes());
    hash.update(versions.as_bytes());
    let digest = hash.finalize();
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Where compiled kernels are kept: the options' folder, else the user's
/// cache folder (`~/.cache/tensorlogic/kernels`).
fn cache_dir(options: &GpuOptions) -> Option<PathBuf> {
    if let Some(dir) = &options.kernel_cache {
        return Some(dir.clone());
    }
    dirs::cache_dir().map(|d| d.join("tensorlogic").join("kernels"))
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn store(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the `extern "C" __global__` kernels written out in
    /// `source` (not those a macro pastes together with `##`).
    fn kernel_names(source: &str) -> Vec<&str> {
        source
            .split("extern \"C\" __global__")
            .skip(1)
            .filter_map(|rest| {
                let head = &rest[..rest.find('(')?];
                // `void NAME`, or `void __launch_bounds__` before `(...) NAME`.
                if head.trim_end().ends_with("__launch_bounds__") {
                    let after = &rest[rest.find(')')? + 1..];
                    after.split('(').next().map(str::trim)
                } else {
                    head.split_whitespace().last()
                }
            })
            .filter(|name| !name.contains("##"))
            .collect()
    }

    /// NVRTC rejects a unit defining one kernel twice, but only on a machine
    /// with a GPU; this finds it anywhere.
    #[test]
    fn kernel_names_are_unique() {
        let mut seen = std::collections::HashMap::new();
        for (file, source) in COMMON {
            for name in kernel_names(source) {
                assert!(
                    !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'),
                    "{file}: cannot read a kernel name ({name:?})"
                );
                if let Some(first) = seen.insert(name, *file) {
                    panic!("kernel {name} is defined in {first} and in {file}");
                }
            }
        }
        assert!(seen.len() >= 20, "found only {} kernels", seen.len());
        assert_eq!(
            kernel_names("extern \"C\" __global__ void a(int x) {} extern \"C\" __global__ void __launch_bounds__(64) b(int y) {}"),
            ["a", "b"]
        );
    }

    #[test]
    fn every_source_file_is_in_a_unit() {
        let units = units("");
        for (name, _) in COMMON.iter().chain([&QUANTS, &GEMV, &GEMV_MMA]) {
            let marker = format!("#line 1 \"{name}\"");
            assert!(units.iter().any(|u| u.source.contains(&marker)), "{name}");
        }
        assert_eq!(units.len(), 1 + GEMV_UNITS.len());
        let with_mma: Vec<_> = units
            .iter()
            .filter(|u| u.source.lines().any(|l| l.starts_with("GEMV_MMA_KERNELS(")))
            .map(|u| u.name.as_str())
            .collect();
        assert_eq!(with_mma, ["gemv_q4_0_blocks", "gemv_q4_1", "gemv_q8_0"]);
    }

    #[test]
    fn kernel_defines_change_every_units_cache_key() {
        let options = GpuOptions {
            kernel_defines: vec!["GEMV_CLOCKS=1".parse().unwrap()],
            ..Default::default()
        };
        let (plain, defined) = (units(""), units(&options.define_lines()));
        for (plain, defined) in plain.iter().zip(&defined) {
            assert!(defined.source.starts_with("#define GEMV_CLOCKS 1\n"));
            assert_ne!(cache_key(plain, "v"), cache_key(defined, "v"));
        }
    }

    /// NVRTC needs no GPU, so wherever libnvrtc is installed the kernels are
    /// compiled for the architectures we target (A100, A10/RTX 30, L4/L40/RTX
    /// 40 and H100/H200); elsewhere the test says why it skips.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !crate::libraries::nvrtc_present() {
            eprintln!("skipped: libnvrtc is not installed here (pip install nvidia-cuda-nvrtc and add its lib folder to LD_LIBRARY_PATH to run this test)");
            return;
        }
        let units = units("");
        let contains = |haystack: &[u8], needle: &str| {
            haystack
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        };
        for arch in ["sm_80", "sm_86", "sm_89", "sm_90"] {
            let cubins: Vec<Vec<u8>> = std::thread::scope(|scope| {
                let jobs: Vec<_> = units
                    .iter()
                    .map(|unit| scope.spawn(move || compile_cubin(unit, arch)))
                    .collect();
                jobs.into_iter()
                    .map(|j| j.join().unwrap().unwrap_or_else(|e| panic!("{e}")))
                    .collect()
            });
            for kernel in [
                "gemv_norm_gated_q4_0",
                "gemv_norm_gated_q4_0_blocks",
                "gemv_norm_rope_f16_l32",
                "gemv_batched_norm_rope_q4_1",
                "gemv_norm_gated_q5_0",
                "gemv_batched_residual_q5_1",
                "gemv_norm_rope_q2_k",
                "gemv_batched_norm_gated_q3_k",
                "gemv_norm_gated_q4_k_blocks",
                "gemv_batched_norm_rope_q4_k",
                "gemv_residual_q5_k",
                "gemv_batched_norm_q6_k",
                "gemv_norm_gated_q4_k_lanes",
                "gemv_batched_norm_rope_q6_k_lanes",
                "gemv_residual_q4_k_gemv",
                "gemv_norm_q2_k_lanes",
                "gemv_batched_q5_k_lanes",
                "gemv_norm_gated_q3_k_lanes",
                "mma_stage_q4_0_blocks",
                "gemv_mma_rope_q4_1",
                "gemv_mma_gated_q8_0",
                "gemv_mma_residual_q4_0_blocks",
                "dequantize_f16_q6_k",
                "embed_q5_1",
                "attention_f16_accumulator",
                "attention_f16_accumulator_batched",
                "attention_flash_64",
                "attention_flash_128",
                "profile_spin",
                "swiglu_to_f16",
                "argmax",
                "top_k_partial",
                "top_k_select",
                "sample_candidates",
            ] {
                assert!(
                    cubins.iter().any(|c| contains(c, kernel)),
                    "{kernel} missing from the {arch} CUBINs"
                );
            }
        }
    }
}
