//! Ollama's routes that manage models: `GET /api/ps` (what is loaded),
//! `POST /api/pull` (fetch a catalogue model, streaming progress),
//! `DELETE /api/delete`, `POST /api/copy`, `POST /api/create` (a name with
//! a system prompt and sampling defaults), and `GET /`, which Ollama's
//! clients use to see that a server runs.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tl_engine::chat_template::date::{strftime, CivilDateTime};
use tokio::sync::mpsc;

use super::error::{or_default, parse_json, ApiError, Flavor};
use super::ollama::{details, ndjson};
use super::AppState;
use crate::config::{PullProgress, Pulled};
use crate::engine::LoadedStatus;
use crate::presets::{normalize, Parameters, Preset};
use crate::registry::{ManageError, ModelEntry, Removed};

const FLAVOR: Flavor = Flavor::Ollama;

/// What `expires_at` says of a model with no keep-alive timer (Ollama
/// writes a far-off date too, rather than nothing).
const NEVER_EXPIRES: &str = "9999-12-31T23:59:59Z";

#[derive(Debug, Deserialize)]
struct NamedRequest {
    #[serde(alias = "name")]
    model: String,
    stream: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct CopyRequest {
    source: String,
    destination: String,
}

/// Ollama's JSON form of `/api/create`. Only a new name for a served model
/// (`from`) is supported; the fields that would need new weights or a new
/// template are refused rather than ignored.
#[derive(Debug, Deserialize)]
struct CreateRequest {
    #[serde(alias = "name")]
    model: String,
    from: Option<String>,
    system: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    parameters: Value,
    stream: Option<bool>,
    files: Option<Value>,
    adapters: Option<Value>,
    template: Option<Value>,
    license: Option<Value>,
    messages: Option<Value>,
    quantize: Option<Value>,
    modelfile: Option<Value>,
}

impl From<ManageError> for ApiError {
    fn from(e: ManageError) -> Self {
        let status = match &e {
            ManageError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ManageError::NotFound(_) => StatusCode::NOT_FOUND,
            ManageError::Conflict(_) => StatusCode::CONFLICT,
            ManageError::Forbidden(_) => StatusCode::FORBIDDEN,
            ManageError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(FLAVOR, status, e.to_string())
    }
}

/// `GET /`: a plain answer that the server runs, as Ollama gives.
pub async fn root() -> &'static str {
    "TensorLogic is running (Ollama- and OpenAI-compatible API)"
}

/// `GET /api/ps`: the loaded models, most recently used first.
pub async fn ps(State(state): State<AppState>) -> Response {
    let status = state.engine.status().await;
    let entries = state.registry.entries();
    let listed = tokio::task::spawn_blocking(move || {
        status
            .loaded
            .iter()
            .filter_map(|loaded| {
                let entry = entries.iter().find(|e| e.name == loaded.name)?;
                Some(running_model(entry, loaded))
            })
            .collect::<Vec<Value>>()
    })
    .await;
    match listed {
        Ok(models) => Json(json!({ "models": models })).into_response(),
        Err(e) => ApiError::internal(FLAVOR, format!("listing failed: {e}")).into_response(),
    }
}

fn running_model(entry: &ModelEntry, loaded: &LoadedStatus) -> Value {
    let expires_at = loaded.expires_at.map_or(NEVER_EXPIRES.to_owned(), |at| {
        let seconds = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        strftime(
            "%Y-%m-%dT%H:%M:%SZ",
            &CivilDateTime::from_unix_seconds(seconds),
        )
    });
    json!({
        "name": entry.name,
        "model": entry.name,
        "size": loaded.bytes,
        "digest": entry.digest(),
        "details": details(entry, None),
        "expires_at": expires_at,
        "size_vram": loaded.device_bytes,
        "context_length": entry.context,
    })
}

/// `DELETE /api/delete`: a preset, or a served file in the models folder
/// that no request uses (never the default model).
pub async fn delete(State(state): State<AppState>, body: Bytes) -> Response {
    let result = async {
        let request: NamedRequest = parse_json(FLAVOR, &body)?;
        let in_use = state.engine.status().await.in_use;
        let busy = |name: &str| in_use.iter().any(|n| n == name);
        match state.registry.remove(&request.model, &busy)? {
            Removed::Preset => {}
            Removed::Model(entry) => state.engine.unload(&entry.name),
        }
        Ok::<_, ApiError>(Json(json!({"status": "success"})))
    };
    result.await.into_response()
}

/// `POST /api/copy`: `destination` becomes another name for `source`.
pub async fn copy(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: CopyRequest = parse_json(FLAVOR, &body)?;
        state.registry.copy(&request.source, &request.destination)?;
        Ok::<_, ApiError>(Json(json!({"status": "success"})))
    })();
    result.into_response()
}

/// `POST /api/create`: a name for a served model (or preset) with its own
/// system prompt and sampling defaults, kept across restarts.
pub async fn create(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: CreateRequest = parse_json(FLAVOR, &body)?;
        let stream = request.stream.unwrap_or(true);
        let preset = preset_of(request)?;
        state.registry.create(preset)?;
        Ok::<_, ApiError>(stream)
    })();
    match result {
        Ok(stream) => status_reply(stream, &["using existing model", "writing manifest"]),
        Err(e) => e.into_response(),
    }
}

/// The preset a create request asks for, or why it cannot be made.
fn preset_of(request: CreateRequest) -> Result<Preset, ApiError> {
    let unsupported = [
        ("files", request.files.is_some()),
        ("adapters", request.adapters.is_some()),
        ("template", request.template.is_some()),
        ("license", request.license.is_some()),
        ("messages", request.messages.is_some()),
        ("quantize", request.quantize.is_some()),
        ("modelfile", request.modelfile.is_some()),
    ];
    if let Some((field, _)) = unsupported.iter().find(|(_, given)| *given) {
        return Err(ApiError::bad_request(
            FLAVOR,
            format!("'{field}' is not supported: create takes 'from' (a served model), 'system' and 'parameters'"),
        ));
    }
    let Some(from) = request.from else {
        return Err(ApiError::bad_request(
            FLAVOR,
            "'from' is required: the served model the new name stands for",
        ));
    };
    let parameters: Parameters = match request.parameters {
        Value::Null => Parameters::default(),
        given => serde_json::from_value(given)
            .map_err(|e| ApiError::bad_request(FLAVOR, format!("invalid parameters: {e}")))?,
    };
    Ok(Preset {
        name: request.model,
        from,
        system: request.system,
        parameters,
    })
}

/// Ollama's answer to create and pull: status lines ending in `success`
/// when streamed, else only the last.
fn status_reply(stream: bool, steps: &[&str]) -> Response {
    if !stream {
        return Json(json!({"status": "success"})).into_response();
    }
    let lines: Vec<Result<String, Infallible>> = steps
        .iter()
        .chain(&["success"])
        .map(|status| Ok(format!("{}\n", json!({ "status": status }))))
        .collect();
    ndjson(stream::iter(lines))
}

/// `POST /api/pull`: fetches a catalogue model into the models folder (or
/// checks the copy there) and serves it, streaming progress lines as
/// Ollama does. One pull runs at a time.
pub async fn pull(State(state): State<AppState>, body: Bytes) -> Response {
    let request: NamedRequest = match parse_json(FLAVOR, &body) {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    let Some(source) = state.model_source.clone() else {
        let message = "this server cannot pull models (it has no models folder)";
        return ApiError::new(FLAVOR, StatusCode::NOT_IMPLEMENTED, message).into_response();
    };
    let name = normalize(&request.model).to_owned();
    if let Err(message) = source.check(&name) {
        return ApiError::new(FLAVOR, StatusCode::NOT_FOUND, message).into_response();
    }
    let (progress, updates) = mpsc::unbounded_channel();
    let pulling = tokio::task::spawn_blocking(move || {
        // The lock only keeps two pulls from writing one file; a poisoned
        // one protects nothing that a later pull could find broken.
        let _one_at_a_time = state
            .pulls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pulled = source.pull(&name, &mut |p| {
            let _ = progress.send(p);
        })?;
        register(&state, &name, &pulled)
    });
    if !request.stream.unwrap_or(true) {
        return match pulling.await {
            Ok(Ok(())) => Json(json!({"status": "success"})).into_response(),
            Ok(Err(message)) => ApiError::internal(FLAVOR, message).into_response(),
            Err(e) => ApiError::internal(FLAVOR, format!("the pull failed: {e}")).into_response(),
        };
    }
    // Progress until the pull's sender is dropped (it has finished), then
    // its outcome.
    let lines = stream::unfold(Some((updates, pulling)), |state| async move {
        let (mut updates, pulling) = state?;
        if let Some(update) = updates.recv().await {
            let line = format!("{}\n", progress_line(&update));
            return Some((Ok::<_, Infallible>(line), Some((updates, pulling))));
        }
        let last = match pulling.await {
            Ok(Ok(())) => json!({"status": "success"}),
            Ok(Err(message)) => json!({ "error": message }),
            Err(e) => json!({ "error": format!("the pull failed: {e}") }),
        };
        Some((Ok(format!("{last}\n")), None))
    });
    ndjson(lines.boxed())
}

/// Serves a pulled file under its catalogue name.
fn register(state: &AppState, name: &str, pulled: &Pulled) -> Result<(), String> {
    state
        .registry
        .add_pulled(&pulled.path, name, &pulled.sha256)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn progress_line(update: &PullProgress) -> Value {
    let mut line = json!({ "status": update.status });
    if let (Some(completed), Some(total)) = (update.completed, update.total) {
        line["completed"] = json!(completed);
        line["total"] = json!(total);
    }
    line
}
