//! Ollama's API: `POST /api/chat` and `POST /api/generate` (streamed as
//! newline-delimited JSON by default, or whole with `"stream": false`),
//! `GET /api/tags`, `POST /api/show`, `GET /api/version`. The routes that
//! manage models are in [`super::manage`]. Chat answers carry the model's
//! tool calls in `message.tool_calls` when the request declared `tools`.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tl_engine::chat_template::date::{strftime, CivilDateTime};
use tl_engine::chat_template::ChatMessage;
use tl_engine::constraint::Grammar;
use tl_engine::tool_calls::{
    parse_tool_calls, ParsedOutput, Piece, ToolCall, ToolCallFormat, ToolCallSplitter,
};

use super::error::{or_default, parse_json, ApiError, Flavor};
use super::generation::{self, finish_reason, Next, Options, PromptSource};
use super::keep_alive::{keep_alive, KeepAlive};
use super::response_format::ollama_format;
use super::tools::{message_tool_calls, tool_request};
use super::AppState;
use crate::engine::{Event, LoggedToken, Scope, Summary, TokenLogprobs};
use crate::presets::Preset;
use crate::registry::{file_name, ModelEntry};
use tokio::sync::watch;

const FLAVOR: Flavor = Flavor::Ollama;

/// Ollama's `options` (the ones that apply to this engine).
#[derive(Debug, Default, Deserialize)]
struct ModelOptions {
    num_ctx: Option<usize>,
    num_predict: Option<i64>,
    seed: Option<i64>,
    temperature: Option<f32>,
    top_k: Option<usize>,
    top_p: Option<f32>,
    min_p: Option<f32>,
    repeat_penalty: Option<f32>,
    repeat_last_n: Option<i64>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    stop: Option<Vec<String>>,
}

impl ModelOptions {
    fn into_options(self, context: usize) -> Options {
        Options {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            // -1: the whole context, as in Ollama.
            repeat_last_n: self
                .repeat_last_n
                .map(|n| if n < 0 { context } else { n as usize }),
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
            max_tokens: self.num_predict,
            stop: self.stop.unwrap_or_default(),
            context: self.num_ctx,
            grammar: None,
            keep_alive: None,
            logprobs: None,
        }
    }
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default, deserialize_with = "or_default")]
    content: String,
    /// An assistant's calls, arguments as objects (see
    /// `tools::message_tool_calls`).
    tool_calls: Option<Value>,
    /// The function a `tool` message answers for.
    #[serde(default, deserialize_with = "or_default", alias = "name")]
    tool_name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatRequest {
    /// Each token's log-probability, with `top_logprobs` alternatives.
    #[serde(default, deserialize_with = "or_default")]
    logprobs: bool,
    top_logprobs: Option<i64>,
    model: String,
    #[serde(default, deserialize_with = "or_default")]
    messages: Vec<Message>,
    /// OpenAI-style function tools, and (an extension) OpenAI's
    /// `tool_choice` (see `tools::tool_request`).
    tools: Option<Value>,
    tool_choice: Option<Value>,
    stream: Option<bool>,
    /// `"json"` or a JSON schema (see `response_format::ollama_format`).
    format: Option<Value>,
    #[serde(default, deserialize_with = "or_default")]
    options: ModelOptions,
    #[serde(default, deserialize_with = "keep_alive")]
    keep_alive: Option<KeepAlive>,
}

#[derive(Debug, Deserialize)]
struct GenerateRequest {
    /// Each token's log-probability, with `top_logprobs` alternatives.
    #[serde(default, deserialize_with = "or_default")]
    logprobs: bool,
    top_logprobs: Option<i64>,
    model: String,
    #[serde(default, deserialize_with = "or_default")]
    prompt: String,
    system: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    raw: bool,
    stream: Option<bool>,
    /// `"json"` or a JSON schema (see `response_format::ollama_format`).
    format: Option<Value>,
    #[serde(default, deserialize_with = "or_default")]
    options: ModelOptions,
    #[serde(default, deserialize_with = "keep_alive")]
    keep_alive: Option<KeepAlive>,
}

#[derive(Debug, Deserialize)]
struct ShowRequest {
    #[serde(alias = "name")]
    model: String,
}

/// Which endpoint a response is for: chat answers carry a `message`,
/// generate answers a `response`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Generate,
}

/// `POST /api/chat`.
pub async fn chat(
    State(state): State<AppState>,
    Extension(scope): Extension<Scope>,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let result = async {
        let request: ChatRequest = parse_json(FLAVOR, &body)?;
        let model = generation::find_model(&state, FLAVOR, &request.model)?;
        let stream = request.stream.unwrap_or(true);
        if request.messages.is_empty() {
            // Ollama loads the model for an empty chat; here weights load on
            // the first generating request, so the answer comes at once.
            return Ok(loaded_reply(
                &state,
                Kind::Chat,
                &model,
                request.keep_alive,
                stream,
            ));
        }
        let bad = |message: String| ApiError::bad_request(FLAVOR, message);
        let tools = tool_request(request.tools.as_ref(), request.tool_choice.as_ref(), None)
            .map_err(bad)?;
        let messages = chat_messages(request.messages).map_err(bad)?;
        let source = PromptSource::Chat { messages, tools };
        let run = Run {
            kind: Kind::Chat,
            name: response_name(&state, &request.model, &model),
            model: &model,
            stream,
            grammar: grammar(request.format.as_ref())?,
            arrived,
            scope,
            keep_alive: request.keep_alive,
            logprobs: generation::logprobs_option(FLAVOR, request.logprobs, request.top_logprobs)?,
        };
        run.generate(&state, source, request.options).await
    };
    result.await.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /api/generate`: the prompt goes through the chat template as one
/// user message (after `system`, if given) unless `raw` is set.
pub async fn generate(
    State(state): State<AppState>,
    Extension(scope): Extension<Scope>,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let result = async {
        let request: GenerateRequest = parse_json(FLAVOR, &body)?;
        let model = generation::find_model(&state, FLAVOR, &request.model)?;
        let stream = request.stream.unwrap_or(true);
        if request.prompt.is_empty() {
            return Ok(loaded_reply(
                &state,
                Kind::Generate,
                &model,
                request.keep_alive,
                stream,
            ));
        }
        let source = if request.raw {
            PromptSource::Raw(request.prompt)
        } else {
            let mut messages = Vec::new();
            if let Some(system) = request.system {
                messages.push(ChatMessage::system(system));
            }
            messages.push(ChatMessage::user(request.prompt));
            PromptSource::chat(messages)
        };
        let run = Run {
            kind: Kind::Generate,
            name: response_name(&state, &request.model, &model),
            model: &model,
            stream,
            grammar: grammar(request.format.as_ref())?,
            arrived,
            scope,
            keep_alive: request.keep_alive,
            logprobs: generation::logprobs_option(FLAVOR, request.logprobs, request.top_logprobs)?,
        };
        run.generate(&state, source, request.options).await
    };
    result.await.unwrap_or_else(IntoResponse::into_response)
}

/// The engine's messages: Ollama's, with an assistant's calls and a tool
/// result's function name.
fn chat_messages(messages: Vec<Message>) -> Result<Vec<ChatMessage>, String> {
    messages
        .into_iter()
        .enumerate()
        .map(|(index, m)| {
            let at = format!("messages[{index}]");
            Ok(ChatMessage {
                tool_calls: message_tool_calls(m.tool_calls.as_ref(), &at)?,
                name: m.tool_name,
                ..ChatMessage::new(m.role, m.content)
            })
        })
        .collect()
}

/// One request of either endpoint, once its prompt is known.
struct Run<'a> {
    kind: Kind,
    /// The name the response gives: the model's, or the preset's asked for.
    name: String,
    model: &'a ModelEntry,
    stream: bool,
    grammar: Option<Grammar>,
    arrived: Instant,
    scope: Scope,
    keep_alive: Option<KeepAlive>,
    logprobs: Option<usize>,
}

/// A preset's name when the request named one, else the model's own.
fn response_name(state: &AppState, requested: &str, model: &ModelEntry) -> String {
    match state.registry.preset(requested) {
        Some(preset) => preset.name.clone(),
        None => model.name.clone(),
    }
}

/// The request's `format`, or a 400.
fn grammar(format: Option<&Value>) -> Result<Option<Grammar>, ApiError> {
    ollama_format(format).map_err(|message| ApiError::bad_request(FLAVOR, message))
}

impl Run<'_> {
    /// Prepares, submits and answers the request.
    async fn generate(
        self,
        state: &AppState,
        source: PromptSource,
        options: ModelOptions,
    ) -> Result<Response, ApiError> {
        let mut options = Options {
            grammar: self.grammar,
            logprobs: self.logprobs,
            ..options.into_options(self.model.context)
        };
        options.keep_alive = self.keep_alive.and_then(KeepAlive::duration);
        let (name, scope) = (&self.name, self.scope);
        let prepared =
            generation::prepare_blocking(state, FLAVOR, name, source, options, scope).await?;
        let tool_format = prepared.tool_format;
        let events = generation::submit(state, FLAVOR, prepared, self.arrived)?;
        let shutdown = state.shutdown.clone();
        let answer = Answer {
            kind: self.kind,
            model: self.name,
            tool_format,
            pending_logprobs: Vec::new(),
        };
        answer.respond(events, shutdown, self.stream).await
    }
}

/// RFC 3339 UTC time, as Ollama's `created_at`.
fn created_at() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let date = CivilDateTime::from_unix_seconds(now.as_secs() as i64);
    let stamp = strftime("%Y-%m-%dT%H:%M:%S", &date);
    format!("{stamp}.{:09}Z", now.subsec_nanos())
}

/// One line of a response: text, or (with `summary`) the last line.
fn line(kind: Kind, model: &str, text: &str, summary: Option<&Summary>) -> Value {
    let mut body = json!({"model": model, "created_at": created_at()});
    match kind {
        Kind::Chat => body["message"] = json!({"role": "assistant", "content": text}),
        Kind::Generate => body["response"] = json!(text),
    }
    body["done"] = json!(summary.is_some());
    if let Some(s) = summary {
        let nanos = |d: Duration| d.as_nanos() as u64;
        body["done_reason"] = json!(finish_reason(s.reason));
        body["total_duration"] = json!(nanos(s.total_time));
        body["load_duration"] = json!(nanos(s.load_time));
        body["prompt_eval_count"] = json!(s.prompt_tokens - s.cached_tokens);
        body["prompt_eval_duration"] = json!(nanos(s.prompt_time));
        body["eval_count"] = json!(s.completion_tokens);
        body["eval_duration"] = json!(nanos(s.decode_time));
        body["seed"] = json!(s.seed);
    }
    body
}

/// The answer to a request without a prompt, which Ollama's clients send to
/// load a model or, with `keep_alive: 0`, to unload it.
fn loaded_reply(
    state: &AppState,
    kind: Kind,
    model: &ModelEntry,
    keep_alive: Option<KeepAlive>,
    stream: bool,
) -> Response {
    let mut reason = "load";
    if let Some(keep_alive) = keep_alive {
        state.engine.keep_alive(&model.name, keep_alive.duration());
        if keep_alive == KeepAlive::For(Duration::ZERO) {
            reason = "unload";
        }
    }
    let mut body = line(kind, &model.name, "", None);
    body["done"] = json!(true);
    body["done_reason"] = json!(reason);
    if stream {
        ndjson(stream::iter([Ok::<_, Infallible>(format!("{body}\n"))]))
    } else {
        Json(body).into_response()
    }
}

pub fn ndjson<S>(lines: S) -> Response
where
    S: futures_util::Stream<Item = Result<String, Infallible>> + Send + 'static,
{
    let mut response = Body::from_stream(lines).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    response
}

/// How a response is written: its endpoint, the model name it gives, and
/// the form of tool calls to read from the text, if any.
struct Answer {
    kind: Kind,
    model: String,
    tool_format: Option<ToolCallFormat>,
    /// Log-probabilities of tokens whose text has not gone out yet.
    pending_logprobs: Vec<TokenLogprobs>,
}

impl Answer {
    async fn respond(
        self,
        events: tokio::sync::mpsc::UnboundedReceiver<Event>,
        shutdown: watch::Receiver<bool>,
        stream: bool,
    ) -> Result<Response, ApiError> {
        if !stream {
            let collected = generation::collect(FLAVOR, events, shutdown).await?;
            let mut body = self.whole(&collected.text, &collected.summary);
            if !collected.logprobs.is_empty() {
                body["logprobs"] = logprobs_json(&collected.logprobs);
            }
            return Ok(Json(body).into_response());
        }
        let splitter = self.tool_format.map(ToolCallSplitter::new);
        let start = Some((self, splitter, events, shutdown));
        let lines = stream::unfold(start, |state| async move {
            let (mut answer, mut splitter, mut events, mut shutdown) = state?;
            let next = generation::next_event(&mut events, &mut shutdown).await;
            let (values, more) = answer.lines_for(next, &mut splitter);
            let text: String = values.iter().map(|value| format!("{value}\n")).collect();
            let next = more.then_some((answer, splitter, events, shutdown));
            Some((Ok::<_, Infallible>(text), next))
        });
        Ok(ndjson(lines.boxed()))
    }

    /// The lines for the next event, and whether more will follow.
    fn lines_for(
        &mut self,
        next: Next,
        splitter: &mut Option<ToolCallSplitter>,
    ) -> (Vec<Value>, bool) {
        let (kind, model) = (self.kind, self.model.as_str());
        match next {
            Next::Event(Event::Text(text)) => {
                let pieces = match splitter {
                    Some(splitter) => splitter.push(&text),
                    None => vec![Piece::Text(text)],
                };
                let mut lines = self.piece_lines(pieces);
                self.attach_logprobs(lines.first_mut());
                (lines, true)
            }
            Next::Event(Event::Logprobs(token)) => {
                self.pending_logprobs.push(token);
                (Vec::new(), true)
            }
            Next::Event(Event::Done(summary)) => {
                let held = splitter
                    .take()
                    .map(ToolCallSplitter::finish)
                    .unwrap_or_default();
                let mut lines = self.piece_lines(held);
                lines.push(line(kind, model, "", Some(&summary)));
                self.attach_logprobs(lines.last_mut());
                (lines, false)
            }
            Next::Event(Event::Failed(message)) => {
                (vec![ApiError::internal(FLAVOR, message).body()], false)
            }
            Next::Dropped => (
                vec![ApiError::internal(FLAVOR, "the engine dropped the request").body()],
                false,
            ),
            Next::ShuttingDown => (vec![shutdown_line(kind, model)], false),
        }
    }

    /// Puts the pending log-probabilities in `line`.
    fn attach_logprobs(&mut self, line: Option<&mut Value>) {
        if let Some(line) = line.filter(|_| !self.pending_logprobs.is_empty()) {
            line["logprobs"] = logprobs_json(&std::mem::take(&mut self.pending_logprobs));
        }
    }

    fn piece_lines(&self, pieces: Vec<Piece>) -> Vec<Value> {
        pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Text(text) => line(self.kind, &self.model, &text, None),
                Piece::Calls(calls) => {
                    let mut body = line(self.kind, &self.model, "", None);
                    body["message"]["tool_calls"] = calls_json(&calls);
                    body
                }
            })
            .collect()
    }

    /// The whole answer, its tool calls in `message.tool_calls`.
    fn whole(&self, text: &str, summary: &Summary) -> Value {
        let parsed = match self.tool_format {
            Some(format) => parse_tool_calls(format, text),
            None => ParsedOutput {
                content: text.to_owned(),
                calls: Vec::new(),
            },
        };
        let mut body = line(self.kind, &self.model, &parsed.content, Some(summary));
        if !parsed.calls.is_empty() {
            body["message"]["tool_calls"] = calls_json(&parsed.calls);
        }
        body
    }
}

/// Log-probabilities as Ollama gives them: per token its text, bytes and
/// log-probability, and its step's most likely tokens.
fn logprobs_json(tokens: &[TokenLogprobs]) -> Value {
    let entry = |token: &LoggedToken| {
        json!({"token": generation::token_text(token), "logprob": token.logprob,
            "bytes": token.bytes})
    };
    tokens
        .iter()
        .map(|t| {
            let mut picked = entry(&t.picked);
            picked["top_logprobs"] = t.top.iter().map(entry).collect();
            picked
        })
        .collect()
}

/// Calls as Ollama writes them: arguments as an object.
fn calls_json(calls: &[ToolCall]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|call| json!({"function": {"name": call.name, "arguments": call.arguments}}))
        .collect();
    Value::Array(calls)
}

/// The last line of a stream the server stopped: done, with the reason.
fn shutdown_line(kind: Kind, model: &str) -> Value {
    let mut body = line(kind, model, "", None);
    body["done"] = json!(true);
    body["done_reason"] = json!("shutdown");
    body
}

pub fn details(model: &ModelEntry, preset: Option<&Preset>) -> Value {
    json!({
        "parent_model": preset.map_or("", |p| p.from.as_str()),
        "format": "gguf",
        "family": model.summary.architecture,
        "families": [model.summary.architecture],
        "parameter_size": model.summary.parameter_size(),
        "quantization_level": model.summary.quantization,
    })
}

/// `GET /api/tags`: every served file and preset. The first listing
/// hashes the files for their `digest` (on a blocking thread; seconds for
/// large files), later ones reuse it.
pub async fn tags(State(state): State<AppState>) -> Response {
    let listed = state.registry.listed();
    let models = tokio::task::spawn_blocking(move || {
        listed
            .iter()
            .map(|listed| {
                let m = &listed.entry;
                let modified = m.summary.modified_unix_seconds();
                let date = CivilDateTime::from_unix_seconds(modified);
                json!({
                    "name": listed.name,
                    "model": listed.name,
                    "modified_at": strftime("%Y-%m-%dT%H:%M:%SZ", &date),
                    "size": m.summary.file_bytes,
                    "digest": m.digest(),
                    "details": details(m, listed.preset.as_deref()),
                })
            })
            .collect::<Vec<Value>>()
    })
    .await;
    match models {
        Ok(models) => Json(json!({ "models": models })).into_response(),
        Err(e) => ApiError::internal(FLAVOR, format!("listing failed: {e}")).into_response(),
    }
}

/// `POST /api/show`.
pub async fn show(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: ShowRequest = parse_json(FLAVOR, &body)?;
        let model = generation::find_model(&state, FLAVOR, &request.model)?;
        let preset = state.registry.preset(&request.model);
        let s = &model.summary;
        let arch = &s.architecture;
        let mut info = serde_json::Map::new();
        info.insert("general.architecture".into(), json!(arch));
        info.insert("general.parameter_count".into(), json!(s.parameter_count));
        for (key, value) in [
            ("context_length", s.context_length),
            ("embedding_length", s.embedding_length),
            ("block_count", s.block_count),
            ("attention.head_count", s.head_count),
            ("attention.head_count_kv", s.head_count_kv),
            ("vocab_size", s.vocab_size),
        ] {
            info.insert(format!("{arch}.{key}"), json!(value));
        }
        let mut parameters = vec![format!("num_ctx {}", model.context)];
        let mut answer = json!({
            // The file's name, not its path: where the server keeps its
            // files is not the client's business.
            "modelfile": format!("FROM {}\n", file_name(&model.path)),
            "template": model.file.template.source(),
            "details": details(&model, preset.as_deref()),
            "model_info": info,
            "capabilities": capabilities(&model),
        });
        if let Some(preset) = &preset {
            let own = preset.parameters.lines();
            if preset.parameters.num_ctx.is_some() {
                parameters.clear();
            }
            parameters.extend(own);
            answer["modelfile"] = json!(preset_modelfile(&model, preset));
            if let Some(system) = &preset.system {
                answer["system"] = json!(system);
            }
        }
        answer["parameters"] = json!(parameters.join("\n"));
        Ok::<_, ApiError>(Json(answer))
    })();
    result.map_or_else(IntoResponse::into_response, IntoResponse::into_response)
}

/// What the model can do, as Ollama lists it: `tools` when its chat
/// template shows the model tools (others get them described in the system
/// message, which works less well).
fn capabilities(model: &ModelEntry) -> Value {
    if ToolCallFormat::renders_tools(model.file.template.source()) {
        json!(["completion", "tools"])
    } else {
        json!(["completion"])
    }
}

/// A preset as an Ollama Modelfile: its model, parameters and system prompt.
fn preset_modelfile(model: &ModelEntry, preset: &Preset) -> String {
    let mut text = format!("FROM {}\n", file_name(&model.path));
    for line in preset.parameters.lines() {
        text.push_str(&format!("PARAMETER {line}\n"));
    }
    if let Some(system) = &preset.system {
        text.push_str(&format!("SYSTEM \"\"\"{system}\"\"\"\n"));
    }
    text
}

/// `GET /api/version`.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION") }))
}
