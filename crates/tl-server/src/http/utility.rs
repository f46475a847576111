//! The routes outside both APIs: `POST /tokenize`, `POST /detokenize` (as
//! llama.cpp's server has them), `GET /health` and `GET /metrics`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::error::{parse_json, ApiError, Flavor};
use super::generation::find_model;
use super::AppState;
use crate::registry::ModelEntry;
use std::sync::Arc;

const FLAVOR: Flavor = Flavor::OpenAi;

#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    content: String,
    model: Option<String>,
    /// Add the model's BOS (and EOS) tokens as a prompt would have them.
    #[serde(default)]
    add_special: bool,
    /// Turn special-token text (`<|im_start|>`) into the special token.
    #[serde(default = "yes")]
    parse_special: bool,
}

fn yes() -> bool {
    true
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

/// `POST /tokenize`.
pub async fn tokenize(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: TokenizeRequest = parse_json(FLAVOR, &body)?;
        let model = model_or_default(&state, request.model.as_deref())?;
        let tokens = model
            .file
            .tokenizer
            .encode(&request.content, request.add_special, request.parse_special)
            .map_err(|e| ApiError::bad_request(FLAVOR, e.to_string()))?;
        Ok::<_, ApiError>(Json(json!({ "tokens": tokens })))
    })();
    result.map_or_else(IntoResponse::into_response, IntoResponse::into_response)
}

/// `POST /detokenize`.
pub async fn detokenize(State(state): State<AppState>, body: Bytes) -> Response {
    let result = (|| {
        let request: DetokenizeRequest = parse_json(FLAVOR, &body)?;
        let model = model_or_default(&state, request.model.as_deref())?;
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
    })();
    result.map_or_else(IntoResponse::into_response, IntoResponse::into_response)
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
