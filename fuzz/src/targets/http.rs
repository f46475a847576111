//! `http`: a request body from a stranger, through the server's real router
//! (`tl_server::http::router`) in process, with no socket: body parsing,
//! model lookup, chat templating, tokenizing, the context and sampler checks,
//! and admission. The server is the real one too: the tiny Qwen3 model is
//! registered and the engine thread runs, but with no sequences and no queue
//! (`parallel` and `max_queue` 0), so a request that passes every check is
//! answered 429 instead of generating. Everything strangers control happens
//! before that point; generating would only make each input slower.
//!
//! An input is `METHOD PATH`, a newline, and the body. A 500 answer is a
//! failure: it means the server hit a bug (tokio turns a panicking handler
//! task into one, and the panic hook has seen that panic too).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use tl_engine::DeviceChoice;
use tl_server::http::{router, AppState};
use tl_server::metrics::Metrics;
use tl_server::registry::{Registry, Store};
use tl_server::{engine, ServerConfig};
use tower::ServiceExt;

use super::Runner;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::{normalize, normalize_against};

/// Responses are read up to this size (a 429 or a JSON answer is small;
/// `/metrics` is the largest).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

const FIELDS: &[&str] = &[
    "model",
    "messages",
    "role",
    "content",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "seed",
    "stop",
    "n",
    "stream",
    "stream_options",
    "include_usage",
    "type",
    "text",
    "options",
    "num_ctx",
    "num_predict",
    "repeat_last_n",
    "system",
    "raw",
    "tokens",
    "add_special",
    "parse_special",
    "name",
    "keep_alive",
    "from",
    "parameters",
    "source",
    "destination",
];

const STRINGS: &[&str] = &[
    "tiny-qwen3-q8_0",
    "tiny-qwen3-q8_0:latest",
    "tiny-qwen3-q8_0.gguf",
    "no-such-model",
    "user",
    "system",
    "assistant",
    "tool",
    "text",
    "image_url",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "Hello",
    "\n",
    "\u{0}",
    "\u{fffd}",
    "\u{1f600}",
    "{{ raise_exception('x') }}",
];

const ROUTES: &[&str] = &[
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /api/chat",
    "POST /api/generate",
    "POST /tokenize",
    "POST /detokenize",
    "POST /api/show",
    "GET /v1/models",
    "GET /v1/models/tiny-qwen3-q8_0",
    "GET /api/tags",
    "GET /api/version",
    "GET /api/ps",
    "POST /api/create",
    "POST /api/copy",
    "DELETE /api/delete",
    "POST /api/pull",
    "POST /chat/completions",
    "GET /",
    "GET /metrics",
    "GET /health",
];

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    seeds::read_all(&seeds::files_with_extension(
        &repo.join("fuzz/seeds/http"),
        "txt",
    )?)
}

pub fn dictionary() -> (Shape, Dictionary) {
    let mut words: Vec<Vec<u8>> = FIELDS
        .iter()
        .chain(STRINGS)
        .map(|w| format!("\"{w}\"").into_bytes())
        .collect();
    words.extend(["{", "}", "[", "]", ",", ":", "null", "true", "-1", "1e400"].map(|w| w.into()));
    let dictionary = Dictionary {
        words,
        keys: FIELDS.to_vec(),
        strings: STRINGS.to_vec(),
        routes: ROUTES.to_vec(),
        ..Dictionary::default()
    };
    (Shape::Request, dictionary)
}

pub struct HttpRunner {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    /// Kept so streams are never told the server is shutting down.
    _shutdown: tokio::sync::watch::Sender<bool>,
}

impl HttpRunner {
    pub fn new(repo: &Path) -> anyhow::Result<Self> {
        let config = ServerConfig {
            models: vec![seeds::tiny_model(repo)],
            parallel: 0,
            max_queue: 0,
            device: DeviceChoice::Cpu,
            ..ServerConfig::default()
        };
        // No models folder: nothing is kept or deleted, and pulls are refused.
        let registry = Arc::new(Registry::open(
            &config.models,
            &config.aliases,
            config.context,
            Store::default(),
        )?);
        let metrics = Arc::new(Metrics::default());
        let engine = engine::start(registry.clone(), &config, metrics.clone())
            .context("starting the engine")?;
        let (shutdown_sender, shutdown) = tokio::sync::watch::channel(false);
        let state = AppState::new(&config, registry, engine, metrics, shutdown);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self {
            runtime,
            router: router(state),
            _shutdown: shutdown_sender,
        })
    }
}

impl Runner for HttpRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let split = input
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(input.len());
        let head = String::from_utf8_lossy(&input[..split]);
        let body = input.get(split + 1..).unwrap_or_default();
        let Some(request) = request(&head, body.to_vec()) else {
            return "not a request line".into();
        };
        let router = self.router.clone();
        let (status, text) = self.runtime.block_on(async move {
            let response = match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), MAX_RESPONSE_BYTES).await;
            (
                status,
                body.map(|b| String::from_utf8_lossy(&b).into_owned()),
            )
        });
        let text = text.unwrap_or_else(|e| format!("(unreadable body: {e})"));
        assert_ne!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{head} answered 500: {text}"
        );
        let route = format!("{} {}", normalize(&head), status.as_u16());
        if status.is_success() || status == StatusCode::TOO_MANY_REQUESTS {
            // Accepted: which known fields it had are the paths it took.
            let mut features = vec![route.clone()];
            features.extend(known_fields(body).map(|field| format!("{route} has {field}")));
            return features.join("\n");
        }
        format!(
            "{route} {}",
            normalize_against(&error_message(&text), input)
        )
    }
}

/// The request fields (top level and Ollama's `options`) that are among the
/// API's known ones.
fn known_fields(body: &[u8]) -> impl Iterator<Item = String> {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let keys = |value: &serde_json::Value, prefix: &str| -> Vec<String> {
        value.as_object().map_or_else(Vec::new, |object| {
            object
                .keys()
                .filter(|key| FIELDS.contains(&key.as_str()))
                .map(|key| format!("{prefix}{key}"))
                .collect()
        })
    };
    let mut fields = keys(&json, "");
    fields.extend(keys(&json["options"], "options."));
    fields.into_iter()
}

/// The message of an error body in either API's shape
/// (`{"error": {"message": ...}}` or `{"error": "..."}`), or the body.
fn error_message(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(body) else {
        return body.to_owned();
    };
    let error = &json["error"];
    error["message"]
        .as_str()
        .or_else(|| error.as_str())
        .map_or_else(|| body.to_owned(), str::to_owned)
}

fn request(head: &str, body: Vec<u8>) -> Option<Request<Body>> {
    let (method, path) = head.split_once(' ')?;
    let method = Method::from_bytes(method.as_bytes()).ok()?;
    Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .ok()
}
