//! The routes outside both APIs: `POST /tokenize`, `POST /detokenize` (as
//! llama.cpp's server has them), `GET /health` and `GET /metrics`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{or_default, parse_json, ApiError, Flavor};
use super::generation::{check_fits, find_model};
use super::AppState;
use crate::registry::ModelEntry;
use std::sync::Arc;

const FLAVOR: Flavor = Flavor::OpenAi;

#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    content: String,
    model: Option<String>,
    /// Add the model's BOS (and EOS) tokens as a prompt would have them.
    #[serde(default, deserialize_with = "or_default")]
    add_special: bool,
    /// Turn special-token text (`<|im_start|>`) into the special token.
    #[serde(default = "yes", deserialize_with = "or_yes")]
    parse_special: bool,
}

fn yes() -> bool {
    true
}

/// `parse_special`'s default for a `null` as for a missing field.
fn or_yes<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(true))
}

#[derive(Debug, Deserialize)]
struct DetokenizeRequest {
    tokens: Vec<u32>,
    model: Option<String>,
}

/// The named model, or the default one.
fn model_or_default(state: &AppState, name: Option<&str>) -> Result<Arc<ModelEntry>, ApiError> {
    match name {
        Some(name) => find_model(state, FLAVOR, name),
        None => state
            .registry
            .entries()
            .first()
            .cloned()
            .ok_or_else(|| ApiError::internal(FLAVOR, "no model is served")),
    }
}

/// `POST /tokenize`: on a blocking-task thread, with a place in the engine's
/// queue (a long text takes seconds of CPU), for texts that could fit the
/// model's context.
pub async fn tokenize(State(state): State<AppState>, body: Bytes) -> Response {
    off_the_async_workers(state, move |state| {
        let request: TokenizeRequest = parse_json(FLAVOR, &body)?;
        let model = model_or_default(state, request.model.as_deref())?;
        check_fits(&request.content, &model, model.context)
            .map_err(|e| ApiError::bad_request(FLAVOR, e))?;
        let tokens = model
            .file
            .tokenizer
            .encode(&request.content, request.add_special, request.parse_special)
            .map_err(|e| ApiError::bad_request(FLAVOR, e.to_string()))?;
        Ok(Json(json!({ "tokens": tokens })))
    })
    .await
}

/// `POST /detokenize`, as `/tokenize` off the async workers.
pub async fn detokenize(State(state): State<AppState>, body: Bytes) -> Response {
    off_the_async_workers(state, move |state| {
        let request: DetokenizeRequest = parse_json(FLAVOR, &body)?;
        let model = model_or_default(state, request.model.as_deref())?;
        let vocab = model.file.tokenizer.vocab_size();
        if let Some(bad) = request.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ApiError::bad_request(
                FLAVOR,
                format!("token {bad} is outside the vocabulary of {vocab}"),
            ));
        }
        let content = model
            .file
            .tokenizer
            .decode(&request.tokens, false)
            .map_err(|e| ApiError::bad_request(FLAVOR, e.to_string()))?;
        Ok(Json(json!({ "content": content })))
    })
    .await
}

/// Runs `work` on a blocking-task thread once the request has a place in the
/// engine's queue (429 when it is full).
async fn off_the_async_workers(
    state: AppState,
    work: impl FnOnce(&AppState) -> Result<Json<Value>, ApiError> + Send + 'static,
) -> Response {
    let place = match state.engine.reserve() {
        Ok(place) => place,
        Err(_) => return ApiError::queue_full(FLAVOR).into_response(),
    };
    let done = tokio::task::spawn_blocking(move || {
        let answer = work(&state);
        drop(place);
        answer
    })
    .await;
    match done {
        Ok(answer) => answer.map_or_else(IntoResponse::into_response, IntoResponse::into_response),
        Err(e) => ApiError::internal(FLAVOR, format!("the request failed: {e}")).into_response(),
    }
}

/// `GET /health`.
pub async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /metrics`, in Prometheus' text format.
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}
