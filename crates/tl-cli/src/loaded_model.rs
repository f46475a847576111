//! Loading everything a command needs to talk to a model: the GGUF file, the
//! weights, the tokenizer and the chat template, with timings at `-v`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use tl_engine::chat_template::ChatTemplate;
use tl_engine::{Backend, DeviceChoice, GpuOptions};
use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use crate::cli::ModelArgs;
use crate::default_model;

/// The context used when neither `--ctx` nor a smaller training context says otherwise.
const DEFAULT_CONTEXT: usize = 4096;

/// A model ready to run.
pub struct LoadedModel {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// Weights and forward pass, on the chosen device.
    pub model: Backend,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// Its chat template (ChatML when the file has none).
    pub template: ChatTemplate,
    /// Context size (KV cache capacity) to use.
    pub context: usize,
}

/// The model file named by `-m`, or the default model (fetched if needed).
pub fn resolve_path(model: Option<&PathBuf>) -> Result<PathBuf> {
    match model {
        Some(path) => Ok(path.clone()),
        None => default_model::ensure(),
    }
}

/// Loads the model named by the arguments.
pub fn load(args: &ModelArgs, verbose: bool) -> Result<LoadedModel> {
    let path = resolve_path(args.model.as_ref())?;
    let started = Instant::now();
    let file = GgufFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let trained = tl_engine::model::ModelConfig::from_gguf(&file)
        .with_context(|| format!("cannot load {}", path.display()))?
        .context_length;
    let tokenizer = Tokenizer::from_gguf(&file)
        .with_context(|| format!("cannot load the tokenizer of {}", path.display()))?;
    let context = args.ctx.unwrap_or_else(|| trained.min(DEFAULT_CONTEXT));
    if context > trained {
        eprintln!(
            "warning: --ctx {context} exceeds the {trained} tokens the model was trained for"
        );
    }
    let model = pick_backend(&file, context, args.device, &args.gpu.to_options(), verbose)
        .with_context(|| format!("cannot load {}", path.display()))?;
    let template = chat_template(&file, &tokenizer, verbose)?;
    for warning in tokenizer.warnings() {
        eprintln!("warning: {warning}");
    }
    if verbose {
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
    Ok(LoadedModel {
        path,
        model,
        tokenizer,
        template,
        context,
    })
}

/// Loads `file`'s weights on the chosen device for caches of up to `context`
/// positions, saying why when `auto` fell back to the CPU (a warning when a
/// GPU is there but cannot run the model; at `-v` when there is none).
pub fn pick_backend(
    file: &GgufFile,
    context: usize,
    device: DeviceChoice,
    gpu_options: &GpuOptions,
    verbose: bool,
) -> tl_engine::Result<Backend> {
    let loaded = Backend::load(file, context, device, gpu_options)?;
    if let Some(fallback) = &loaded.fallback {
        if !fallback.no_gpu {
            eprintln!("warning: running on the CPU: {}", fallback.reason);
        } else if verbose {
            eprintln!("no usable GPU ({}); running on the CPU", fallback.reason);
        }
    }
    Ok(loaded.backend)
}

fn chat_template(file: &GgufFile, tokenizer: &Tokenizer, verbose: bool) -> Result<ChatTemplate> {
    match ChatTemplate::from_gguf(file, tokenizer)? {
        Some(template) => Ok(template),
        None => {
            if verbose {
                eprintln!("the model has no chat template; using ChatML");
            }
            Ok(ChatTemplate::chatml())
        }
    }
}

impl LoadedModel {
    /// A session sized to the context.
    pub fn new_session(&self) -> Result<tl_engine::Session> {
        Ok(tl_engine::Session::new(&self.model, self.context)?)
    }
}
