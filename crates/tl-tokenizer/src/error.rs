//! Errors of tokenizer construction and use.

use thiserror::Error;

/// Errors raised while building or using a tokenizer.
#[derive(Debug, Error)]
pub enum Error {
    /// The GGUF metadata could not be read.
    #[error(transparent)]
    Gguf(#[from] tl_gguf::Error),

    /// The vocabulary metadata is missing or inconsistent.
    #[error("invalid vocabulary: {0}")]
    InvalidVocab(String),

    /// The tokenizer model or pre-tokenizer is not supported.
    #[error("unsupported tokenizer: {0}")]
    Unsupported(String),

    /// A pre-tokenizer regex failed to compile or to run (e.g. it backtracked too much).
    #[error("pre-tokenizer regex {pattern:?}: {message}")]
    Regex {
        /// The regex as written in the pre-tokenizer table.
        pattern: String,
        /// What the regex engine reported.
        message: String,
    },

    /// A token id is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab_size} tokens")]
    UnknownTokenId {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
}

/// Result alias for the tokenizer.
pub type Result<T> = std::result::Result<T, Error>;
