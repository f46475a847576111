//! Metadata values: the thirteen GGUF value types, with arrays kept typed so a
//! vocabulary's scores stay a `Vec<f32>` rather than a vector of enums, and its
//! tokens one buffer of text rather than a `String` each ([`StringArray`]).

use std::fmt;

/// Deepest nesting of arrays the reader accepts and the writer produces; real files
/// use one level, and the bound keeps the reader's recursion shallow.
pub(crate) const MAX_ARRAY_DEPTH: u32 = 4;

/// The type tag of a metadata value (`gguf_metadata_value_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    /// The type for a GGUF tag, if it is one.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::U8,
            1 => Self::I8,
            2 => Self::U16,
            3 => Self::I16,
            4 => Self::U32,
            5 => Self::I32,
            6 => Self::F32,
            7 => Self::Bool,
            8 => Self::String,
            9 => Self::Array,
            10 => Self::U64,
            11 => Self::I64,
            12 => Self::F64,
            _ => return None,
        })
    }

    /// The GGUF tag.
    pub fn id(self) -> u32 {
        match self {
            Self::U8 => 0,
            Self::I8 => 1,
            Self::U16 => 2,
            Self::I16 => 3,
            Self::U32 => 4,
            Self::I32 => 5,
            Self::F32 => 6,
            Self::Bool => 7,
            Self::String => 8,
            Self::Array => 9,
            Self::U64 => 10,
            Self::I64 => 11,
            Self::F64 => 12,
        }
    }

    /// The smallest number of bytes one value of this type takes in a file; used to
    /// reject element counts that cannot fit in what is left of the file before
    /// anything is allocated.
    pub fn min_encoded_bytes(self) -> u64 {
        match self {
            Self::U8 | Self::I8 | Self::Bool => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 | Self::String => 8,
            Self::Array => 12,
        }
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A typed metadata array.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(StringArray),
    Array(Vec<Array>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Value {
    /// The value's type tag.
    pub fn value_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::I8(v) => Some(v.into()),
            Self::I16(v) => Some(v.into()),
            Self::I32(v) => Some(v.into()),
            Self::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, if it is a float (either width).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Self::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description of the type, for error messages (`u32`, `array of string`).
    pub fn type_description(&self) -> String {
        match self {
            Self::Array(a) => format!("array of {}", a.element_type_name()),
            other => format!("{:?}", other.value_type()).to_lowercase(),
        }
    }
}

impl Array {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
        }
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The type tag of the elements.
    pub fn element_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
        }
    }

    /// Levels of arrays, counting this one: 1 for an array of scalars.
    pub(crate) fn nesting_depth(&self) -> u32 {
        match self {
            Self::Array(items) => 1 + items.iter().map(Array::nesting_depth).max().unwrap_or(0),
            _ => 1,
        }
    }

    fn element_type_name(&self) -> String {
        format!("{:?}", self.element_type()).to_lowercase()
    }

    /// The elements as `i64`s, if they are integers that fit.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy + TryInto<i64>>(v: &[T]) -> Option<Vec<i64>> {
            v.iter().map(|x| (*x).try_into().ok()).collect()
        }
        match self {
            Self::U8(v) => conv(v),
            Self::I8(v) => conv(v),
            Self::U16(v) => conv(v),
            Self::I16(v) => conv(v),
            Self::U32(v) => conv(v),
            Self::I32(v) => conv(v),
            Self::U64(v) => conv(v),
            Self::I64(v) => Some(v.clone()),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    /// A compact rendering for `tl model inspect`: long strings and arrays are cut.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String(s) if s.chars().count() > 60 => {
                let head: String = s.chars().take(57).collect();
                write!(f, "{head:?}...")
            }
            Self::String(s) => write!(f, "{s:?}"),
            Self::Array(a) => write!(f, "[{} x {}]", a.len(), a.element_type_name()),
            Self::U8(v) => write!(f, "{v}"),
            Self::I8(v) => write!(f, "{v}"),
            Self::U16(v) => write!(f, "{v}"),
            Self::I16(v) => write!(f, "{v}"),
            Self::U32(v) => write!(f, "{v}"),
            Self::I32(v) => write!(f, "{v}"),
            Self::U64(v) => write!(f, "{v}"),
            Self::I64(v) => write!(f, "{v}"),
            Self::F32(v) => write!(f, "{v}"),
            Self::F64(v) => write!(f, "{v}"),
            Self::Bool(v) => write!(f, "{v}"),
        }
    }
}

/// An array of strings kept as one buffer of text and where each string ends:
/// 8 bytes a string beyond its text, where a `Vec<String>` takes 24 and an
/// allocation each (a vocabulary of millions of short or empty tokens would
/// otherwise cost several times the file that holds it).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringArray {
    text: String,
    ends: Vec<usize>,
}

impl StringArray {
    /// An empty array.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty array with room for `strings` strings of `bytes` bytes in all.
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
        }
    }

    /// Appends a string.
    pub fn push(&mut self, item: &str) {
        self.text.push_str(item);
        self.ends.push(self.text.len());
    }

    /// The number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the array holds no string.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The string at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)?;
        let start = match index {
            0 => 0,
            _ => self.ends[index - 1],
        };
        Some(&self.text[start..end])
    }

    /// The strings in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|index| {
            let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
            &self.text[start..self.ends[index]]
        })
    }

    /// Bytes of all the strings together.
    pub fn text_bytes(&self) -> usize {
        self.text.len()
    }
}

impl fmt::Debug for StringArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<S> for StringArray {
    fn from_iter<I: IntoIterator<Item = S>>(items: I) -> Self {
        let mut array = Self::new();
        for item in items {
            array.push(item.as_ref());
        }
        array
    }
}

impl<S: AsRef<str>> From<Vec<S>> for StringArray {
    fn from(items: Vec<S>) -> Self {
        items.iter().collect()
    }
}

impl std::ops::Index<usize> for StringArray {
    type Output = str;

    /// The string at `index`; panics past the end, as slices do.
    fn index(&self, index: usize) -> &str {
        match self.get(index) {
            Some(item) => item,
            None => panic!(
                "index {index} is past the end of an array of {} strings",
                self.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_in_order() {
        let array = StringArray::from(vec!["a", "", "bc"]);
        assert_eq!(array.len(), 3);
        assert_eq!(array.iter().collect::<Vec<_>>(), ["a", "", "bc"]);
        assert_eq!((array.get(1), array.get(3)), (Some(""), None));
        assert_eq!(&array[2], "bc");
        assert_eq!(format!("{array:?}"), r#"["a", "", "bc"]"#);
        assert_eq!(array.text_bytes(), 3);
    }
}
