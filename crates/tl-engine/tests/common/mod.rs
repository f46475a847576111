//! What the engine's integration tests share: where their models are, the
//! backends a test body runs on, and small step helpers.
//!
//! [`backend_tests!`] is candle's `test_device!`: one test body, one `#[test]`
//! per backend, so each backend passes, fails or skips on its own line. The
//! CPU runs the default model alone (CI time stays flat); a GPU runs every
//! model of `TL_GPU_TEST_MODELS`, as `scripts/gpu_checks.sh` sets it.

// Each test file includes this module and uses a part of it.
#![allow(dead_code, unused_macros)]

use std::path::{Path, PathBuf};

use tl_cuda::CudaError;
use tl_engine::{Backend, DeviceChoice, Error, GpuOptions, Picked, SequenceCache, Wanted};
use tl_gguf::{GgmlType, GgufFile};

/// Positions every test model is loaded for and every test cache holds.
pub const CONTEXT: usize = 256;

/// Declares test bodies that run on every backend. Each
/// `fn name(backend: &Backend, model: &Path) { .. }` becomes a module `name`
/// with the tests `name::cpu` and `name::cuda`, which run the body on each of
/// that device's test models ([`run_on`]); the CUDA test prints
/// `skipped on cuda: ..` where no GPU can be opened. The body sees the test
/// file's items.
macro_rules! backend_tests {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($backend:ident: &Backend, $model:ident: &Path) $body:block
    )*) => {$(
        $(#[$meta])*
        mod $name {
            use super::*;

            fn body($backend: &tl_engine::Backend, $model: &std::path::Path) $body

            #[test]
            fn cpu() {
                crate::common::run_on(tl_engine::DeviceChoice::Cpu, body);
            }

            #[test]
            fn cuda() {
                crate::common::run_on(tl_engine::DeviceChoice::Cuda, body);
            }
        }
    )*};
}
#[allow(unused_imports)] // as above
pub(crate) use backend_tests;

/// Runs `body` on every test model of `device` ([`models_on`]), each loaded
/// there; returns at once, saying why, where `device` is a GPU this machine
/// cannot open.
pub fn run_on(device: DeviceChoice, body: fn(&Backend, &Path)) {
    for path in models_on(device) {
        let Some(backend) = load(&path, device) else {
            return;
        };
        eprintln!("{} on {}", path.display(), backend.device_name());
        body(&backend, &path);
    }
}

/// The models a test body runs on: on the CPU the default model alone; on a
/// GPU those of [`gpu_models`].
pub fn models_on(device: DeviceChoice) -> Vec<PathBuf> {
    match device {
        DeviceChoice::Cpu => vec![default_model()],
        DeviceChoice::Cuda | DeviceChoice::Auto => gpu_models(),
    }
}

/// `TL_GPU_TEST_MODELS` (paths separated by ':'), else the default model.
pub fn gpu_models() -> Vec<PathBuf> {
    match std::env::var("TL_GPU_TEST_MODELS") {
        Ok(list) => list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect(),
        Err(_) => vec![default_model()],
    }
}

/// The default model: `TL_TEST_MODEL`, else where `tl model pull` puts it
/// (the README's test command runs that first).
pub fn default_model() -> PathBuf {
    tl_testdata::default_model().unwrap_or_else(|e| panic!("{e}"))
}

/// The model at `path` on `device`, for caches of [`CONTEXT`] positions; `None`,
/// after printing why, where `device` is a GPU and this machine has no usable
/// one (no CUDA library, no device). Any other failure panics: on a machine
/// with a GPU, a GPU that does not load is a failure.
pub fn load(path: &Path, device: DeviceChoice) -> Option<Backend> {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match Backend::load(&file, CONTEXT, device, &GpuOptions::default()) {
        Ok(loaded) => Some(loaded.backend),
        Err(e @ Error::Cuda(CudaError::LibraryMissing { .. } | CudaError::NoDevice))
            if device == DeviceChoice::Cuda =>
        {
            eprintln!("skipped on cuda: no usable GPU here ({e})");
            None
        }
        Err(e) => panic!("{} on {device:?}: {e}", path.display()),
    }
}

/// One token per session, as [`tl_engine::Session::advance`] takes them.
pub fn singles(tokens: &[u32]) -> Vec<&[u32]> {
    tokens.iter().map(std::slice::from_ref).collect()
}

/// The logits after `tokens`, appended to `cache` in one step.
pub fn last_logits(backend: &Backend, tokens: &[u32], cache: &mut SequenceCache) -> Vec<f32> {
    match backend.step_one(tokens, cache, Wanted::Logits).unwrap() {
        Picked::Row(logits) => logits,
        Picked::Token(_) => panic!("a step asked for logits gave a token"),
    }
}

/// The backend's argmax after `token`, appended to `cache` (picked on the
/// device where there is one).
pub fn greedy(backend: &Backend, token: u32, cache: &mut SequenceCache) -> u32 {
    match backend.step_one(&[token], cache, Wanted::Argmax).unwrap() {
        Picked::Token(token) => token,
        Picked::Row(_) => panic!("a step asked for the argmax gave no token"),
    }
}

/// `len` prompt tokens spread over the vocabulary.
pub fn prompt_of(vocab: usize, len: u32) -> Vec<u32> {
    (0..len).map(|i| (i * 7919 + 13) % vocab as u32).collect()
}

/// Whether `a` and `b` hold the same bits (NaNs included).
pub fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The relative (L2) difference of `got` from `want`.
pub fn relative_error(got: &[f32], want: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        assert!(g.is_finite(), "non-finite logit");
        diff += (g as f64 - w as f64).powi(2);
        norm += (w as f64).powi(2);
    }
    (diff / norm).sqrt()
}

/// Whether every block matrix of the model at `path` is quantized (Q4_0,
/// Q4_1, Q8_0). Then a GPU runs decode steps and prompts under 64 tokens row
/// by row, through the kernels that compute the CPU's bits; float weights
/// take cuBLAS GEMMs for any pass of several rows, summed in another order.
pub fn quantized_blocks(path: &Path) -> bool {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.tensors()
        .iter()
        .filter(|t| t.name.starts_with("blk.") && t.dims.len() == 2)
        .all(|t| {
            matches!(
                t.ggml_type,
                GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0
            )
        })
}
