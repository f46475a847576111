//! Reading GGUF files: the header, metadata and tensor table are parsed and
//! validated at open time (see `header.rs`); tensor data stays in the memory map
//! until asked for, and the accessors here only look things up.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;

use crate::error::{Error, Result};
use crate::header::parse_header;
use crate::tensor_info::TensorInfo;
use crate::value::{Array, StringArray, Value};

/// The four magic bytes at the start of every GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";
/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The bytes of a GGUF file: memory-mapped from disk, or owned (tests, writers).
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map) => map,
            Bytes::Owned(vec) => vec,
        }
    }
}

/// An opened, validated GGUF file.
pub struct GgufFile {
    bytes: Bytes,
    version: u32,
    metadata: Vec<(String, Value)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.version)
            .field("metadata_entries", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Opens and validates a GGUF file, mapping it into memory.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let io_err = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if path.is_dir() {
            // Opening succeeds and mapping fails with ENODEV ("No such
            // device"), which would not say what is wrong.
            return Err(io_err(std::io::ErrorKind::IsADirectory.into()));
        }
        let file = File::open(path).map_err(io_err)?;
        // SAFETY: the map is read-only and private to this process. If another
        // process truncates or rewrites the file while it is mapped, reads may fault
        // or see new bytes; like every mmap-based model loader we accept that and
        // document that model files must not be modified while in use.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
        Self::parse(Bytes::Mapped(map))
    }

    /// Parses and validates GGUF bytes held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(Bytes::Owned(bytes))
    }

    fn parse(bytes: Bytes) -> Result<Self> {
        let header = parse_header(&bytes)?;
        Ok(GgufFile {
            bytes,
            version: header.version,
            metadata_index: header.metadata_index,
            metadata: header.metadata,
            tensor_index: header.tensor_index,
            tensors: header.tensors,
            alignment: header.alignment,
            data_offset: header.data_offset,
        })
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Alignment of the data section and of each tensor's data.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Byte offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// All metadata entries, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of a metadata key, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// The value of a key that must be present.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key)
            .ok_or_else(|| Error::MissingKey(key.to_string()))
    }

    /// A string value (`Ok(None)` when absent, an error when of another type).
    pub fn get_str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "string", Value::as_str)
    }

    /// An unsigned integer value of any width.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>> {
        self.typed(key, "unsigned integer", Value::as_u64)
    }

    /// A signed integer value of any width.
    pub fn get_i64(&self, key: &str) -> Result<Option<i64>> {
        self.typed(key, "integer", Value::as_i64)
    }

    /// A float value of either width.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>> {
        self.typed(key, "float", Value::as_f64)
    }

    /// A bool value.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "bool", Value::as_bool)
    }

    /// An array value.
    pub fn get_array(&self, key: &str) -> Result<Option<&Array>> {
        self.typed(key, "array", Value::as_array)
    }

    /// An array of strings.
    pub fn get_string_array(&self, key: &str) -> Result<Option<&StringArray>> {
        match self.get_array(key)? {
            None => Ok(None),
            Some(Array::String(items)) => Ok(Some(items)),
            Some(_) => Err(self.wrong_type(key, "array of string")),
        }
    }

    fn typed<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        convert: impl Fn(&'s Value) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => convert(value)
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, expected)),
        }
    }

    fn wrong_type(&self, key: &str, expected: &'static str) -> Error {
        Error::WrongType {
            key: key.to_string(),
            expected,
            found: self
                .get(key)
                .map_or_else(|| "nothing".to_string(), Value::type_description),
        }
    }

    /// All tensor descriptors, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The descriptor of a tensor, if present.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }

    /// The raw bytes of a tensor (in its GGML layout), borrowed from the map.
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let info = self
            .tensor_info(name)
            .ok_or_else(|| Error::TensorNotFound(name.to_string()))?;
        Ok(self.data_of(info))
    }

    /// The raw bytes described by `info`.
    ///
    /// # Panics
    ///
    /// If `info` does not come from this file (a caller's bug, not bad input):
    /// every extent in this file was checked at open time to lie inside it.
    pub fn data_of(&self, info: &TensorInfo) -> &[u8] {
        let start = (self.data_offset + info.offset) as usize;
        &self.bytes[start..start + info.size_bytes as usize]
    }
}
