//! Writing GGUF files, for tests and for `tl model synth` (random-weight models of
//! real shapes, up to several GB).
//!
//! Metadata and tensor descriptors are collected first; `write_to` then checks
//! everything and plans the layout before the first byte goes out, and streams the
//! tensor data one tensor at a time, so data from a generator is never held in
//! memory. `write_to_path` writes beside the destination and renames into place, so
//! a failure never leaves a half-written model under the final name.
//!
//! The layout matches llama.cpp's writer: the data section and every tensor start
//! at a multiple of the alignment, and every tensor (the last one too) is padded
//! with zeros to the next multiple.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::byte_count::{CountingWriter, LimitedWriter};
use crate::encode;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::reader::{DEFAULT_ALIGNMENT, MAGIC};
use crate::tensor_info::data_size;
use crate::value::{Value, MAX_ARRAY_DEPTH};

/// The metadata key that overrides the default alignment.
const ALIGNMENT_KEY: &str = "general.alignment";
/// llama.cpp keeps tensor names in a 64-byte buffer that ends with a NUL.
const MAX_TENSOR_NAME_BYTES: usize = 63;
/// Large enough that the many small writes of a header (a vocabulary is ~100k
/// strings) and of generated data reach the file in big chunks.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Writes one tensor's bytes in its GGML layout to the stream it is given.
pub type DataGenerator = Box<dyn Fn(&mut dyn Write) -> io::Result<()> + Send + Sync>;

/// Where a tensor's bytes come from.
pub enum TensorData {
    /// The bytes, already in the tensor's GGML layout.
    Bytes(Vec<u8>),
    /// A generator that writes exactly the tensor's size in bytes each time it is
    /// called (once per `write_to`), so large tensors never sit in memory.
    /// Writing more fails inside the generator; writing less fails the write.
    Generated(DataGenerator),
}

impl TensorData {
    /// Wraps a generator closure (saves the caller a `Box::new`).
    pub fn generated(
        generate: impl Fn(&mut dyn Write) -> io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        Self::Generated(Box::new(generate))
    }
}

impl fmt::Debug for TensorData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bytes(bytes) => write!(f, "Bytes({} bytes)", bytes.len()),
            Self::Generated(_) => f.write_str("Generated"),
        }
    }
}

/// A tensor waiting to be written; dims, type and size were validated when added.
#[derive(Debug)]
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    size_bytes: u64,
    data: TensorData,
}

/// Builds a GGUF file: metadata in insertion order, then tensors in insertion order.
#[derive(Debug)]
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

/// Where everything goes, computed before the first byte is written.
struct Layout {
    alignment: u64,
    /// Each tensor's offset from the start of the data section.
    tensor_offsets: Vec<u64>,
}

impl GgufWriter {
    /// A writer for GGUF `version` (2 or 3; checked when writing, since the two
    /// differ only in the version field).
    pub fn new(version: u32) -> Self {
        Self {
            version,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Sets a metadata value: an existing key keeps its place and gets the new
    /// value, a new key goes last. `general.alignment` (a `U32` power of two)
    /// changes the alignment of the data section, 32 by default.
    pub fn set_metadata(&mut self, key: impl Into<String>, value: Value) -> &mut Self {
        let key = key.into();
        match self
            .metadata
            .iter_mut()
            .find(|(existing, _)| *existing == key)
        {
            Some((_, slot)) => *slot = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Adds a tensor of `dims` in GGML order (`dims[0]` is the row length) and type
    /// `ggml_type`. Fails for a duplicate or over-long name, dims GGML cannot hold
    /// (0 or more than 4, rows not whole blocks, sizes that overflow) and `Bytes`
    /// of another length than the tensor's size.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: Vec<u64>,
        ggml_type: GgmlType,
        data: TensorData,
    ) -> Result<&mut Self> {
        let name = name.into();
        let size_bytes = self.check_new_tensor(&name, &dims, ggml_type, &data)?;
        self.tensors.push(PendingTensor {
            name,
            dims,
            ggml_type,
            size_bytes,
            data,
        });
        Ok(self)
    }

    /// Returns the new tensor's size in bytes, once it is known to be writable.
    fn check_new_tensor(
        &self,
        name: &str,
        dims: &[u64],
        ggml_type: GgmlType,
        data: &TensorData,
    ) -> Result<u64> {
        let invalid = |reason: String| Error::Write(format!("tensor '{name}': {reason}"));
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(invalid("a tensor of this name was already added".into()));
        }
        if name.len() > MAX_TENSOR_NAME_BYTES {
            return Err(invalid(format!(
                "name is {} bytes, llama.cpp allows at most {MAX_TENSOR_NAME_BYTES}",
                name.len()
            )));
        }
        let size_bytes = data_size(dims, ggml_type).map_err(invalid)?;
        if let TensorData::Bytes(bytes) = data {
            if bytes.len() as u64 != size_bytes {
                return Err(invalid(format!(
                    "{} bytes of data given, a {ggml_type} tensor of dims {dims:?} holds {size_bytes}",
                    bytes.len()
                )));
            }
        }
        Ok(size_bytes)
    }

    /// Writes the file to `path`, through `PATH.tmp` renamed into place on success
    /// and removed on failure.
    pub fn write_to_path(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        // Refuse an invalid writer before touching the disk.
        self.plan()?;
        let temp = temp_path_for(path);
        let written = self
            .write_file(&temp)
            .and_then(|()| fs::rename(&temp, path).map_err(io_error_at(path)));
        if written.is_err() {
            // Best effort: the error that made us clean up is the one to report.
            let _ = fs::remove_file(&temp);
        }
        written
    }

    fn write_file(&self, path: &Path) -> Result<()> {
        let mut file = File::create(path).map_err(io_error_at(path))?;
        self.write_to(&mut file)?;
        // Synced before the rename, so a crash cannot leave a renamed but empty file.
        file.sync_all().map_err(io_error_at(path))
    }

    /// The whole file in memory; for tests and small files.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.write_to(&mut bytes)?;
        Ok(bytes)
    }

    /// Streams the file to `out` (buffered here, so `out` need not be).
    pub fn write_to(&self, out: &mut impl Write) -> Result<()> {
        let layout = self.plan()?;
        let mut out = CountingWriter::new(BufWriter::with_capacity(WRITE_BUFFER_BYTES, out));
        self.write_header(&mut out, &layout)
            .map_err(write_io_error("header"))?;
        let data_offset = out.written();
        for (tensor, &offset) in self.tensors.iter().zip(&layout.tensor_offsets) {
            out.pad_to(data_offset + offset)
                .map_err(write_io_error("padding"))?;
            write_tensor_data(&mut out, tensor)?;
        }
        let end = out.written().next_multiple_of(layout.alignment);
        out.pad_to(end).map_err(write_io_error("padding"))?;
        out.flush().map_err(write_io_error("the end of the file"))
    }

    /// Checks what could not be checked as it was set, and places every tensor.
    fn plan(&self) -> Result<Layout> {
        if !(2..=3).contains(&self.version) {
            return Err(Error::Write(format!(
                "GGUF version {} cannot be written (2 or 3)",
                self.version
            )));
        }
        self.check_array_depths()?;
        let alignment = self.alignment()?;
        let mut tensor_offsets = Vec::with_capacity(self.tensors.len());
        let mut next_offset = 0u64;
        for tensor in &self.tensors {
            tensor_offsets.push(next_offset);
            next_offset = next_offset
                .checked_add(tensor.size_bytes)
                .and_then(|end| end.checked_next_multiple_of(alignment))
                .ok_or_else(|| Error::Write("tensor data exceeds 2^64 bytes".into()))?;
        }
        Ok(Layout {
            alignment,
            tensor_offsets,
        })
    }

    /// The reader refuses arrays nested deeper than it recurses.
    fn check_array_depths(&self) -> Result<()> {
        for (key, value) in &self.metadata {
            if let Value::Array(array) = value {
                if array.nesting_depth() > MAX_ARRAY_DEPTH {
                    return Err(Error::Write(format!(
                        "metadata '{key}': arrays nested {} deep, at most {MAX_ARRAY_DEPTH} can be read back",
                        array.nesting_depth()
                    )));
                }
            }
        }
        Ok(())
    }

    /// llama.cpp reads `general.alignment` as a `u32` only, so nothing else is written.
    fn alignment(&self) -> Result<u64> {
        match self.metadata.iter().find(|(key, _)| key == ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((_, Value::U32(a))) if a.is_power_of_two() => Ok(u64::from(*a)),
            Some((_, other)) => Err(Error::Write(format!(
                "metadata '{ALIGNMENT_KEY}' must be a u32 power of two, found {} {other}",
                other.type_description()
            ))),
        }
    }

    /// Everything before the data section, padded to the alignment.
    fn write_header<W: Write>(
        &self,
        out: &mut CountingWriter<W>,
        layout: &Layout,
    ) -> io::Result<()> {
        out.write_all(MAGIC)?;
        encode::u32(out, self.version)?;
        encode::u64(out, self.tensors.len() as u64)?;
        encode::u64(out, self.metadata.len() as u64)?;
        for (key, value) in &self.metadata {
            encode::key_value(out, key, value)?;
        }
        for (tensor, &offset) in self.tensors.iter().zip(&layout.tensor_offsets) {
            encode::tensor_info(out, &tensor.name, &tensor.dims, tensor.ggml_type, offset)?;
        }
        out.pad_to(out.written().next_multiple_of(layout.alignment))
    }
}

fn write_tensor_data(out: &mut impl Write, tensor: &PendingTensor) -> Result<()> {
    let context = || format!("data of tensor '{}'", tensor.name);
    match &tensor.data {
        TensorData::Bytes(bytes) => out.write_all(bytes).map_err(write_io_error(context())),
        TensorData::Generated(generate) => {
            let mut limited = LimitedWriter::new(out, tensor.size_bytes);
            generate(&mut limited).map_err(write_io_error(context()))?;
            if limited.written() != tensor.size_bytes {
                return Err(Error::Write(format!(
                    "{}: the generator wrote {} bytes, the tensor holds {}",
                    context(),
                    limited.written(),
                    tensor.size_bytes
                )));
            }
            Ok(())
        }
    }
}

/// `PATH.tmp`, in the destination's directory so the final rename stays on one
/// file system (and is atomic there).
fn temp_path_for(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn io_error_at(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::WriteIo { context, source }
}
