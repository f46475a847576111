//! Encoding strings, metadata values and tensor descriptors in GGUF's little-endian
//! layout: the inverse of `cursor.rs`, used by the writer.

use std::io::{self, Write};

use crate::ggml_type::GgmlType;
use crate::value::{Array, Value};

pub(crate) fn u32(out: &mut impl Write, v: u32) -> io::Result<()> {
    out.write_all(&v.to_le_bytes())
}

pub(crate) fn u64(out: &mut impl Write, v: u64) -> io::Result<()> {
    out.write_all(&v.to_le_bytes())
}

/// A GGUF string: u64 byte length, then the UTF-8 bytes.
pub(crate) fn string(out: &mut impl Write, s: &str) -> io::Result<()> {
    u64(out, s.len() as u64)?;
    out.write_all(s.as_bytes())
}

/// A metadata pair: key, value type tag, value.
pub(crate) fn key_value(out: &mut impl Write, key: &str, value: &Value) -> io::Result<()> {
    string(out, key)?;
    u32(out, value.value_type().id())?;
    value_payload(out, value)
}

fn value_payload(out: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::U8(v) => out.write_all(&v.to_le_bytes()),
        Value::I8(v) => out.write_all(&v.to_le_bytes()),
        Value::U16(v) => out.write_all(&v.to_le_bytes()),
        Value::I16(v) => out.write_all(&v.to_le_bytes()),
        Value::U32(v) => out.write_all(&v.to_le_bytes()),
        Value::I32(v) => out.write_all(&v.to_le_bytes()),
        Value::F32(v) => out.write_all(&v.to_le_bytes()),
        Value::Bool(v) => out.write_all(&[u8::from(*v)]),
        Value::String(v) => string(out, v),
        Value::Array(v) => array(out, v),
        Value::U64(v) => out.write_all(&v.to_le_bytes()),
        Value::I64(v) => out.write_all(&v.to_le_bytes()),
        Value::F64(v) => out.write_all(&v.to_le_bytes()),
    }
}

/// An array: element type tag, u64 count, then the elements without tags (nested
/// arrays each carry their own element type and count).
fn array(out: &mut impl Write, array: &Array) -> io::Result<()> {
    u32(out, array.element_type().id())?;
    u64(out, array.len() as u64)?;
    macro_rules! each_le {
        ($items:expr) => {
            $items
                .iter()
                .try_for_each(|item| out.write_all(&item.to_le_bytes()))
        };
    }
    match array {
        Array::U8(items) => out.write_all(items),
        Array::I8(items) => each_le!(items),
        Array::U16(items) => each_le!(items),
        Array::I16(items) => each_le!(items),
        Array::U32(items) => each_le!(items),
        Array::I32(items) => each_le!(items),
        Array::F32(items) => each_le!(items),
        Array::Bool(items) => items
            .iter()
            .try_for_each(|&item| out.write_all(&[u8::from(item)])),
        Array::String(items) => items.iter().try_for_each(|item| string(out, item)),
        Array::Array(items) => items.iter().try_for_each(|item| self::array(out, item)),
        Array::U64(items) => each_le!(items),
        Array::I64(items) => each_le!(items),
        Array::F64(items) => each_le!(items),
    }
}

/// A tensor descriptor: name, n_dims, dims (GGML order), type id, data offset
/// relative to the data section.
pub(crate) fn tensor_info(
    out: &mut impl Write,
    name: &str,
    dims: &[u64],
    ggml_type: GgmlType,
    offset: u64,
) -> io::Result<()> {
    string(out, name)?;
    // `dims` was checked to hold 1 to 4 entries when the tensor was added.
    u32(out, dims.len() as u32)?;
    dims.iter().try_for_each(|&dim| u64(out, dim))?;
    u32(out, ggml_type.id())?;
    u64(out, offset)
}
