//! Kernel sources and their compilation: the `.cu` files are embedded in the
//! binary, concatenated into one translation unit, compiled by NVRTC for the GPU's
//! architecture on first use, and the PTX is cached on disk keyed by a hash of the
//! sources, the architecture and the NVRTC and driver versions, so later runs
//! skip the compile.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::error::{CudaError, Result};

/// The kernel sources, in the order they are concatenated.
const SOURCES: &[(&str, &str)] = &[
    ("prelude.cuh", include_str!("../kernels/prelude.cuh")),
    ("gemv.cu", include_str!("../kernels/gemv.cu")),
    ("rows.cu", include_str!("../kernels/rows.cu")),
    ("attention.cu", include_str!("../kernels/attention.cu")),
    (
        "flash_attention.cu",
        include_str!("../kernels/flash_attention.cu"),
    ),
];

/// All kernels as one translation unit, with `#line` markers so compiler
/// messages name the original file and line.
pub fn kernel_source() -> String {
    let mut out = String::new();
    for (name, text) in SOURCES {
        out.push_str(&format!("#line 1 \"{name}\"\n"));
        out.push_str(text);
        out.push('\n');
    }
    out
}

/// The NVRTC version as (major, minor).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints through the pointers, which point at
    // live locals. The library's presence was checked by the caller.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::driver("nvrtcVersion", status));
    }
    Ok((major, minor))
}

/// Compiles the kernels to PTX for `arch` (e.g. `sm_90`), with no cache.
pub fn compile_ptx(arch: &str) -> Result<String> {
    let options = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        name: Some("tensorlogic.cu".into()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(kernel_source(), options) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(CudaError::Compile {
            arch: arch.into(),
            log: log.to_string_lossy().into_owned(),
        }),
        Err(other) => Err(CudaError::Compile {
            arch: arch.into(),
            log: format!("{other:?}"),
        }),
    }
}

/// PTX for `arch`, from the disk cache when a matching entry exists, else
/// compiled and stored. A cache that cannot be read or written only costs time.
pub fn cached_ptx(arch: &str, driver_version: i32) -> Result<String> {
    let key = cache_key(arch, driver_version)?;
    let path = cache_dir().map(|dir| dir.join(format!("{key}.ptx")));
    if let Some(path) = &path {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Ok(text);
        }
    }
    let ptx = compile_ptx(arch)?;
    if let Some(path) = &path {
        store(path, &ptx);
    }
    Ok(ptx)
}

fn cache_key(arch: &str, driver_version: i32) -> Result<String> {
    let (major, minor) = nvrtc_version()?;
    let mut hash = Sha256::new();
    hash.update(kernel_source().as_bytes());
    hash.update(format!("|{arch}|nvrtc {major}.{minor}|driver {driver_version}").as_bytes());
    let digest = hash.finalize();
    Ok(digest.iter().take(16).map(|b| format!("{b:02x}")).collect())
}

/// Where compiled kernels are kept: `$TL_KERNEL_CACHE`, else the user's cache
/// folder (`~/.cache/tensorlogic/kernels`).
fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TL_KERNEL_CACHE") {
        return Some(PathBuf::from(dir));
    }
    dirs::cache_dir().map(|d| d.join("tensorlogic").join("kernels"))
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn store(path: &std::path::Path, text: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&temporary, text).is_ok() && std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_file_is_in_the_translation_unit() {
        let source = kernel_source();
        for (name, _) in SOURCES {
            assert!(source.contains(&format!("#line 1 \"{name}\"")), "{name}");
        }
    }

    /// NVRTC needs no GPU, so wherever libnvrtc is installed the kernels are
    /// compiled for the architectures we target; elsewhere the test says why it
    /// skips.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if !crate::libraries::nvrtc_present() {
            eprintln!("skipped: libnvrtc is not installed here (pip install nvidia-cuda-nvrtc and add its lib folder to LD_LIBRARY_PATH to run this test)");
            return;
        }
        for arch in ["sm_80", "sm_90"] {
            let ptx = compile_ptx(arch).unwrap_or_else(|e| panic!("{e}"));
            for kernel in [
                "gemv_norm_swiglu_q4_0",
                "attention_f16_accumulator",
                "attention_flash_64",
                "attention_flash_128",
                "profile_spin",
                "argmax",
            ] {
                assert!(ptx.contains(kernel), "{kernel} missing from the {arch} PTX");
            }
        }
    }
}
