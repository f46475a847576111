//! GGUF files: a strict reader (memory-mapped, every count, size, offset and
//! alignment validated with overflow-checked arithmetic before use) and a writer.
//!
//! Format reference: a header (magic `GGUF`, version, tensor count, metadata count),
//! metadata key/value pairs, tensor descriptors, then the data section aligned to
//! `general.alignment` (default 32), each tensor's data at an aligned offset.

mod byte_count;
mod cursor;
mod encode;
pub mod error;
pub mod ggml_type;
mod header;
pub mod reader;
pub mod tensor_info;
pub mod value;
pub mod writer;

pub use error::{Error, Result};
pub use ggml_type::GgmlType;
pub use reader::GgufFile;
pub use tensor_info::TensorInfo;
pub use value::{Array, StringArray, Value, ValueType};
pub use writer::{DataGenerator, GgufWriter, TensorData};
