//! Errors as each API writes them: OpenAI's `{"error": {"message", "type",
//! "code"}}` for `/v1/*` and the utility routes, Ollama's `{"error": "..."}`
//! for `/api/*`, with the status code that says what went wrong.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Which protocol's error shape to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenAi,
    Ollama,
}

impl Flavor {
    /// The flavor of a request path.
    pub fn of_path(path: &str) -> Flavor {
        if path.starts_with("/api/") {
            Flavor::Ollama
        } else {
            Flavor::OpenAi
        }
    }
}

/// A request that failed, ready to be written in its API's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub flavor: Flavor,
    /// Seconds a client should wait before retrying (429 and 503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(flavor: Flavor, status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            flavor,
            retry_after: None,
        }
    }

    pub fn bad_request(flavor: Flavor, message: impl Into<String>) -> Self {
        Self::new(flavor, StatusCode::BAD_REQUEST, message)
    }

    pub fn unknown_model(flavor: Flavor, name: &str) -> Self {
        Self::new(
            flavor,
            StatusCode::NOT_FOUND,
            format!("model '{name}' not found (GET /v1/models or /api/tags lists the models)"),
        )
    }

    pub fn queue_full(flavor: Flavor) -> Self {
        ApiError {
            retry_after: Some(1),
            ..Self::new(
                flavor,
                StatusCode::TOO_MANY_REQUESTS,
                "the server is busy: too many requests are waiting; retry shortly",
            )
        }
    }

    pub fn internal(flavor: Flavor, message: impl Into<String>) -> Self {
        Self::new(flavor, StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        match self.flavor {
            Flavor::Ollama => json!({ "error": self.message }),
            Flavor::OpenAi => json!({
                "error": {
                    "message": self.message,
                    "type": openai_type(self.status),
                    "param": null,
                    "code": self.status.as_u16(),
                }
            }),
        }
    }
}

/// OpenAI's error `type` for a status.
fn openai_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::NOT_FOUND => "not_found_error",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        s if s.is_server_error() => "server_error",
        _ => "invalid_request_error",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// Parses a JSON body into `T`: malformed JSON, a missing required field or a
/// field of the wrong type is a 400 that names the problem.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    flavor: Flavor,
    body: &[u8],
) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(flavor, format!("invalid request body: {e}")))
}

/// For `#[serde(default, deserialize_with = "or_default")]`: a field a
/// client may leave out or send as `null` (OpenAI's clients send `null` for
/// every optional field they were not given), both meaning its default.
pub fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_each_api() {
        let e = ApiError::bad_request(Flavor::OpenAi, "nope");
        assert_eq!(e.body()["error"]["message"], "nope");
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
        let e = ApiError::unknown_model(Flavor::Ollama, "x");
        assert!(e.body()["error"]
            .as_str()
            .is_some_and(|m| m.contains("'x'")));
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct R {
            max_tokens: Option<u32>,
        }
        let e = parse_json::<R>(Flavor::OpenAi, br#"{"max_tokens": "ten"}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.message.contains("max_tokens") || e.message.contains("invalid type"),
            "{}",
            e.message
        );
        assert!(parse_json::<R>(Flavor::OpenAi, b"{").is_err());
        assert!(parse_json::<R>(Flavor::OpenAi, br#"{"other": 1}"#).is_ok());
    }
}
