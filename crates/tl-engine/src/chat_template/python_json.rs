//! A `tojson` filter that writes what Hugging Face's does, i.e. Python's
//! `json.dumps(value, ensure_ascii=False, indent=indent)`.
//!
//! minijinja's built-in `tojson` escapes `<`, `>`, `&` and `'` for HTML, which
//! changes the prompt text of tool-calling templates (`"a<b"` would reach the
//! model as `"a\u003cb"`), so we replace it. Python's separators are `", "` and
//! `": "` on one line, and `","` + newline and `": "` when indenting.
//!
//! Inside a render the output is bounded by the render's work budget and the
//! nesting by its depth limit, so that neither a huge value nor a deep one (a
//! list nested a million times) can exhaust memory or the stack.

use std::io;

use minijinja::value::{Kwargs, Value};
use minijinja::{Error, ErrorKind, State};
use serde::Serialize;
use serde_json::ser::Formatter;

use super::bounded::render_budget;

/// Nesting allowed outside a render (no budget to ask).
const DEFAULT_MAX_DEPTH: usize = 128;

/// The filter: `value|tojson`, `value|tojson(4)` or `value|tojson(indent=4)`.
pub fn tojson(
    state: &State,
    value: &Value,
    indent: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let indent = match indent {
        Some(indent) => Some(indent),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    kwargs.assert_all_used()?;
    let indent = indent_width(indent)?;
    let budget = render_budget(state);
    let bounds = JsonBounds {
        max_bytes: budget
            .as_ref()
            .map_or(u64::MAX, |budget| budget.remaining_work()),
        max_depth: budget
            .as_ref()
            .map_or(DEFAULT_MAX_DEPTH, |budget| budget.depth_limit()),
    };
    let json = to_bounded_python_json(value, indent, bounds)
        .map_err(|err| Error::new(ErrorKind::InvalidOperation, format!("tojson: {err}")))?;
    Ok(Value::from_safe_string(json))
}

/// Python accepts `indent=None` (one line) or a number of spaces.
fn indent_width(indent: Option<Value>) -> Result<Option<usize>, Error> {
    match indent {
        None => Ok(None),
        Some(value) if value.is_none() || value.is_undefined() => Ok(None),
        Some(value) => usize::try_from(value).map(Some).map_err(|_| {
            Error::new(
                ErrorKind::InvalidOperation,
                "tojson: indent must be a non-negative integer",
            )
        }),
    }
}

/// Serializes `value` with Python's `json.dumps` layout.
#[cfg(test)]
pub fn to_python_json<T: Serialize + ?Sized>(
    value: &T,
    indent: Option<usize>,
) -> serde_json::Result<String> {
    let bounds = JsonBounds {
        max_bytes: u64::MAX,
        max_depth: DEFAULT_MAX_DEPTH,
    };
    to_bounded_python_json(value, indent, bounds)
}

/// How much JSON one `tojson` may write.
#[derive(Debug, Clone, Copy)]
struct JsonBounds {
    max_bytes: u64,
    max_depth: usize,
}

/// [`to_python_json`] that fails once the text would pass `max_bytes` or
/// the nesting `max_depth`, before the serializer recurses any deeper.
fn to_bounded_python_json<T: Serialize + ?Sized>(
    value: &T,
    indent: Option<usize>,
    bounds: JsonBounds,
) -> serde_json::Result<String> {
    let mut out = BoundedBytes {
        bytes: Vec::new(),
        max: usize::try_from(bounds.max_bytes).unwrap_or(usize::MAX),
    };
    let formatter = PythonFormatter::new(indent, bounds.max_depth);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut serializer)?;
    // serde_json only ever writes UTF-8.
    String::from_utf8(out.bytes).map_err(|err| serde_json::Error::io(io::Error::other(err)))
}

/// A byte buffer that refuses to grow past `max`.
struct BoundedBytes {
    bytes: Vec<u8>,
    max: usize,
}

impl io::Write for BoundedBytes {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len().saturating_add(buf.len()) > self.max {
            return Err(io::Error::other(format!(
                "the template exceeded its work limit: the JSON would be longer than the {} \
                 units it has left",
                self.max
            )));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// serde_json formatter mirroring Python's separators and indentation.
struct PythonFormatter {
    indent: Option<usize>,
    depth: usize,
    max_depth: usize,
    /// Whether the container being closed had any element (Python writes
    /// empty containers as `[]` / `{}` even when indenting).
    has_value: bool,
}

impl PythonFormatter {
    fn new(indent: Option<usize>, max_depth: usize) -> Self {
        Self {
            indent,
            depth: 0,
            max_depth,
            has_value: false,
        }
    }

    fn begin_container<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        open: &[u8],
    ) -> io::Result<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(io::Error::other(format!(
                "the template exceeded its depth limit: the value nests deeper than {} levels",
                self.max_depth
            )));
        }
        self.has_value = false;
        writer.write_all(open)
    }

    fn end_container<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        close: &[u8],
    ) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            if let Some(width) = self.indent {
                writer.write_all(b"\n")?;
                write_spaces(writer, width.saturating_mul(self.depth))?;
            }
        }
        writer.write_all(close)
    }

    fn begin_element<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        match self.indent {
            None if first => Ok(()),
            None => writer.write_all(b", "),
            Some(width) => {
                writer.write_all(if first { b"\n" } else { b",\n" })?;
                write_spaces(writer, width.saturating_mul(self.depth))
            }
        }
    }
}

fn write_spaces<W: ?Sized + io::Write>(writer: &mut W, count: usize) -> io::Result<()> {
    const SPACES: [u8; 64] = [b' '; 64];
    let mut left = count;
    while left > 0 {
        let chunk = left.min(SPACES.len());
        writer.write_all(&SPACES[..chunk])?;
        left -= chunk;
    }
    Ok(())
}

impl Formatter for PythonFormatter {
    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.begin_container(writer, b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.end_container(writer, b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.begin_element(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.begin_container(writer, b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.end_container(writer, b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.begin_element(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _writer: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dumps(value: serde_json::Value, indent: Option<usize>) -> String {
        to_python_json(&value, indent).unwrap()
    }

    #[test]
    fn one_line_uses_python_separators() {
        let value = json!({"a": [1, 2.5, "x"], "b": {}, "c": [], "d": null, "e": true});
        assert_eq!(
            dumps(value, None),
            r#"{"a": [1, 2.5, "x"], "b": {}, "c": [], "d": null, "e": true}"#
        );
    }

    #[test]
    fn indented_output_matches_python() {
        // json.dumps({"a": [1, {"b": []}], "c": {}}, indent=2)
        let value = json!({"a": [1, {"b": []}], "c": {}});
        let want = "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n  \"c\": {}\n}";
        assert_eq!(dumps(value, Some(2)), want);
    }

    #[test]
    fn strings_are_not_html_or_ascii_escaped() {
        let value = json!("a<b & 'c' > é \"q\"\n");
        assert_eq!(dumps(value, None), r#""a<b & 'c' > é \"q\"\n""#);
    }
}
