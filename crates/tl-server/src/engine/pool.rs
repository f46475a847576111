//! The models whose weights are loaded, one copy each, under a byte budget:
//! a model a request needs is loaded on demand, evicting the least recently
//! used models that no running sequence uses until it fits.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tl_engine::{Backend, DeviceChoice};
use tl_gguf::GgufFile;

use crate::metrics::Metrics;
use crate::registry::ModelEntry;

struct LoadedModel {
    name: String,
    backend: Backend,
    bytes: u64,
    last_used: u64,
}

/// Loaded weights by model name.
pub struct ModelPool {
    device: DeviceChoice,
    budget: Option<u64>,
    loaded: Vec<LoadedModel>,
    /// Ticks on every use, ordering the models for eviction.
    clock: u64,
    metrics: Arc<Metrics>,
}

/// What making a model ready did.
pub struct Ready {
    /// Time spent loading (zero when it was loaded already).
    pub load_time: Duration,
    /// Models evicted to make room; their idle caches must go too.
    pub evicted: Vec<String>,
}

impl ModelPool {
    pub fn new(device: DeviceChoice, budget: Option<u64>, metrics: Arc<Metrics>) -> Self {
        ModelPool {
            device,
            budget,
            loaded: Vec::new(),
            clock: 0,
            metrics,
        }
    }

    /// The loaded weights of `name`.
    pub fn backend(&self, name: &str) -> Option<&Backend> {
        self.loaded
            .iter()
            .find(|m| m.name == name)
            .map(|m| &m.backend)
    }

    /// Loads `entry` with no eviction (at start).
    pub fn load(&mut self, entry: &ModelEntry) -> Result<Duration, String> {
        self.ensure(entry, &|_| true).map(|ready| ready.load_time)
    }

    /// Makes `entry` loaded and most recently used; `busy(name)` says which
    /// models running sequences hold (never evicted).
    pub fn ensure(
        &mut self,
        entry: &ModelEntry,
        busy: &dyn Fn(&str) -> bool,
    ) -> Result<Ready, String> {
        self.clock += 1;
        if let Some(model) = self.loaded.iter_mut().find(|m| m.name == entry.name) {
            model.last_used = self.clock;
            return Ok(Ready {
                load_time: Duration::ZERO,
                evicted: Vec::new(),
            });
        }
        // The file's size is a lower bound of the loaded bytes (the CPU
        // repacks some matrices); the real size is checked once loaded.
        let evicted = self.make_room(&entry.name, entry.summary.file_bytes, busy)?;
        let started = Instant::now();
        let backend = load_backend(entry, self.device)?;
        let bytes = backend.weight_bytes() as u64;
        self.loaded.push(LoadedModel {
            name: entry.name.clone(),
            backend,
            bytes,
            last_used: self.clock,
        });
        let more = self.make_room(&entry.name, 0, &|name| name == entry.name || busy(name));
        let evicted = match more {
            Ok(more) => evicted.into_iter().chain(more).collect(),
            Err(message) => {
                self.loaded.retain(|m| m.name != entry.name);
                self.update_metrics();
                return Err(message);
            }
        };
        self.update_metrics();
        Ok(Ready {
            load_time: started.elapsed(),
            evicted,
        })
    }

    /// Evicts idle models, least recently used first, until `needed` more
    /// bytes fit in the budget.
    fn make_room(
        &mut self,
        name: &str,
        needed: u64,
        busy: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<String>, String> {
        let Some(budget) = self.budget else {
            return Ok(Vec::new());
        };
        let mut evicted = Vec::new();
        while self.loaded_bytes() + needed > budget {
            let victim = self
                .loaded
                .iter()
                .enumerate()
                .filter(|(_, m)| !busy(&m.name))
                .min_by_key(|(_, m)| m.last_used)
                .map(|(i, _)| i);
            let Some(victim) = victim else {
                return Err(format!(
                    "model '{name}' ({:.1} MB) does not fit in the model memory budget of {:.1} MB beside the models in use; try again when they are idle",
                    needed as f64 / 1e6,
                    budget as f64 / 1e6
                ));
            };
            evicted.push(self.loaded.remove(victim).name);
        }
        self.update_metrics();
        Ok(evicted)
    }

    fn loaded_bytes(&self) -> u64 {
        self.loaded.iter().map(|m| m.bytes).sum()
    }

    fn update_metrics(&self) {
        let m = &self.metrics;
        m.models_loaded
            .store(self.loaded.len() as u64, Ordering::Relaxed);
        m.model_bytes_loaded
            .store(self.loaded_bytes(), Ordering::Relaxed);
    }
}

fn load_backend(entry: &ModelEntry, device: DeviceChoice) -> Result<Backend, String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot load {}: {e}", entry.path.display());
    let file = GgufFile::open(&entry.path).map_err(|e| fail(&e))?;
    let loaded = Backend::load(&file, entry.context, device).map_err(|e| fail(&e))?;
    if let Some(fallback) = loaded.fallback.filter(|f| !f.no_gpu) {
        eprintln!(
            "warning: {} runs on the CPU: {}",
            entry.name, fallback.reason
        );
    }
    Ok(loaded.backend)
}
