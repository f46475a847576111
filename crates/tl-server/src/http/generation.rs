//! What the generation endpoints of both APIs share: finding the model,
//! turning messages or a prompt into tokens, checking limits, building the
//! sampler settings, handing the job to the engine, and reading its events.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tl_engine::chat_template::ChatMessage;
use tl_engine::constraint::{Constraint, Grammar};
use tl_engine::sampler::{SamplerConfig, MAX_TOP_LOGPROBS};
use tl_engine::tool_calls::ToolCallFormat;
use tl_engine::{GenerationConfig, StopReason};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::error::{ApiError, Flavor};
use super::tool_prompt::{tool_prompt, ToolGrammar};
use super::tools::ToolRequest;
use super::AppState;
use crate::engine::{Event, Job, LoggedToken, Place, Refusal, Scope, Summary, TokenLogprobs};
use crate::presets::Parameters;
use crate::registry::ModelEntry;

/// What the model is asked to continue.
#[derive(Clone)]
pub enum PromptSource {
    /// Chat messages and the request's tools, rendered with the model's
    /// template and a generation prompt; special-token text in them stays
    /// text.
    Chat {
        messages: Vec<ChatMessage>,
        tools: Option<ToolRequest>,
    },
    /// Text used as is (BOS added when the model wants one; special-token text
    /// becomes special tokens).
    Raw(String),
}

/// Sampling and limits as a request states them; `None` keeps the default.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<usize>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub seed: Option<i64>,
    /// Most tokens to generate; `None` (or, for Ollama, negative): until the
    /// context is full.
    pub max_tokens: Option<i64>,
    pub stop: Vec<String>,
    /// A smaller context than the server's for this request (Ollama's `num_ctx`).
    pub context: Option<usize>,
    /// What the output must follow (OpenAI's `response_format`, Ollama's
    /// `format`).
    pub grammar: Option<Grammar>,
    /// How long the model stays loaded once idle after this request
    /// (Ollama's `keep_alive`); `None`: until evicted.
    pub keep_alive: Option<std::time::Duration>,
    /// Each token's log-probability and those of this many alternatives
    /// (at most `MAX_TOP_LOGPROBS`); `None`: none.
    pub logprobs: Option<usize>,
}

impl Options {
    /// The request's values, and a preset's where the request gave none.
    fn with_defaults(mut self, defaults: &Parameters, context: usize) -> Options {
        let d = defaults;
        self.temperature = self.temperature.or(d.temperature);
        self.top_k = self.top_k.or(d.top_k);
        self.top_p = self.top_p.or(d.top_p);
        self.min_p = self.min_p.or(d.min_p);
        self.repeat_penalty = self.repeat_penalty.or(d.repeat_penalty);
        self.repeat_last_n =
            self.repeat_last_n.or(d
                .repeat_last_n
                .map(|n| if n < 0 { context } else { n as usize }));
        self.presence_penalty = self.presence_penalty.or(d.presence_penalty);
        self.frequency_penalty = self.frequency_penalty.or(d.frequency_penalty);
        self.seed = self.seed.or(d.seed);
        self.max_tokens = self.max_tokens.or(d.num_predict);
        self.context = self.context.or(d.num_ctx);
        if self.stop.is_empty() {
            self.stop = d.stop.clone().unwrap_or_default();
        }
        self
    }
}

impl PromptSource {
    /// Chat messages without tools.
    pub fn chat(messages: Vec<ChatMessage>) -> Self {
        PromptSource::Chat {
            messages,
            tools: None,
        }
    }
}

/// A preset's system prompt goes first, unless the request has its own.
fn with_system(source: PromptSource, system: Option<&str>) -> PromptSource {
    match (source, system) {
        (
            PromptSource::Chat {
                mut messages,
                tools,
            },
            Some(system),
        ) if !messages.iter().any(|m| m.role == "system") => {
            messages.insert(0, ChatMessage::system(system.to_owned()));
            PromptSource::Chat { messages, tools }
        }
        (source, _) => source,
    }
}

/// A request ready for the engine.
pub struct Prepared {
    pub model: Arc<ModelEntry>,
    pub prompt: Vec<u32>,
    pub sampler: SamplerConfig,
    pub constraint: Option<Constraint>,
    pub generation: GenerationConfig,
    pub keep_alive: Option<std::time::Duration>,
    pub logprobs: Option<usize>,
    /// The form the answer's tool calls take, when they are to be read.
    pub tool_format: Option<ToolCallFormat>,
    admitted: Admitted,
}

impl Prepared {
    /// The same request sampled with `seed`, in a queue place of its own:
    /// a further choice of a request for `n` (templated, tokenized and
    /// compiled once for all of them).
    pub fn with_seed(
        &self,
        state: &AppState,
        flavor: Flavor,
        seed: u64,
    ) -> Result<Prepared, ApiError> {
        let place = state.engine.reserve().map_err(|r| refused(flavor, r))?;
        Ok(Prepared {
            model: self.model.clone(),
            prompt: self.prompt.clone(),
            sampler: SamplerConfig {
                seed,
                ..self.sampler.clone()
            },
            constraint: self.constraint.clone(),
            generation: self.generation.clone(),
            keep_alive: self.keep_alive,
            logprobs: self.logprobs,
            tool_format: self.tool_format,
            admitted: Admitted {
                place,
                scope: self.admitted.scope,
            },
        })
    }
}

/// A request taken in: its place in the engine's queue (taken before its
/// prompt is templated and tokenized) and whose KV caches it may reuse.
pub struct Admitted {
    place: Place,
    scope: Scope,
}

/// The model named by a request, or 404.
pub fn find_model(
    state: &AppState,
    flavor: Flavor,
    name: &str,
) -> Result<Arc<ModelEntry>, ApiError> {
    state
        .registry
        .find(name)
        .ok_or_else(|| ApiError::unknown_model(flavor, name))
}

/// [`prepare`] on a blocking-task thread: templating and tokenizing a long
/// prompt takes milliseconds of CPU, which must not stall the async workers
/// that serve every other connection. The request takes its place in the
/// queue first, so a full queue refuses it before any of that work, and at
/// most as many prompts as the queue holds are being tokenized at once.
pub async fn prepare_blocking(
    state: &AppState,
    flavor: Flavor,
    model: &str,
    source: PromptSource,
    options: Options,
    scope: Scope,
) -> Result<Prepared, ApiError> {
    let place = state.engine.reserve().map_err(|r| refused(flavor, r))?;
    let (state, model) = (state.clone(), model.to_owned());
    let admitted = Admitted { place, scope };
    tokio::task::spawn_blocking(move || prepare(&state, flavor, &model, source, options, admitted))
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::internal(
                flavor,
                format!("preparing the request failed: {e}"),
            ))
        })
}

/// Templates, tokenizes and checks a request.
fn prepare(
    state: &AppState,
    flavor: Flavor,
    model: &str,
    source: PromptSource,
    options: Options,
    admitted: Admitted,
) -> Result<Prepared, ApiError> {
    let preset = state.registry.preset(model);
    let model = find_model(state, flavor, model)?;
    let (options, source) = match &preset {
        Some(preset) => (
            options.with_defaults(&preset.parameters, model.context),
            with_system(source, preset.system.as_deref()),
        ),
        None => (options, source),
    };
    let options = &options;
    let bad = |message: String| ApiError::bad_request(flavor, message);
    check_stop_strings(&options.stop, flavor).map_err(bad)?;
    let context = options
        .context
        .filter(|&c| c > 0)
        .map_or(model.context, |c| c.min(model.context));
    let (prompt, tool_grammar, tool_format) = match source {
        PromptSource::Chat { messages, tools } => {
            let chat = chat_prompt(&model, messages, tools, context).map_err(bad)?;
            (chat.tokens, chat.tool_grammar, chat.tool_format)
        }
        PromptSource::Raw(text) => {
            check_fits(&text, &model, context).map_err(bad)?;
            let tokens = model
                .file
                .tokenizer
                .encode(&text, true, true)
                .map_err(|e| bad(format!("cannot tokenize the prompt: {e}")))?;
            (tokens, None, None)
        }
    };
    if prompt.is_empty() {
        return Err(bad("the prompt is empty".into()));
    }
    if prompt.len() > context {
        return Err(bad(format!(
            "the prompt has {} tokens, more than the context of {context}",
            prompt.len()
        )));
    }
    let room = (context - prompt.len()).max(1);
    // Ollama's negative `num_predict` means "until the context is full";
    // OpenAI has no such value.
    let (field, negative_is_unlimited) = match flavor {
        Flavor::OpenAi => ("max_tokens", false),
        Flavor::Ollama => ("num_predict", true),
    };
    let max_tokens = match options.max_tokens {
        Some(n) if n > 0 => (n as usize).min(room),
        Some(n) if n < 0 && negative_is_unlimited => room,
        Some(n) => return Err(bad(format!("{field} must be at least 1, got {n}"))),
        None => room,
    };
    let sampler = sampler_config(options);
    sampler.validate().map_err(|e| bad(e.to_string()))?;
    let constraint = match (tool_grammar, &options.grammar) {
        (Some(_), Some(_)) => return Err(bad(TOOLS_AND_FORMAT.into())),
        (Some(tools), None) => Some(compile_tool_grammar(&model, &tools).map_err(bad)?),
        (None, Some(format)) => {
            Some(compile_grammar(&model, format, "invalid response format").map_err(bad)?)
        }
        (None, None) => None,
    };
    Ok(Prepared {
        model,
        prompt,
        sampler,
        constraint,
        generation: GenerationConfig {
            max_tokens,
            stop_strings: options.stop.clone(),
            prefill_chunk_tokens: 0,
        },
        keep_alive: options.keep_alive,
        logprobs: options.logprobs,
        tool_format,
        admitted,
    })
}

/// A chat's prompt tokens, and what its tools ask of the answer.
struct ChatPrompt {
    tokens: Vec<u32>,
    tool_grammar: Option<ToolGrammar>,
    tool_format: Option<ToolCallFormat>,
}

/// Renders `messages` and `tools` with the model's template and tokenizes
/// them; the error is the client's to fix.
fn chat_prompt(
    model: &ModelEntry,
    messages: Vec<ChatMessage>,
    tools: Option<ToolRequest>,
    context: usize,
) -> Result<ChatPrompt, String> {
    if messages.is_empty() {
        return Err("'messages' is empty".into());
    }
    let file = &model.file;
    let tools = tool_prompt(tools, messages, file.template.source(), &file.tokenizer);
    // The rendered prompt holds at least the messages' text and the tools.
    let text_bytes = tools
        .messages
        .iter()
        .map(|m| m.content.len())
        .sum::<usize>()
        + serde_json::to_string(&tools.extras).map_or(0, |text| text.len());
    check_fits_bytes(text_bytes, model, context)?;
    // Message text is kept from becoming control tokens; the template
    // writes any BOS itself, as Hugging Face's does.
    let prompt = file
        .template
        .encode_with_extras(&file.tokenizer, &tools.messages, true, &tools.extras)
        .map_err(|e| match e {
            tl_engine::Error::Tokenizer(e) => format!("cannot tokenize the prompt: {e}"),
            e => e.to_string(),
        })?;
    Ok(ChatPrompt {
        tokens: prompt.tokens,
        tool_grammar: tools.grammar,
        tool_format: tools.format,
    })
}

/// Why a request cannot have both: each is a grammar for the whole answer.
const TOOLS_AND_FORMAT: &str = "a structured output format ('response_format' or 'format') cannot be combined with a 'tool_choice' that requires a call or with strict tools";

/// The tools' grammar, compiled for `model` once each enforced function's
/// calls are known to be possible (the error names the function).
fn compile_tool_grammar(model: &ModelEntry, tools: &ToolGrammar) -> Result<Constraint, String> {
    for (name, schema) in &tools.calls {
        compile_grammar(model, schema, &format!("invalid tools: function '{name}'"))?;
    }
    compile_grammar(model, &tools.whole, "invalid tools")
}

/// The request's grammar or schema, compiled for `model`; the error is the
/// client's to fix (a 400), and says `what` was invalid.
fn compile_grammar(
    model: &ModelEntry,
    grammar: &Grammar,
    what: &str,
) -> Result<Constraint, String> {
    let compiler = model.constraint_compiler()?;
    compiler
        .compile(grammar)
        .map_err(|e| format!("{what}: {e}"))
}

/// Most stop strings a request may give: OpenAI's limit, and more for Ollama's
/// clients, whose model files often list several.
const MAX_STOP_STRINGS: [usize; 2] = [4, 16];
/// Longest stop string, in bytes.
const MAX_STOP_BYTES: usize = 256;

/// Stop strings are matched against every piece of text the engine thread
/// produces, so their number and size are bounded.
fn check_stop_strings(stop: &[String], flavor: Flavor) -> Result<(), String> {
    let most = match flavor {
        Flavor::OpenAi => MAX_STOP_STRINGS[0],
        Flavor::Ollama => MAX_STOP_STRINGS[1],
    };
    if stop.len() > most {
        return Err(format!("at most {most} stop strings, got {}", stop.len()));
    }
    match stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
        Some(long) => Err(format!(
            "a stop string may have at most {MAX_STOP_BYTES} bytes, one has {}",
            long.len()
        )),
        None => Ok(()),
    }
}

/// Refuses, before tokenizing it, a prompt too long to fit the context
/// whatever its tokens: no token covers more than the longest token's text
/// (a margin of 4 allows for tokenizers that fold whitespace).
pub fn check_fits(text: &str, model: &ModelEntry, context: usize) -> Result<(), String> {
    check_fits_bytes(text.len(), model, context)
}

fn check_fits_bytes(bytes: usize, model: &ModelEntry, context: usize) -> Result<(), String> {
    let most = context
        .saturating_mul(model.longest_token_bytes)
        .saturating_mul(4);
    if bytes > most {
        return Err(format!(
            "the prompt has {bytes} bytes, more than a context of {context} tokens can hold"
        ));
    }
    Ok(())
}

/// llama.cpp's defaults (`SamplerConfig::default`) with the request's values.
fn sampler_config(options: &Options) -> SamplerConfig {
    let d = SamplerConfig::default();
    SamplerConfig {
        temperature: options.temperature.unwrap_or(d.temperature),
        top_k: options.top_k.unwrap_or(d.top_k),
        top_p: options.top_p.unwrap_or(d.top_p),
        min_p: options.min_p.unwrap_or(d.min_p),
        repeat_penalty: options.repeat_penalty.unwrap_or(d.repeat_penalty),
        repeat_last_n: options.repeat_last_n.unwrap_or(d.repeat_last_n),
        presence_penalty: options.presence_penalty.unwrap_or(d.presence_penalty),
        frequency_penalty: options.frequency_penalty.unwrap_or(d.frequency_penalty),
        seed: options.seed.map_or_else(fresh_seed, |s| s as u64),
    }
}

/// A seed for a request that gave none, different each time (so asking again
/// gives another answer) and reported in the response (so it can be given
/// back to reproduce one).
fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
    // Within JSON's exact integers, so every client reads it back unchanged.
    hasher.finish() >> 11
}

/// Hands a prepared request to the engine; its events come back on the
/// returned channel (dropping it cancels the request).
pub fn submit(
    state: &AppState,
    flavor: Flavor,
    prepared: Prepared,
    arrived: Instant,
) -> Result<UnboundedReceiver<Event>, ApiError> {
    let (events, receiver) = unbounded_channel();
    let job = Job {
        model: prepared.model,
        prompt: prepared.prompt,
        sampler: prepared.sampler,
        constraint: prepared.constraint,
        generation: prepared.generation,
        events,
        arrived,
        place: prepared.admitted.place,
        scope: prepared.admitted.scope,
        keep_alive: prepared.keep_alive,
        logprobs: prepared.logprobs,
    };
    state.engine.submit(job).map_err(|r| refused(flavor, r))?;
    Ok(receiver)
}

/// The error a request the engine would not take gets.
pub fn refused(flavor: Flavor, refusal: Refusal) -> ApiError {
    match refusal {
        Refusal::QueueFull => ApiError::queue_full(flavor),
        Refusal::Stopped => ApiError::internal(flavor, "the engine has stopped"),
    }
}

/// What a streaming response sends next.
pub enum Next {
    Event(Event),
    /// The engine dropped the request without a last event.
    Dropped,
    /// The server is stopping and the grace period is over: the stream
    /// gets its final event now rather than a cut connection.
    ShuttingDown,
}

/// The next event of a stream, or word that the server is shutting down.
pub async fn next_event(
    events: &mut UnboundedReceiver<Event>,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Next {
    tokio::select! {
        biased;
        event = events.recv() => event.map_or(Next::Dropped, Next::Event),
        _ = shutdown.wait_for(|stopping| *stopping) => Next::ShuttingDown,
    }
}

/// What a stream cut short by shutdown says.
pub const SHUTTING_DOWN: &str = "the server is shutting down";

/// A whole generation, as non-streaming responses give it.
pub struct Collected {
    pub text: String,
    /// One per sampled token, when the request asked for them.
    pub logprobs: Vec<TokenLogprobs>,
    pub summary: Summary,
}

/// Waits for the whole generation (non-streaming responses); one still
/// running when the shutdown grace ends is answered 503.
pub async fn collect(
    flavor: Flavor,
    mut events: UnboundedReceiver<Event>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<Collected, ApiError> {
    let (mut text, mut logprobs) = (String::new(), Vec::new());
    loop {
        match next_event(&mut events, &mut shutdown).await {
            Next::Event(Event::Text(piece)) => text.push_str(&piece),
            Next::Event(Event::Logprobs(token)) => logprobs.push(token),
            Next::Event(Event::Done(summary)) => {
                return Ok(Collected {
                    text,
                    logprobs,
                    summary,
                })
            }
            Next::Event(Event::Failed(message)) => return Err(ApiError::internal(flavor, message)),
            Next::Dropped => {
                return Err(ApiError::internal(flavor, "the engine dropped the request"))
            }
            Next::ShuttingDown => {
                let status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
                return Err(ApiError::new(flavor, status, SHUTTING_DOWN));
            }
        }
    }
}

/// A token's text as the logprobs objects of both APIs give it (a piece
/// of a character shows as U+FFFD; `bytes` has it whole).
pub fn token_text(token: &LoggedToken) -> String {
    String::from_utf8_lossy(&token.bytes).into_owned()
}

/// The requested count of alternatives, checked: `asked` says whether
/// log-probabilities were asked for at all.
pub fn logprobs_option(
    flavor: Flavor,
    asked: bool,
    top: Option<i64>,
) -> Result<Option<usize>, ApiError> {
    let top = match top {
        None => 0,
        Some(n) if (0..=MAX_TOP_LOGPROBS as i64).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::bad_request(
                flavor,
                format!("top_logprobs must be 0 to {MAX_TOP_LOGPROBS}, got {n}"),
            ))
        }
    };
    Ok(asked.then_some(top))
}

/// OpenAI's and Ollama's name for why generation ended.
pub fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        StopReason::EndOfGeneration
        | StopReason::StopString
        | StopReason::Cancelled
        | StopReason::GrammarComplete => "stop",
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
