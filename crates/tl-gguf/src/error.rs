//! Errors of the GGUF reader and writer. Every parse error names the field being
//! read and the byte offset where it starts, so a corrupt file can be diagnosed
//! with a hex dump.

use std::path::PathBuf;
use thiserror::Error;

/// Errors raised while reading or writing GGUF files.
#[derive(Debug, Error)]
pub enum Error {
    /// The file could not be opened, mapped or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The bytes do not start with the GGUF magic.
    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    NotGguf {
        /// The first bytes found.
        found: Vec<u8>,
    },

    /// The file is GGUF, but of a version this reader does not handle.
    #[error("unsupported GGUF version {0} (supported: 2, 3){hint}", hint = big_endian_hint(*.0))]
    UnsupportedVersion(u32),

    /// The file is truncated, inconsistent or otherwise malformed.
    #[error("malformed GGUF at byte {offset}: {field}: {reason}")]
    Malformed {
        /// Byte offset of the field in the file.
        offset: u64,
        /// What was being read (e.g. `tensor_info[3].dims`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A tensor uses a quantisation type that this build does not know.
    #[error("tensor '{tensor}' at byte {offset} has unsupported type {type_name} (id {type_id})")]
    UnsupportedTensorType {
        /// The tensor's name.
        tensor: String,
        /// Byte offset of the type field in the file.
        offset: u64,
        /// The type's id in the file.
        type_id: u32,
        /// The type's name if known (e.g. `IQ2_XXS`), else `unknown`.
        type_name: &'static str,
    },

    /// A metadata key is missing.
    #[error("metadata key '{0}' is missing")]
    MissingKey(String),

    /// A metadata key holds a value of another type than expected.
    #[error("metadata key '{key}' holds {found}, expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// The expected type.
        expected: &'static str,
        /// The type found.
        found: String,
    },

    /// No tensor of that name exists.
    #[error("tensor '{0}' not found")]
    TensorNotFound(String),

    /// A value given to the writer cannot be encoded.
    #[error("cannot write GGUF: {0}")]
    Write(String),

    /// The writer's output stream (or a tensor data generator) failed.
    #[error("cannot write GGUF: {context}: {source}")]
    WriteIo {
        /// What was being written (e.g. `data of tensor 'output.weight'`).
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A big-endian GGUF file shows its version byte-swapped; saying so beats a bare
/// "unsupported version 50331648".
fn big_endian_hint(version: u32) -> &'static str {
    if (2..=3).contains(&version.swap_bytes()) {
        " - this looks like a big-endian GGUF file, which is not supported"
    } else {
        ""
    }
}

/// Result alias for GGUF operations.
pub type Result<T> = std::result::Result<T, Error>;
