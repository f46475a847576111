//! CORS for browser front ends, off unless `--cors ORIGIN` is given: the
//! listed origins (or any, with `*`) get answered preflight requests and
//! `Access-Control-Allow-Origin` on every response, errors included, so a
//! page can read why a request failed. Preflights are answered before the
//! API-key check, since browsers send them without credentials.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The methods the routes use.
const METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// Headers allowed when a preflight names none.
const DEFAULT_HEADERS: &str = "authorization, content-type";
/// How long browsers may cache a preflight's answer (a day).
const MAX_AGE_SECONDS: &str = "86400";

/// Which origins may call the server.
#[derive(Debug, Clone)]
pub struct CorsPolicy {
    origins: Arc<[String]>,
}

impl CorsPolicy {
    pub fn new(origins: &[String]) -> Self {
        CorsPolicy {
            origins: origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_owned())
                .collect(),
        }
    }

    pub fn is_on(&self) -> bool {
        !self.origins.is_empty()
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        if self.origins.iter().any(|o| o == "*") {
            return Some(HeaderValue::from_static("*"));
        }
        let origin_text = origin.to_str().ok()?;
        self.origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin_text))
            .then(|| origin.clone())
    }
}

/// Answers preflights from allowed origins and marks their responses.
pub async fn cors(State(policy): State<CorsPolicy>, request: Request, next: Next) -> Response {
    let allowed = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|origin| policy.allow(origin));
    let Some(allowed) = allowed else {
        return next.run(request).await;
    };
    let is_preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if is_preflight {
        return preflight(allowed, request.headers());
    }
    let mut response = next.run(request).await;
    mark(response.headers_mut(), allowed);
    response
}

fn preflight(allowed: HeaderValue, asked: &HeaderMap) -> Response {
    let headers = asked
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or(HeaderValue::from_static(DEFAULT_HEADERS));
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    mark(out, allowed);
    out.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(METHODS),
    );
    out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, headers);
    out.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(MAX_AGE_SECONDS),
    );
    response
}

fn mark(headers: &mut HeaderMap, allowed: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
    // Answers differ by origin, so caches must keep them apart.
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("retry-after"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_are_allowed() {
        let policy = CorsPolicy::new(&["http://localhost:3000/".into()]);
        let ok = HeaderValue::from_static("http://localhost:3000");
        assert_eq!(policy.allow(&ok), Some(ok.clone()));
        assert_eq!(
            policy.allow(&HeaderValue::from_static("http://evil.example")),
            None
        );
        let any = CorsPolicy::new(&["*".into()]);
        assert_eq!(any.allow(&ok), Some(HeaderValue::from_static("*")));
        assert!(!CorsPolicy::new(&[]).is_on());
    }
}
