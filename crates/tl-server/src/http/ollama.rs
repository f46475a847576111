//! Ollama's API: `POST /api/chat` and `POST /api/generate` (streamed as
//! newline-delimited JSON by default, or whole with `"stream": false`),
//! `GET /api/tags`, `POST /api/show`, `GET /api/version`.

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

use super::error::{parse_json, ApiError, Flavor};
use super::generation::{self, finish_reason, Options, PromptSource};
use super::response_format::ollama_format;
use super::AppState;
use crate::engine::{Event, Scope, Summary};
use crate::registry::ModelEntry;

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
        }
    }
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: String,
}

#[derive(Debug, Deserialize)]
struct ChatRequest {
    model: String,
    #[serde(default)]
    messages: Vec<Message>,
    stream: Option<bool>,
    /// `"json"` or a JSON schema (see `response_format::ollama_format`).
    format: Option<Value>,
    #[serde(default)]
    options: ModelOptions,
}

#[derive(Debug, Deserialize)]
struct GenerateRequest {
    model: String,
    #[serde(default)]
    prompt: String,
    system: Option<String>,
    #[serde(default)]
    raw: bool,
    stream: Option<bool>,
    /// `"json"` or a JSON schema (see `response_format::ollama_format`).
    format: Option<Value>,
    #[serde(default)]
    options: ModelOptions,
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
            return Ok(loaded_reply(Kind::Chat, &model, stream));
        }
        let messages = request
            .messages
            .into_iter()
            .map(|m| ChatMessage::new(m.role, m.content))
            .collect();
        let source = PromptSource::Chat(messages);
        let run = Run {
            kind: Kind::Chat,
            model: &model,
            stream,
            grammar: grammar(request.format.as_ref())?,
            arrived,
            scope,
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
            return Ok(loaded_reply(Kind::Generate, &model, stream));
        }
        let source = if request.raw {
            PromptSource::Raw(request.prompt)
        } else {
            let mut messages = Vec::new();
            if let Some(system) = request.system {
                messages.push(ChatMessage::system(system));
            }
            messages.push(ChatMessage::user(request.prompt));
            PromptSource::Chat(messages)
        };
        let run = Run {
            kind: Kind::Generate,
            model: &model,
            stream,
            grammar: grammar(request.format.as_ref())?,
            arrived,
            scope,
        };
        run.generate(&state, source, request.options).await
    };
    result.await.unwrap_or_else(IntoResponse::into_response)
}

/// One request of either endpoint, once its prompt is known.
struct Run<'a> {
    kind: Kind,
    model: &'a ModelEntry,
    stream: bool,
    grammar: Option<Grammar>,
    arrived: Instant,
    scope: Scope,
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
        let options = Options {
            grammar: self.grammar,
            ..options.into_options(self.model.context)
        };
        let (name, scope) = (&self.model.name, self.scope);
        let prepared =
            generation::prepare_blocking(state, FLAVOR, name, source, options, scope).await?;
        let events = generation::submit(state, FLAVOR, prepared, self.arrived)?;
        respond(self.kind, self.model.name.clone(), events, self.stream).await
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

fn loaded_reply(kind: Kind, model: &ModelEntry, stream: bool) -> Response {
    let mut body = line(kind, &model.name, "", None);
    body["done"] = json!(true);
    body["done_reason"] = json!("load");
    if stream {
        ndjson(stream::iter([Ok::<_, Infallible>(format!("{body}\n"))]))
    } else {
        Json(body).into_response()
    }
}

fn ndjson<S>(lines: S) -> Response
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

async fn respond(
    kind: Kind,
    model: String,
    events: tokio::sync::mpsc::UnboundedReceiver<Event>,
    stream: bool,
) -> Result<Response, ApiError> {
    if !stream {
        let (text, summary) = generation::collect(FLAVOR, events).await?;
        return Ok(Json(line(kind, &model, &text, Some(&summary))).into_response());
    }
    let lines = stream::unfold(Some((events, model)), move |state| async move {
        let (mut events, model) = state?;
        let (value, more) = match events.recv().await {
            Some(Event::Text(text)) => (line(kind, &model, &text, None), true),
            Some(Event::Done(summary)) => (line(kind, &model, "", Some(&summary)), false),
            Some(Event::Failed(message)) => (ApiError::internal(FLAVOR, message).body(), false),
            None => (
                ApiError::internal(FLAVOR, "the engine dropped the request").body(),
                false,
            ),
        };
        let next = more.then_some((events, model));
        Some((Ok::<_, Infallible>(format!("{value}\n")), next))
    });
    Ok(ndjson(lines.boxed()))
}

fn details(model: &ModelEntry) -> Value {
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": model.summary.architecture,
        "families": [model.summary.architecture],
        "parameter_size": model.summary.parameter_size(),
        "quantization_level": model.summary.quantization,
    })
}

/// `GET /api/tags`.
pub async fn tags(State(state): State<AppState>) -> Json<Value> {
    let models: Vec<Value> = state
        .registry
        .entries()
        .iter()
        .map(|m| {
            let modified = m.summary.modified_unix_seconds();
            let date = CivilDateTime::from_unix_seconds(modified);
            json!({
                "name": m.name,
                "model": m.name,
                "modified_at": strftime("%Y-%m-%dT%H:%M:%SZ", &date),
                "size": m.summary.file_bytes,
                "details": details(m),
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

/// `POST /api/show`.
pub async fn show(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: ShowRequest = parse_json(FLAVOR, &body)?;
        let model = generation::find_model(&state, FLAVOR, &request.model)?;
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
        Ok::<_, ApiError>(Json(json!({
            // The file's name, not its path: where the server keeps its
            // files is not the client's business.
            "modelfile": format!("FROM {}\n", file_name(&model.path)),
            "parameters": format!("num_ctx {}", model.context),
            "template": model.file.template.source(),
            "details": details(&model),
            "model_info": info,
            "capabilities": ["completion"],
        })))
    })();
    result.map_or_else(IntoResponse::into_response, IntoResponse::into_response)
}

/// The last part of `path` (a file's name).
fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// `GET /api/version`.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION") }))
}
