//! The server's settings, filled by the CLI (`tl serve`) or by tests.

use std::path::PathBuf;
use std::sync::Arc;

use tl_engine::{DeviceChoice, GpuOptions};

/// Everything `tl serve` is told.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// GGUF files to serve; the first is the default model (loaded at start),
    /// the others are loaded when a request names them.
    pub models: Vec<PathBuf>,
    /// Other names requests may use for a model: (name, path of one of
    /// `models`), such as the catalogue name it was given by (`gemma3`).
    pub aliases: Vec<(String, PathBuf)>,
    /// The folder the server manages: `/api/pull` fetches into it,
    /// `/api/delete` deletes files only from it, and the names made by
    /// `/api/create` and `/api/copy` are kept in its `presets.json`. `None`:
    /// none of that is kept, and no file may be deleted.
    pub models_dir: Option<PathBuf>,
    /// Where `/api/pull` gets models by name; `None`: pulling is refused.
    pub model_source: Option<Arc<dyn ModelSource>>,
    /// Web origins (`https://app.example`, or `*` for any) whose pages may
    /// call the server: answered preflight requests and CORS headers. None
    /// by default, so browsers keep other sites' pages from using it.
    pub cors_origins: Vec<String>,
    /// Address to bind (loopback unless told otherwise).
    pub host: String,
    /// Port to bind; 0 picks a free one (printed at start).
    pub port: u16,
    /// Sequences generated at once; more requests wait in the queue.
    pub parallel: usize,
    /// Requests that may wait for a free sequence before new ones get 429.
    pub max_queue: usize,
    /// Context per sequence (KV cache capacity); default: the model's training
    /// context, at most 4096.
    pub context: Option<usize>,
    /// Prompt tokens per forward pass, so a long prompt does not stall the
    /// running streams for its whole length.
    pub prefill_chunk_tokens: usize,
    /// Bytes of weights that may be loaded at once; models beyond it evict the
    /// least recently used (the default model included, when idle). `None`: no
    /// limit.
    pub model_memory_budget: Option<u64>,
    /// Reuse the KV cache of an earlier request whose tokens start the new
    /// prompt (a chat's next turn then runs only the new messages). Off by
    /// default: the reused part was computed in differently shaped passes
    /// than a fresh prompt would be, which changes the last bits of the
    /// logits and can change the tokens, so outputs would depend on what ran
    /// before.
    pub prompt_cache: bool,
    /// Requests must carry `Authorization: Bearer KEY` with one of these when
    /// any are given. Each key is its own prompt-cache scope.
    pub api_keys: Vec<String>,
    /// Seconds a request's headers, and then its body, may take to arrive.
    pub request_timeout_seconds: u64,
    /// Connections open at once; `None`: the process's open-file limit less 100.
    pub max_connections: Option<usize>,
    /// Where models run.
    pub device: DeviceChoice,
    /// How a GPU is used, when models run on one.
    pub gpu_options: GpuOptions,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            models: Vec::new(),
            aliases: Vec::new(),
            models_dir: None,
            model_source: None,
            cors_origins: Vec::new(),
            host: "127.0.0.1".into(),
            port: 8080,
            parallel: 4,
            max_queue: 64,
            context: None,
            prefill_chunk_tokens: 512,
            model_memory_budget: None,
            prompt_cache: false,
            api_keys: Vec::new(),
            request_timeout_seconds: 10,
            max_connections: None,
            device: DeviceChoice::Auto,
            gpu_options: GpuOptions::default(),
        }
    }
}

impl ServerConfig {
    /// Rejects settings the server cannot run with.
    pub fn validate(&self) -> crate::Result<()> {
        if self.models.is_empty() {
            return Err(crate::Error::NoModel);
        }
        if self.parallel == 0 {
            return Err(crate::Error::Config("--parallel must be at least 1".into()));
        }
        if self.prefill_chunk_tokens == 0 {
            return Err(crate::Error::Config(
                "the prefill chunk must be at least 1 token".into(),
            ));
        }
        if self.request_timeout_seconds == 0 {
            return Err(crate::Error::Config(
                "--request-timeout must be at least 1 second".into(),
            ));
        }
        if self.max_connections == Some(0) {
            return Err(crate::Error::Config(
                "--max-connections must be at least 1".into(),
            ));
        }
        if self.context == Some(0) {
            return Err(crate::Error::Config("--ctx must be at least 1".into()));
        }
        if let Some(bad) = self.cors_origins.iter().find(|o| !is_origin(o)) {
            return Err(crate::Error::Config(format!(
                "--cors takes an origin such as http://localhost:3000 (scheme, host, optional port, no path) or *, not '{bad}'"
            )));
        }
        self.gpu_options
            .validate()
            .map_err(|e| crate::Error::Config(e.to_string()))?;
        Ok(())
    }
}

/// Whether `origin` is `*` or how browsers write an origin:
/// `scheme://host[:port]`, nothing after.
fn is_origin(origin: &str) -> bool {
    if origin == "*" {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let scheme_ok = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric());
    let host_ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    scheme_ok && host_ok
}

/// Fetches models by name for `/api/pull`: the CLI's catalogue, which knows
/// where each model comes from and where it is kept.
pub trait ModelSource: Send + Sync {
    /// Whether `name` can be pulled; if not, an error naming what can.
    fn check(&self, name: &str) -> std::result::Result<(), String>;
    /// The file of `name`, checked in the models folder or fetched into it,
    /// telling `progress` how far it got.
    fn pull(
        &self,
        name: &str,
        progress: &mut dyn FnMut(PullProgress),
    ) -> std::result::Result<Pulled, String>;
}

impl std::fmt::Debug for dyn ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelSource")
    }
}

/// A pulled model's file.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub path: PathBuf,
    /// Its sha256, as hex.
    pub sha256: String,
}

/// One step of a pull, as Ollama reports them: a status, and for steps
/// that move bytes, how many of how many.
#[derive(Debug, Clone, PartialEq)]
pub struct PullProgress {
    pub status: String,
    pub completed: Option<u64>,
    pub total: Option<u64>,
}

impl PullProgress {
    pub fn status(status: impl Into<String>) -> Self {
        PullProgress {
            status: status.into(),
            completed: None,
            total: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_origin;

    #[test]
    fn origins_are_checked() {
        for good in [
            "*",
            "http://localhost:3000",
            "https://app.example",
            "http://[::1]:8000",
        ] {
            assert!(is_origin(good), "{good}");
        }
        for bad in [
            "",
            "localhost:3000",
            "http://a/b",
            "http://",
            "http://a b",
            "https://x/",
        ] {
            assert!(!is_origin(bad), "{bad}");
        }
    }
}
