//! The models whose weights are loaded, one copy each, under a byte budget:
//! a model a request needs is loaded on demand, evicting the least recently
//! used models that no running sequence uses until it fits.
//!
//! Loading happens on a thread of its own (reading and uploading gigabytes
//! takes seconds), so the engine keeps generating for the models it has;
//! one model loads at a time, which keeps the budget arithmetic simple.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tl_engine::{Backend, DeviceChoice, GpuOptions};

use crate::metrics::Metrics;
use crate::registry::ModelEntry;

struct LoadedModel {
    name: String,
    backend: Backend,
    bytes: u64,
    last_used: u64,
    load_time: Duration,
    loaded_at: Instant,
    /// When it is unloaded if idle (the last request's `keep_alive`);
    /// `None`: only when evicted for room.
    expires: Option<Expiry>,
}

#[derive(Debug, Clone, Copy)]
struct Expiry {
    at: Instant,
    /// The same moment on the wall clock, for `/api/ps`.
    wall: SystemTime,
}

/// A loaded model, as `/api/ps` shows it.
#[derive(Debug, Clone)]
pub struct LoadedStatus {
    pub name: String,
    /// Bytes of weights.
    pub bytes: u64,
    /// Bytes of them in GPU memory.
    pub device_bytes: u64,
    /// When it will be unloaded if idle; `None`: not on a timer.
    pub expires_at: Option<SystemTime>,
}

/// Loaded weights by model name.
pub struct ModelPool {
    device: DeviceChoice,
    gpu_options: Arc<GpuOptions>,
    budget: Option<u64>,
    loaded: Vec<LoadedModel>,
    /// The model being loaded in the background, if any.
    loading: Option<String>,
    /// Loaded sizes of models that were loaded and then found no room,
    /// so the next attempt waits for that much.
    known_bytes: HashMap<String, u64>,
    /// Ticks on every use, ordering the models for eviction.
    clock: u64,
    metrics: Arc<Metrics>,
}

/// Whether a model has room in the budget.
#[derive(Debug, PartialEq, Eq)]
pub enum Room {
    /// It has, after evicting these idle models.
    Made(Vec<String>),
    /// Not while models that running sequences use stay loaded: wait until
    /// they are idle.
    Busy,
}

/// A finished background load, sent back to the engine thread.
pub struct LoadResult {
    pub name: String,
    pub result: Result<(Backend, Duration), String>,
}

impl ModelPool {
    pub fn new(
        device: DeviceChoice,
        gpu_options: GpuOptions,
        budget: Option<u64>,
        metrics: Arc<Metrics>,
    ) -> Self {
        ModelPool {
            device,
            gpu_options: Arc::new(gpu_options),
            budget,
            loaded: Vec::new(),
            loading: None,
            known_bytes: HashMap::new(),
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

    /// How long `name` took to load and when it finished, when it is loaded.
    pub fn load_time(&self, name: &str) -> Option<(Duration, Instant)> {
        self.loaded
            .iter()
            .find(|m| m.name == name)
            .map(|m| (m.load_time, m.loaded_at))
    }

    /// Marks `name` most recently used; whether it is loaded.
    pub fn touch(&mut self, name: &str) -> bool {
        self.clock += 1;
        let clock = self.clock;
        match self.loaded.iter_mut().find(|m| m.name == name) {
            Some(model) => {
                model.last_used = clock;
                true
            }
            None => false,
        }
    }

    /// Whether a background load is under way.
    pub fn is_loading(&self) -> bool {
        self.loading.is_some()
    }

    /// Loads `entry` on this thread (the default model, at start).
    pub fn load(&mut self, entry: &ModelEntry) -> Result<(), String> {
        let loaded = load_backend(entry, self.device, &self.gpu_options)?;
        match self.finish_load(&entry.name, Ok(loaded), &|_| true)? {
            Room::Made(_) => Ok(()),
            Room::Busy => Err(format!(
                "model '{}' does not fit in the model memory budget",
                entry.name
            )),
        }
    }

    /// Starts loading `entry` on a new thread, after evicting idle models to
    /// make room for it (`busy(name)`: models running sequences hold, never
    /// evicted); `done` gets the result. Returns the evicted models, or
    /// [`Room::Busy`] (nothing started) while the models in use leave no room.
    pub fn start_load(
        &mut self,
        entry: &Arc<ModelEntry>,
        busy: &dyn Fn(&str) -> bool,
        done: impl FnOnce(LoadResult) + Send + 'static,
    ) -> Result<Room, String> {
        // The file's size is a lower bound of the loaded bytes (the CPU
        // repacks some matrices), unless an earlier load measured them; the
        // real size is checked once loaded.
        let known = self.known_bytes.get(&entry.name);
        let needed = known.map_or(entry.summary.file_bytes, |&bytes| bytes);
        let room = self.make_room(&entry.name, needed, busy)?;
        if room == Room::Busy {
            return Ok(room);
        }
        self.loading = Some(entry.name.clone());
        let (entry, device) = (entry.clone(), self.device);
        let gpu_options = self.gpu_options.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tl-load-{}", entry.name))
            .spawn(move || {
                let result = load_backend(&entry, device, &gpu_options);
                done(LoadResult {
                    name: entry.name.clone(),
                    result,
                });
            });
        if let Err(e) = spawned {
            self.loading = None;
            return Err(format!("cannot start a thread to load the model: {e}"));
        }
        Ok(room)
    }

    /// Takes a finished load in: the model joins the pool, and idle models
    /// are evicted if its real size needs the room. Returns the evicted
    /// models; [`Room::Busy`] if the models in use leave no room for its real
    /// size (it is dropped, and a later load waits for that size); or why the
    /// model cannot be kept at all.
    pub fn finish_load(
        &mut self,
        name: &str,
        result: Result<(Backend, Duration), String>,
        busy: &dyn Fn(&str) -> bool,
    ) -> Result<Room, String> {
        self.loading = None;
        let (backend, load_time) = result?;
        self.clock += 1;
        let bytes = backend.weight_bytes() as u64;
        self.loaded.push(LoadedModel {
            name: name.to_owned(),
            bytes,
            backend,
            last_used: self.clock,
            load_time,
            loaded_at: Instant::now(),
            expires: None,
        });
        let room = self.make_room(name, 0, &|other| other == name || busy(other));
        if !matches!(room, Ok(Room::Made(_))) {
            self.loaded.retain(|m| m.name != name);
            self.known_bytes.insert(name.to_owned(), bytes);
        }
        self.update_metrics();
        room
    }

    /// Evicts idle models, least recently used first, until `needed` more
    /// bytes fit in the budget: the evicted models, or [`Room::Busy`] (none
    /// evicted) if only models in use stand in the way. An error if the
    /// model is larger than the whole budget.
    fn make_room(
        &mut self,
        name: &str,
        needed: u64,
        busy: &dyn Fn(&str) -> bool,
    ) -> Result<Room, String> {
        let Some(budget) = self.budget else {
            return Ok(Room::Made(Vec::new()));
        };
        let size = needed.max(self.bytes_of(name));
        if size > budget {
            return Err(format!(
                "model '{name}' ({:.1} MB) is larger than the model memory budget of {:.1} MB (--model-memory-mb)",
                size as f64 / 1e6,
                budget as f64 / 1e6
            ));
        }
        // The idle models, least recently used first, until enough bytes
        // would be free; nothing is evicted unless that is enough.
        let mut idle: Vec<&LoadedModel> = self.loaded.iter().filter(|m| !busy(&m.name)).collect();
        idle.sort_by_key(|m| m.last_used);
        let mut loaded = self.loaded_bytes();
        let mut victims = Vec::new();
        for model in idle {
            if loaded + needed <= budget {
                break;
            }
            loaded -= model.bytes;
            victims.push(model.name.clone());
        }
        if loaded + needed > budget {
            return Ok(Room::Busy);
        }
        self.loaded.retain(|m| !victims.contains(&m.name));
        self.update_metrics();
        Ok(Room::Made(victims))
    }

    /// Sets how long `name` stays loaded once idle, from now (`None`: until
    /// evicted for room).
    pub fn set_keep_alive(&mut self, name: &str, keep_alive: Option<Duration>) {
        if let Some(model) = self.loaded.iter_mut().find(|m| m.name == name) {
            model.expires = keep_alive.map(|d| Expiry {
                at: Instant::now() + d,
                wall: SystemTime::now() + d,
            });
        }
    }

    /// The models whose keep-alive has run out by `now`.
    pub fn expired(&self, now: Instant) -> Vec<String> {
        self.loaded
            .iter()
            .filter(|m| m.expires.is_some_and(|e| e.at <= now))
            .map(|m| m.name.clone())
            .collect()
    }

    /// The soonest moment a keep-alive runs out.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.loaded
            .iter()
            .filter_map(|m| m.expires)
            .map(|e| e.at)
            .min()
    }

    /// Drops `name`'s weights; whether it was loaded.
    pub fn unload(&mut self, name: &str) -> bool {
        let before = self.loaded.len();
        self.loaded.retain(|m| m.name != name);
        self.known_bytes.remove(name);
        self.update_metrics();
        before != self.loaded.len()
    }

    /// Every loaded model, most recently used first.
    pub fn status(&self) -> Vec<LoadedStatus> {
        let mut loaded: Vec<&LoadedModel> = self.loaded.iter().collect();
        loaded.sort_by_key(|m| std::cmp::Reverse(m.last_used));
        loaded
            .into_iter()
            .map(|m| LoadedStatus {
                name: m.name.clone(),
                bytes: m.bytes,
                device_bytes: if m.backend.is_cpu() { 0 } else { m.bytes },
                expires_at: m.expires.map(|e| e.wall),
            })
            .collect()
    }

    fn bytes_of(&self, name: &str) -> u64 {
        self.loaded
            .iter()
            .find(|m| m.name == name)
            .map_or(0, |m| m.bytes)
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

fn load_backend(
    entry: &ModelEntry,
    device: DeviceChoice,
    gpu_options: &GpuOptions,
) -> Result<(Backend, Duration), String> {
    let started = Instant::now();
    let fail = |e: &dyn std::fmt::Display| format!("cannot load {}: {e}", entry.path.display());
    let loaded = entry
        .file
        .load_backend(entry.context, device, gpu_options)
        .map_err(|e| fail(&e))?;
    if let Some(fallback) = loaded.fallback.filter(|f| !f.no_gpu) {
        tracing::warn!("{} runs on the CPU: {}", entry.name, fallback.reason);
    }
    Ok((loaded.backend, started.elapsed()))
}
