//! The engine thread: it owns the loaded models and every sequence's KV cache,
//! and runs the scheduler. HTTP tasks hand it [`Job`]s through an
//! [`EngineHandle`] and read [`Event`]s back from the job's own channel; a
//! closed channel (the client went away) cancels the job.

mod pool;
mod scheduler;

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tl_engine::sampler::SamplerConfig;
use tl_engine::{GenerationConfig, StopReason};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::ServerConfig;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::registry::{ModelEntry, Registry};

pub use pool::ModelPool;

/// What reaches the engine thread: requests, and finished background loads.
pub enum Message {
    Job(Job),
    /// Boxed: a loaded model is large and rare beside requests.
    Loaded(Box<pool::LoadResult>),
}

/// One generation request, parsed, templated and tokenized.
pub struct Job {
    pub model: Arc<ModelEntry>,
    pub prompt: Vec<u32>,
    pub sampler: SamplerConfig,
    /// Token limit and stop strings (the server sets the prefill chunk).
    pub generation: GenerationConfig,
    /// Where the job's events go; dropping the receiver cancels the job.
    pub events: UnboundedSender<Event>,
    /// When the request arrived (time to first token counts from here).
    pub arrived: Instant,
}

/// What the engine tells a request's handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Generated text that is final (valid UTF-8, no part of a stop string).
    Text(String),
    /// Generation ended; the last event.
    Done(Summary),
    /// The engine could not run the request; the last event.
    Failed(String),
}

/// Counts and timings of a finished generation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub reason: StopReason,
    pub prompt_tokens: usize,
    /// Prompt tokens taken from a cached prefix instead of being run.
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    /// From arrival to the first token (queueing, loading and prefill).
    pub time_to_first_token: Duration,
    /// Loading the model's weights, when this request had to.
    pub load_time: Duration,
    pub prompt_time: Duration,
    pub decode_time: Duration,
    pub total_time: Duration,
}

/// Why a job was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `max_queue` requests are already waiting.
    QueueFull,
    /// The engine thread has stopped.
    Stopped,
}

/// The HTTP side's end of the engine.
#[derive(Clone)]
pub struct EngineHandle {
    jobs: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
    max_queue: u64,
}

impl EngineHandle {
    /// Queues a job, unless the queue is full.
    pub fn submit(&self, job: Job) -> std::result::Result<(), Refusal> {
        let max = self.max_queue;
        let reserved =
            self.metrics
                .queued
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                    (queued < max).then_some(queued + 1)
                });
        if reserved.is_err() {
            return Err(Refusal::QueueFull);
        }
        self.jobs.send(Message::Job(job)).map_err(|_| {
            self.metrics.queued.fetch_sub(1, Ordering::AcqRel);
            Refusal::Stopped
        })
    }
}

/// Starts the engine thread and waits until it has loaded the default model,
/// so a bad file fails `tl serve` at once. Models and caches are made on the
/// engine thread and never leave it (GPU graphs are bound to their thread).
pub fn start(
    registry: Arc<Registry>,
    config: &ServerConfig,
    metrics: Arc<Metrics>,
) -> Result<EngineHandle> {
    let (jobs, receiver) = mpsc::channel();
    let loads = jobs.clone();
    let (ready_tx, ready_rx) = mpsc::channel();
    let engine_config = config.clone();
    let engine_metrics = metrics.clone();
    std::thread::Builder::new()
        .name("tl-engine".into())
        .spawn(move || {
            let mut pool = ModelPool::new(
                engine_config.device,
                engine_config.model_memory_budget,
                engine_metrics.clone(),
            );
            let Some(default) = registry.entries().first() else {
                let _ = ready_tx.send(Err(crate::Error::NoModel));
                return;
            };
            let model_error = |e: String| crate::Error::Model {
                path: default.path.clone(),
                message: e,
            };
            if let Err(e) = pool.load(default) {
                let _ = ready_tx.send(Err(model_error(e)));
                return;
            }
            let mut scheduler =
                scheduler::Scheduler::new(pool, &engine_config, engine_metrics, loads);
            if let Err(e) = scheduler.preallocate(default) {
                let _ = ready_tx.send(Err(model_error(e)));
                return;
            }
            let _ = ready_tx.send(Ok(()));
            scheduler.run(receiver);
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(EngineHandle {
            jobs,
            metrics,
            max_queue: config.max_queue as u64,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(crate::Error::Config(
            "the engine thread stopped while loading the model".into(),
        )),
    }
}
