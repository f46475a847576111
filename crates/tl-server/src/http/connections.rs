//! Accepting and serving connections, with the bounds a public server needs:
//! - at most `max_connections` open at once (below the process's limit on
//!   open files, so accepting never fails for want of one); further clients
//!   wait in the listen backlog until one closes (so a flood of connections
//!   that send nothing delays others by at most `header_timeout`);
//! - a request's headers must arrive within `header_timeout` (a client that
//!   sends them a byte at a time is dropped, and so is a kept-alive
//!   connection that sends nothing), and its body within `body_timeout`
//!   (the `read_body_in_time` middleware).
//!
//! Each connection runs on its own task; on shutdown the accept loop stops,
//! open connections finish their current response, and [`Connections::closed`]
//! resolves when the last one has gone.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::error::{ApiError, Flavor};

/// Bounds on connections and how long a request may take to arrive.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_body_bytes: usize,
}

impl Limits {
    /// The server's settings: `timeout` for headers and again for a body, and
    /// `max_connections` or else the open-file limit less 100 (for model
    /// files, logs and the runtime's own descriptors), at most 16384.
    pub fn new(max_connections: Option<usize>, timeout: Duration, max_body_bytes: usize) -> Limits {
        let fitting = open_file_limit().saturating_sub(100).clamp(16, 16_384);
        Limits {
            max_connections: max_connections.unwrap_or(fitting),
            header_timeout: timeout,
            body_timeout: timeout,
            max_body_bytes,
        }
    }
}

/// The soft limit on open files (Linux: from /proc; elsewhere a common default).
fn open_file_limit() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(1024)
}

/// Serves `router` on `listener` until `stop` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl std::future::Future<Output = ()>,
) -> Connections {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stopping, stop_requested) = watch::channel(false);
    let router = router.layer(axum::middleware::from_fn(move |request, next| {
        read_body_in_time(request, next, limits)
    }));
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit,
            () = &mut stop => break,
        };
        let Ok(permit) = permit else { break };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or a client gone before we took it:
                    // pause briefly rather than spin.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stop_requested = stop_requested.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let finished = tokio::select! {
                result = connection.as_mut() => Some(result),
                _ = stop_requested.wait_for(|stop| *stop) => None,
            };
            let result = match finished {
                Some(result) => result,
                None => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    let _ = stopping.send(true);
    Connections {
        slots,
        max: limits.max_connections,
        _stopping: stopping,
    }
}

/// The connections still open once the server stopped accepting.
pub struct Connections {
    slots: Arc<Semaphore>,
    max: usize,
    /// Keeps the stop signal alive for connections still finishing.
    _stopping: watch::Sender<bool>,
}

impl Connections {
    /// Resolves when every connection has closed.
    pub async fn closed(&self) {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.slots.acquire_many(all).await;
    }
}

/// Reads the request's body within the body timeout (a body sent a byte at
/// a time, or one that never ends, gets 408) and up to the size limit (413,
/// at once when the declared length is over it); the handler then gets it
/// whole.
async fn read_body_in_time(request: Request, next: Next, limits: Limits) -> Response {
    let flavor = Flavor::of_path(request.uri().path());
    let too_large = || {
        let message = format!("the body is larger than {} bytes", limits.max_body_bytes);
        ApiError::new(flavor, StatusCode::PAYLOAD_TOO_LARGE, message).into_response()
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, limits.max_body_bytes);
    let bytes: Bytes = match tokio::time::timeout(limits.body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if e.to_string().contains("length limit") => return too_large(),
        Ok(Err(e)) => {
            let message = format!("cannot read the body: {e}");
            return ApiError::bad_request(flavor, message).into_response();
        }
        Err(_) => {
            let message = format!("the body did not arrive within {:?}", limits.body_timeout);
            return ApiError::new(flavor, StatusCode::REQUEST_TIMEOUT, message).into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
