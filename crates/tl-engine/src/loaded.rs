//! The loaded-model bundle, built in one place for every command, the server
//! and the language: a model file's description (its GGUF file, validated
//! configuration, tokenizer and chat template) and, once its weights are
//! loaded on a device, the backend that runs it.
//!
//! The two steps are apart because the server reads every file's description
//! at start (HTTP tasks template and tokenize without the engine) and loads
//! weights only when a request needs them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use crate::backend::{Backend, DeviceChoice, Fallback};
use crate::chat_template::ChatTemplate;
use crate::error::Result;
use crate::model::ModelConfig;
use crate::session::Session;

/// What a model file says, read without its weights.
pub struct ModelFile {
    pub path: PathBuf,
    /// Shared, so lazily read tensors (the language's `model.tensor`) can
    /// hold it.
    pub gguf: Arc<GgufFile>,
    pub config: ModelConfig,
    pub tokenizer: Arc<Tokenizer>,
    /// The file's chat template, else its architecture's, else ChatML.
    pub template: ChatTemplate,
    /// Whether `template` is ChatML standing in for a missing one.
    pub template_is_fallback: bool,
}

impl ModelFile {
    /// Opens and validates `path`: the GGUF structure, the architecture's
    /// configuration, the tokenizer and the chat template.
    pub fn open(path: &Path) -> Result<Self> {
        let gguf = GgufFile::open(path)?;
        let config = ModelConfig::from_gguf(&gguf)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        let stored = ChatTemplate::from_gguf(&gguf, &tokenizer)?;
        let template = match stored {
            Some(template) => Some(template),
            None => ChatTemplate::for_architecture(&config.architecture, &tokenizer)?,
        };
        let template_is_fallback = template.is_none();
        let template = template.unwrap_or_else(ChatTemplate::chatml);
        Ok(ModelFile {
            path: path.to_path_buf(),
            gguf: Arc::new(gguf),
            config,
            tokenizer: Arc::new(tokenizer),
            template,
            template_is_fallback,
        })
    }

    /// The context a sequence gets when the user asks for `requested`
    /// positions (or nothing): by default the training context, at most
    /// `default_cap`; a request beyond the training context is cut to it or
    /// allowed, as `beyond` says. Returns the context and, for a request
    /// beyond the training context, a warning saying what happens.
    pub fn context_for(
        &self,
        requested: Option<usize>,
        default_cap: usize,
        beyond: BeyondTraining,
    ) -> (usize, Option<String>) {
        let trained = self.config.context_length;
        let name = self.name();
        match (requested, beyond) {
            (Some(context), BeyondTraining::Cut) if context > trained => (
                trained,
                Some(format!(
                    "--ctx {context} is more than the {trained} tokens {name} was trained for; using {trained}"
                )),
            ),
            (Some(context), BeyondTraining::Allow) if context > trained => (
                context,
                Some(format!(
                    "--ctx {context} exceeds the {trained} tokens {name} was trained for"
                )),
            ),
            (Some(context), _) => (context, None),
            (None, _) => (trained.min(default_cap), None),
        }
    }

    /// The file name without its `.gguf` extension.
    pub fn name(&self) -> String {
        model_name(&self.path)
    }

    /// Loads the weights on `device` for caches of up to `context` positions.
    pub fn load_backend(
        &self,
        context: usize,
        device: DeviceChoice,
        gpu_options: &tl_cuda::GpuOptions,
    ) -> Result<crate::backend::Loaded> {
        Backend::load(&self.gguf, context, device, gpu_options)
    }

    /// The whole bundle: this description with its weights loaded.
    pub fn load(
        self,
        context: usize,
        device: DeviceChoice,
        gpu_options: &tl_cuda::GpuOptions,
    ) -> Result<LoadedModel> {
        let loaded = self.load_backend(context, device, gpu_options)?;
        Ok(LoadedModel {
            file: self,
            backend: loaded.backend,
            context,
            fallback: loaded.fallback,
        })
    }
}

/// What a context beyond the one a model was trained for gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeyondTraining {
    /// Cut to the training context (a server, whose caches many requests
    /// share).
    Cut,
    /// Allowed, with a warning (a command a user runs to try it).
    Allow,
}

/// A model ready to run: its file's description and its weights on a device.
pub struct LoadedModel {
    pub file: ModelFile,
    pub backend: Backend,
    /// Positions a sequence's cache holds.
    pub context: usize,
    /// Why `auto` chose the CPU, when it did.
    pub fallback: Option<Fallback>,
}

impl LoadedModel {
    /// A session sized to the context.
    pub fn new_session(&self) -> Result<Session> {
        Session::new(&self.backend, self.context)
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.file.tokenizer
    }

    pub fn template(&self) -> &ChatTemplate {
        &self.file.template
    }

    pub fn config(&self) -> &ModelConfig {
        &self.file.config
    }
}

/// A model file's name as requests and listings use it: the file name
/// without `.gguf`.
pub fn model_name(path: &Path) -> String {
    let file = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    file.strip_suffix(".gguf").unwrap_or(&file).to_string()
}
