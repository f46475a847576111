//! The grammar that makes a model call tools: the template's wrapper
//! around a JSON object whose `name` is one of the declared functions and
//! whose arguments follow that function's parameter schema, in llguidance's
//! Lark with one `%json` schema per function.
//!
//! ```text
//! start: calls                 (a call is required)
//! start: PROSE | calls         (text or calls; the calls follow the schemas)
//! calls: the format's wrapper around one call, or several in a row
//! call:  tool_0 | tool_1 | ...
//! tool_i: %json {"properties": {"name": {"const": NAME_i}, "arguments": PARAMETERS_i}, ...}
//! ```
//!
//! `PROSE` is text that cannot be taken for the start of a call, so that an
//! answer that begins one must finish it by the schemas.

use serde_json::{json, Map, Value};
use tl_tokenizer::Tokenizer;

use super::ToolCallFormat;
use crate::constraint::{json_layout, Grammar};

/// A declared function and the schema its arguments must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    /// A JSON schema object (`{"type": "object"}` for any arguments).
    pub parameters: Value,
}

/// What the grammar allows besides calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallMode {
    /// Calls only: at least one, several in a row when `parallel` (and the
    /// format has a way to write several).
    Required { parallel: bool },
    /// Text, or calls that follow the schemas.
    Optional { parallel: bool },
}

/// The grammar for calling one of `tools` in `format`. The tokenizer says
/// whether the format's marker (`[TOOL_CALLS]`) is a control token, which the
/// grammar then names by id.
pub fn tool_call_grammar(
    format: ToolCallFormat,
    tools: &[ToolSchema],
    mode: ToolCallMode,
    tokenizer: &Tokenizer,
) -> Grammar {
    let (parallel, prose) = match mode {
        ToolCallMode::Required { parallel } => (parallel, None),
        ToolCallMode::Optional { parallel } => (parallel, Some(prose_regex(format))),
    };
    let mut lark = String::new();
    match prose {
        Some(prose) => lark.push_str(&format!("start: PROSE | calls\nPROSE: {prose}\n")),
        None => lark.push_str("start: calls\n"),
    }
    lark.push_str(&calls_rule(format, parallel, tokenizer));
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("tool_{i}")).collect();
    lark.push_str(&format!("call: {}\n", alternatives.join(" | ")));
    for (i, tool) in tools.iter().enumerate() {
        let schema = call_schema(format, tool);
        lark.push_str(&format!("tool_{i}: %json {schema}\n"));
    }
    Grammar::Lark(lark)
}

/// The wrapper around the calls.
fn calls_rule(format: ToolCallFormat, parallel: bool, tokenizer: &Tokenizer) -> String {
    match format {
        ToolCallFormat::Hermes => {
            let block = r#"block: "<tool_call>\n" call "\n</tool_call>""#;
            let calls = if parallel {
                r#"calls: block ("\n" block)*"#
            } else {
                "calls: block"
            };
            format!("{calls}\n{block}\n")
        }
        ToolCallFormat::Mistral => {
            let marker = control_token(tokenizer, "[TOOL_CALLS]")
                .map_or_else(|| r#""[TOOL_CALLS]""#.to_owned(), |id| format!("<[{id}]>"));
            let more = if parallel { r#" (", " call)*"# } else { "" };
            format!("calls: {marker} \"[\" call{more} \"]\"\n")
        }
        ToolCallFormat::Llama3Json | ToolCallFormat::Generic => "calls: call\n".to_owned(),
    }
}

/// The id of the control token spelled `text`, if the vocabulary has one.
fn control_token(tokenizer: &Tokenizer, text: &str) -> Option<u32> {
    tokenizer
        .token_id(text)
        .filter(|&id| tokenizer.is_control(id))
}

/// Text that does not start a call in `format` (Lark terminal syntax).
fn prose_regex(format: ToolCallFormat) -> &'static str {
    match format {
        ToolCallFormat::Hermes => r"/(.|\n)+/ & ~/(.|\n)*<tool_call>(.|\n)*/",
        ToolCallFormat::Llama3Json => r"/(.|\n)+/ & ~/\s*\{(.|\n)*/",
        ToolCallFormat::Mistral => r"/(.|\n)+/ & ~/\s*\[(.|\n)*/",
        ToolCallFormat::Generic => r"/(.|\n)+/ & ~/\s*[\{\[](.|\n)*/",
    }
}

/// The schema of one call of `tool`: its name, and its parameters under the
/// format's key, with their definitions moved to the root so that their
/// references still resolve.
fn call_schema(format: ToolCallFormat, tool: &ToolSchema) -> Value {
    let key = format.arguments_key();
    let mut definitions = Map::new();
    let mut parameters = nested_schema(&tool.parameters, key, &mut definitions);
    close_objects(&mut parameters);
    definitions.values_mut().for_each(close_objects);
    let mut properties = Map::new();
    properties.insert("name".into(), json!({ "const": tool.name }));
    properties.insert(key.into(), parameters);
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "required": ["name", key],
        "additionalProperties": false,
        "x-guidance": json_layout(),
    });
    for (keyword, defs) in definitions {
        schema[keyword] = defs;
    }
    schema
}

/// Objects whose schema lists `properties` but says nothing of others get
/// `additionalProperties: false`, as llama.cpp's grammars do: a function
/// takes the arguments it declares, and a model (one with random weights
/// above all) left free to invent more may never stop.
fn close_objects(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let lists_properties = map.get("properties").is_some_and(Value::is_object);
            let object_type = map.get("type").is_none_or(|kind| kind == "object");
            let open_keywords = [
                "additionalProperties",
                "patternProperties",
                "unevaluatedProperties",
            ];
            if lists_properties
                && object_type
                && !open_keywords.iter().any(|k| map.contains_key(*k))
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.iter_mut()
                .filter(|(keyword, _)| !VALUE_KEYWORDS.contains(&keyword.as_str()))
                .for_each(|(_, value)| close_objects(value));
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// Keywords whose values are JSON data, not schemas.
const VALUE_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// Keywords whose maps hold a schema's definitions.
const DEFINITION_KEYWORDS: [&str; 2] = ["$defs", "definitions"];

/// `parameters` as the value of property `key` of a new root: its top-level
/// definitions go to `definitions` (for the root), and its local references
/// are rewritten to point where the parts now are.
fn nested_schema(parameters: &Value, key: &str, definitions: &mut Map<String, Value>) -> Value {
    let prefix = format!("#/properties/{key}");
    let mut parameters = parameters.clone();
    if let Value::Object(map) = &mut parameters {
        for keyword in DEFINITION_KEYWORDS {
            if let Some(mut defs) = map.remove(keyword) {
                rewrite_references(&mut defs, &prefix);
                definitions.insert(keyword.into(), defs);
            }
        }
    }
    rewrite_references(&mut parameters, &prefix);
    parameters
}

/// Points every local `$ref` that is not to a hoisted definition below
/// `prefix`: `#` becomes `#/properties/arguments`, and so on.
fn rewrite_references(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(map) => {
            for (name, value) in map.iter_mut() {
                match value {
                    Value::String(reference) if name == "$ref" => {
                        if let Some(moved) = moved_reference(reference, prefix) {
                            *reference = moved;
                        }
                    }
                    other => rewrite_references(other, prefix),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| rewrite_references(item, prefix)),
        _ => {}
    }
}

fn moved_reference(reference: &str, prefix: &str) -> Option<String> {
    let pointer = reference.strip_prefix('#')?;
    let first_step = pointer
        .strip_prefix('/')
        .map(|p| p.split('/').next().unwrap_or(p));
    let hoisted = first_step.is_some_and(|step| DEFINITION_KEYWORDS.contains(&step));
    (!hoisted).then(|| format!("{prefix}{pointer}"))
}
