//! Loading the model a command names (the engine's bundle: file, tokenizer,
//! chat template, weights on a device), with what the user should hear about
//! it on stderr and timings at `-v`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use tl_engine::backend::Fallback;
pub use tl_engine::LoadedModel;
use tl_engine::{BeyondTraining, ModelFile};

use crate::catalogue;
use crate::cli::ModelArgs;

/// The context used when neither `--ctx` nor a smaller training context says otherwise.
const DEFAULT_CONTEXT: usize = 4096;

/// The model file named by `-m` (a path, or a catalogue name fetched if
/// needed), or the default model.
pub fn resolve_path(model: Option<&PathBuf>) -> Result<PathBuf> {
    catalogue::resolve(model.map(PathBuf::as_path))
}

/// Loads the model named by the arguments.
pub fn load(args: &ModelArgs, verbose: bool) -> Result<LoadedModel> {
    let path = resolve_path(args.model.as_ref())?;
    let started = Instant::now();
    let file = ModelFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let (context, beyond) = file.context_for(args.ctx, DEFAULT_CONTEXT, BeyondTraining::Allow);
    if let Some(warning) = beyond {
        eprintln!("warning: {warning}");
    }
    let loaded = file
        .load(context, args.device, &args.gpu.to_options())
        .with_context(|| format!("cannot load {}", path.display()))?;
    report_fallback(loaded.fallback.as_ref(), verbose);
    if loaded.file.template_is_fallback && verbose {
        eprintln!("the model has no chat template; using ChatML");
    }
    for warning in loaded.file.tokenizer.warnings() {
        eprintln!("warning: {warning}");
    }
    if verbose {
        let model = &loaded.backend;
        let config = model.config();
        let copies = match model.f16_copy_bytes() {
            0 => String::new(),
            bytes => format!(" (+{:.1} MB of f16 copies for prompts)", bytes as f64 / 1e6),
        };
        eprintln!(
            "loaded {} on {} in {:.0} ms: {} ({} blocks, {} hidden, {}/{} heads), {:.1} MB of weights{copies}, context {context}",
            path.display(),
            model.device_name(),
            started.elapsed().as_secs_f64() * 1000.0,
            config.architecture,
            config.block_count,
            config.embedding_length,
            config.head_count,
            config.head_count_kv,
            model.weight_bytes() as f64 / 1e6,
        );
    }
    Ok(loaded)
}

/// Says why `auto` fell back to the CPU: a warning when a GPU is there but
/// cannot run the model, a note at `-v` when there is none.
pub fn report_fallback(fallback: Option<&Fallback>, verbose: bool) {
    if let Some(fallback) = fallback {
        if !fallback.no_gpu {
            eprintln!("warning: running on the CPU: {}", fallback.reason);
        } else if verbose {
            eprintln!("no usable GPU ({}); running on the CPU", fallback.reason);
        }
    }
}
