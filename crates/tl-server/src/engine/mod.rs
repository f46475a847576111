//! The engine thread: it owns the loaded models and every sequence's KV cache,
//! and runs the scheduler. HTTP tasks hand it [`Job`]s through an
//! [`EngineHandle`] and read [`Event`]s back from the job's own channel; a
//! closed channel (the client went away) cancels the job. Embedding
//! requests ([`EmbedJob`]) come the same way and get one answer.

mod embeddings;
mod pool;
mod scheduler;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tl_engine::constraint::Constraint;
use tl_engine::sampler::SamplerConfig;
use tl_engine::{GenerationConfig, StopReason};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::config::ServerConfig;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::registry::{ModelEntry, Registry};

pub use embeddings::{EmbedJob, Embedded};
pub use pool::{LoadedStatus, ModelPool};

/// What reaches the engine thread: requests, finished background loads,
/// and questions and orders about the loaded models.
pub enum Message {
    Job(Job),
    Embed(EmbedJob),
    /// Boxed: a loaded model is large and rare beside requests.
    Loaded(Box<pool::LoadResult>),
    /// `/api/ps`: the loaded models, and which models requests use.
    Status(oneshot::Sender<Status>),
    /// A request without a prompt set the model's keep-alive (`Some(0)`
    /// unloads it once idle).
    KeepAlive {
        model: String,
        keep_alive: Option<Duration>,
    },
    /// The model was deleted: unload it (once idle) and forget its caches.
    Unload(String),
}

/// What the engine holds, as `/api/ps` and `/api/delete` need it.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub loaded: Vec<LoadedStatus>,
    /// Models that running or waiting requests use.
    pub in_use: Vec<String>,
}

/// One generation request, parsed, templated and tokenized.
pub struct Job {
    pub model: Arc<ModelEntry>,
    pub prompt: Vec<u32>,
    pub sampler: SamplerConfig,
    /// The grammar or JSON schema the output must follow, compiled.
    pub constraint: Option<Constraint>,
    /// Token limit and stop strings (the server sets the prefill chunk).
    pub generation: GenerationConfig,
    /// Where the job's events go; dropping the receiver cancels the job.
    pub events: UnboundedSender<Event>,
    /// When the request arrived (time to first token counts from here).
    pub arrived: Instant,
    /// The job's place among the requests the engine holds, from
    /// [`EngineHandle::reserve`].
    pub place: Place,
    /// Whose KV caches the job may reuse (with `--prompt-cache`).
    pub scope: Scope,
    /// How long the model stays loaded once idle after this job (Ollama's
    /// `keep_alive`; zero unloads it at once); `None`: until evicted.
    pub keep_alive: Option<Duration>,
    /// Each sampled token's log-probability and those of this many
    /// alternatives ([`Event::Logprobs`]), when asked for.
    pub logprobs: Option<usize>,
}

/// Who may reuse whose KV caches: one scope per API key (the same number
/// for every request made with one key), one for a server without keys. A
/// request never reuses another scope's cache, so `cached_tokens` and
/// timing reveal nothing of another key's prompts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope(pub usize);

/// A job's place among the requests the engine holds, running or waiting;
/// given back when the job ends, or at the latest when it is dropped.
pub struct Place(Option<Arc<AtomicU64>>);

impl Place {
    /// Frees the place (once; later calls do nothing).
    pub fn give_back(&mut self) {
        if let Some(held) = self.0.take() {
            held.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// What the engine tells a request's handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Generated text that is final (valid UTF-8, no part of a stop string).
    Text(String),
    /// A sampled token's log-probability, sent before the text it adds
    /// (only for jobs that ask, see [`Job::logprobs`]).
    Logprobs(TokenLogprobs),
    /// Generation ended; the last event.
    Done(Summary),
    /// The engine could not run the request; the last event.
    Failed(String),
}

/// One sampled token's log-probability and its step's most likely tokens
/// (`log_softmax` of the step's logits, see `tl_engine::sampler`).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    pub picked: LoggedToken,
    /// Most likely first.
    pub top: Vec<LoggedToken>,
}

/// A token's bytes (a piece of a character, possibly) and log-probability.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedToken {
    pub bytes: Vec<u8>,
    pub logprob: f64,
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
    /// The sampler's seed: the request's, or the one drawn for it (given
    /// back, it reproduces the tokens).
    pub seed: u64,
}

/// Why a job was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `parallel` requests are running and `max_queue` more are waiting.
    QueueFull,
    /// The engine thread has stopped.
    Stopped,
}

/// The HTTP side's end of the engine.
#[derive(Clone)]
pub struct EngineHandle {
    jobs: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
    /// Requests the engine holds, running or waiting.
    held: Arc<AtomicU64>,
    /// How many it may hold: `parallel` running and `max_queue` waiting.
    capacity: u64,
}

impl EngineHandle {
    /// A place for a new request, unless `parallel` requests run and
    /// `max_queue` wait. Requests count from here until they end, so one that
    /// will get a free sequence as soon as the engine reads it is not counted
    /// as waiting.
    pub fn reserve(&self) -> std::result::Result<Place, Refusal> {
        let capacity = self.capacity;
        let reserved = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < capacity).then_some(held + 1)
            });
        match reserved {
            Ok(_) => Ok(Place(Some(self.held.clone()))),
            Err(_) => Err(Refusal::QueueFull),
        }
    }

    /// Queues a job (with its place from [`Self::reserve`]).
    pub fn submit(&self, job: Job) -> std::result::Result<(), Refusal> {
        self.send(Message::Job(job))
    }

    /// Queues an embedding request (with its place from [`Self::reserve`]).
    pub fn submit_embedding(&self, job: EmbedJob) -> std::result::Result<(), Refusal> {
        self.send(Message::Embed(job))
    }

    /// The loaded models and the models in use (none when the engine has
    /// stopped).
    pub async fn status(&self) -> Status {
        let (reply, answer) = oneshot::channel();
        if self.jobs.send(Message::Status(reply)).is_err() {
            return Status::default();
        }
        answer.await.unwrap_or_default()
    }

    /// Sets how long `model` stays loaded once idle (`Some(0)`: unload it).
    pub fn keep_alive(&self, model: &str, keep_alive: Option<Duration>) {
        let model = model.to_owned();
        let _ = self.jobs.send(Message::KeepAlive { model, keep_alive });
    }

    /// Unloads a deleted model once no request uses it.
    pub fn unload(&self, model: &str) {
        let _ = self.jobs.send(Message::Unload(model.to_owned()));
    }

    fn send(&self, message: Message) -> std::result::Result<(), Refusal> {
        self.metrics.queued.fetch_add(1, Ordering::AcqRel);
        self.jobs.send(message).map_err(|_| {
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
                engine_config.gpu_options.clone(),
                engine_config.model_memory_budget,
                engine_metrics.clone(),
            );
            let Some(default) = registry.default_model() else {
                let _ = ready_tx.send(Err(crate::Error::NoModel));
                return;
            };
            let default = &default;
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
            held: Arc::new(AtomicU64::new(0)),
            capacity: config.parallel.saturating_add(config.max_queue) as u64,
        }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(crate::Error::Config(
            "the engine thread stopped while loading the model".into(),
        )),
    }
}
