//! What a model will take on the GPU, counted from the file and the
//! configuration before anything is uploaded, so that a model too large for
//! the device's free memory is refused with the sizes rather than failing an
//! allocation halfway through the upload.

use tl_gguf::GgufFile;

use super::batch::batch_bytes;
use super::prefill::prefill_bytes;
use super::MAX_PREFILL_ROWS;
use crate::error::{Error, Result};
use crate::memory::format_bytes;
use crate::model::config::ModelConfig;

/// Room kept for what is not counted: the kernels' modules, cuBLAS's
/// handle and workspace, the sampler's and the argmax's buffers, and the
/// allocator's rounding.
const RUNTIME_HEADROOM: u64 = 256 << 20;

/// Device memory a model needs, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePlan {
    /// Every tensor of the file as the device holds it (norms in f32).
    pub weights: u64,
    /// One sequence's KV cache of `positions` positions.
    pub kv_cache: u64,
    pub positions: usize,
    /// The RoPE table, the prefill and batched-step buffers, one sequence's
    /// step buffers and [`RUNTIME_HEADROOM`].
    pub workspace: u64,
}

impl DevicePlan {
    /// The plan for the model in `file` (configuration `c`) with caches of
    /// `positions` positions.
    pub fn of(file: &GgufFile, c: &ModelConfig, positions: usize) -> Result<Self> {
        let weights = file.tensors().iter().try_fold(0u64, |sum, t| {
            let shape = t.shape();
            let bytes = match shape.as_slice() {
                [rows, cols] => tl_cuda::device_bytes(t.ggml_type, *rows, *cols)
                    .map(|b| b as u64)
                    .unwrap_or(t.size_bytes),
                // Vectors (norms) are uploaded as f32.
                _ => shape.iter().product::<usize>() as u64 * 4,
            };
            sum.checked_add(bytes)
        });
        let weights = weights.ok_or_else(|| Error::Memory("the weights' size overflows".into()))?;
        let step = (c.embedding_length
            + c.query_width()
            + 2 * c.key_value_width()
            + c.query_width()
            + c.feed_forward_length
            + c.vocab_size) as u64
            * 4;
        let workspace = [
            c.rope_table_bytes(positions)?,
            prefill_bytes(c, MAX_PREFILL_ROWS),
            batch_bytes(c),
            step,
            RUNTIME_HEADROOM,
        ]
        .into_iter()
        .try_fold(0u64, u64::checked_add)
        .ok_or_else(|| Error::Memory("the workspace's size overflows".into()))?;
        Ok(DevicePlan {
            weights,
            kv_cache: c.kv_cache_bytes(positions)?,
            positions,
            workspace,
        })
    }

    /// Everything together (`None` on overflow).
    pub fn total(&self) -> Option<u64> {
        self.weights
            .checked_add(self.kv_cache)?
            .checked_add(self.workspace)
    }

    /// Errors, naming every size, unless the plan fits in `free` bytes of
    /// `device`.
    pub fn check(&self, device: &str, free: u64) -> Result<()> {
        match self.total() {
            Some(total) if total <= free => Ok(()),
            total => Err(Error::Memory(format!(
                "the model does not fit on the GPU ({device}): it needs {} (weights {}, KV cache of {} positions {}, workspace {}) but {} is free; use a shorter context (--ctx) or the CPU (--device cpu)",
                total.map_or("more than 16 EB".into(), format_bytes),
                format_bytes(self.weights),
                self.positions,
                format_bytes(self.kv_cache),
                format_bytes(self.workspace),
                format_bytes(free)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> DevicePlan {
        DevicePlan {
            weights: 4_000_000_000,
            kv_cache: 1_000_000_000,
            positions: 4096,
            workspace: 500_000_000,
        }
    }

    #[test]
    fn a_plan_that_fits_passes() {
        assert!(plan().check("a GPU", 5_500_000_000).is_ok());
    }

    #[test]
    fn a_plan_too_large_names_every_size() {
        let error = plan().check("NVIDIA H100", 5_499_999_999).unwrap_err();
        assert_eq!(
            error.to_string(),
            "not enough memory: the model does not fit on the GPU (NVIDIA H100): it needs 5.5 GB (weights 4.0 GB, KV cache of 4096 positions 1.0 GB, workspace 500.0 MB) but 5.5 GB is free; use a shorter context (--ctx) or the CPU (--device cpu)"
        );
    }

    /// The tiny test model: its matrices as the device holds them (Q8_0's
    /// 34-byte blocks take 32 + 2), its norms in f32, and a cache of the
    /// configuration's size.
    #[test]
    fn a_plan_counts_the_files_tensors_and_the_cache() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/tiny-qwen3-q8_0.gguf"
        );
        let file = GgufFile::open(std::path::Path::new(path)).unwrap();
        let c = ModelConfig::from_gguf(&file).unwrap();
        let plan = DevicePlan::of(&file, &c, 256).unwrap();
        let data: u64 = file.tensors().iter().map(|t| t.size_bytes).sum();
        assert_eq!(plan.weights, data);
        assert_eq!(plan.kv_cache, c.kv_cache_bytes(256).unwrap());
        assert!(plan.workspace > RUNTIME_HEADROOM);
    }

    #[test]
    fn overflowing_sizes_are_refused() {
        let huge = DevicePlan {
            weights: u64::MAX,
            ..plan()
        };
        assert_eq!(huge.total(), None);
        let error = huge.check("a GPU", u64::MAX).unwrap_err().to_string();
        assert!(error.contains("more than 16 EB"), "{error}");
    }
}
