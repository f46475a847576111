//! Reading calls out of a whole answer. Whatever does not parse as a call
//! (malformed JSON, a call without a name, arguments that are not an object)
//! stays in the content, so the worst a model's mistake can do is answer
//! in text.

use serde_json::Value;

use super::{ToolCall, ToolCallFormat};

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
/// Control tokens that start a call; absent from streamed text, but kept in
/// outputs decoded with them.
const MISTRAL_MARKER: &str = "[TOOL_CALLS]";
const LLAMA3_MARKER: &str = "<|python_tag|>";

/// An answer split into what it says and the calls it makes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedOutput {
    /// The text outside the calls (trimmed when there are calls; the whole
    /// answer unchanged when there are none).
    pub content: String,
    pub calls: Vec<ToolCall>,
}

impl ParsedOutput {
    fn text(text: &str) -> Self {
        ParsedOutput {
            content: text.to_owned(),
            calls: Vec::new(),
        }
    }

    fn calls(calls: Vec<ToolCall>) -> Self {
        ParsedOutput {
            content: String::new(),
            calls,
        }
    }
}

/// The calls `text` makes in `format`, and the rest of it.
pub fn parse_tool_calls(format: ToolCallFormat, text: &str) -> ParsedOutput {
    let parsed = match format {
        ToolCallFormat::Hermes => hermes(text),
        ToolCallFormat::Llama3Json => whole_answer(text, &[LLAMA3_MARKER], '{'),
        ToolCallFormat::Mistral => whole_answer(text, &[MISTRAL_MARKER], '['),
        ToolCallFormat::Generic => generic(text),
    };
    parsed.unwrap_or_else(|| ParsedOutput::text(text))
}

/// `<tool_call>` blocks anywhere in the text; a last block may lack its
/// closing tag (the answer was cut, or the model ended there).
fn hermes(text: &str) -> Option<ParsedOutput> {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(HERMES_OPEN) {
        content.push_str(&rest[..start]);
        let block = &rest[start..];
        let inner = &block[HERMES_OPEN.len()..];
        let (inner, after) = match inner.find(HERMES_CLOSE) {
            Some(end) => (&inner[..end], &inner[end + HERMES_CLOSE.len()..]),
            None => (without_partial_close(inner), ""),
        };
        match calls_from_json(inner.trim()) {
            Some(found) => calls.extend(found),
            None => content.push_str(&block[..block.len() - after.len()]),
        }
        rest = after;
    }
    content.push_str(rest);
    if calls.is_empty() {
        return None;
    }
    Some(ParsedOutput {
        content: content.trim().to_owned(),
        calls,
    })
}

/// A block cut off inside its closing tag (`...}\n</tool_ca`) without the
/// piece of the tag.
fn without_partial_close(inner: &str) -> &str {
    let trimmed = inner.trim_end();
    (1..HERMES_CLOSE.len())
        .rev()
        .find_map(|len| trimmed.strip_suffix(&HERMES_CLOSE[..len]))
        .unwrap_or(inner)
}

/// An answer that is nothing but calls, starting with `first` once an
/// optional marker is removed.
fn whole_answer(text: &str, markers: &[&str], first: char) -> Option<ParsedOutput> {
    let body = without_marker(text.trim(), markers);
    if !body.starts_with(first) {
        return None;
    }
    calls_from_json(body).map(ParsedOutput::calls)
}

fn without_marker<'t>(text: &'t str, markers: &[&str]) -> &'t str {
    markers
        .iter()
        .find_map(|marker| text.strip_prefix(marker))
        .map_or(text, str::trim_start)
}

/// Every form in turn, and JSON in a Markdown code fence.
fn generic(text: &str) -> Option<ParsedOutput> {
    if text.contains(HERMES_OPEN) {
        return hermes(text);
    }
    let body = without_marker(text.trim(), &[MISTRAL_MARKER, LLAMA3_MARKER]);
    let body = without_fence(body).unwrap_or(body);
    if !body.starts_with(['{', '[']) {
        return None;
    }
    calls_from_json(body).map(ParsedOutput::calls)
}

/// The inside of a text that is one ```` ``` ```` (or ```` ```json ````) block.
fn without_fence(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("```")?.strip_suffix("```")?;
    let inner = inner.strip_prefix("json").unwrap_or(inner);
    Some(inner.trim())
}

/// The calls in `text`, which must be nothing but JSON: one or more call
/// objects (separated by whitespace, `;` or `,`) or arrays of them.
fn calls_from_json(text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = values.next()?.ok()?;
        calls.extend(calls_from_value(&value)?);
        rest = rest[values.byte_offset()..].trim_start();
        rest = rest.strip_prefix([';', ',']).unwrap_or(rest).trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// The calls one JSON value holds: a call, a list of calls, or llama.cpp's
/// generic `{"tool_call": ...}` / `{"tool_calls": [...]}`.
fn calls_from_value(value: &Value) -> Option<Vec<ToolCall>> {
    match value {
        Value::Array(items) => {
            let calls: Option<Vec<Vec<ToolCall>>> = items.iter().map(calls_from_value).collect();
            let calls: Vec<ToolCall> = calls?.into_iter().flatten().collect();
            (!calls.is_empty()).then_some(calls)
        }
        Value::Object(map) => {
            if let Some(inner) = map.get("tool_calls").or_else(|| map.get("tool_call")) {
                return calls_from_value(inner);
            }
            call_from_object(map).map(|call| vec![call])
        }
        _ => None,
    }
}

/// One call: `name` and `arguments` (or `parameters`), perhaps inside
/// OpenAI's `{"type": "function", "function": {...}}`.
fn call_from_object(map: &serde_json::Map<String, Value>) -> Option<ToolCall> {
    if let Some(Value::Object(function)) = map.get("function") {
        return call_from_object(function);
    }
    let name = map.get("name")?.as_str().filter(|name| !name.is_empty())?;
    let arguments = map.get("arguments").or_else(|| map.get("parameters"));
    Some(ToolCall {
        name: name.to_owned(),
        arguments: arguments_object(arguments)?,
    })
}

/// Arguments as an object: absent or `null` is `{}`, a string must hold a
/// JSON object (OpenAI's way of writing them).
fn arguments_object(arguments: Option<&Value>) -> Option<Value> {
    match arguments {
        None | Some(Value::Null) => Some(Value::Object(serde_json::Map::new())),
        Some(object @ Value::Object(_)) => Some(object.clone()),
        Some(Value::String(text)) => match serde_json::from_str(text) {
            Ok(object @ Value::Object(_)) => Some(object),
            _ => None,
        },
        Some(_) => None,
    }
}
