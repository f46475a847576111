//! Tool calling as both APIs ask for it, read into [`ToolRequest`]:
//! OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` (Ollama's
//! `/api/chat` takes the same `tools`, and `tool_choice` as an extension),
//! and the `tool_calls` of assistant messages sent back. Every
//! mistake is a 400 in the API's terms (`tools[1]: 'function.name' is
//! missing`), never a serde message; the number and size of tools are
//! bounded, since each is rendered into the prompt and may become grammar.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};
use tl_engine::chat_template::ChatToolCall;
use tl_engine::tool_calls::ToolCallFormat;

/// Most tools a request may declare (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;
/// Most bytes the declared tools may take, as compact JSON.
pub const MAX_TOOLS_BYTES: usize = 256 * 1024;
/// Longest function name (OpenAI's limit).
const MAX_NAME_CHARS: usize = 64;

/// A declared function.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    /// Its parameters' JSON schema (`{"type": "object", "properties": {}}`
    /// when the client gave none).
    pub parameters: Value,
    /// OpenAI's `function.strict`: calls must follow the schema even when
    /// the model may answer in text.
    pub strict: bool,
    /// The tool as the client sent it, for the chat template.
    pub definition: Value,
}

/// What the model may or must do with the tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// No tools: they are not shown to the model and no calls are read.
    None,
    /// Text or calls, as the model chooses.
    Auto,
    /// At least one call.
    Required,
    /// One call of this function.
    Function(String),
}

/// The tools of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRequest {
    pub tools: Vec<Tool>,
    pub choice: ToolChoice,
    /// Whether an answer forced to call may hold several calls. Off unless
    /// asked for, as in llama.cpp's server: a model never taught tools,
    /// once made to write one call, tends to go on writing more until
    /// `max_tokens`. Calls the model makes of its own accord are all read.
    pub parallel: bool,
}

/// `tools`, `tool_choice` and `parallel_tool_calls` (OpenAI's fields, which
/// Ollama's `/api/chat` takes too); `None` when the request declares no
/// tools (or an empty list).
pub fn tool_request(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel: Option<&Value>,
) -> Result<Option<ToolRequest>, String> {
    let tools = read_tools(tools)?;
    let choice = read_choice(choice, &tools)?;
    let parallel = match parallel {
        None | Some(Value::Null) => false,
        Some(Value::Bool(parallel)) => *parallel,
        Some(_) => return Err("'parallel_tool_calls' must be true or false".into()),
    };
    if tools.is_empty() {
        return Ok(None);
    }
    Ok(Some(ToolRequest {
        tools,
        choice,
        parallel,
    }))
}

fn read_tools(tools: Option<&Value>) -> Result<Vec<Tool>, String> {
    let items =
        match tools {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(
                "'tools' must be a list of {\"type\": \"function\", \"function\": {...}} objects"
                    .into(),
            ),
        };
    if items.len() > MAX_TOOLS {
        return Err(format!("at most {MAX_TOOLS} tools, got {}", items.len()));
    }
    let bytes = serde_json::to_string(items).map_or(0, |text| text.len());
    if bytes > MAX_TOOLS_BYTES {
        return Err(format!(
            "the tools take {bytes} bytes, more than the {MAX_TOOLS_BYTES} allowed"
        ));
    }
    let tools: Vec<Tool> = items
        .iter()
        .enumerate()
        .map(|(index, item)| read_tool(item).map_err(|why| format!("tools[{index}]: {why}")))
        .collect::<Result<_, _>>()?;
    if let Some(name) = first_duplicate(tools.iter().map(|tool| tool.name.as_str())) {
        return Err(format!("two tools are named '{name}'"));
    }
    Ok(tools)
}

fn read_tool(item: &Value) -> Result<Tool, String> {
    let Value::Object(tool) = item else {
        return Err(
            "a tool must be an object {\"type\": \"function\", \"function\": {...}}".into(),
        );
    };
    match tool.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "function" => {}
        Some(other) => {
            return Err(format!(
                "tools of type {other} are not supported, only \"function\""
            ))
        }
    }
    let Some(Value::Object(function)) = tool.get("function") else {
        return Err("'function' is missing or not an object".into());
    };
    let name = function_name(function.get("name"))?;
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
        Some(schema @ Value::Object(_)) => schema.clone(),
        Some(_) => {
            return Err(format!(
                "'function.parameters' of '{name}' must be a JSON schema object"
            ))
        }
    };
    let strict = match function.get("strict") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(strict)) => *strict,
        Some(_) => return Err("'function.strict' must be true or false".into()),
    };
    Ok(Tool {
        name,
        parameters,
        strict,
        definition: item.clone(),
    })
}

/// A function name: 1 to 64 ASCII letters, digits, `_`, `-` or `.` (OpenAI
/// allows all but the dot; Ollama's clients name functions after Python
/// ones, which may be dotted). The name becomes grammar text, so it is kept
/// to what cannot be taken for markup.
fn function_name(name: Option<&Value>) -> Result<String, String> {
    let Some(name) = name else {
        return Err("'function.name' is missing".into());
    };
    let Some(name) = name.as_str() else {
        return Err(format!("'function.name' must be a string, got {name}"));
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || !name.chars().all(allowed) {
        return Err(format!(
            "function name '{}' must be 1 to {MAX_NAME_CHARS} letters, digits, underscores, dashes or dots",
            name.chars().take(MAX_NAME_CHARS + 1).collect::<String>()
        ));
    }
    Ok(name.to_owned())
}

fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().find(|name| !seen.insert(*name))
}

/// OpenAI's `tool_choice`: `"none"`, `"auto"` (the default), `"required"`
/// (`"any"` as Mistral's API calls it), or a function by name.
fn read_choice(choice: Option<&Value>, tools: &[Tool]) -> Result<ToolChoice, String> {
    let choice = match choice {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(Value::String(mode)) => match mode.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" | "any" => ToolChoice::Required,
            _ => return Err(choice_error()),
        },
        Some(Value::Object(named)) => ToolChoice::Function(named_function(named)?),
        Some(_) => return Err(choice_error()),
    };
    match &choice {
        ToolChoice::Required if tools.is_empty() => {
            Err("'tool_choice' \"required\" needs a non-empty 'tools'".into())
        }
        ToolChoice::Function(name) if !tools.iter().any(|tool| &tool.name == name) => Err(format!(
            "'tool_choice' names the function '{name}', which is not in 'tools'"
        )),
        _ => Ok(choice),
    }
}

/// `{"type": "function", "function": {"name": ...}}`, or the flatter
/// `{"type": "function", "name": ...}` of OpenAI's newer APIs.
fn named_function(named: &Map<String, Value>) -> Result<String, String> {
    let name = named
        .get("function")
        .and_then(|function| function.get("name"))
        .or_else(|| named.get("name"))
        .and_then(Value::as_str);
    name.map(str::to_owned).ok_or_else(choice_error)
}

fn choice_error() -> String {
    "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}".into()
}

/// The `tool_calls` of an assistant message sent back: OpenAI's (with
/// `arguments` a JSON string, read into a value for the template, as
/// llama.cpp's server does; a string that is not JSON stays a string) or
/// Ollama's (arguments already an object). `at` names the message in errors.
pub fn message_tool_calls(
    calls: Option<&Value>,
    at: &str,
) -> Result<Option<Vec<ChatToolCall>>, String> {
    let items = match calls {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) if items.is_empty() => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(format!("{at}.tool_calls must be a list")),
    };
    let calls = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            message_tool_call(item).map_err(|why| format!("{at}.tool_calls[{index}]: {why}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(calls))
}

fn message_tool_call(item: &Value) -> Result<ChatToolCall, String> {
    let Some(Value::Object(function)) = item.get("function") else {
        return Err("'function' is missing or not an object".into());
    };
    let name = match function.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err("'function.name' must be a non-empty string".into()),
    };
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Some(value) => value.clone(),
    };
    let id = match item.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return Err("'id' must be a string".into()),
    };
    Ok(ChatToolCall::function(id, name, arguments))
}

/// A fresh id for a call the model made: nine letters and digits, as
/// Mistral's template requires of the ids sent back to it, after `call_`
/// for the other forms (OpenAI's style).
pub fn call_id(format: ToolCallFormat) -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    // 62⁹ < 2⁶⁴: one hash gives all nine characters.
    let mut bits = hasher.finish();
    let id: String = (0..9)
        .map(|_| {
            let c = ALPHABET[(bits % 62) as usize];
            bits /= 62;
            char::from(c)
        })
        .collect();
    match format {
        ToolCallFormat::Mistral => id,
        _ => format!("call_{id}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> Value {
        json!({"type": "function", "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
        }})
    }

    #[test]
    fn tools_and_choices_are_read() {
        let tools = json!([weather()]);
        let read = |choice: Value| tool_request(Some(&tools), Some(&choice), None);
        let request = read(json!(null)).unwrap().unwrap();
        assert_eq!(request.choice, ToolChoice::Auto);
        assert!(!request.parallel);
        assert_eq!(request.tools[0].name, "get_weather");
        assert_eq!(request.tools[0].definition, weather());
        assert_eq!(
            read(json!("none")).unwrap().unwrap().choice,
            ToolChoice::None
        );
        assert_eq!(
            read(json!("required")).unwrap().unwrap().choice,
            ToolChoice::Required
        );
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        assert_eq!(
            read(named).unwrap().unwrap().choice,
            ToolChoice::Function("get_weather".into())
        );
        let parallel = tool_request(Some(&tools), None, Some(&json!(true)));
        assert!(parallel.unwrap().unwrap().parallel);
        assert_eq!(tool_request(Some(&json!([])), None, None), Ok(None));
        assert_eq!(tool_request(None, Some(&json!("auto")), None), Ok(None));
        let bare = json!([{"type": "function", "function": {"name": "now"}}]);
        let request = tool_request(Some(&bare), None, None).unwrap().unwrap();
        assert_eq!(request.tools[0].parameters["type"], "object");
    }

    /// Each mistake is named in the API's terms.
    #[test]
    fn bad_tools_are_refused_with_a_reason() {
        let many: Vec<Value> = (0..=MAX_TOOLS)
            .map(|i| json!({"type": "function", "function": {"name": format!("f{i}")}}))
            .collect();
        let huge = json!([{"type": "function", "function": {
            "name": "f", "description": "x".repeat(MAX_TOOLS_BYTES)
        }}]);
        let cases = [
            (json!({"type": "function"}), "'tools' must be a list"),
            (json!("get_weather"), "'tools' must be a list"),
            (json!([5]), "tools[0]: a tool must be an object"),
            (
                json!([{"type": "function"}]),
                "tools[0]: 'function' is missing",
            ),
            (
                json!([{"type": "function", "function": {}}]),
                "'function.name' is missing",
            ),
            (
                json!([{"type": "function", "function": {"name": 3}}]),
                "must be a string",
            ),
            (
                json!([{"type": "function", "function": {"name": ""}}]),
                "1 to 64",
            ),
            (
                json!([{"type": "function", "function": {"name": "a b"}}]),
                "1 to 64",
            ),
            (
                json!([{"type": "function", "function": {"name": "<tool_call>"}}]),
                "1 to 64",
            ),
            (
                json!([{"type": "function", "function": {"name": "x".repeat(65)}}]),
                "1 to 64",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "parameters": "object"}}]),
                "must be a JSON schema object",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "parameters": [1]}}]),
                "must be a JSON schema object",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "strict": "yes"}}]),
                "'function.strict'",
            ),
            (json!([{"type": "retrieval"}]), "only \"function\""),
            (
                json!([weather(), weather()]),
                "two tools are named 'get_weather'",
            ),
            (Value::Array(many), "at most 128 tools"),
            (huge, "bytes, more than"),
        ];
        for (tools, expected) in cases {
            let message = tool_request(Some(&tools), None, None).unwrap_err();
            assert!(message.contains(expected), "{tools}: {message}");
            assert!(!message.contains("invalid type"), "{message}");
        }
    }

    #[test]
    fn bad_choices_are_refused_with_a_reason() {
        let tools = json!([weather()]);
        let cases = [
            (json!("sometimes"), "must be \"none\""),
            (json!(1), "must be \"none\""),
            (json!({"type": "function"}), "must be \"none\""),
            (
                json!({"type": "function", "function": {"name": "get_time"}}),
                "'get_time', which is not in 'tools'",
            ),
        ];
        for (choice, expected) in cases {
            let message = tool_request(Some(&tools), Some(&choice), None).unwrap_err();
            assert!(message.contains(expected), "{choice}: {message}");
        }
        let message = tool_request(None, Some(&json!("required")), None).unwrap_err();
        assert!(message.contains("needs a non-empty 'tools'"), "{message}");
        let message = tool_request(Some(&tools), None, Some(&json!("yes"))).unwrap_err();
        assert!(message.contains("parallel_tool_calls"), "{message}");
    }

    #[test]
    fn call_ids_differ_and_suit_the_format() {
        let mistral = call_id(ToolCallFormat::Mistral);
        assert!(mistral.len() == 9 && mistral.chars().all(|c| c.is_ascii_alphanumeric()));
        let hermes = call_id(ToolCallFormat::Hermes);
        assert!(
            hermes.starts_with("call_") && hermes.len() == 14,
            "{hermes}"
        );
        assert_ne!(call_id(ToolCallFormat::Hermes), hermes);
    }

    #[test]
    fn calls_sent_back_take_arguments_as_values() {
        let calls = json!([
            {"id": "call_1", "type": "function",
             "function": {"name": "f", "arguments": "{\"a\": 1}"}},
            {"function": {"name": "g", "arguments": {"b": [2]}}},
            {"function": {"name": "h", "arguments": "not json"}},
        ]);
        let read = message_tool_calls(Some(&calls), "messages[1]")
            .unwrap()
            .unwrap();
        assert_eq!(read[0].id.as_deref(), Some("call_1"));
        assert_eq!(read[0].function.arguments, json!({"a": 1}));
        assert_eq!(read[1].function.arguments, json!({"b": [2]}));
        assert_eq!(read[2].function.arguments, json!("not json"));
        assert_eq!(message_tool_calls(Some(&json!([])), "m"), Ok(None));
        for (bad, expected) in [
            (json!({"function": {}}), "must be a list"),
            (
                json!([{"function": {"arguments": "{}"}}]),
                "messages[1].tool_calls[0]: 'function.name'",
            ),
            (json!([{"name": "f"}]), "'function' is missing"),
            (
                json!([{"id": 7, "function": {"name": "f"}}]),
                "'id' must be a string",
            ),
        ] {
            let message = message_tool_calls(Some(&bad), "messages[1]").unwrap_err();
            assert!(message.contains(expected), "{bad}: {message}");
        }
    }
}
