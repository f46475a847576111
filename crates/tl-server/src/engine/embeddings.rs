//! Embedding requests on the engine thread. One request runs at a time,
//! beside the generating sequences: each scheduler turn runs one prompt
//! chunk of it (`prefill_chunk_tokens`), so a batch of long inputs delays
//! the streams by one chunk a turn, as a long prompt does. Its inputs run
//! one after another in a KV cache of its own, sized to its longest input
//! and freed when it ends. Requests wait in arrival order; they hold a
//! place in the engine's queue (see [`Place`]) but no generation slot.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tl_engine::embedding::MeanPool;
use tl_engine::{Backend, Session, Wanted};
use tokio::sync::oneshot;

use super::Place;
use crate::metrics::{Metrics, Outcome};
use crate::registry::ModelEntry;

/// One embedding request, its inputs tokenized and checked.
pub struct EmbedJob {
    pub model: Arc<ModelEntry>,
    /// Token ids of each input, each non-empty and within the context.
    pub inputs: Vec<Vec<u32>>,
    /// Leading values each vector keeps (checked against the model).
    pub dimensions: Option<usize>,
    /// Where the vectors go; dropping the receiver cancels the request.
    pub reply: oneshot::Sender<Result<Embedded, String>>,
    pub arrived: Instant,
    pub place: Place,
}

/// A finished embedding request.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    /// One unit vector per input, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens of all inputs.
    pub prompt_tokens: usize,
    /// Loading the model's weights, when this request had to wait for it.
    pub load_time: Duration,
    pub total_time: Duration,
}

/// The request running and its progress.
struct Running {
    job: EmbedJob,
    session: Session,
    /// The input being run, and its first token not yet run.
    input: usize,
    next: usize,
    pool: MeanPool,
    vectors: Vec<Vec<f32>>,
    load_time: Duration,
}

/// The embedding requests the engine holds.
#[derive(Default)]
pub struct Embeddings {
    waiting: VecDeque<EmbedJob>,
    running: Option<Running>,
}

impl Embeddings {
    pub fn push(&mut self, job: EmbedJob) {
        self.waiting.push_back(job);
    }

    /// Whether a request is running (and so wants a turn).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The model of the running request, which must stay loaded.
    pub fn model_in_use(&self) -> Option<&str> {
        self.running.as_ref().map(|r| r.job.model.name.as_str())
    }

    /// Whether a running or waiting request needs `model`.
    pub fn uses(&self, model: &str) -> bool {
        self.model_in_use() == Some(model) || self.waiting.iter().any(|j| j.model.name == model)
    }

    /// The model the next waiting request needs, when none runs.
    pub fn next_model(&self) -> Option<Arc<ModelEntry>> {
        match self.running {
            Some(_) => None,
            None => self.waiting.front().map(|job| job.model.clone()),
        }
    }

    /// Forgets waiting requests whose client has gone.
    pub fn drop_abandoned(&mut self, metrics: &Metrics) {
        let before = self.waiting.len();
        self.waiting.retain(|job| !job.reply.is_closed());
        for _ in 0..before - self.waiting.len() {
            metrics.queued.fetch_sub(1, Ordering::AcqRel);
            metrics.count(Outcome::Cancelled);
        }
    }

    /// Fails the waiting requests for `model`, which cannot load.
    pub fn fail_model(&mut self, model: &str, message: &str, metrics: &Metrics) {
        let (failed, waiting): (Vec<EmbedJob>, Vec<EmbedJob>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|job| job.model.name == model);
        self.waiting = waiting.into();
        for job in failed {
            metrics.queued.fetch_sub(1, Ordering::AcqRel);
            fail(job, message.to_owned(), metrics);
        }
    }

    /// Starts the next waiting request on `backend` (its model's, loaded
    /// `load_time` ago when that was after the request arrived).
    pub fn start(&mut self, backend: &Backend, load: Option<(Duration, Instant)>, m: &Metrics) {
        let Some(job) = self.waiting.pop_front() else {
            return;
        };
        m.queued.fetch_sub(1, Ordering::AcqRel);
        let longest = job.inputs.iter().map(Vec::len).max().unwrap_or(0);
        let session = match Session::new(backend, longest.max(1)) {
            Ok(session) => session,
            Err(e) => return fail(job, e.to_string(), m),
        };
        let load_time = match load {
            Some((took, finished)) if finished > job.arrived => took,
            _ => Duration::ZERO,
        };
        let tokens: usize = job.inputs.iter().map(Vec::len).sum();
        m.prompt_tokens.fetch_add(tokens as u64, Ordering::Relaxed);
        self.running = Some(Running {
            pool: MeanPool::new(backend.config().embedding_length),
            vectors: Vec::with_capacity(job.inputs.len()),
            input: 0,
            next: 0,
            session,
            load_time,
            job,
        });
    }

    /// Runs the next chunk of the running request on `backend` (its
    /// model's, or `None` when that is no longer loaded); answers it when
    /// it is done, failed or abandoned.
    pub fn step(&mut self, backend: Option<&Backend>, chunk_tokens: usize, metrics: &Metrics) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        if running.job.reply.is_closed() {
            metrics.count(Outcome::Cancelled);
            return;
        }
        let Some(backend) = backend else {
            return fail(running.job, "the model was unloaded".into(), metrics);
        };
        match running.advance(backend, chunk_tokens.max(1)) {
            Ok(false) => self.running = Some(running),
            Ok(true) => running.answer(metrics),
            Err(message) => fail(running.job, message, metrics),
        }
    }
}

impl Running {
    /// Runs one chunk of the current input; whether every input is done.
    fn advance(&mut self, backend: &Backend, chunk_tokens: usize) -> Result<bool, String> {
        let tokens = &self.job.inputs[self.input];
        let end = (self.next + chunk_tokens).min(tokens.len());
        let hidden = self
            .session
            .advance_one(backend, &tokens[self.next..end], Wanted::HiddenStates)
            .and_then(|picked| picked.into_row())
            .map_err(|e| e.to_string())?;
        self.pool.add(&hidden).map_err(|e| e.to_string())?;
        self.next = end;
        if end < tokens.len() {
            return Ok(false);
        }
        let width = backend.config().embedding_length;
        let pool = std::mem::replace(&mut self.pool, MeanPool::new(width));
        let vector = pool
            .finish(self.job.dimensions)
            .map_err(|e| e.to_string())?;
        self.vectors.push(vector);
        self.session.reset();
        self.input += 1;
        self.next = 0;
        Ok(self.input == self.job.inputs.len())
    }

    fn answer(mut self, metrics: &Metrics) {
        self.job.place.give_back();
        let embedded = Embedded {
            prompt_tokens: self.job.inputs.iter().map(Vec::len).sum(),
            vectors: self.vectors,
            load_time: self.load_time,
            total_time: self.job.arrived.elapsed(),
        };
        tracing::debug!(
            "{}: embedded {} inputs, {} tokens, in {:.1} ms",
            self.job.model.name,
            embedded.vectors.len(),
            embedded.prompt_tokens,
            embedded.total_time.as_secs_f64() * 1e3
        );
        metrics.count(Outcome::Completed);
        let _ = self.job.reply.send(Ok(embedded));
    }
}

/// Answers `job` with an error. Its place is free before the client hears,
/// so a request it sends at once is not refused for it.
fn fail(mut job: EmbedJob, message: String, metrics: &Metrics) {
    tracing::debug!("{}: embedding failed: {message}", job.model.name);
    job.place.give_back();
    metrics.count(Outcome::Failed);
    let _ = job.reply.send(Err(message));
}
