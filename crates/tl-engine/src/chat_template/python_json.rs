//! A `tojson` filter that writes what Hugging Face's does, i.e. Python's
//! `json.dumps(value, ensure_ascii=False, indent=indent)`.
//!
//! minijinja's built-in `tojson` escapes `<`, `>`, `&` and `'` for HTML, which
//! changes the prompt text of tool-calling templates (`"a<b"` would reach the
//! model as `"a\u003cb"`), so we replace it. Python's separators are `", "` and
//! `": "` on one line, and `","` + newline and `": "` when indenting.

use std::io;

use minijinja::value::{Kwargs, Value};
use minijinja::{Error, ErrorKind};
use serde::Serialize;
use serde_json::ser::Formatter;

/// The filter: `value|tojson`, `value|tojson(4)` or `value|tojson(indent=4)`.
pub fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(indent) => Some(indent),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    kwargs.assert_all_used()?;
    let indent = indent_width(indent)?;
    let json = to_python_json(value, indent).map_err(|err| {
        Error::new(
            ErrorKind::InvalidOperation,
            "tojson: cannot serialize value",
        )
        .with_source(err)
    })?;
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
pub fn to_python_json<T: Serialize + ?Sized>(
    value: &T,
    indent: Option<usize>,
) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let formatter = PythonFormatter::new(indent);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut serializer)?;
    // serde_json only ever writes UTF-8.
    String::from_utf8(out).map_err(|err| serde_json::Error::io(io::Error::other(err)))
}

/// serde_json formatter mirroring Python's separators and indentation.
struct PythonFormatter {
    indent: Option<usize>,
    depth: usize,
    /// Whether the container being closed had any element (Python writes
    /// empty containers as `[]` / `{}` even when indenting).
    has_value: bool,
}

impl PythonFormatter {
    fn new(indent: Option<usize>) -> Self {
        Self {
            indent,
            depth: 0,
            has_value: false,
        }
    }

    fn begin_container<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        open: &[u8],
    ) -> io::Result<()> {
        self.depth += 1;
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
                write_spaces(writer, width * self.depth)?;
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
                write_spaces(writer, width * self.depth)
            }
        }
    }
}

fn write_spaces<W: ?Sized + io::Write>(writer: &mut W, count: usize) -> io::Result<()> {
    for _ in 0..count {
        writer.write_all(b" ")?;
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
