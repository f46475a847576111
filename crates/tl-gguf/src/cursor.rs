//! A bounds-checked little-endian reader over the file's bytes. Every read checks
//! the remaining length first and reports the field name and offset on failure, so
//! no malformed input can index out of bounds or allocate more than the file holds.

use crate::error::{Error, Result};
use crate::value::{Array, Value, ValueType, MAX_ARRAY_DEPTH};

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
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
        let bytes = self.take(len, field)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| self.malformed(offset, field, format!("string is not UTF-8: {e}")))
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
        // The check above bounds `count` by the file length, so it fits a usize.
        let n = count as usize;
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
            ValueType::String => collect!(String, self.string(field)?),
            ValueType::Array => collect!(Array, self.array(field, depth + 1)?),
            ValueType::U64 => collect!(U64, self.u64(field)?),
            ValueType::I64 => collect!(I64, self.u64(field)? as i64),
            ValueType::F64 => collect!(F64, self.f64(field)?),
        })
    }
}
