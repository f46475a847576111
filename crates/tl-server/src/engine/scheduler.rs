//! The scheduler: continuous batching over sequences that each own a KV cache.
//!
//! Every turn of the loop it (1) takes the requests that arrived, (2) drops
//! waiting ones whose client left, (3) admits waiting requests while fewer than
//! `parallel` sequences run, and (4) advances every running sequence by one
//! step: one prompt chunk of at most `prefill_chunk_tokens` for a sequence
//! still in its prompt, one token for the others. New requests therefore join
//! between decode steps, and a long prompt delays the running streams by one
//! chunk per turn, not by its whole length.
//!
//! Each sequence has its own sampler (seeded from its request), so its tokens do
//! not depend on what else runs. Finished sequences' caches are kept idle (up to
//! `parallel` caches in all, allocated at start) and, with `prompt_cache`, their
//! tokens too, for prefix reuse (a chat's next turn skips the shared history);
//! a cancelled or failed sequence's cache is emptied at once.
//!
//! The decoding sequences of a model step together in one batched pass (each
//! weight read once per step for all of them; each sequence gets exactly what
//! a lone step would give it); a sequence decoding alone takes the lone path.
//!
//! Embedding requests run one at a time beside the sequences, a prompt chunk
//! a turn (see [`super::embeddings`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tl_engine::generate::{step_batch_sampled, step_sampled, TextOutput};
use tl_engine::sampler::{Sampler, TokenLogprob};
use tl_engine::{Backend, Session, StopReason};

use super::embeddings::Embeddings;
use super::pool::{LoadResult, ModelPool, Room};
use super::{Event, Job, LoggedToken, Message, Scope, Status, Summary, TokenLogprobs};
use crate::config::ServerConfig;
use crate::metrics::{Metrics, Outcome};
use crate::registry::ModelEntry;

/// A request being generated.
struct Sequence {
    job: Job,
    session: Session,
    sampler: Sampler,
    output: TextOutput,
    phase: Phase,
    cached_tokens: usize,
    load_time: Duration,
    admitted: Instant,
    prompt_done: Option<Instant>,
    last_token: Option<Instant>,
}

enum Phase {
    /// Running the prompt; `next` is the first prompt token not yet run.
    Prompt { next: usize },
    /// `token` was sampled and emitted but not yet fed to the model.
    Decode { token: u32 },
}

/// A cache kept after its request ended, for a later prompt with the same prefix.
struct IdleCache {
    model: String,
    /// The scope of the job that left it.
    scope: Scope,
    session: Session,
}

pub struct Scheduler {
    pool: ModelPool,
    waiting: VecDeque<Job>,
    running: Vec<Sequence>,
    idle: Vec<IdleCache>,
    embeddings: Embeddings,
    parallel: usize,
    prefill_chunk_tokens: usize,
    prompt_cache: bool,
    metrics: Arc<Metrics>,
    /// Where background model loads report back.
    loads: mpsc::Sender<Message>,
}

/// What became of a model load that `admit` asked for.
enum LoadStart {
    Started,
    /// Not started: the models in use leave no room until they go idle.
    MustWait,
    /// It cannot load; the requests waiting for it were failed.
    Failed,
}

/// How a step left a sequence.
enum Step {
    Continue,
    Finished(StopReason),
    Cancelled,
    Failed(String),
}

impl Scheduler {
    pub fn new(
        pool: ModelPool,
        config: &ServerConfig,
        metrics: Arc<Metrics>,
        loads: mpsc::Sender<Message>,
    ) -> Self {
        Scheduler {
            pool,
            waiting: VecDeque::new(),
            running: Vec::new(),
            idle: Vec::new(),
            embeddings: Embeddings::default(),
            parallel: config.parallel,
            prefill_chunk_tokens: config.prefill_chunk_tokens,
            prompt_cache: config.prompt_cache,
            metrics,
            loads,
        }
    }

    /// Allocates `parallel` caches for `model` up front, so the first requests
    /// do not pay for allocating and touching them (94 MB each for the
    /// default model at 4096 tokens).
    pub fn preallocate(&mut self, model: &ModelEntry) -> Result<(), String> {
        let Some(backend) = self.pool.backend(&model.name) else {
            return Err(format!("model '{}' is not loaded", model.name));
        };
        while self.idle.len() < self.parallel {
            let session = Session::new(backend, model.context).map_err(|e| {
                format!(
                    "cannot allocate {} KV caches of {} tokens: {e} (lower --parallel or --ctx)",
                    self.parallel, model.context
                )
            })?;
            self.idle.push(IdleCache {
                model: model.name.clone(),
                scope: Scope::default(),
                session,
            });
        }
        self.update_metrics();
        Ok(())
    }

    /// Runs for the life of the server (it holds a sender of its own, for
    /// background loads, so the channel never closes).
    pub fn run(mut self, messages: mpsc::Receiver<Message>) {
        loop {
            while let Ok(message) = messages.try_recv() {
                self.receive(message);
            }
            self.drop_abandoned();
            self.unload_expired();
            self.admit();
            self.admit_embedding();
            if self.running.is_empty() && !self.embeddings.is_running() {
                // Nothing to step: every waiting request (if any) waits for
                // a model to load. Sleep until a request or a load arrives,
                // or a model's keep-alive runs out.
                let received = match self.pool.next_expiry() {
                    Some(at) => messages.recv_timeout(at.saturating_duration_since(Instant::now())),
                    None => messages
                        .recv()
                        .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                };
                match received {
                    Ok(message) => self.receive(message),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
                continue;
            }
            self.step_all();
            self.step_embedding();
            // Before any status question is read: a client told its request
            // is done finds a `keep_alive: 0` model already unloaded.
            self.unload_expired();
            self.update_metrics();
        }
    }

    fn receive(&mut self, message: Message) {
        match message {
            Message::Job(job) => self.waiting.push_back(job),
            Message::Embed(job) => self.embeddings.push(job),
            Message::Loaded(load) => self.finish_load(*load),
            Message::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Message::KeepAlive { model, keep_alive } => {
                self.pool.set_keep_alive(&model, keep_alive);
                // Before a status question sent after it is answered.
                self.unload_expired();
            }
            Message::Unload(model) => {
                self.pool.set_keep_alive(&model, Some(Duration::ZERO));
                self.unload_expired();
            }
        }
    }

    /// Whether a running or waiting request needs `model`.
    fn in_use(&self, model: &str) -> bool {
        self.running.iter().any(|s| s.job.model.name == model)
            || self.waiting.iter().any(|j| j.model.name == model)
            || self.embeddings.uses(model)
    }

    fn status(&self) -> Status {
        let loaded = self.pool.status();
        let mut in_use: Vec<String> = Vec::new();
        let names = self.running.iter().map(|s| &s.job.model.name);
        for name in names.chain(self.waiting.iter().map(|j| &j.model.name)) {
            if !in_use.contains(name) {
                in_use.push(name.clone());
            }
        }
        if let Some(name) = self.embeddings.model_in_use() {
            in_use.push(name.to_owned());
        }
        Status { loaded, in_use }
    }

    /// Unloads the idle models whose keep-alive has run out, with their
    /// idle caches.
    fn unload_expired(&mut self) {
        for name in self.pool.expired(Instant::now()) {
            if self.in_use(&name) {
                continue;
            }
            self.pool.unload(&name);
            self.idle.retain(|c| c.model != name);
            tracing::info!("unloaded {name} (its keep_alive ran out)");
        }
    }

    /// Takes a background load in; on failure, fails the requests that
    /// waited for the model.
    fn finish_load(&mut self, load: LoadResult) {
        let (running, embedding) = (&self.running, self.embeddings.model_in_use());
        let busy = |name: &str| {
            embedding == Some(name) || running.iter().any(|s| s.job.model.name == name)
        };
        match self.pool.finish_load(&load.name, load.result, &busy) {
            Ok(Room::Made(evicted)) => self.idle.retain(|c| !evicted.contains(&c.model)),
            // Its requests wait; `admit` loads it again once there is room.
            Ok(Room::Busy) => {}
            Err(message) => {
                tracing::error!("{message}");
                self.embeddings
                    .fail_model(&load.name, &message, &self.metrics);
                let (failed, waiting): (Vec<Job>, Vec<Job>) = std::mem::take(&mut self.waiting)
                    .into_iter()
                    .partition(|job| job.model.name == load.name);
                self.waiting = waiting.into();
                for job in failed {
                    self.metrics.queued.fetch_sub(1, Ordering::AcqRel);
                    self.fail_job(job, message.clone());
                }
            }
        }
        self.update_metrics();
    }

    /// Forgets waiting requests whose client has gone.
    fn drop_abandoned(&mut self) {
        let before = self.waiting.len();
        self.waiting.retain(|job| !job.events.is_closed());
        let dropped = before - self.waiting.len();
        for _ in 0..dropped {
            self.metrics.queued.fetch_sub(1, Ordering::AcqRel);
            self.metrics.count(Outcome::Cancelled);
        }
        self.embeddings.drop_abandoned(&self.metrics);
    }

    /// Starts waiting requests, oldest first, while fewer than `parallel`
    /// run; a request whose model is not loaded starts its load (one at a
    /// time) and waits, without holding up requests for loaded models. If
    /// the load must wait for models in use to go idle, later requests wait
    /// behind it, so the running ones drain instead of being replaced.
    fn admit(&mut self) {
        let mut i = 0;
        while self.running.len() < self.parallel && i < self.waiting.len() {
            let model = self.waiting[i].model.clone();
            if !self.pool.touch(&model.name) {
                if !self.pool.is_loading() {
                    match self.start_load(&model) {
                        LoadStart::Started => {}
                        LoadStart::MustWait => break,
                        // Its requests, this one included, have left the queue.
                        LoadStart::Failed => continue,
                    }
                }
                i += 1;
                continue;
            }
            let Some(job) = self.waiting.remove(i) else {
                break;
            };
            self.metrics.queued.fetch_sub(1, Ordering::AcqRel);
            if let Err(message) = self.start(job) {
                tracing::error!("request failed: {message}");
            }
        }
    }

    /// Loads `model` in the background (see [`ModelPool::start_load`]); if it
    /// cannot even start, fails the requests waiting for it.
    fn start_load(&mut self, model: &Arc<ModelEntry>) -> LoadStart {
        let (running, embedding) = (&self.running, self.embeddings.model_in_use());
        let busy = |name: &str| {
            embedding == Some(name) || running.iter().any(|s| s.job.model.name == name)
        };
        let loads = self.loads.clone();
        let done = move |result| {
            let _ = loads.send(Message::Loaded(Box::new(result)));
        };
        match self.pool.start_load(model, &busy, done) {
            Ok(Room::Made(evicted)) => {
                self.idle.retain(|c| !evicted.contains(&c.model));
                LoadStart::Started
            }
            Ok(Room::Busy) => LoadStart::MustWait,
            Err(message) => {
                self.finish_load(LoadResult {
                    name: model.name.clone(),
                    result: Err(message),
                });
                LoadStart::Failed
            }
        }
    }

    /// Starts the next embedding request when none runs and its model is
    /// loaded; else starts its model's load (when no load is under way).
    fn admit_embedding(&mut self) {
        let Some(model) = self.embeddings.next_model() else {
            return;
        };
        if self.pool.touch(&model.name) {
            if let Some(backend) = self.pool.backend(&model.name) {
                let load = self.pool.load_time(&model.name);
                self.embeddings.start(backend, load, &self.metrics);
            }
        } else if !self.pool.is_loading() {
            // A failed start fails the waiting requests for the model.
            self.start_load(&model);
        }
    }

    /// One chunk of the running embedding request.
    fn step_embedding(&mut self) {
        let Some(model) = self.embeddings.model_in_use() else {
            return;
        };
        let backend = self.pool.backend(model);
        let chunk = self.prefill_chunk_tokens;
        self.embeddings.step(backend, chunk, &self.metrics);
    }

    /// Gives a job (whose model is loaded) a cache and starts its prompt.
    fn start(&mut self, mut job: Job) -> Result<(), String> {
        let Some(backend) = self.pool.backend(&job.model.name) else {
            return Err(self.fail_job(job, "the model is not loaded".into()));
        };
        // A request that waited for its model's load counts the load.
        let load_time = match self.pool.load_time(&job.model.name) {
            Some((took, finished)) if finished > job.arrived => took,
            _ => Duration::ZERO,
        };
        let mut session = match take_cache(
            &mut self.idle,
            &job,
            backend,
            self.parallel,
            self.running.len(),
        ) {
            Ok(session) => session,
            Err(message) => return Err(self.fail_job(job, message)),
        };
        if !self.prompt_cache {
            session.reset();
        }
        let cached_tokens = match session.begin(&job.prompt) {
            Ok(reused) => reused,
            Err(e) => return Err(self.fail_job(job, e.to_string())),
        };
        self.metrics
            .prompt_tokens
            .fetch_add(job.prompt.len() as u64, Ordering::Relaxed);
        self.running.push(Sequence {
            sampler: Sampler::new(job.sampler.clone())
                .with_constraint(job.constraint.take())
                .with_logprobs(job.logprobs),
            output: TextOutput::new(&job.generation),
            phase: Phase::Prompt {
                next: cached_tokens,
            },
            session,
            cached_tokens,
            load_time,
            admitted: Instant::now(),
            prompt_done: None,
            last_token: None,
            job,
        });
        Ok(())
    }

    fn fail_job(&self, mut job: Job, message: String) -> String {
        // Its place is free before the client hears, so a request it sends
        // at once is not refused for it.
        job.place.give_back();
        self.metrics.count(Outcome::Failed);
        let _ = job.events.send(Event::Failed(message.clone()));
        message
    }

    /// Advances every running sequence by one step and retires the finished;
    /// every decoding sequence of a model runs in one batched pass.
    fn step_all(&mut self) {
        let mut steps: Vec<Option<Step>> = Vec::with_capacity(self.running.len());
        for sequence in &mut self.running {
            let batched = matches!(sequence.phase, Phase::Decode { .. });
            let step = if sequence.job.events.is_closed() {
                Some(Step::Cancelled)
            } else if batched {
                None
            } else {
                Some(match self.pool.backend(&sequence.job.model.name) {
                    Some(backend) => {
                        advance(sequence, backend, self.prefill_chunk_tokens, &self.metrics)
                    }
                    None => Step::Failed("the model was unloaded".into()),
                })
            };
            steps.push(step);
        }
        self.decode_batches(&mut steps);
        for i in (0..self.running.len()).rev() {
            match steps[i].take() {
                Some(Step::Continue) | None => {}
                Some(ended) => {
                    let sequence = self.running.swap_remove(i);
                    self.retire(sequence, ended);
                }
            }
        }
    }

    /// Runs the sequences `steps` left open (`None`) in one batched pass per
    /// model and fills in their steps.
    fn decode_batches(&mut self, steps: &mut [Option<Step>]) {
        let mut models: Vec<String> = Vec::new();
        for (sequence, step) in self.running.iter().zip(steps.iter()) {
            if step.is_none() && !models.contains(&sequence.job.model.name) {
                models.push(sequence.job.model.name.clone());
            }
        }
        for model in models {
            let Some(backend) = self.pool.backend(&model) else {
                continue;
            };
            let (indices, mut batch): (Vec<usize>, Vec<&mut Sequence>) = self
                .running
                .iter_mut()
                .enumerate()
                .filter(|(i, s)| steps[*i].is_none() && s.job.model.name == model)
                .unzip();
            if let [sequence] = &mut batch[..] {
                // Alone, a sequence takes the single-step path (on a GPU a
                // replayed graph).
                let step = advance(sequence, backend, self.prefill_chunk_tokens, &self.metrics);
                steps[indices[0]] = Some(step);
                continue;
            }
            let tokens: Vec<u32> = batch.iter().map(|s| s.pending_token()).collect();
            let (mut sessions, mut samplers): (Vec<&mut Session>, Vec<&mut Sampler>) = batch
                .iter_mut()
                .map(|s| (&mut s.session, &mut s.sampler))
                .unzip();
            match step_batch_sampled(&mut sessions, backend, &mut samplers, &tokens) {
                Ok(picked) => {
                    for ((i, sequence), picked) in indices.into_iter().zip(batch).zip(picked) {
                        let picked = picked.map_err(|e| e.to_string());
                        steps[i] = Some(take_token(sequence, picked, &self.metrics));
                    }
                }
                Err(e) => {
                    for i in indices {
                        steps[i] = Some(Step::Failed(e.to_string()));
                    }
                }
            }
        }
    }

    /// Ends a sequence: tells its client (if still there) and keeps or empties
    /// its cache.
    fn retire(&mut self, mut sequence: Sequence, step: Step) {
        // As in `fail_job`: the place is free before the last event is sent.
        sequence.job.place.give_back();
        log_request(&sequence, &step);
        self.pool
            .set_keep_alive(&sequence.job.model.name, sequence.job.keep_alive);
        match step {
            Step::Finished(reason) => {
                let rest = sequence.output.finish(reason);
                if !rest.is_empty() {
                    let _ = sequence.job.events.send(Event::Text(rest));
                }
                let summary = summarize(&sequence, reason);
                self.metrics.count(Outcome::Completed);
                let _ = sequence.job.events.send(Event::Done(summary));
            }
            Step::Cancelled => {
                self.metrics.count(Outcome::Cancelled);
                sequence.session.reset();
            }
            Step::Failed(message) => {
                self.metrics.count(Outcome::Failed);
                let _ = sequence.job.events.send(Event::Failed(message));
                sequence.session.reset();
            }
            Step::Continue => {}
        }
        if !self.prompt_cache {
            sequence.session.reset();
        }
        self.idle.push(IdleCache {
            model: sequence.job.model.name.clone(),
            scope: sequence.job.scope,
            session: sequence.session,
        });
    }

    fn update_metrics(&self) {
        let held = |sessions: &mut dyn Iterator<Item = &Session>| {
            sessions.map(|s| s.tokens().len() as u64).sum::<u64>()
        };
        let m = &self.metrics;
        m.active.store(self.running.len() as u64, Ordering::Relaxed);
        m.kv_tokens.store(
            held(&mut self.running.iter().map(|s| &s.session)),
            Ordering::Relaxed,
        );
        m.kv_cached_tokens.store(
            held(&mut self.idle.iter().map(|c| &c.session)),
            Ordering::Relaxed,
        );
        let capacity = self
            .running
            .iter()
            .map(|s| s.session.capacity())
            .chain(self.idle.iter().map(|c| c.session.capacity()))
            .sum::<usize>();
        m.kv_capacity_tokens
            .store(capacity as u64, Ordering::Relaxed);
    }
}

/// A cache for `job`: the idle one of its model sharing the longest prefix
/// with the prompt, else a new one (dropping the oldest idle cache when
/// `parallel` caches exist already).
fn take_cache(
    idle: &mut Vec<IdleCache>,
    job: &Job,
    backend: &Backend,
    parallel: usize,
    running: usize,
) -> Result<Session, String> {
    let reusable = |c: &IdleCache| match c.scope == job.scope {
        true => c.session.reusable_prefix(&job.prompt),
        false => 0,
    };
    let best = idle
        .iter()
        .enumerate()
        .filter(|(_, c)| c.model == job.model.name && c.session.capacity() == job.model.context)
        .max_by_key(|(i, c)| (reusable(c), *i))
        .map(|(i, _)| i);
    if let Some(i) = best {
        let cache = idle.remove(i);
        let mut session = cache.session;
        if cache.scope != job.scope {
            session.reset();
        }
        return Ok(session);
    }
    while !idle.is_empty() && running + idle.len() >= parallel {
        idle.remove(0);
    }
    Session::new(backend, job.model.context).map_err(|e| e.to_string())
}

impl Sequence {
    /// The token sampled last, not yet fed to the model (decode phase).
    fn pending_token(&self) -> u32 {
        match self.phase {
            Phase::Decode { token } => token,
            Phase::Prompt { .. } => 0,
        }
    }
}

/// One step of one sequence: a prompt chunk, or feeding the pending token
/// and sampling the next.
fn advance(
    sequence: &mut Sequence,
    backend: &Backend,
    prefill_chunk_tokens: usize,
    metrics: &Metrics,
) -> Step {
    let picked = match sequence.phase {
        Phase::Prompt { next } => {
            let end = (next + prefill_chunk_tokens).min(sequence.job.prompt.len());
            let logits = match sequence
                .session
                .feed(backend, &sequence.job.prompt[next..end])
            {
                Ok(logits) => logits,
                Err(e) => return Step::Failed(e.to_string()),
            };
            if end < sequence.job.prompt.len() {
                sequence.phase = Phase::Prompt { next: end };
                return Step::Continue;
            }
            sequence.prompt_done = Some(Instant::now());
            sequence.sampler.sample(&logits, sequence.session.tokens())
        }
        Phase::Decode { token } => {
            step_sampled(&mut sequence.session, backend, &mut sequence.sampler, token)
        }
    };
    take_token(sequence, picked.map_err(|e| e.to_string()), metrics)
}

/// Emits a sampled token's text and decides whether the sequence goes on.
fn take_token(sequence: &mut Sequence, picked: Result<u32, String>, metrics: &Metrics) -> Step {
    let token = match picked {
        Ok(token) => token,
        Err(message) => return Step::Failed(message),
    };
    record_token_time(sequence, metrics);
    if let Some(step) = sequence.sampler.take_logprobs() {
        let tokenizer = &sequence.job.model.file.tokenizer;
        let logged = |t: TokenLogprob| LoggedToken {
            bytes: tokenizer.token_to_bytes(t.token, false),
            logprob: t.logprob,
        };
        let event = Event::Logprobs(TokenLogprobs {
            picked: logged(step.picked),
            top: step.top.into_iter().map(logged).collect(),
        });
        if sequence.job.events.send(event).is_err() {
            return Step::Cancelled;
        }
    }
    let accepted = sequence
        .output
        .accept(&sequence.job.model.file.tokenizer, token);
    if !accepted.text.is_empty()
        && sequence
            .job
            .events
            .send(Event::Text(accepted.text))
            .is_err()
    {
        return Step::Cancelled;
    }
    match accepted.stop {
        // Complete on its last allowed token: the answer is whole.
        Some(StopReason::MaxTokens) | None if sequence.sampler.constraint_complete() => {
            return Step::Finished(StopReason::GrammarComplete)
        }
        Some(reason) => return Step::Finished(reason),
        None => {}
    }
    if sequence.session.tokens().len() >= sequence.session.capacity() {
        return Step::Finished(StopReason::ContextFull);
    }
    sequence.phase = Phase::Decode { token };
    Step::Continue
}

/// The `-v` line of a finished request: a debug event.
fn log_request(sequence: &Sequence, step: &Step) {
    let outcome = match step {
        Step::Finished(reason) => format!("{reason:?}"),
        Step::Cancelled => "cancelled (client left)".into(),
        Step::Failed(message) => format!("failed: {message}"),
        Step::Continue => return,
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let first = sequence.prompt_done.map_or(String::from("-"), |t| {
        format!("{:.1} ms", ms(t - sequence.job.arrived))
    });
    tracing::debug!(
        "{}: prompt {} tokens ({} cached), {} generated, first token {first}, total {:.1} ms: {outcome}",
        sequence.job.model.name,
        sequence.job.prompt.len(),
        sequence.cached_tokens,
        sequence.output.tokens().len(),
        ms(sequence.job.arrived.elapsed()),
    );
}

fn record_token_time(sequence: &mut Sequence, metrics: &Metrics) {
    let now = Instant::now();
    match sequence.last_token {
        None => metrics
            .time_to_first_token
            .observe(now - sequence.job.arrived),
        Some(last) => metrics.inter_token_latency.observe(now - last),
    }
    metrics.generated_tokens.fetch_add(1, Ordering::Relaxed);
    sequence.last_token = Some(now);
}

fn summarize(sequence: &Sequence, reason: StopReason) -> Summary {
    let now = Instant::now();
    // The first token is sampled right after the prompt's last chunk.
    let prompt_done = sequence.prompt_done.unwrap_or(now);
    Summary {
        reason,
        prompt_tokens: sequence.job.prompt.len(),
        cached_tokens: sequence.cached_tokens,
        completion_tokens: sequence.output.generated_tokens(reason),
        time_to_first_token: prompt_done - sequence.job.arrived,
        load_time: sequence.load_time,
        prompt_time: prompt_done - sequence.admitted,
        decode_time: now - prompt_done,
        total_time: now - sequence.job.arrived,
        seed: sequence.job.sampler.seed,
    }
}
