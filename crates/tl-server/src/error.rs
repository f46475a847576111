//! Errors of the server crate.

use std::path::PathBuf;

/// What can go wrong starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read model {path}: {message}")]
    Model { path: PathBuf, message: String },
    #[error("two models are both named '{0}' (rename one of the files)")]
    DuplicateModel(String),
    #[error("{} and {} are the same file (give each model once)", first.display(), second.display())]
    SameFile { first: PathBuf, second: PathBuf },
    #[error("no model to serve")]
    NoModel,
    // Not named `source`: the message already says it, and a source would
    // be printed a second time after it.
    #[error("cannot listen on {address}: {reason}")]
    Bind {
        address: String,
        reason: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("invalid setting: {0}")]
    Config(String),
}

pub type Result<T> = std::result::Result<T, Error>;
