//! The settings a GPU is opened with: switches for comparisons (CUDA graphs,
//! f16 weight copies, L2 prefetch, dependent launches), launch shapes for
//! measurements, and where compiled kernels are cached. The defaults are what
//! the runtime is tuned for; `tl` fills the rest from hidden flags. Each range
//! check is a function of its own, so the command line can reject a value
//! with the same words [`GpuOptions::validate`] uses.

use std::path::PathBuf;

use crate::error::{CudaError, Result};

/// Threads per block at most in a quantized GEMV tile (`GEMV_MAX_THREADS` in
/// gemv.cu).
pub const MAX_TILE_THREADS: usize = 512;

/// Warps per block at most in a float GEMV (`GEMV_MAX_THREADS` in gemv.cu
/// is 16 warps).
pub const MAX_GEMV_WARPS: usize = 16;

/// How a GPU is used. `Default` is what the runtime is tuned for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuOptions {
    /// Replay each decode step as a CUDA graph (default on); off launches the
    /// step's kernels one by one (for comparison).
    pub graphs: bool,
    /// Keep an f16 copy of every block matrix for prompt GEMMs when the device
    /// has room (default on); off saves that memory, and each prompt GEMM
    /// dequantizes its matrix again.
    pub f16_weights: bool,
    /// How much kernels ask L2 for ahead of need (`prefetch_l2` in
    /// prelude.cuh), before waiting for the previous kernel: 0 nothing; 1 the
    /// first data they read after the wait that is likely not in L2 (norm
    /// weights, older cache positions); 2 (the default) also the weights of
    /// the matrix the step multiplies by next (`gemv_batched`'s `next`).
    pub l2_prefetch: u8,
    /// Launch decode kernels as programmatic dependents of the kernel before
    /// them on sm_90 and later, so each may start while that one finishes
    /// (default on; older GPUs never do).
    pub dependent_launches: bool,
    /// Run batched products of quantized weights whose type has tensor-core
    /// kernels (Q4_0, Q4_1, Q8_0) with int8 MMA (default on); off takes the
    /// CUDA-core tile kernels. Both compute the same bits.
    pub tensor_core_gemv: bool,
    /// Output rows per quantized GEMV tile, at least 2 (rounded up to even and
    /// cut to what fits in shared memory). `None` (the default): the fewest
    /// that give every multiprocessor one block.
    pub gemv_tile_rows: Option<usize>,
    /// The fewest threads per quantized GEMV block, 32 to
    /// [`MAX_TILE_THREADS`] (default 512).
    pub gemv_tile_threads: usize,
    /// Warps (rows in flight) per float GEMV block: even, 2 to
    /// [`MAX_GEMV_WARPS`] (default 16).
    pub gemv_warps: usize,
    /// The most float GEMV blocks per multiprocessor, at least 1 (default 1).
    pub gemv_blocks_per_sm: usize,
    /// `#define`s put before the kernels' source (variants for
    /// measurements, such as `GEMV_CLOCKS=1`); part of the source, so of the
    /// kernel cache key. Default: none.
    pub kernel_defines: Vec<KernelDefine>,
    /// Where compiled kernels are cached. `None` (the default): the user's
    /// cache folder (`~/.cache/tensorlogic/kernels`).
    pub kernel_cache: Option<PathBuf>,
    /// Run as a GPU of this older compute capability (major, minor): the
    /// kernels are compiled for it (PTX the driver translates for the real
    /// card) and the host uses only what it has, so a newer card runs an
    /// older card's code paths (for tests). `None` (the default): the
    /// card's own.
    pub older_card: Option<(i32, i32)>,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            graphs: true,
            f16_weights: true,
            l2_prefetch: 2,
            dependent_launches: true,
            tensor_core_gemv: true,
            gemv_tile_rows: None,
            gemv_tile_threads: MAX_TILE_THREADS,
            gemv_warps: MAX_GEMV_WARPS,
            gemv_blocks_per_sm: 1,
            kernel_defines: Vec::new(),
            kernel_cache: None,
            older_card: None,
        }
    }
}

impl GpuOptions {
    /// Rejects values outside the ranges the kernels are written for.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field: &str, reason: String| {
            CudaError::InvalidOption(format!("GPU option {field}: {reason}"))
        };
        check_l2_prefetch(self.l2_prefetch).map_err(|r| invalid("l2_prefetch", r))?;
        if let Some(rows) = self.gemv_tile_rows {
            check_gemv_tile_rows(rows).map_err(|r| invalid("gemv_tile_rows", r))?;
        }
        check_gemv_tile_threads(self.gemv_tile_threads)
            .map_err(|r| invalid("gemv_tile_threads", r))?;
        check_gemv_warps(self.gemv_warps).map_err(|r| invalid("gemv_warps", r))?;
        check_gemv_blocks_per_sm(self.gemv_blocks_per_sm)
            .map_err(|r| invalid("gemv_blocks_per_sm", r))?;
        for define in &self.kernel_defines {
            define.check().map_err(|r| invalid("kernel_defines", r))?;
        }
        if let Some((major, minor)) = self.older_card {
            if major < 8 || minor < 0 {
                let reason =
                    format!("compute capability {major}.{minor}: the kernels need 8.0 or later");
                return Err(invalid("older_card", reason));
            }
        }
        Ok(())
    }

    /// The kernel defines as `#define` lines.
    pub(crate) fn define_lines(&self) -> String {
        self.kernel_defines
            .iter()
            .map(|d| format!("#define {} {}\n", d.name, d.value))
            .collect()
    }
}

/// [`GpuOptions::l2_prefetch`]'s range.
pub fn check_l2_prefetch(level: u8) -> std::result::Result<(), String> {
    if level <= 2 {
        Ok(())
    } else {
        Err(format!("{level} is not a prefetch level (0, 1 or 2)"))
    }
}

/// [`GpuOptions::gemv_tile_rows`]'s range.
pub fn check_gemv_tile_rows(rows: usize) -> std::result::Result<(), String> {
    if rows >= 2 {
        Ok(())
    } else {
        Err(format!("{rows} rows per tile; at least 2"))
    }
}

/// [`GpuOptions::gemv_tile_threads`]'s range.
pub fn check_gemv_tile_threads(threads: usize) -> std::result::Result<(), String> {
    if (32..=MAX_TILE_THREADS).contains(&threads) {
        Ok(())
    } else {
        Err(format!(
            "{threads} threads per tile; 32 to {MAX_TILE_THREADS}"
        ))
    }
}

/// [`GpuOptions::gemv_warps`]'s range.
pub fn check_gemv_warps(warps: usize) -> std::result::Result<(), String> {
    if (2..=MAX_GEMV_WARPS).contains(&warps) && warps.is_multiple_of(2) {
        Ok(())
    } else {
        Err(format!(
            "{warps} warps per block; an even number from 2 to {MAX_GEMV_WARPS}"
        ))
    }
}

/// [`GpuOptions::gemv_blocks_per_sm`]'s range.
pub fn check_gemv_blocks_per_sm(blocks: usize) -> std::result::Result<(), String> {
    if blocks >= 1 {
        Ok(())
    } else {
        Err("0 blocks per multiprocessor; at least 1".into())
    }
}

/// One `#define NAME VALUE` for the GEMV kernels' source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDefine {
    /// A C identifier.
    pub name: String,
    /// The replacement text, on one line.
    pub value: String,
}

impl KernelDefine {
    /// A name that is a C identifier and a value without line breaks (either
    /// would change the source beyond one definition).
    fn check(&self) -> std::result::Result<(), String> {
        let mut chars = self.name.chars();
        let identifier = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier {
            return Err(format!("'{}' is not a C identifier", self.name));
        }
        if self.value.contains(['\n', '\r']) {
            return Err(format!("the value of {} has a line break", self.name));
        }
        Ok(())
    }
}

impl std::str::FromStr for KernelDefine {
    type Err = String;

    /// `NAME=VALUE`.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| format!("'{text}' is not NAME=VALUE"))?;
        let define = KernelDefine {
            name: name.trim().to_owned(),
            value: value.trim().to_owned(),
        };
        define.check()?;
        Ok(define)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid() {
        GpuOptions::default().validate().unwrap();
    }

    #[test]
    fn values_the_kernels_cannot_take_are_errors() {
        let bad = [
            GpuOptions {
                l2_prefetch: 3,
                ..Default::default()
            },
            GpuOptions {
                gemv_tile_rows: Some(1),
                ..Default::default()
            },
            GpuOptions {
                gemv_tile_threads: 16,
                ..Default::default()
            },
            GpuOptions {
                gemv_tile_threads: 1024,
                ..Default::default()
            },
            GpuOptions {
                gemv_warps: 3,
                ..Default::default()
            },
            GpuOptions {
                gemv_warps: 18,
                ..Default::default()
            },
            GpuOptions {
                gemv_blocks_per_sm: 0,
                ..Default::default()
            },
            GpuOptions {
                kernel_defines: vec![KernelDefine {
                    name: "A B".into(),
                    value: "1".into(),
                }],
                ..Default::default()
            },
        ];
        for options in bad {
            let error = options.validate().unwrap_err().to_string();
            assert!(error.starts_with("GPU option "), "{error}");
        }
    }

    #[test]
    fn defines_parse_as_name_equals_value() {
        let define: KernelDefine = "GEMV_CLOCKS=1".parse().unwrap();
        assert_eq!(define.name, "GEMV_CLOCKS");
        assert_eq!(define.value, "1");
        let options = GpuOptions {
            kernel_defines: vec![define, "X=(2 * 3)".parse().unwrap()],
            ..Default::default()
        };
        assert_eq!(
            options.define_lines(),
            "#define GEMV_CLOCKS 1\n#define X (2 * 3)\n"
        );
        for bad in ["GEMV_CLOCKS", "=1", "1X=2", "A\nB=1"] {
            assert!(bad.parse::<KernelDefine>().is_err(), "{bad:?}");
        }
    }
}
