//! OpenAI's API: `POST /v1/chat/completions`, `POST /v1/completions` (both
//! streamed as server-sent events ending in `data: [DONE]`, or whole) and
//! `GET /v1/models`. Unknown fields are ignored; known fields of the wrong
//! type are a 400. Chat answers carry the model's tool calls in
//! `message.tool_calls` (streamed as `delta.tool_calls`) when the request
//! declared tools.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tl_engine::chat_template::ChatMessage;
use tl_engine::tool_calls::{parse_tool_calls, Piece, ToolCall, ToolCallFormat, ToolCallSplitter};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use super::error::{or_default, parse_json, ApiError, Flavor};
use super::generation::{
    self, find_model, finish_reason, next_event, token_text, unix_now, Next, Options, PromptSource,
    SHUTTING_DOWN,
};
use super::response_format::openai_response_format;
use super::tools::{call_id, message_tool_calls, tool_request};
use super::AppState;
use crate::engine::{Event, LoggedToken, Scope, Summary, TokenLogprobs};
use crate::registry::ModelEntry;

const FLAVOR: Flavor = Flavor::OpenAi;

/// A string or a list of strings (`stop`, a completion's `prompt`). The
/// `expecting` text replaces serde's "did not match any variant of untagged
/// enum OneOrMany", which names our type, not the client's mistake.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "`prompt` and `stop` take a string or a list of strings"
)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// A message's content: text, or a list of parts of which the text ones count.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "a message's `content` is a string or a list of content parts"
)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, deserialize_with = "or_default")]
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default, deserialize_with = "or_default")]
    content: Option<Content>,
    /// An assistant's calls (see `tools::message_tool_calls`).
    tool_calls: Option<Value>,
    /// The call a `tool` message answers.
    #[serde(default, deserialize_with = "or_default")]
    tool_call_id: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default, deserialize_with = "or_default")]
    include_usage: bool,
}

/// The sampling fields both endpoints take (llama.cpp's `top_k`, `min_p`,
/// `repeat_penalty` included).
#[derive(Debug, Deserialize)]
struct Sampling {
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<usize>,
    min_p: Option<f32>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    repeat_penalty: Option<f32>,
    seed: Option<i64>,
    stop: Option<OneOrMany>,
    /// Answers to the same request (each its own sequence and seed).
    n: Option<u32>,
    #[serde(default, deserialize_with = "or_default")]
    stream: bool,
    stream_options: Option<StreamOptions>,
    /// Free text, JSON, or JSON following a schema (see
    /// `response_format::openai_response_format`).
    response_format: Option<Value>,
    /// Chat's `true`/`false`, or completions' count of alternatives.
    logprobs: Option<Value>,
    top_logprobs: Option<i64>,
}

/// The most choices one request may ask for (each takes a queue place and
/// a sequence of its own).
const MAX_CHOICES: usize = 16;

/// How a request is answered besides its sampling.
struct Shape {
    stream: bool,
    include_usage: bool,
    /// How many answers (`n`).
    choices: usize,
}

#[derive(Debug, Deserialize)]
struct ChatRequest {
    model: String,
    messages: Vec<Message>,
    /// See `tools::tool_request`.
    tools: Option<Value>,
    tool_choice: Option<Value>,
    parallel_tool_calls: Option<Value>,
    #[serde(flatten)]
    sampling: Sampling,
}

#[derive(Debug, Deserialize)]
struct CompletionRequest {
    model: String,
    prompt: OneOrMany,
    #[serde(flatten)]
    sampling: Sampling,
}

impl Sampling {
    /// The alternatives each token's log-probability comes with, when the
    /// request asks for log-probabilities: chat's `logprobs: true` with
    /// `top_logprobs`, or completions' `logprobs: N` (`false`, `0` and
    /// `null` ask for none, as does a chat request without `logprobs`).
    fn logprobs(&self, kind: Kind) -> Result<Option<usize>, ApiError> {
        let bad = |message: &str| ApiError::bad_request(FLAVOR, message);
        let (asked, top) = match (&self.logprobs, kind) {
            (Some(Value::Null) | None, _) => (false, self.top_logprobs),
            (Some(Value::Bool(on)), _) => (*on, self.top_logprobs),
            (Some(Value::Number(count)), Kind::Completion) => {
                let count = count
                    .as_i64()
                    .ok_or_else(|| bad("'logprobs' must be a whole number"))?;
                (count != 0 || self.top_logprobs.is_some(), Some(count))
            }
            (Some(_), Kind::Chat) => return Err(bad("'logprobs' must be true or false")),
            (Some(_), Kind::Completion) => return Err(bad("'logprobs' must be a whole number")),
        };
        if !asked && top.is_some_and(|n| n != 0) {
            return Err(bad("'top_logprobs' needs 'logprobs' set to true"));
        }
        generation::logprobs_option(FLAVOR, asked, top)
    }

    fn options(self, kind: Kind) -> Result<(Options, Shape), ApiError> {
        let choices = match self.n {
            None => 1,
            Some(n) if (1..=MAX_CHOICES as u32).contains(&n) => n as usize,
            Some(n) => {
                return Err(ApiError::bad_request(
                    FLAVOR,
                    format!("n must be 1 to {MAX_CHOICES}, got {n}"),
                ))
            }
        };
        let logprobs = self.logprobs(kind)?;
        let include_usage = self.stream_options.is_some_and(|o| o.include_usage);
        let grammar = openai_response_format(self.response_format.as_ref())
            .map_err(|message| ApiError::bad_request(FLAVOR, message))?;
        let options = Options {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
            max_tokens: self.max_completion_tokens.or(self.max_tokens),
            stop: self.stop.map(OneOrMany::into_vec).unwrap_or_default(),
            grammar,
            logprobs,
            ..Options::default()
        };
        let shape = Shape {
            stream: self.stream,
            include_usage,
            choices,
        };
        Ok((options, shape))
    }
}

fn chat_messages(messages: Vec<Message>) -> Result<Vec<ChatMessage>, ApiError> {
    messages
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            let bad = |message: String| ApiError::bad_request(FLAVOR, message);
            let content = match m.content {
                None => String::new(),
                Some(Content::Text(text)) => text,
                Some(Content::Parts(parts)) => {
                    if let Some(part) = parts.iter().find(|p| p.kind != "text") {
                        return Err(bad(format!(
                            "content parts of type '{}' are not supported",
                            part.kind
                        )));
                    }
                    parts.into_iter().filter_map(|p| p.text).collect()
                }
            };
            let at = format!("messages[{index}]");
            let tool_calls = message_tool_calls(m.tool_calls.as_ref(), &at).map_err(bad)?;
            Ok(ChatMessage {
                tool_calls,
                tool_call_id: m.tool_call_id,
                name: m.name,
                ..ChatMessage::new(m.role, content)
            })
        })
        .collect()
}

/// Which endpoint a response is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completion,
}

/// The identity of one response, repeated in every chunk.
struct Identity {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Identity {
    fn new(kind: Kind, model: &str) -> Self {
        let prefix = match kind {
            Kind::Chat => "chatcmpl",
            Kind::Completion => "cmpl",
        };
        Identity {
            kind,
            id: format!("{prefix}-tl{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)),
            created: unix_now(),
            model: model.to_owned(),
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": concat!("tl-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        })
    }

    /// A streamed choice carrying `text` (or the finish reason).
    fn chunk(&self, text: Option<&str>, first: bool, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Chat => {
                let delta = match (text, first) {
                    (Some(t), true) => json!({"role": "assistant", "content": t}),
                    (Some(t), false) => json!({"content": t}),
                    (None, _) => json!({}),
                };
                self.delta_chunk(delta, finish)
            }
            Kind::Completion => {
                let choice = json!({
                    "index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish
                });
                self.envelope(true, json!([choice]))
            }
        }
    }

    /// A streamed chat choice carrying `delta`.
    fn delta_chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        let choice = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish});
        self.envelope(true, json!([choice]))
    }

    /// The `logprobs` object of a choice for `tokens` (the first of which
    /// starts `offset` bytes into the answer): chat's `content` list, or
    /// completions' parallel lists.
    fn logprobs(&self, tokens: &[TokenLogprobs], offset: usize) -> Value {
        match self.kind {
            Kind::Chat => {
                let entry = |token: &LoggedToken| {
                    json!({"token": token_text(token), "logprob": token.logprob,
                        "bytes": token.bytes})
                };
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let mut picked = entry(&t.picked);
                        picked["top_logprobs"] = t.top.iter().map(entry).collect();
                        picked
                    })
                    .collect();
                json!({"content": content, "refusal": null})
            }
            Kind::Completion => {
                let mut at = offset;
                let offsets: Vec<usize> = tokens
                    .iter()
                    .map(|t| {
                        let start = at;
                        at += t.picked.bytes.len();
                        start
                    })
                    .collect();
                let top: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let map: serde_json::Map<String, Value> = t
                            .top
                            .iter()
                            .map(|a| (token_text(a), json!(a.logprob)))
                            .collect();
                        Value::Object(map)
                    })
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| token_text(&t.picked)).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.picked.logprob).collect::<Vec<_>>(),
                    "top_logprobs": top,
                    "text_offset": offsets,
                })
            }
        }
    }

    /// The whole answer; a chat answer's tool calls (when `tool_format`
    /// says to read them) go in `message.tool_calls`, with the finish
    /// reason `tool_calls`.
    fn whole(&self, text: String, summary: &Summary, tool_format: Option<ToolCallFormat>) -> Value {
        let finish = finish_reason(summary.reason);
        let choice = match self.kind {
            Kind::Chat => {
                let (message, finish) = chat_message(text, tool_format, finish);
                json!({
                    "index": 0,
                    "message": message,
                    "logprobs": null,
                    "finish_reason": finish,
                })
            }
            Kind::Completion => json!({
                "index": 0, "text": text, "logprobs": null, "finish_reason": finish
            }),
        };
        let mut body = self.envelope(false, json!([choice]));
        body["usage"] = usage(std::slice::from_ref(summary));
        body["seed"] = json!(summary.seed);
        body
    }
}

/// The assistant's message for `text`, and the finish reason: its calls
/// read out when `tool_format` is given and it makes some.
fn chat_message(
    text: String,
    tool_format: Option<ToolCallFormat>,
    finish: &'static str,
) -> (Value, &'static str) {
    let Some(format) = tool_format else {
        return (json!({"role": "assistant", "content": text}), finish);
    };
    let parsed = parse_tool_calls(format, &text);
    if parsed.calls.is_empty() {
        return (json!({"role": "assistant", "content": text}), finish);
    }
    let content = (!parsed.content.is_empty()).then_some(parsed.content);
    let calls: Vec<Value> = parsed
        .calls
        .iter()
        .map(|call| call_json(call, call_id(format)))
        .collect();
    let message = json!({"role": "assistant", "content": content, "tool_calls": calls});
    (message, calls_finish_reason(finish))
}

/// An answer that made calls ends with `tool_calls`, unless it was cut
/// short (`length`: the last call may be missing).
fn calls_finish_reason(finish: &'static str) -> &'static str {
    if finish == "length" {
        finish
    } else {
        "tool_calls"
    }
}

/// A call as OpenAI writes one: its arguments as a JSON string.
fn call_json(call: &ToolCall, id: String) -> Value {
    json!({
        "id": id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments.to_string()},
    })
}

/// The usage of a request's choices: the prompt once, every choice's
/// tokens.
fn usage(summaries: &[Summary]) -> Value {
    let first = summaries.first();
    let prompt = first.map_or(0, |s| s.prompt_tokens);
    let completion: usize = summaries.iter().map(|s| s.completion_tokens).sum();
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": first.map_or(0, |s| s.cached_tokens)},
    })
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    Extension(scope): Extension<Scope>,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let result = async {
        let request: ChatRequest = parse_json(FLAVOR, &body)?;
        let tools = tool_request(
            request.tools.as_ref(),
            request.tool_choice.as_ref(),
            request.parallel_tool_calls.as_ref(),
        )
        .map_err(|message| ApiError::bad_request(FLAVOR, message))?;
        let source = PromptSource::Chat {
            messages: chat_messages(request.messages)?,
            tools,
        };
        let model = request.model;
        generate(
            &state,
            Kind::Chat,
            &model,
            source,
            request.sampling,
            (arrived, scope),
        )
        .await
    };
    result.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    Extension(scope): Extension<Scope>,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let result = async {
        let request: CompletionRequest = parse_json(FLAVOR, &body)?;
        let prompt = match request.prompt.into_vec() {
            prompts if prompts.len() == 1 => prompts.into_iter().collect::<String>(),
            _ => {
                return Err(ApiError::bad_request(
                    FLAVOR,
                    "'prompt' must be one string (batches of prompts are not supported)",
                ))
            }
        };
        let source = PromptSource::Raw(prompt);
        let model = request.model;
        generate(
            &state,
            Kind::Completion,
            &model,
            source,
            request.sampling,
            (arrived, scope),
        )
        .await
    };
    result.await.unwrap_or_else(IntoResponse::into_response)
}

/// Prepares, submits and answers one request of either endpoint: `n`
/// choices are `n` sequences, choice `i` sampled with the seed plus `i`.
async fn generate(
    state: &AppState,
    kind: Kind,
    model: &str,
    source: PromptSource,
    sampling: Sampling,
    (arrived, scope): (Instant, Scope),
) -> Result<Response, ApiError> {
    let (options, shape) = sampling.options(kind)?;
    let first = generation::prepare_blocking(state, FLAVOR, model, source, options, scope).await?;
    let seed = first.sampler.seed;
    let mut choices = vec![first];
    for i in 1..shape.choices {
        let choice = choices[0].with_seed(state, FLAVOR, seed.wrapping_add(i as u64))?;
        choices.push(choice);
    }
    let name = match state.registry.preset(model) {
        Some(preset) => preset.name.clone(),
        None => choices[0].model.name.clone(),
    };
    let identity = Arc::new(Identity::new(kind, &name));
    let tool_format = choices[0].tool_format;
    let asked_logprobs = choices[0].logprobs.is_some();
    let mut receivers = Vec::with_capacity(choices.len());
    for prepared in choices {
        receivers.push(generation::submit(state, FLAVOR, prepared, arrived)?);
    }
    let shutdown = state.shutdown.clone();
    if shape.stream {
        let answers = receivers.into_iter().enumerate().map(|(index, events)| {
            let answer = StreamedAnswer::new(identity.clone(), index, tool_format);
            answer.chunks(events, shutdown.clone()).boxed()
        });
        let events = sse_events(answers.collect(), identity, shape.include_usage);
        return Ok(Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let collected = futures_util::future::try_join_all(
        receivers
            .into_iter()
            .map(|events| generation::collect(FLAVOR, events, shutdown.clone())),
    )
    .await?;
    let mut body = Value::Null;
    let mut answers = Vec::with_capacity(collected.len());
    for (index, collected) in collected.iter().enumerate() {
        let mut whole = identity.whole(collected.text.clone(), &collected.summary, tool_format);
        let choice = &mut whole["choices"][0];
        choice["index"] = json!(index);
        if asked_logprobs {
            choice["logprobs"] = identity.logprobs(&collected.logprobs, 0);
        }
        answers.push(choice.take());
        if index == 0 {
            body = whole;
        }
    }
    body["choices"] = Value::Array(answers);
    let summaries: Vec<Summary> = collected.iter().map(|c| c.summary).collect();
    body["usage"] = usage(&summaries);
    Ok(Json(body).into_response())
}

/// The SSE stream of a streamed answer: the choices' chunks as they come,
/// then the usage when asked (all choices together) and `[DONE]`.
fn sse_events(
    choices: Vec<futures_util::stream::BoxStream<'static, ChoiceItem>>,
    identity: Arc<Identity>,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let summaries = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = summaries.clone();
    let chunks = stream::select_all(choices).flat_map(move |item| {
        let values = match item {
            ChoiceItem::Chunks(values) => values,
            ChoiceItem::Finished(summary) => {
                if let Ok(mut seen) = seen.lock() {
                    seen.push(summary);
                }
                Vec::new()
            }
        };
        stream::iter(values)
    });
    let tail = stream::once(async move {
        let summaries = summaries.lock().map(|s| s.clone()).unwrap_or_default();
        let mut tail = Vec::new();
        if include_usage && !summaries.is_empty() {
            let mut last = identity.envelope(true, json!([]));
            last["usage"] = usage(&summaries);
            tail.push(last.to_string());
        }
        tail.push("[DONE]".to_owned());
        stream::iter(tail)
    })
    .flatten();
    chunks
        .map(|value| value.to_string())
        .chain(tail)
        .map(|data| Ok(SseEvent::default().data(data)))
}

/// What one choice's stream yields: chunks to send, or its summary once it
/// finished.
enum ChoiceItem {
    Chunks(Vec<Value>),
    Finished(Summary),
}

/// What a streamed answer has sent so far.
struct StreamedAnswer {
    identity: Arc<Identity>,
    /// The choice's index among the request's `n`.
    index: usize,
    /// Reads tool calls out of the text, when they are to be read.
    splitter: Option<ToolCallSplitter>,
    tool_format: Option<ToolCallFormat>,
    /// Whether no chunk has gone out yet (the first carries the role).
    first: bool,
    calls_sent: usize,
    done: bool,
    /// Log-probabilities of tokens whose text has not gone out yet, and the
    /// answer's bytes before them.
    pending_logprobs: Vec<TokenLogprobs>,
    logprobs_offset: usize,
}

impl StreamedAnswer {
    fn new(identity: Arc<Identity>, index: usize, tool_format: Option<ToolCallFormat>) -> Self {
        StreamedAnswer {
            identity,
            index,
            splitter: tool_format.map(ToolCallSplitter::new),
            tool_format,
            first: true,
            calls_sent: 0,
            done: false,
            pending_logprobs: Vec::new(),
            logprobs_offset: 0,
        }
    }

    /// The choice's chunks: one per piece of text or tool call, a last
    /// chunk with the finish reason; a failure after the stream started, or
    /// the server shutting down, is sent as an `error` object. Every chunk
    /// carries the choice's index.
    fn chunks(
        self,
        events: UnboundedReceiver<Event>,
        shutdown: watch::Receiver<bool>,
    ) -> impl Stream<Item = ChoiceItem> {
        stream::unfold(
            (self, events, shutdown),
            |(mut answer, mut events, mut shutdown)| async move {
                if answer.done {
                    return None;
                }
                let next = next_event(&mut events, &mut shutdown).await;
                let finished = match &next {
                    Next::Event(Event::Done(summary)) => Some(*summary),
                    _ => None,
                };
                let mut chunks = answer.chunks_for(next);
                for chunk in &mut chunks {
                    if chunk["choices"][0].is_object() {
                        chunk["choices"][0]["index"] = json!(answer.index);
                    }
                }
                let mut items = vec![ChoiceItem::Chunks(chunks)];
                items.extend(finished.map(ChoiceItem::Finished));
                Some((stream::iter(items), (answer, events, shutdown)))
            },
        )
        .flatten()
    }

    fn chunks_for(&mut self, next: Next) -> Vec<Value> {
        match next {
            Next::Event(Event::Text(text)) => {
                let pieces = match &mut self.splitter {
                    Some(splitter) => splitter.push(&text),
                    None => vec![Piece::Text(text)],
                };
                let mut chunks = self.piece_chunks(pieces);
                self.attach_logprobs(chunks.first_mut());
                chunks
            }
            Next::Event(Event::Logprobs(token)) => {
                self.pending_logprobs.push(token);
                Vec::new()
            }
            Next::Event(Event::Done(summary)) => {
                let mut chunks = self.last_chunks(&summary);
                let with_choice = chunks
                    .iter_mut()
                    .rev()
                    .find(|c| c["choices"][0].is_object());
                self.attach_logprobs(with_choice);
                chunks
            }
            Next::Event(Event::Failed(message)) => {
                self.done = true;
                vec![ApiError::internal(FLAVOR, message).body()]
            }
            Next::Dropped => {
                self.done = true;
                vec![ApiError::internal(FLAVOR, "the engine dropped the request").body()]
            }
            Next::ShuttingDown => {
                self.done = true;
                let status = axum::http::StatusCode::SERVICE_UNAVAILABLE;
                vec![ApiError::new(FLAVOR, status, SHUTTING_DOWN).body()]
            }
        }
    }

    /// Puts the pending log-probabilities in `chunk`'s choice.
    fn attach_logprobs(&mut self, chunk: Option<&mut Value>) {
        let Some(chunk) = chunk else { return };
        if self.pending_logprobs.is_empty() {
            return;
        }
        let tokens = std::mem::take(&mut self.pending_logprobs);
        chunk["choices"][0]["logprobs"] = self.identity.logprobs(&tokens, self.logprobs_offset);
        self.logprobs_offset += tokens.iter().map(|t| t.picked.bytes.len()).sum::<usize>();
    }

    fn piece_chunks(&mut self, pieces: Vec<Piece>) -> Vec<Value> {
        let mut out = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Text(text) => {
                    out.push(self.identity.chunk(Some(&text), self.first, None));
                    self.first = false;
                }
                Piece::Calls(calls) => {
                    for call in calls {
                        out.extend(self.call_chunks(&call));
                    }
                }
            }
        }
        out
    }

    /// A call as OpenAI streams one: its index, id, type and name, then
    /// its arguments.
    fn call_chunks(&mut self, call: &ToolCall) -> [Value; 2] {
        let index = self.calls_sent;
        self.calls_sent += 1;
        let id = self.tool_format.map_or_else(String::new, call_id);
        let head = json!({"index": index, "id": id, "type": "function",
            "function": {"name": call.name, "arguments": ""}});
        let mut opening = json!({ "tool_calls": [head] });
        if self.first {
            opening["role"] = json!("assistant");
            opening["content"] = Value::Null;
            self.first = false;
        }
        let arguments =
            json!({"index": index, "function": {"arguments": call.arguments.to_string()}});
        [
            self.identity.delta_chunk(opening, None),
            self.identity
                .delta_chunk(json!({ "tool_calls": [arguments] }), None),
        ]
    }

    /// What was held back, the finish reason and the usage.
    fn last_chunks(&mut self, summary: &Summary) -> Vec<Value> {
        self.done = true;
        let mut out = match self.splitter.take() {
            Some(splitter) => self.piece_chunks(splitter.finish()),
            None => Vec::new(),
        };
        if self.first && self.identity.kind == Kind::Chat {
            out.push(self.identity.chunk(Some(""), true, None));
        }
        let finish = match finish_reason(summary.reason) {
            finish if self.calls_sent > 0 => calls_finish_reason(finish),
            finish => finish,
        };
        let mut last = self.identity.chunk(None, false, Some(finish));
        last["seed"] = json!(summary.seed);
        out.push(last);
        out
    }
}

/// `GET /v1/models`: the served files and the presets made of them.
pub async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .registry
        .listed()
        .iter()
        .map(|listed| model_object(&listed.name, &listed.entry))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// `GET /v1/models/{model}`: one model, or 404.
pub async fn model(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let model = find_model(&state, Flavor::OpenAi, &name)?;
    let id = match state.registry.preset(&name) {
        Some(preset) => preset.name.clone(),
        None => model.name.clone(),
    };
    Ok(Json(model_object(&id, &model)))
}

/// A model as OpenAI's API describes one.
fn model_object(id: &str, model: &ModelEntry) -> Value {
    let created = model.summary.modified_unix_seconds();
    json!({"id": id, "object": "model", "created": created, "owned_by": "tensorlogic"})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each form of `logprobs` asks for: chat's boolean with
    /// `top_logprobs`, completions' count; off in every falsy form.
    #[test]
    fn logprobs_fields_read_as_each_api_means_them() {
        let asked = |kind: Kind, fields: &str| {
            let body = format!(r#"{{"model": "m", "messages": [], {fields}}}"#);
            parse_json::<ChatRequest>(FLAVOR, body.as_bytes())
                .unwrap()
                .sampling
                .logprobs(kind)
                .map_err(|e| e.message)
        };
        assert_eq!(asked(Kind::Chat, r#""logprobs": true"#), Ok(Some(0)));
        assert_eq!(
            asked(Kind::Chat, r#""logprobs": true, "top_logprobs": 3"#),
            Ok(Some(3))
        );
        assert_eq!(asked(Kind::Completion, r#""logprobs": 3"#), Ok(Some(3)));
        assert_eq!(asked(Kind::Completion, r#""logprobs": 0"#), Ok(None));
        for off in [
            r#""logprobs": false, "top_logprobs": 0"#,
            r#""logprobs": null, "top_logprobs": null"#,
        ] {
            assert_eq!(asked(Kind::Chat, off), Ok(None), "{off}");
        }
        assert!(asked(Kind::Chat, r#""top_logprobs": 2"#).is_err());
        assert!(asked(Kind::Chat, r#""logprobs": 3"#).is_err());
    }

    /// A `prompt`, `stop` or `content` of the wrong shape is named in the
    /// client's terms, never as one of our Rust types.
    #[test]
    fn shape_errors_speak_the_api() {
        let cases: [(&[u8], &str); 3] = [
            (
                br#"{"model": "m", "prompt": 5}"#,
                "a string or a list of strings",
            ),
            (
                br#"{"model": "m", "prompt": "x", "stop": {"a": 1}}"#,
                "a string or a list of strings",
            ),
            (
                br#"{"model": "m", "messages": [{"role": "user", "content": 7}]}"#,
                "content parts",
            ),
        ];
        for (body, expected) in cases {
            let chat = body.windows(10).any(|w| w == b"\"messages\"");
            let message = if chat {
                parse_json::<ChatRequest>(FLAVOR, body).unwrap_err().message
            } else {
                parse_json::<CompletionRequest>(FLAVOR, body)
                    .unwrap_err()
                    .message
            };
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains("untagged"), "{message}");
        }
    }
}
