//! The HTTP side: routes, shared state, the API-key check, and `serve`.

mod connections;
mod cors;
mod embeddings;
mod error;
mod generation;
mod keep_alive;
mod manage;
mod ollama;
mod openai;
mod response_format;
mod tool_prompt;
mod tools;
mod utility;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::watch;

pub use error::{ApiError, Flavor};

use crate::config::{ModelSource, ServerConfig};
use crate::engine::{self, EngineHandle, Scope};
use crate::error::{Error, Result};
use crate::metrics::{Metrics, Outcome};
use crate::presets::PresetFile;
use crate::registry::{Registry, Store};

/// Largest request body accepted (long prompts fit easily).
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub registry: Arc<Registry>,
    pub engine: EngineHandle,
    pub metrics: Arc<Metrics>,
    /// The accepted API keys (none: no key needed).
    pub api_keys: Arc<[Box<str>]>,
    /// Where `/api/pull` fetches models from.
    pub model_source: Option<Arc<dyn ModelSource>>,
    /// Held by the pull under way, so two never write one file.
    pub pulls: Arc<Mutex<()>>,
    /// Becomes true when the server stops and streams still open must send
    /// their last event.
    pub shutdown: watch::Receiver<bool>,
    pub cors: cors::CorsPolicy,
}

impl AppState {
    /// The state of a server told `config`, serving `registry`'s models on
    /// `engine`; `shutdown` turns true when open streams must end.
    pub fn new(
        config: &ServerConfig,
        registry: Arc<Registry>,
        engine: EngineHandle,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) -> AppState {
        AppState {
            registry,
            engine,
            metrics,
            api_keys: config.api_keys.iter().map(|k| k.as_str().into()).collect(),
            model_source: config.model_source.clone(),
            pulls: Arc::new(Mutex::new(())),
            shutdown,
            cors: cors::CorsPolicy::new(&config.cors_origins),
        }
    }
}

/// Every route.
pub fn router(state: AppState) -> Router {
    let api_key = || middleware::from_fn_with_state(state.clone(), require_api_key);
    // The key is checked inside the refusal count, so a wrong key counts too.
    // OpenAI's routes answer without the `/v1` too, for clients given the
    // server's address as their base URL.
    let generation = Router::new()
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/chat/completions", post(openai::chat_completions))
        .route("/v1/completions", post(openai::completions))
        .route("/completions", post(openai::completions))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/v1/embeddings", post(embeddings::openai))
        .route("/embeddings", post(embeddings::openai))
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_legacy))
        .route_layer(api_key())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            count_refusals,
        ));
    let others = Router::new()
        .route("/v1/models", get(openai::models))
        .route("/models", get(openai::models))
        .route("/v1/models/{model}", get(openai::model))
        .route("/models/{model}", get(openai::model))
        .route("/api/tags", get(ollama::tags))
        .route("/api/show", post(ollama::show))
        .route("/api/version", get(ollama::version))
        .route("/api/ps", get(manage::ps))
        .route("/api/pull", post(manage::pull))
        .route("/api/delete", post(manage::delete).delete(manage::delete))
        .route("/api/copy", post(manage::copy))
        .route("/api/create", post(manage::create))
        .route("/tokenize", post(utility::tokenize))
        .route("/detokenize", post(utility::detokenize))
        .route("/metrics", get(utility::metrics))
        .route_layer(api_key());
    let router = Router::new()
        .merge(generation)
        .merge(others)
        .route("/health", get(utility::health))
        .route("/", get(manage::root))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(json_errors));
    let router = match state.cors.is_on() {
        true => router.layer(middleware::from_fn_with_state(
            state.cors.clone(),
            cors::cors,
        )),
        false => router,
    };
    router.with_state(state)
}

/// Errors axum writes itself (a body over the size limit: 413; a wrong
/// method: 405; ...) come as plain text; clients of either API expect their
/// JSON error shape, so those are rewritten.
async fn json_errors(request: Request, next: Next) -> Response {
    let flavor = Flavor::of_path(request.uri().path());
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_owned();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    ApiError::new(flavor, status, message).into_response()
}

/// With `--api-key`, every route but `/health` needs `Authorization: Bearer
/// KEY` with one of the keys. The request carries its key's [`Scope`] (the
/// key's number; 0 without keys).
async fn require_api_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if state.api_keys.is_empty() {
        request.extensions_mut().insert(Scope(0));
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(scope) = given.and_then(|g| key_number(&state.api_keys, g)) {
        request.extensions_mut().insert(Scope(scope));
        return next.run(request).await;
    }
    ApiError::new(
        Flavor::of_path(request.uri().path()),
        StatusCode::UNAUTHORIZED,
        "invalid or missing API key",
    )
    .into_response()
}

/// Which key (numbered from 1) `given` is, comparing with every key in
/// constant time, so response times reveal neither how much of a guess was
/// right nor which key matched.
fn key_number(keys: &[Box<str>], given: &str) -> Option<usize> {
    keys.iter().enumerate().fold(None, |found, (i, key)| {
        let same = constant_time_eq(given.as_bytes(), key.as_bytes());
        if same && found.is_none() {
            Some(i + 1)
        } else {
            found
        }
    })
}

/// Counts generation requests answered with a client error (bad input,
/// a wrong API key, unknown model, full queue) in
/// `tl_requests_total{outcome="rejected"}`.
async fn count_refusals(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status().is_client_error() {
        state.metrics.count(Outcome::Rejected);
    }
    response
}

/// Compares without stopping at the first difference, so response times do
/// not reveal how much of a guessed key was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_owned();
    ApiError::new(
        Flavor::of_path(&path),
        StatusCode::NOT_FOUND,
        format!("no route for {} {path}", request.method()),
    )
    .into_response()
}

/// How far `serve` got, for the caller to tell its user.
#[derive(Debug, Clone, Copy)]
pub enum ServeEvent {
    /// The port is bound (the real one even when 0 was asked for); the
    /// default model loads next.
    Bound(SocketAddr),
    /// The model is loaded and requests are served.
    Listening(SocketAddr),
}

/// Binds the port, loads the models, starts the engine and serves until
/// Ctrl-C or SIGTERM. The port comes first, so a port in use is reported
/// at once rather than after the model has loaded.
pub fn serve(config: &ServerConfig, on_event: &mut dyn FnMut(ServeEvent)) -> Result<()> {
    config.validate()?;
    let address = format!("{}:{}", config.host, config.port);
    let listener = std::net::TcpListener::bind(&address)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|reason| Error::Bind { address, reason })?;
    let bound = listener.local_addr()?;
    on_event(ServeEvent::Bound(bound));
    let store = Store {
        models_dir: config.models_dir.clone(),
        presets: config
            .models_dir
            .as_ref()
            .map(|dir| PresetFile::new(dir.join(PRESETS_FILE))),
    };
    let registry = Arc::new(Registry::open(
        &config.models,
        &config.aliases,
        config.context,
        store,
    )?);
    let metrics = Arc::new(Metrics::default());
    let engine = engine::start(registry.clone(), config, metrics.clone())?;
    let (streams_end, shutdown) = watch::channel(false);
    let state = AppState::new(config, registry, engine, metrics, shutdown);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let stop = stop_signal();
        let listener = tokio::net::TcpListener::from_std(listener)?;
        on_event(ServeEvent::Listening(bound));
        let timeout = std::time::Duration::from_secs(config.request_timeout_seconds);
        let limits = connections::Limits::new(config.max_connections, timeout, MAX_BODY_BYTES);
        let open = connections::serve(listener, router(state), limits, stop).await;
        tracing::info!("shutting down: no new requests; running ones get {SHUTDOWN_GRACE:?}");
        if tokio::time::timeout(SHUTDOWN_GRACE, open.closed())
            .await
            .is_ok()
        {
            return Ok(());
        }
        // Streams can run for minutes: those still open get their last
        // event (Ollama's `done`, OpenAI's error and `[DONE]`) rather than
        // a cut connection. Returning then drops what is left, which
        // cancels it.
        let _ = streams_end.send(true);
        if tokio::time::timeout(FINAL_EVENT_GRACE, open.closed())
            .await
            .is_err()
        {
            tracing::info!("stopped the requests still running");
        }
        Ok(())
    })
}

/// The file in the models folder that keeps the names `/api/create` and
/// `/api/copy` made.
pub const PRESETS_FILE: &str = "presets.json";

/// Resolves at Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `kill`, service
/// managers and container runtimes send), so both get the graceful stop.
/// The handlers are installed when this is called (inside the runtime, before
/// the server says it is listening), not when the future is first polled.
#[cfg(unix)]
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        match signals {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

#[cfg(not(unix))]
fn stop_signal() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// How long requests still running at Ctrl-C or SIGTERM may take to finish.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
/// How long streams then have to send their last event.
const FINAL_EVENT_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn keys_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
