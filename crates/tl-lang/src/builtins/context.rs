//! What builtins may touch besides their arguments: where `print` writes, where
//! `input` reads, the folder relative paths are resolved against, and the models
//! already loaded (each file is loaded once per run).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tl_engine::{DeviceChoice, GpuOptions};

use crate::handles::ModelHandle;

/// The runtime services of one program run.
pub struct Context {
    /// Where `print` writes.
    pub out: Box<dyn Write>,
    /// Where `input` reads.
    pub input: Box<dyn BufRead>,
    /// Relative paths in `load_model` and `read_file` are resolved against this.
    pub base_dir: PathBuf,
    /// Models loaded so far, by canonical path.
    pub models: HashMap<PathBuf, Rc<ModelHandle>>,
    /// The program's command-line arguments (`args()`).
    pub program_args: Vec<String>,
    /// Finds (fetching if needed) the default model, for `default_model()`.
    pub default_model: Option<DefaultModel>,
    /// Set (by a Ctrl-C handler, say) to stop the running program at its next
    /// loop iteration or call.
    pub interrupt: Arc<AtomicBool>,
    /// Where `load_model` puts a model's weights (`auto`: a GPU when one is
    /// usable, else the CPU).
    pub device: DeviceChoice,
    /// The settings a GPU is opened with.
    pub gpu_options: GpuOptions,
    /// The most memory the process may hold while the program runs (`tl run
    /// --max-memory`); none: only what the machine has.
    pub memory_limit: Option<u64>,
}

/// How the runtime finds the default model's file.
pub type DefaultModel = Box<dyn Fn() -> Result<PathBuf, String>>;

impl Context {
    /// A context printing to stdout and reading stdin.
    pub fn stdio(base_dir: PathBuf, program_args: Vec<String>) -> Self {
        Context {
            out: Box::new(std::io::stdout()),
            input: Box::new(std::io::BufReader::new(std::io::stdin())),
            base_dir,
            models: HashMap::new(),
            program_args,
            default_model: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            device: DeviceChoice::Auto,
            gpu_options: GpuOptions::default(),
            memory_limit: None,
        }
    }

    /// A context whose output is captured in memory (tests, the docs checker).
    pub fn captured(base_dir: PathBuf, out: Box<dyn Write>) -> Self {
        Context {
            out,
            input: Box::new(std::io::Cursor::new(Vec::new())),
            base_dir,
            models: HashMap::new(),
            program_args: Vec::new(),
            default_model: None,
            interrupt: Arc::new(AtomicBool::new(false)),
            device: DeviceChoice::Auto,
            gpu_options: GpuOptions::default(),
            memory_limit: None,
        }
    }

    /// Errors unless `bytes` more for `what` fit: in the memory budget, given
    /// what the process holds now, and in what can be allocated (see
    /// [`tl_engine::memory::check_allocation`]).
    pub fn check_memory(&self, what: &str, bytes: u64) -> crate::error::Result<()> {
        self.check_budget(bytes)?;
        tl_engine::memory::check_allocation(what, bytes)
            .map_err(|e| crate::error::LangError::user(e.to_string()))
    }

    /// Errors when the process holds, or with `more` bytes would hold, more
    /// than the memory budget.
    pub fn check_budget(&self, more: u64) -> crate::error::Result<()> {
        let Some(limit) = self.memory_limit else {
            return Ok(());
        };
        let Some(held) = tl_engine::memory::resident_bytes() else {
            return Ok(());
        };
        if held.saturating_add(more) <= limit {
            return Ok(());
        }
        let format = tl_engine::memory::format_bytes;
        let asked = if more > 0 {
            format!(" and asks for {} more", format(more))
        } else {
            String::new()
        };
        Err(crate::error::LangError::user(format!(
            "the program holds {}{asked}, over its memory budget of {}",
            format(held),
            format(limit)
        ))
        .with_hint("raise it with `--max-memory`, or keep fewer or smaller tensors alive"))
    }

    /// A path as the program wrote it, resolved against the script's folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }
}
