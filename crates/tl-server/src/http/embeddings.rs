//! Embeddings from the served model: OpenAI's `POST /v1/embeddings`,
//! Ollama's `POST /api/embed` and its older `POST /api/embeddings`. Each
//! input's vector is the mean of the model's final hidden states over its
//! tokens, scaled to unit length (`tl_engine::embedding`), the same as
//! llama.cpp's `llama-embedding --pooling mean --embd-normalize 2`.
//!
//! Inputs are tokenized as a raw completion prompt is (BOS added when the
//! model wants one; special-token text becomes special tokens, as in
//! llama.cpp). Bounds: at most [`MAX_INPUTS`] inputs and [`MAX_TOTAL_TOKENS`]
//! tokens a request (OpenAI's limits), no empty input, and each input within
//! the context: a longer one is a 400 unless Ollama's `truncate: true` asks
//! to cut it (Ollama cuts by default; here it must be asked for).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::error::{parse_json, ApiError, Flavor};
use super::generation::{check_fits, find_model, refused};
use super::AppState;
use crate::engine::{EmbedJob, Embedded, Place};
use crate::registry::ModelEntry;

/// Most inputs one request may embed (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;
/// Most tokens of all of one request's inputs together (OpenAI's limit).
pub const MAX_TOTAL_TOKENS: usize = 300_000;

/// OpenAI's `input`: text, texts, token ids, or lists of token ids.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "`input` takes a string, a list of strings, a list of token ids or a list of lists of token ids"
)]
enum OpenAiInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<i64>),
    TokenLists(Vec<Vec<i64>>),
}

/// Ollama's `input`: text or texts.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "`input` takes a string or a list of strings")]
enum OllamaInput {
    Text(String),
    Texts(Vec<String>),
}

#[derive(Debug, Deserialize)]
struct OpenAiRequest {
    model: String,
    input: OpenAiInput,
    encoding_format: Option<String>,
    dimensions: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct OllamaEmbedRequest {
    model: String,
    input: OllamaInput,
    truncate: Option<bool>,
    dimensions: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct OllamaLegacyRequest {
    model: String,
    prompt: String,
}

/// One input as the request gave it.
enum Input {
    Text(String),
    /// Token ids as sent (checked against the vocabulary later).
    Tokens(Vec<i64>),
}

/// What an embedding request asks, in any API.
struct Asked {
    model: String,
    inputs: Vec<Input>,
    dimensions: Option<i64>,
    /// Cut inputs longer than the context instead of refusing them.
    truncate: bool,
}

/// How OpenAI's vectors are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Float,
    /// Little-endian f32 bytes in base64 (what the `openai` client asks for).
    Base64,
}

/// `POST /v1/embeddings`.
pub async fn openai(State(state): State<AppState>, body: Bytes) -> Response {
    let flavor = Flavor::OpenAi;
    let result = async {
        let request: OpenAiRequest = parse_json(flavor, &body)?;
        let encoding = match request.encoding_format.as_deref() {
            None | Some("float") => Encoding::Float,
            Some("base64") => Encoding::Base64,
            Some(other) => {
                return Err(ApiError::bad_request(
                    flavor,
                    format!("encoding_format must be 'float' or 'base64', not '{other}'"),
                ))
            }
        };
        let inputs = match request.input {
            OpenAiInput::Text(text) => vec![Input::Text(text)],
            OpenAiInput::Texts(texts) => texts.into_iter().map(Input::Text).collect(),
            OpenAiInput::Tokens(ids) => vec![Input::Tokens(ids)],
            OpenAiInput::TokenLists(lists) => lists.into_iter().map(Input::Tokens).collect(),
        };
        let asked = Asked {
            model: request.model,
            inputs,
            dimensions: request.dimensions,
            truncate: false,
        };
        let (model, embedded) = embed(&state, flavor, asked).await?;
        let data = embedded
            .vectors
            .iter()
            .enumerate()
            .map(|(index, vector)| OpenAiEmbedding {
                object: "embedding",
                index,
                embedding: match encoding {
                    Encoding::Float => Encoded::Float(vector),
                    Encoding::Base64 => Encoded::Base64(base64_f32(vector)),
                },
            })
            .collect();
        let tokens = embedded.prompt_tokens;
        Ok::<_, ApiError>(
            Json(OpenAiList {
                object: "list",
                data,
                model: &model.name,
                usage: Usage {
                    prompt_tokens: tokens,
                    total_tokens: tokens,
                },
            })
            .into_response(),
        )
    };
    result.await.into_response()
}

// The answers are typed rather than `json!` values, which would widen each
// f32 to f64 and print it with 17 digits: as f32s they print in their
// shortest exact form, half the bytes.

/// OpenAI's answer.
#[derive(Serialize)]
struct OpenAiList<'a> {
    object: &'static str,
    data: Vec<OpenAiEmbedding<'a>>,
    model: &'a str,
    usage: Usage,
}

#[derive(Serialize)]
struct OpenAiEmbedding<'a> {
    object: &'static str,
    index: usize,
    embedding: Encoded<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Encoded<'a> {
    Float(&'a [f32]),
    Base64(String),
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: usize,
    total_tokens: usize,
}

/// Ollama's `/api/embed` answer (durations in nanoseconds).
#[derive(Serialize)]
struct OllamaEmbedAnswer<'a> {
    model: &'a str,
    embeddings: &'a [Vec<f32>],
    total_duration: u64,
    load_duration: u64,
    prompt_eval_count: usize,
}

/// Ollama's `/api/embeddings` answer.
#[derive(Serialize)]
struct OllamaLegacyAnswer<'a> {
    embedding: &'a [f32],
}

/// `POST /api/embed`.
pub async fn ollama_embed(State(state): State<AppState>, body: Bytes) -> Response {
    let flavor = Flavor::Ollama;
    let result = async {
        let request: OllamaEmbedRequest = parse_json(flavor, &body)?;
        let inputs = match request.input {
            OllamaInput::Text(text) => vec![Input::Text(text)],
            OllamaInput::Texts(texts) => texts.into_iter().map(Input::Text).collect(),
        };
        let asked = Asked {
            model: request.model,
            inputs,
            dimensions: request.dimensions,
            truncate: request.truncate.unwrap_or(false),
        };
        let (model, embedded) = embed(&state, flavor, asked).await?;
        let nanos = |d: std::time::Duration| d.as_nanos() as u64;
        Ok::<_, ApiError>(
            Json(OllamaEmbedAnswer {
                model: &model.name,
                embeddings: &embedded.vectors,
                total_duration: nanos(embedded.total_time),
                load_duration: nanos(embedded.load_time),
                prompt_eval_count: embedded.prompt_tokens,
            })
            .into_response(),
        )
    };
    result.await.into_response()
}

/// `POST /api/embeddings`, Ollama's older route: one `prompt`, one
/// `embedding` (unit length here too; Ollama's own is not normalised).
pub async fn ollama_legacy(State(state): State<AppState>, body: Bytes) -> Response {
    let flavor = Flavor::Ollama;
    let result = async {
        let request: OllamaLegacyRequest = parse_json(flavor, &body)?;
        let asked = Asked {
            model: request.model,
            inputs: vec![Input::Text(request.prompt)],
            dimensions: None,
            truncate: false,
        };
        let (_, embedded) = embed(&state, flavor, asked).await?;
        let vector = embedded.vectors.first().map_or(&[][..], Vec::as_slice);
        Ok::<_, ApiError>(Json(OllamaLegacyAnswer { embedding: vector }).into_response())
    };
    result.await.into_response()
}

/// Checks and tokenizes the inputs off the async workers (with a place in
/// the engine's queue first, so a full queue refuses before any work), has
/// the engine embed them and waits for the vectors.
async fn embed(
    state: &AppState,
    flavor: Flavor,
    asked: Asked,
) -> Result<(Arc<ModelEntry>, Embedded), ApiError> {
    let arrived = Instant::now();
    let place = state.engine.reserve().map_err(|r| refused(flavor, r))?;
    let worker_state = state.clone();
    let prepared =
        tokio::task::spawn_blocking(move || prepare(&worker_state, flavor, asked, place, arrived))
            .await
            .unwrap_or_else(|e| {
                Err(ApiError::internal(
                    flavor,
                    format!("preparing the request failed: {e}"),
                ))
            })?;
    let (job, answer) = prepared;
    let model = job.model.clone();
    state
        .engine
        .submit_embedding(job)
        .map_err(|r| refused(flavor, r))?;
    match answer.await {
        Ok(Ok(embedded)) => Ok((model, embedded)),
        Ok(Err(message)) => Err(ApiError::internal(flavor, message)),
        Err(_) => Err(ApiError::internal(flavor, "the engine dropped the request")),
    }
}

type Answer = oneshot::Receiver<Result<Embedded, String>>;

/// The engine's job for `asked`, or the 400 (404 for an unknown model) that
/// says what is wrong with it.
fn prepare(
    state: &AppState,
    flavor: Flavor,
    asked: Asked,
    place: Place,
    arrived: Instant,
) -> Result<(EmbedJob, Answer), ApiError> {
    let model = find_model(state, flavor, &asked.model)?;
    let bad = |message: String| ApiError::bad_request(flavor, message);
    let width = model.file.config.embedding_length;
    let dimensions = match asked.dimensions {
        None => None,
        Some(d) if d >= 1 && d as u64 <= width as u64 => Some(d as usize),
        Some(d) => {
            return Err(bad(format!(
                "dimensions must be between 1 and {width} for model '{}', got {d}",
                model.name
            )))
        }
    };
    let inputs = tokenize_all(&model, asked.inputs, asked.truncate).map_err(bad)?;
    let (reply, answer) = oneshot::channel();
    let job = EmbedJob {
        model,
        inputs,
        dimensions,
        reply,
        arrived,
        place,
    };
    Ok((job, answer))
}

/// Every input's tokens, checked: some inputs and not too many, none empty,
/// each within the context (cut to it when `truncate`), all together within
/// [`MAX_TOTAL_TOKENS`].
fn tokenize_all(
    model: &ModelEntry,
    inputs: Vec<Input>,
    truncate: bool,
) -> Result<Vec<Vec<u32>>, String> {
    if inputs.is_empty() {
        return Err("'input' is empty: give at least one text".into());
    }
    if inputs.len() > MAX_INPUTS {
        return Err(format!(
            "at most {MAX_INPUTS} inputs a request, got {}",
            inputs.len()
        ));
    }
    let context = model.context;
    let mut total = 0usize;
    let mut all = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.into_iter().enumerate() {
        let mut tokens =
            tokens_of(model, input, truncate).map_err(|e| format!("input {index}: {e}"))?;
        if tokens.len() > context {
            if !truncate {
                return Err(format!(
                    "input {index} has {} tokens, more than the context of {context}",
                    tokens.len()
                ));
            }
            tokens.truncate(context);
        }
        total += tokens.len();
        if total > MAX_TOTAL_TOKENS {
            return Err(format!(
                "the inputs have more than {MAX_TOTAL_TOKENS} tokens together; send fewer at a time"
            ));
        }
        all.push(tokens);
    }
    Ok(all)
}

/// One input's tokens, non-empty: text tokenized (a text too long for the
/// context refused before tokenizing, unless it is to be cut), ids checked
/// against the vocabulary.
fn tokens_of(model: &ModelEntry, input: Input, truncate: bool) -> Result<Vec<u32>, String> {
    match input {
        Input::Text(text) if text.is_empty() => Err("the text is empty".into()),
        Input::Text(text) => {
            if !truncate {
                check_fits(&text, model, model.context)?;
            }
            let tokenizer = &model.file.tokenizer;
            tokenizer
                .encode(&text, true, true)
                .map_err(|e| format!("cannot tokenize it: {e}"))
        }
        Input::Tokens(ids) if ids.is_empty() => Err("the list of token ids is empty".into()),
        Input::Tokens(ids) => {
            let vocab = model.file.config.vocab_size;
            ids.iter()
                .map(|&id| match u32::try_from(id) {
                    Ok(token) if (token as usize) < vocab => Ok(token),
                    _ => Err(format!(
                        "token id {id} is outside the vocabulary of {vocab}"
                    )),
                })
                .collect()
        }
    }
}

/// `values` as little-endian f32 bytes in standard base64 (with padding), as
/// OpenAI writes `encoding_format: "base64"`.
fn base64_f32(values: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            *group.get(1).unwrap_or(&0),
            *group.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(ALPHABET[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_encoding() {
        // 1.0f32 = 00 00 80 3f; 1.0, -2.0 = 00 00 80 3f 00 00 00 c0.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[1.0, -2.0, 0.5]), "AACAPwAAAMAAAAA/");
        assert_eq!(base64_f32(&[]), "");
    }

    #[test]
    fn input_shapes_parse_and_wrong_ones_speak_the_api() {
        let parse = |body: &str| parse_json::<OpenAiRequest>(Flavor::OpenAi, body.as_bytes());
        assert!(matches!(
            parse(r#"{"model": "m", "input": "a"}"#).unwrap().input,
            OpenAiInput::Text(_)
        ));
        assert!(matches!(
            parse(r#"{"model": "m", "input": ["a", "b"]}"#)
                .unwrap()
                .input,
            OpenAiInput::Texts(_)
        ));
        assert!(matches!(
            parse(r#"{"model": "m", "input": [1, 2]}"#).unwrap().input,
            OpenAiInput::Tokens(_)
        ));
        assert!(matches!(
            parse(r#"{"model": "m", "input": [[1], [2, 3]]}"#)
                .unwrap()
                .input,
            OpenAiInput::TokenLists(_)
        ));
        let request =
            parse(r#"{"model": "m", "input": "a", "encoding_format": null, "dimensions": null}"#)
                .unwrap();
        assert!(request.encoding_format.is_none() && request.dimensions.is_none());
        let message = parse(r#"{"model": "m", "input": {"a": 1}}"#)
            .unwrap_err()
            .message;
        assert!(message.contains("`input` takes"), "{message}");
        assert!(!message.contains("untagged"), "{message}");
    }
}
