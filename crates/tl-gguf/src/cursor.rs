//! A bounds-checked little-endian reader over the file's bytes. Every read checks
//! the remaining length first and reports the field name and offset on failure, so
//! no malformed input can index out of bounds or allocate more than the file holds.
//!
//! What is read is also charged to a [`MemoryBudget`] before it is allocated: a
//! count bounded by the file's length still lets a file of 8-byte empty strings
//! become three times its size in `String`s, or a file of short keys ten times.

use crate::error::{Error, Result};
use crate::value::{Array, StringArray, Value, ValueType, MAX_ARRAY_DEPTH};

/// Bytes of memory the parsed header may take beyond twice the file's size: room
/// for the vocabulary of a small vocabulary-only file, whose metadata is all there
/// is (a real 150k-token vocabulary takes about 20 MB as `String`s).
const HEADER_MEMORY_ALLOWANCE: u64 = 64 << 20;

/// The memory the parsed header may still take: `2 × file size + 64 MiB` at the
/// start, so no file costs more than a small multiple of its size however its
/// metadata is shaped.
pub(crate) struct MemoryBudget {
    limit: u64,
    used: u64,
}

impl MemoryBudget {
    fn for_file(len: u64) -> Self {
        Self {
            limit: len
                .saturating_mul(2)
                .saturating_add(HEADER_MEMORY_ALLOWANCE),
            used: 0,
        }
    }
}

/// Heap bytes a `String` or `Vec` of `len` bytes takes under a typical allocator:
/// nothing when empty, else the bytes plus a chunk header, at least 32.
pub(crate) fn heap_bytes(len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    len.saturating_add(8).next_multiple_of(16).max(32)
}

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    budget: MemoryBudget,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            budget: MemoryBudget::for_file(bytes.len() as u64),
        }
    }

    /// Charges `bytes` of memory about to be allocated for `field` (read at
    /// `offset`), or fails when the header would outgrow its budget.
    pub(crate) fn charge(&mut self, bytes: u64, offset: u64, field: &str) -> Result<()> {
        let used = self.budget.used.saturating_add(bytes);
        if used > self.budget.limit {
            let reason = format!(
                "the metadata and tensor descriptors would take more than {} MiB of memory \
                 (twice the file's {} bytes plus {} MiB)",
                self.budget.limit >> 20,
                self.bytes.len(),
                HEADER_MEMORY_ALLOWANCE >> 20
            );
            return Err(self.malformed(offset, field, reason));
        }
        self.budget.used = used;
        Ok(())
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
    }

    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub(crate) fn malformed(&self, offset: u64, field: &str, reason: impl Into<String>) -> Error {
        Error::Malformed {
            offset,
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// Takes `len` bytes or fails naming `field`.
    pub(crate) fn take(&mut self, len: u64, field: &str) -> Result<&'a [u8]> {
        let start = self.pos;
        if len > self.remaining() {
            return Err(self.malformed(
                start as u64,
                field,
                format!(
                    "needs {len} bytes but the file ends after {}",
                    self.remaining()
                ),
            ));
        }
        // `len <= remaining`, which is a usize, so the cast and the add are exact.
        let end = start + len as usize;
        self.pos = end;
        Ok(&self.bytes[start..end])
    }

    fn take_array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, field: &str) -> Result<u8> {
        Ok(self.take_array::<1>(field)?[0])
    }
    pub(crate) fn u16(&mut self, field: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take_array(field)?))
    }
    pub(crate) fn u32(&mut self, field: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take_array(field)?))
    }
    pub(crate) fn u64(&mut self, field: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take_array(field)?))
    }
    fn f32(&mut self, field: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take_array(field)?))
    }
    fn f64(&mut self, field: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take_array(field)?))
    }

    fn bool(&mut self, field: &str) -> Result<bool> {
        let offset = self.position();
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.malformed(offset, field, format!("bool byte is {other}"))),
        }
    }

    /// A GGUF string: u64 length, then UTF-8 bytes. Errors point at the length, the
    /// start of the string, which is what a hex dump is read from.
    pub(crate) fn string(&mut self, field: &str) -> Result<String> {
        let offset = self.position();
        let text = self.str(field)?;
        self.charge(heap_bytes(text.len() as u64), offset, field)?;
        Ok(text.to_string())
    }

    /// A GGUF string, borrowed from the file.
    fn str(&mut self, field: &str) -> Result<&'a str> {
        let offset = self.position();
        let bytes = self.string_bytes(field)?;
        std::str::from_utf8(bytes)
            .map_err(|e| self.malformed(offset, field, format!("string is not UTF-8: {e}")))
    }

    /// The bytes of a GGUF string (u64 length, then the bytes).
    fn string_bytes(&mut self, field: &str) -> Result<&'a [u8]> {
        let offset = self.position();
        let len = self.u64(field)?;
        if len > self.remaining() {
            return Err(self.malformed(
                offset,
                field,
                format!(
                    "string of {len} bytes runs past the end of the file ({} bytes left)",
                    self.remaining()
                ),
            ));
        }
        self.take(len, field)
    }

    /// `n` strings, in one buffer sized to their text: a first pass finds the
    /// size, so the buffer is allocated once (growing it could leave half of it
    /// unused) and charged before it is.
    fn string_array(&mut self, n: usize, offset: u64, field: &str) -> Result<StringArray> {
        let start = self.pos;
        let mut text_bytes = 0usize;
        for _ in 0..n {
            // Each string lies inside the file, so the sum does not overflow.
            text_bytes += self.string_bytes(field)?.len();
        }
        self.pos = start;
        self.charge(heap_bytes(text_bytes as u64), offset, field)?;
        let mut array = StringArray::with_capacity(n, text_bytes);
        for _ in 0..n {
            array.push(self.str(field)?);
        }
        Ok(array)
    }

    pub(crate) fn value_type(&mut self, field: &str) -> Result<ValueType> {
        let offset = self.position();
        let id = self.u32(field)?;
        ValueType::from_id(id)
            .ok_or_else(|| self.malformed(offset, field, format!("unknown value type {id}")))
    }

    /// A metadata value of type `ty`.
    pub(crate) fn value(&mut self, ty: ValueType, field: &str) -> Result<Value> {
        self.value_at_depth(ty, field, 0)
    }

    fn value_at_depth(&mut self, ty: ValueType, field: &str, depth: u32) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(self.u8(field)?),
            ValueType::I8 => Value::I8(self.u8(field)? as i8),
            ValueType::U16 => Value::U16(self.u16(field)?),
            ValueType::I16 => Value::I16(self.u16(field)? as i16),
            ValueType::U32 => Value::U32(self.u32(field)?),
            ValueType::I32 => Value::I32(self.u32(field)? as i32),
            ValueType::F32 => Value::F32(self.f32(field)?),
            ValueType::Bool => Value::Bool(self.bool(field)?),
            ValueType::String => Value::String(self.string(field)?),
            ValueType::Array => Value::Array(self.array(field, depth)?),
            ValueType::U64 => Value::U64(self.u64(field)?),
            ValueType::I64 => Value::I64(self.u64(field)? as i64),
            ValueType::F64 => Value::F64(self.f64(field)?),
        })
    }

    /// An array: element type, u64 count, elements. The count is checked against
    /// the bytes left before any allocation.
    fn array(&mut self, field: &str, depth: u32) -> Result<Array> {
        let offset = self.position();
        if depth >= MAX_ARRAY_DEPTH {
            return Err(self.malformed(offset, field, "arrays nested too deeply"));
        }
        let elem = self.value_type(field)?;
        let count_offset = self.position();
        let count = self.u64(field)?;
        let min_bytes = count.checked_mul(elem.min_encoded_bytes());
        if min_bytes.is_none_or(|needed| needed > self.remaining()) {
            return Err(self.malformed(
                count_offset,
                field,
                format!(
                    "array of {count} elements cannot fit in the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        // The check above bounds `count` by the file length, so it fits a usize
        // and the product below does not overflow.
        let n = count as usize;
        self.charge(
            count.saturating_mul(element_bytes(elem)),
            count_offset,
            field,
        )?;
        macro_rules! collect {
            ($variant:ident, $read:expr) => {{
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push($read);
                }
                Array::$variant(items)
            }};
        }
        Ok(match elem {
            ValueType::U8 => collect!(U8, self.u8(field)?),
            ValueType::I8 => collect!(I8, self.u8(field)? as i8),
            ValueType::U16 => collect!(U16, self.u16(field)?),
            ValueType::I16 => collect!(I16, self.u16(field)? as i16),
            ValueType::U32 => collect!(U32, self.u32(field)?),
            ValueType::I32 => collect!(I32, self.u32(field)? as i32),
            ValueType::F32 => collect!(F32, self.f32(field)?),
            ValueType::Bool => collect!(Bool, self.bool(field)?),
            ValueType::String => Array::String(self.string_array(n, count_offset, field)?),
            ValueType::Array => collect!(Array, self.array(field, depth + 1)?),
            ValueType::U64 => collect!(U64, self.u64(field)?),
            ValueType::I64 => collect!(I64, self.u64(field)? as i64),
            ValueType::F64 => collect!(F64, self.f64(field)?),
        })
    }
}

/// Bytes one element of an array of `ty` takes in memory (the text of strings
/// and the elements of nested arrays are charged as they are read).
fn element_bytes(ty: ValueType) -> u64 {
    let size = match ty {
        ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
        ValueType::U16 | ValueType::I16 => 2,
        ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
        ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
        // Where the string ends; its text is charged as it is read.
        ValueType::String => size_of::<usize>(),
        ValueType::Array => size_of::<Array>(),
    };
    size as u64
}
