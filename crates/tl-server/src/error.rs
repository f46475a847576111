//! Errors of the server crate.

use std::path::PathBuf;

/// What can go wrong starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read model {path}: {message}")]
    Model { path: PathBuf, message: String },
    #[error("two models are both named '{0}' (rename one of the files)")]
    DuplicateModel(String),
    #[error("no model to serve")]
    NoModel,
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("invalid setting: {0}")]
    Config(String),
}

pub type Result<T> = std::result::Result<T, Error>;
