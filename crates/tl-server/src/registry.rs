//! The models a server knows: each file's name, tokenizer, chat template and
//! summary, read once at start so HTTP tasks can template and tokenize without
//! the engine. Weights are loaded by the engine's model pool when needed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use tl_engine::chat_template::ChatTemplate;
use tl_engine::model::ModelConfig;
use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use crate::error::{Error, Result};

/// The context used when neither `--ctx` nor a smaller training context says otherwise.
const DEFAULT_CONTEXT: usize = 4096;

/// One servable model.
#[derive(Debug)]
pub struct ModelEntry {
    /// The name requests use: the file name without `.gguf`.
    pub name: String,
    pub path: PathBuf,
    pub tokenizer: Tokenizer,
    /// The file's chat template (ChatML when it has none).
    pub template: ChatTemplate,
    /// Context per sequence.
    pub context: usize,
    pub summary: ModelSummary,
}

/// What `/api/tags`, `/api/show` and `/v1/models` report about a model.
#[derive(Debug, Clone)]
pub struct ModelSummary {
    pub architecture: String,
    pub parameter_count: u64,
    /// The most common weight type among the block matrices (`Q4_1`).
    pub quantization: String,
    pub file_bytes: u64,
    pub modified: SystemTime,
    pub context_length: usize,
    pub embedding_length: usize,
    pub block_count: usize,
    pub head_count: usize,
    pub head_count_kv: usize,
    pub vocab_size: usize,
}

/// All models, the first being the default.
#[derive(Debug)]
pub struct Registry {
    entries: Vec<Arc<ModelEntry>>,
}

impl Registry {
    /// Reads every file's header, tokenizer and template.
    pub fn open(paths: &[PathBuf], context: Option<usize>) -> Result<Registry> {
        if paths.is_empty() {
            return Err(Error::NoModel);
        }
        let mut entries: Vec<Arc<ModelEntry>> = Vec::new();
        let mut files: Vec<FileIdentity> = Vec::new();
        for path in paths {
            let entry = read_entry(path, context)?;
            if entries.iter().any(|e| e.name == entry.name) {
                return Err(Error::DuplicateModel(entry.name));
            }
            // The same file under two names would be loaded twice.
            let file = file_identity(path);
            if let Some(i) = files.iter().position(|f| *f == file) {
                return Err(Error::SameFile {
                    first: entries[i].path.clone(),
                    second: path.clone(),
                });
            }
            files.push(file);
            entries.push(Arc::new(entry));
        }
        Ok(Registry { entries })
    }

    pub fn entries(&self) -> &[Arc<ModelEntry>] {
        &self.entries
    }

    /// The model a request names: its name, its file name, or either with
    /// Ollama's `:latest` tag.
    pub fn find(&self, requested: &str) -> Option<&Arc<ModelEntry>> {
        let name = requested.strip_suffix(":latest").unwrap_or(requested);
        let name = name.strip_suffix(".gguf").unwrap_or(name);
        self.entries.iter().find(|e| e.name == name)
    }
}

fn read_entry(path: &Path, context: Option<usize>) -> Result<ModelEntry> {
    let fail = |source: Box<dyn std::error::Error + Send + Sync>| Error::Model {
        path: path.to_path_buf(),
        message: source.to_string(),
    };
    let file = GgufFile::open(path).map_err(|e| fail(Box::new(e)))?;
    let config = ModelConfig::from_gguf(&file).map_err(|e| fail(Box::new(e)))?;
    let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| fail(Box::new(e)))?;
    let template = ChatTemplate::from_gguf(&file, &tokenizer)
        .map_err(|e| fail(Box::new(e)))?
        .unwrap_or_else(ChatTemplate::chatml);
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let summary = ModelSummary {
        architecture: config.architecture.clone(),
        parameter_count: file.tensors().iter().map(|t| t.element_count()).sum(),
        quantization: dominant_weight_type(&file),
        file_bytes: file.file_size(),
        modified,
        context_length: config.context_length,
        embedding_length: config.embedding_length,
        block_count: config.block_count,
        head_count: config.head_count,
        head_count_kv: config.head_count_kv,
        vocab_size: config.vocab_size,
    };
    Ok(ModelEntry {
        name: model_name(path),
        path: path.to_path_buf(),
        tokenizer,
        template,
        context: sequence_context(path, context, config.context_length),
        summary,
    })
}

/// What makes two paths the same file: device and inode on Unix (links of
/// either kind), the canonical path elsewhere.
#[derive(PartialEq, Eq)]
enum FileIdentity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_identity(path: &Path) -> FileIdentity {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            return FileIdentity::Inode(metadata.dev(), metadata.ino());
        }
    }
    FileIdentity::Path(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// The context per sequence: `--ctx` if given, else the training context (at
/// most [`DEFAULT_CONTEXT`]); never more than the training context, which
/// also bounds the memory a mistyped `--ctx` would ask for (the caches and
/// rotation tables grow with it).
fn sequence_context(path: &Path, requested: Option<usize>, trained: usize) -> usize {
    match requested {
        Some(context) if context > trained => {
            tracing::warn!(
                "--ctx {context} is more than {}'s training context of {trained} tokens; using {trained}",
                model_name(path)
            );
            trained
        }
        Some(context) => context,
        None => trained.min(DEFAULT_CONTEXT),
    }
}

/// The file name without its `.gguf` extension.
pub fn model_name(path: &Path) -> String {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    file_name
        .strip_suffix(".gguf")
        .map(str::to_owned)
        .unwrap_or(file_name)
}

/// The weight type holding the most parameters among the block matrices.
fn dominant_weight_type(file: &GgufFile) -> String {
    let mut counts: Vec<(&'static str, u64)> = Vec::new();
    for tensor in file.tensors().iter().filter(|t| t.name.starts_with("blk.")) {
        let name = tensor.ggml_type.name();
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += tensor.element_count(),
            None => counts.push((name, tensor.element_count())),
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, count)| *count)
        .map_or_else(|| "unknown".into(), |(name, _)| name.to_owned())
}

impl ModelSummary {
    /// The file's modification time, in seconds since the Unix epoch.
    pub fn modified_unix_seconds(&self) -> i64 {
        self.modified
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }

    /// Parameters as Ollama writes them: `135M`, `1.1B`.
    pub fn parameter_size(&self) -> String {
        let n = self.parameter_count as f64;
        if n >= 1e9 {
            format!("{:.1}B", n / 1e9)
        } else {
            format!("{:.0}M", n / 1e6)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_drop_the_extension() {
        assert_eq!(
            model_name(Path::new("/m/SmolLM2.Q4_1.gguf")),
            "SmolLM2.Q4_1"
        );
        assert_eq!(model_name(Path::new("plain")), "plain");
    }
}
