//! The models a server knows: each file's name, tokenizer, chat template and
//! summary, read once at start so HTTP tasks can template and tokenize without
//! the engine. Weights are loaded by the engine's model pool when needed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use tl_engine::constraint::{ConstraintCompiler, ConstraintVocabulary};
pub use tl_engine::loaded::model_name;
use tl_engine::{BeyondTraining, ModelFile};
use tl_gguf::GgufFile;

use crate::error::{Error, Result};

/// The context used when neither `--ctx` nor a smaller training context says otherwise.
const DEFAULT_CONTEXT: usize = 4096;

/// One servable model.
pub struct ModelEntry {
    /// The name requests use: the file name without `.gguf`.
    pub name: String,
    /// Other names requests may use (the catalogue name it was served by).
    pub aliases: Vec<String>,
    pub path: PathBuf,
    /// The file's description: tokenizer, chat template (ChatML when it has
    /// none), configuration; the pool loads its weights from it. The file
    /// stays mapped while the server runs: address space, and page cache for
    /// what a load read; a file changed in place under a running server is
    /// not supported.
    pub file: ModelFile,
    /// Context per sequence.
    pub context: usize,
    pub summary: ModelSummary,
    /// Bytes of the longest token's text: no token covers more of a prompt,
    /// so a prompt of more than `context ×` this many bytes cannot fit, and
    /// is refused before it is tokenized.
    pub longest_token_bytes: usize,
    /// Compiles the requests' grammars and schemas; built by the first
    /// request that has one (tens of milliseconds for a 50k vocabulary).
    constraints: OnceLock<std::result::Result<ConstraintCompiler, String>>,
}

impl ModelEntry {
    /// The model's grammar compiler, built on first use; an error says why
    /// this model cannot take grammars (it has no end-of-sequence token).
    pub fn constraint_compiler(&self) -> std::result::Result<&ConstraintCompiler, String> {
        self.constraints
            .get_or_init(|| {
                let vocabulary = ConstraintVocabulary::from_tokenizer(&self.file.tokenizer);
                ConstraintCompiler::new(&vocabulary).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl std::fmt::Debug for ModelEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelEntry")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
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
    /// Reads every file's header, tokenizer and template; `aliases` are
    /// other names of some of the files.
    pub fn open(
        paths: &[PathBuf],
        aliases: &[(String, PathBuf)],
        context: Option<usize>,
    ) -> Result<Registry> {
        if paths.is_empty() {
            return Err(Error::NoModel);
        }
        let mut entries: Vec<Arc<ModelEntry>> = Vec::new();
        let mut files: Vec<FileIdentity> = Vec::new();
        for path in paths {
            let mut entry = read_entry(path, context)?;
            entry.aliases = aliases
                .iter()
                .filter(|(alias, of)| of == path && *alias != entry.name)
                .map(|(alias, _)| alias.clone())
                .collect();
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

    /// The model a request names: its name, an alias, its file name, or
    /// any of them with Ollama's `:latest` tag.
    pub fn find(&self, requested: &str) -> Option<&Arc<ModelEntry>> {
        let name = requested.strip_suffix(":latest").unwrap_or(requested);
        let name = name.strip_suffix(".gguf").unwrap_or(name);
        self.entries
            .iter()
            .find(|e| e.name == name || e.aliases.iter().any(|a| a == name))
    }
}

fn read_entry(path: &Path, context: Option<usize>) -> Result<ModelEntry> {
    let fail = |source: Box<dyn std::error::Error + Send + Sync>| Error::Model {
        path: path.to_path_buf(),
        message: source.to_string(),
    };
    let model = ModelFile::open(path).map_err(|e| fail(Box::new(e)))?;
    let (file, config) = (&model.gguf, &model.config);
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let summary = ModelSummary {
        architecture: config.architecture.clone(),
        parameter_count: file.tensors().iter().map(|t| t.element_count()).sum(),
        quantization: dominant_weight_type(file),
        file_bytes: file.file_size(),
        modified,
        context_length: config.context_length,
        embedding_length: config.embedding_length,
        block_count: config.block_count,
        head_count: config.head_count,
        head_count_kv: config.head_count_kv,
        vocab_size: config.vocab_size,
    };
    let tokenizer = &model.tokenizer;
    let longest_token_bytes = (0..tokenizer.vocab_size() as u32)
        .filter_map(|id| tokenizer.token_text(id).map(str::len))
        .max()
        .unwrap_or(1)
        .max(1);
    let (context, cut) = model.context_for(context, DEFAULT_CONTEXT, BeyondTraining::Cut);
    if let Some(warning) = cut {
        tracing::warn!("{warning}");
    }
    Ok(ModelEntry {
        name: model_name(path),
        aliases: Vec::new(),
        path: path.to_path_buf(),
        file: model,
        context,
        summary,
        longest_token_bytes,
        constraints: OnceLock::new(),
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
