//! Structured output as each API asks for it, read into the engine's
//! [`Grammar`]: OpenAI's `response_format` and Ollama's `format`. The
//! grammar itself is compiled later, with the request's model
//! (`generation::prepare`), where a bad schema becomes a 400 too.

use serde_json::Value;
use tl_engine::constraint::Grammar;

/// OpenAI's `response_format`: `{"type": "text"}` (or `null`) for free
/// text, `{"type": "json_object"}` for any JSON object, and
/// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.
/// The schema is enforced whether `strict` is set or not. A `schema` beside
/// `json_object`'s type (llama.cpp's form) is taken too.
pub fn openai_response_format(format: Option<&Value>) -> Result<Option<Grammar>, String> {
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let Some(kind) = format.get("type").and_then(Value::as_str) else {
        return Err(
            "'response_format' must be an object with a 'type': \"text\", \"json_object\" or \"json_schema\""
                .into(),
        );
    };
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(match format.get("schema") {
            Some(schema) if !schema.is_null() => Grammar::JsonSchema(schema.clone()),
            _ => Grammar::any_json_object(),
        })),
        "json_schema" => {
            let schema = format
                .get("json_schema")
                .and_then(|spec| spec.get("schema"))
                .filter(|schema| !schema.is_null());
            match schema {
                Some(schema) => Ok(Some(Grammar::JsonSchema(schema.clone()))),
                None => Err("'response_format' of type \"json_schema\" needs 'json_schema.schema'".into()),
            }
        }
        other => Err(format!(
            "'response_format' type \"{other}\" is not supported (\"text\", \"json_object\" or \"json_schema\")"
        )),
    }
}

/// Ollama's `format`: `"json"` for any JSON object, a JSON schema object,
/// or nothing (`null`, `""`).
pub fn ollama_format(format: Option<&Value>) -> Result<Option<Grammar>, String> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(Grammar::any_json_object())),
        Some(schema @ Value::Object(_)) => Ok(Some(Grammar::JsonSchema(schema.clone()))),
        Some(other) => Err(format!(
            "'format' must be \"json\" or a JSON schema object, got {}",
            short(other)
        )),
    }
}

/// A value for an error message, cut to a readable length.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_formats_become_grammars() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let cases = [
            (json!(null), None),
            (json!({"type": "text"}), None),
            (
                json!({"type": "json_object"}),
                Some(Grammar::any_json_object()),
            ),
            (
                json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": true}}),
                Some(Grammar::JsonSchema(schema.clone())),
            ),
            (
                json!({"type": "json_object", "schema": schema}),
                Some(Grammar::JsonSchema(schema.clone())),
            ),
        ];
        for (format, want) in cases {
            assert_eq!(openai_response_format(Some(&format)).unwrap(), want);
        }
        assert_eq!(openai_response_format(None).unwrap(), None);
    }

    #[test]
    fn openai_format_errors_name_the_field() {
        for bad in [
            json!("json"),
            json!({"type": "yaml"}),
            json!({"type": "json_schema"}),
            json!({"type": "json_schema", "json_schema": {"name": "x"}}),
        ] {
            let message = openai_response_format(Some(&bad)).unwrap_err();
            assert!(message.contains("response_format"), "{message}");
        }
    }

    #[test]
    fn ollama_formats_become_grammars() {
        let schema = json!({"type": "object"});
        assert_eq!(ollama_format(None).unwrap(), None);
        assert_eq!(ollama_format(Some(&json!(""))).unwrap(), None);
        assert_eq!(
            ollama_format(Some(&json!("json"))).unwrap(),
            Some(Grammar::any_json_object())
        );
        assert_eq!(
            ollama_format(Some(&schema)).unwrap(),
            Some(Grammar::JsonSchema(schema.clone()))
        );
        let message = ollama_format(Some(&json!("yaml"))).unwrap_err();
        assert!(message.contains("'format'"), "{message}");
        let message = ollama_format(Some(&json!(vec![1; 100]))).unwrap_err();
        assert!(message.len() < 120, "{message}");
    }
}
