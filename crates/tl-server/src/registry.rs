//! The models a server knows: each file's name, tokenizer, chat template and
//! summary, read once at start so HTTP tasks can template and tokenize without
//! the engine. Weights are loaded by the engine's model pool when needed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::SystemTime;

use tl_engine::constraint::{ConstraintCompiler, ConstraintVocabulary};
pub use tl_engine::loaded::model_name;
use tl_engine::{BeyondTraining, ModelFile};
use tl_gguf::GgufFile;

use crate::error::{Error, Result};
use crate::presets::{normalize, Parameters, Preset, PresetFile, MAX_PRESETS};

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
    /// The file's sha256 (hex), computed the first time it is asked for:
    /// hashing a large file takes seconds, and most servers never list it.
    digest: OnceLock<String>,
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

    /// The file's sha256, as hex (empty if the file cannot be read).
    pub fn digest(&self) -> &str {
        self.digest.get_or_init(|| {
            sha256_of(&self.path).unwrap_or_else(|e| {
                tracing::warn!("cannot hash {}: {e}", self.path.display());
                String::new()
            })
        })
    }
}

fn sha256_of(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
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

/// All models, the first being the default, and the names made for them
/// by `/api/create`, `/api/copy` and `/api/pull`. HTTP tasks read it on every
/// request and change it rarely, so it sits behind a read-write lock.
#[derive(Debug)]
pub struct Registry {
    models: RwLock<Models>,
    context: Option<usize>,
    store: Store,
}

/// Where the registry keeps what it is told: the models folder (pulled files
/// go there, and only files there may be deleted) and the presets' file.
#[derive(Debug, Clone, Default)]
pub struct Store {
    pub models_dir: Option<PathBuf>,
    pub presets: Option<PresetFile>,
}

#[derive(Debug, Default)]
struct Models {
    entries: Vec<Arc<ModelEntry>>,
    /// Names given to served files after start (`/api/pull NAME`): (name,
    /// entry name).
    aliases: Vec<(String, String)>,
    /// Every preset kept, those whose model is not served this time too (so
    /// saving does not lose them).
    presets: Vec<Arc<Preset>>,
}

/// One name a model can be asked for, as the listing routes show it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub entry: Arc<ModelEntry>,
    pub preset: Option<Arc<Preset>>,
}

/// What a change to the registry was refused for.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("{0}")]
    BadRequest(String),
    #[error("model '{0}' not found (GET /api/tags lists the models)")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Io(String),
}

/// What [`Registry::remove`] took away.
pub enum Removed {
    Preset,
    /// A served file, now deleted; the engine should unload it.
    Model(Arc<ModelEntry>),
}

impl Registry {
    /// Reads every file's header, tokenizer and template; `aliases` are
    /// other names of some of the files.
    pub fn open(
        paths: &[PathBuf],
        aliases: &[(String, PathBuf)],
        context: Option<usize>,
        store: Store,
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
        let presets = match &store.presets {
            Some(file) => file.load().map_err(Error::Config)?,
            None => Vec::new(),
        };
        let models = Models {
            entries,
            aliases: Vec::new(),
            presets: presets.into_iter().map(Arc::new).collect(),
        };
        Ok(Registry {
            models: RwLock::new(models),
            context,
            store,
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Models> {
        self.models.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Models> {
        self.models.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The served files, the default first.
    pub fn entries(&self) -> Vec<Arc<ModelEntry>> {
        self.read().entries.clone()
    }

    /// The model loaded at start and used when a request names none.
    pub fn default_model(&self) -> Option<Arc<ModelEntry>> {
        self.read().entries.first().cloned()
    }

    /// The model a request names: its name, an alias, its file name, a
    /// preset's name, or any of them with Ollama's `:latest` tag.
    pub fn find(&self, requested: &str) -> Option<Arc<ModelEntry>> {
        let models = self.read();
        let name = normalize(requested);
        if let Some(entry) = models.entry(name) {
            return Some(entry.clone());
        }
        let preset = models.presets.iter().find(|p| p.name == name)?;
        models.entry(&preset.from).cloned()
    }

    /// The preset a request names, if it names one.
    pub fn preset(&self, requested: &str) -> Option<Arc<Preset>> {
        let name = normalize(requested);
        let models = self.read();
        if models.entry(name).is_some() {
            return None;
        }
        models.presets.iter().find(|p| p.name == name).cloned()
    }

    /// Every name to list: the served files, then the presets of them.
    pub fn listed(&self) -> Vec<Listed> {
        let models = self.read();
        let files = models.entries.iter().map(|entry| Listed {
            name: entry.name.clone(),
            entry: entry.clone(),
            preset: None,
        });
        let presets = models.presets.iter().filter_map(|preset| {
            Some(Listed {
                name: preset.name.clone(),
                entry: models.entry(&preset.from)?.clone(),
                preset: Some(preset.clone()),
            })
        });
        files.chain(presets).collect()
    }

    /// `/api/create`: `preset` as asked, its `from` being a served model or
    /// another preset (whose settings it starts from). A preset of the same
    /// name is replaced.
    pub fn create(&self, mut preset: Preset) -> std::result::Result<(), ManageError> {
        preset.name = normalize(&preset.name).to_owned();
        preset.validate().map_err(ManageError::BadRequest)?;
        let mut models = self.write();
        let from = normalize(&preset.from).to_owned();
        if let Some(entry) = models.entry(&from) {
            preset.from = entry.name.clone();
        } else if let Some(base) = models.presets.iter().find(|p| p.name == from) {
            preset = inherit(base, preset);
        } else {
            return Err(ManageError::NotFound(from));
        }
        self.insert(&mut models, preset)
    }

    /// `/api/copy`: `destination` names what `source` names.
    pub fn copy(&self, source: &str, destination: &str) -> std::result::Result<(), ManageError> {
        let (source, destination) = (normalize(source), normalize(destination));
        if source == destination {
            return Err(ManageError::BadRequest(
                "the source and the destination are the same".into(),
            ));
        }
        let mut models = self.write();
        let copy = if let Some(entry) = models.entry(source) {
            Preset {
                name: destination.to_owned(),
                from: entry.name.clone(),
                system: None,
                parameters: Parameters::default(),
            }
        } else if let Some(preset) = models.presets.iter().find(|p| p.name == source) {
            Preset {
                name: destination.to_owned(),
                ..Preset::clone(preset)
            }
        } else {
            return Err(ManageError::NotFound(source.to_owned()));
        };
        copy.validate().map_err(ManageError::BadRequest)?;
        self.insert(&mut models, copy)
    }

    /// Adds or replaces a checked preset and saves the list.
    fn insert(&self, models: &mut Models, preset: Preset) -> std::result::Result<(), ManageError> {
        if models.entry(&preset.name).is_some() {
            return Err(ManageError::Conflict(format!(
                "'{}' names a served model file; choose another name",
                preset.name
            )));
        }
        let mut presets = models.presets.clone();
        presets.retain(|p| p.name != preset.name);
        if presets.len() >= MAX_PRESETS {
            return Err(ManageError::Conflict(format!(
                "at most {MAX_PRESETS} models can be created; delete some first"
            )));
        }
        presets.push(Arc::new(preset));
        self.save(&presets)?;
        models.presets = presets;
        Ok(())
    }

    fn save(&self, presets: &[Arc<Preset>]) -> std::result::Result<(), ManageError> {
        let Some(file) = &self.store.presets else {
            return Ok(());
        };
        let list: Vec<Preset> = presets.iter().map(|p| Preset::clone(p)).collect();
        file.save(&list).map_err(ManageError::Io)
    }

    /// `/api/delete`: forgets a preset, or deletes a served file that lives
    /// in the models folder (not the default model, which the server
    /// always keeps ready), and the presets made from it. `in_use` says
    /// whether requests are running on a model.
    pub fn remove(
        &self,
        requested: &str,
        in_use: &dyn Fn(&str) -> bool,
    ) -> std::result::Result<Removed, ManageError> {
        let name = normalize(requested);
        let mut models = self.write();
        let Some(entry) = models.entry(name).cloned() else {
            let before = models.presets.len();
            let mut presets = models.presets.clone();
            presets.retain(|p| p.name != name);
            if presets.len() == before {
                return Err(ManageError::NotFound(name.to_owned()));
            }
            self.save(&presets)?;
            models.presets = presets;
            return Ok(Removed::Preset);
        };
        self.check_deletable(&models, &entry, in_use)?;
        std::fs::remove_file(&entry.path).map_err(|e| {
            ManageError::Io(format!("cannot delete {}: {e}", file_name(&entry.path)))
        })?;
        tracing::info!("deleted {}", entry.path.display());
        models.entries.retain(|e| e.name != entry.name);
        models.aliases.retain(|(_, of)| *of != entry.name);
        let mut presets = models.presets.clone();
        presets.retain(|p| p.from != entry.name);
        if presets.len() != models.presets.len() {
            self.save(&presets)?;
            models.presets = presets;
        }
        Ok(Removed::Model(entry))
    }

    fn check_deletable(
        &self,
        models: &Models,
        entry: &ModelEntry,
        in_use: &dyn Fn(&str) -> bool,
    ) -> std::result::Result<(), ManageError> {
        let is_default = models
            .entries
            .first()
            .is_some_and(|first| first.name == entry.name);
        if is_default {
            return Err(ManageError::Conflict(format!(
                "'{}' is the server's default model and cannot be deleted while it serves",
                entry.name
            )));
        }
        if in_use(&entry.name) {
            return Err(ManageError::Conflict(format!(
                "'{}' is in use by running requests; try again when they end",
                entry.name
            )));
        }
        let managed = self
            .store
            .models_dir
            .as_deref()
            .is_some_and(|dir| is_inside(dir, &entry.path));
        if !managed {
            return Err(ManageError::Forbidden(format!(
                "'{}' is not in the models folder; the server deletes only files it manages",
                entry.name
            )));
        }
        Ok(())
    }

    /// `/api/pull`: serves the file at `path` (just fetched or found in the
    /// models folder) under `alias` as well as its own name; a file served
    /// already only gains the alias. `digest` is its known sha256.
    pub fn add_pulled(
        &self,
        path: &Path,
        alias: &str,
        digest: &str,
    ) -> std::result::Result<Arc<ModelEntry>, ManageError> {
        let identity = file_identity(path);
        let served = self
            .read()
            .entries
            .iter()
            .find(|e| file_identity(&e.path) == identity)
            .cloned();
        let entry = match served {
            Some(entry) => entry,
            None => {
                // Read outside the lock: the tokenizer takes a while.
                let entry =
                    read_entry(path, self.context).map_err(|e| ManageError::Io(e.to_string()))?;
                let _ = entry.digest.set(digest.to_owned());
                let entry = Arc::new(entry);
                let mut models = self.write();
                if let Some(same) = models.entry(&entry.name) {
                    return Ok(same.clone());
                }
                models.entries.push(entry.clone());
                entry
            }
        };
        let mut models = self.write();
        let alias = normalize(alias);
        if alias != entry.name && models.entry(alias).is_none() {
            models.aliases.push((alias.to_owned(), entry.name.clone()));
        }
        Ok(entry)
    }
}

impl Models {
    /// The served file named `name` (its name, an alias or its file name).
    fn entry(&self, name: &str) -> Option<&Arc<ModelEntry>> {
        let name = name.strip_suffix(".gguf").unwrap_or(name);
        let aliased = self
            .aliases
            .iter()
            .find(|(alias, _)| alias == name)
            .map(|(_, of)| of.as_str());
        let name = aliased.unwrap_or(name);
        self.entries
            .iter()
            .find(|e| e.name == name || e.aliases.iter().any(|a| a == name))
    }
}

/// A preset made from another: the new one's settings over the old one's.
fn inherit(base: &Preset, new: Preset) -> Preset {
    let (b, n) = (&base.parameters, new.parameters);
    Preset {
        name: new.name,
        from: base.from.clone(),
        system: new.system.or_else(|| base.system.clone()),
        parameters: Parameters {
            temperature: n.temperature.or(b.temperature),
            top_k: n.top_k.or(b.top_k),
            top_p: n.top_p.or(b.top_p),
            min_p: n.min_p.or(b.min_p),
            repeat_penalty: n.repeat_penalty.or(b.repeat_penalty),
            repeat_last_n: n.repeat_last_n.or(b.repeat_last_n),
            presence_penalty: n.presence_penalty.or(b.presence_penalty),
            frequency_penalty: n.frequency_penalty.or(b.frequency_penalty),
            seed: n.seed.or(b.seed),
            num_ctx: n.num_ctx.or(b.num_ctx),
            num_predict: n.num_predict.or(b.num_predict),
            stop: n.stop.or_else(|| b.stop.clone()),
        },
    }
}

/// Whether `path` is a file inside `dir` (both resolved, so `..` and links
/// cannot lead out).
fn is_inside(dir: &Path, path: &Path) -> bool {
    match (std::fs::canonicalize(dir), std::fs::canonicalize(path)) {
        (Ok(dir), Ok(path)) => path.starts_with(dir),
        _ => false,
    }
}

/// The last part of `path` (a file's name).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
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
        digest: OnceLock::new(),
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
