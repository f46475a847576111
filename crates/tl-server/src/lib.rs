//! `tl serve`: an HTTP server speaking OpenAI's (`/v1/*`) and Ollama's
//! (`/api/*`) protocols over the engine.
//!
//! Layout, following the request's path:
//! - [`http`]: axum routes; each handler parses the body into native types
//!   at the edge, renders the chat template, tokenizes, and sends a
//!   [`engine::Job`] to the engine with its own event channel;
//! - [`engine`]: one thread that owns the loaded models and every sequence's KV
//!   cache and runs the scheduler (admission between decode steps, chunked
//!   prefill, a sampler per sequence, cancellation when a client goes away);
//! - [`registry`]: the models the server knows (tokenizer and template are
//!   loaded at start; weights only when a request needs them), and the
//!   [`presets`] made for them by Ollama's `/api/create` and `/api/copy`;
//! - [`metrics`]: counters and histograms for `GET /metrics`.

pub mod config;
pub mod engine;
pub mod error;
pub mod http;
pub mod metrics;
pub mod presets;
pub mod registry;

pub use config::{ModelSource, PullProgress, Pulled, ServerConfig};
pub use error::{Error, Result};
pub use http::{serve, ServeEvent};
