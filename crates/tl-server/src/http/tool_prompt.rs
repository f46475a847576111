//! Putting a request's tools before the model: the template gets them as
//! its `tools` variable, and what the answer may be follows `tool_choice`
//! (a grammar when a call is required, a function is named, or a tool is
//! `strict`). The form of the calls is read from the template
//! ([`ToolCallFormat`]), and so is how to read them back from the answer.
//!
//! A template that says nothing about tools (ChatML, Gemma) would show the
//! model none, so the tools are described in the system message instead,
//! in Qwen2.5's words and call form, and earlier calls and results in the
//! conversation are written into the turns as that form writes them.

use serde_json::{json, Map, Value};
use tl_engine::chat_template::{ChatMessage, ChatToolCall};
use tl_engine::constraint::Grammar;
use tl_engine::tool_calls::{tool_call_grammar, ToolCallFormat, ToolCallMode, ToolSchema};
use tl_tokenizer::Tokenizer;

use super::tools::{Tool, ToolChoice, ToolRequest};

/// A conversation ready for the template, with its tools.
#[derive(Debug)]
pub struct ToolPrompt {
    pub messages: Vec<ChatMessage>,
    /// The template's extra variables (`tools`).
    pub extras: Map<String, Value>,
    /// What the answer must follow, when `tool_choice` asks for calls.
    pub grammar: Option<ToolGrammar>,
    /// The form to read calls back in; `None` when none are to be read.
    pub format: Option<ToolCallFormat>,
}

/// The grammar of the calls, and each enforced function's parameters
/// alone (by name): compiled first, they show a schema no call can follow
/// before generation and name its function (inside the whole grammar such
/// a schema is only found when the model reaches it).
#[derive(Debug)]
pub struct ToolGrammar {
    pub whole: Grammar,
    pub calls: Vec<(String, Grammar)>,
}

/// `messages` and `tools` as the template with `source` takes them.
pub fn tool_prompt(
    request: Option<ToolRequest>,
    messages: Vec<ChatMessage>,
    source: &str,
    tokenizer: &Tokenizer,
) -> ToolPrompt {
    let renders_tools = ToolCallFormat::renders_tools(source);
    let mut messages = if renders_tools {
        messages
    } else {
        with_tool_turns_as_text(messages)
    };
    let mut extras = Map::new();
    let Some(request) = request.filter(|request| request.choice != ToolChoice::None) else {
        return ToolPrompt {
            messages,
            extras,
            grammar: None,
            format: None,
        };
    };
    let format = ToolCallFormat::for_template(source);
    if renders_tools {
        let definitions = request.tools.iter().map(|tool| tool.definition.clone());
        extras.insert("tools".into(), Value::Array(definitions.collect()));
    } else {
        describe_tools(&mut messages, &request.tools);
    }
    ToolPrompt {
        messages,
        extras,
        grammar: grammar(&request, format, tokenizer),
        format: Some(format),
    }
}

/// The grammar `tool_choice` asks for: the declared schemas for every call
/// when one is required (of the named function only, when one is named),
/// and for `strict` tools' calls when the model may also answer in text.
fn grammar(
    request: &ToolRequest,
    format: ToolCallFormat,
    tokenizer: &Tokenizer,
) -> Option<ToolGrammar> {
    let parallel = request.parallel;
    let (schemas, mode): (Vec<ToolSchema>, _) = match &request.choice {
        ToolChoice::None => return None,
        ToolChoice::Auto => {
            if !request.tools.iter().any(|tool| tool.strict) {
                return None;
            }
            let schemas = request.tools.iter().map(|t| schema(t, t.strict)).collect();
            (schemas, ToolCallMode::Optional { parallel })
        }
        ToolChoice::Required => {
            let schemas = request.tools.iter().map(|t| schema(t, true)).collect();
            (schemas, ToolCallMode::Required { parallel })
        }
        ToolChoice::Function(name) => {
            let named = request.tools.iter().filter(|t| &t.name == name);
            let schemas = named.map(|t| schema(t, true)).collect();
            (schemas, ToolCallMode::Required { parallel: false })
        }
    };
    let calls = schemas
        .iter()
        .filter(|schema| schema.parameters != any_object())
        .map(|schema| {
            let parameters = Grammar::JsonSchema(schema.parameters.clone());
            (schema.name.clone(), parameters)
        })
        .collect();
    Some(ToolGrammar {
        whole: tool_call_grammar(format, &schemas, mode, tokenizer),
        calls,
    })
}

fn any_object() -> Value {
    json!({"type": "object"})
}

/// The schema a call of `tool` must follow: its parameters when enforced,
/// else any object.
fn schema(tool: &Tool, enforced: bool) -> ToolSchema {
    let parameters = if enforced {
        tool.parameters.clone()
    } else {
        any_object()
    };
    ToolSchema {
        name: tool.name.clone(),
        parameters,
    }
}

/// Qwen2.5's description of tools, after its default system prompt.
const TOOLS_HEADER: &str = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const TOOLS_FOOTER: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// Adds the tools' description to the system message (a new one first
/// when there is none).
fn describe_tools(messages: &mut Vec<ChatMessage>, tools: &[Tool]) {
    let mut text = TOOLS_HEADER.to_owned();
    for tool in tools {
        text.push('\n');
        text.push_str(&tool.definition.to_string());
    }
    text.push_str(TOOLS_FOOTER);
    match messages.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{text}", first.content);
        }
        _ => messages.insert(0, ChatMessage::system(text)),
    }
}

/// For a template without tools: an assistant's calls written into its
/// text as `<tool_call>` blocks, and tool results as a user turn of
/// `<tool_response>` blocks (consecutive results in one turn), as Qwen2.5's
/// template writes them.
fn with_tool_turns_as_text(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    let mut previous_was_tool = false;
    for message in messages {
        let is_tool = message.role == "tool";
        if is_tool {
            let block = format!("<tool_response>\n{}\n</tool_response>", message.content);
            match out.last_mut() {
                Some(last) if previous_was_tool => {
                    last.content = format!("{}\n{block}", last.content)
                }
                _ => out.push(ChatMessage::user(block)),
            }
        } else {
            out.push(without_calls(message));
        }
        previous_was_tool = is_tool;
    }
    out
}

fn without_calls(mut message: ChatMessage) -> ChatMessage {
    let Some(calls) = message.tool_calls.take() else {
        return message;
    };
    let blocks: Vec<String> = calls.iter().map(call_block).collect();
    let mut parts = vec![message.content.clone()];
    parts.retain(|part| !part.is_empty());
    parts.extend(blocks);
    message.content = parts.join("\n");
    message
}

fn call_block(call: &ChatToolCall) -> String {
    let body = json!({"name": call.function.name, "arguments": call.function.arguments});
    format!("<tool_call>\n{body}\n</tool_call>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> Tokenizer {
        let path = tl_testdata::testdata().join("vocab/ggml-vocab-llama3-pre.gguf");
        Tokenizer::from_gguf(&tl_gguf::GgufFile::open(&path).unwrap()).unwrap()
    }

    fn request(choice: ToolChoice) -> ToolRequest {
        let tools = json!([{"type": "function", "function": {"name": "f", "strict": true}}]);
        let mut request = super::super::tools::tool_request(Some(&tools), None, None)
            .unwrap()
            .unwrap();
        request.choice = choice;
        request
    }

    const QWEN: &str = "{% for tool in tools %}{{ tool.function.name }}{% endfor %}<tool_call>";
    const CHATML: &str = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";

    #[test]
    fn templates_with_tools_get_them_as_a_variable() {
        let messages = vec![ChatMessage::user("Hi")];
        let prompt = tool_prompt(
            Some(request(ToolChoice::Auto)),
            messages,
            QWEN,
            &tokenizer(),
        );
        assert_eq!(prompt.extras["tools"][0]["function"]["name"], "f");
        assert_eq!(prompt.format, Some(ToolCallFormat::Hermes));
        // A strict tool is enforced even when text is allowed.
        assert!(prompt.grammar.is_some());
        assert_eq!(prompt.messages, vec![ChatMessage::user("Hi")]);
    }

    #[test]
    fn tool_choice_none_shows_no_tools_and_reads_no_calls() {
        let messages = vec![ChatMessage::user("Hi")];
        let prompt = tool_prompt(
            Some(request(ToolChoice::None)),
            messages,
            QWEN,
            &tokenizer(),
        );
        assert!(prompt.extras.is_empty() && prompt.grammar.is_none() && prompt.format.is_none());
    }

    #[test]
    fn templates_without_tools_get_them_described_and_turns_as_text() {
        let call = ChatToolCall::function(Some("c1".into()), "f", json!({"a": 1}));
        let messages = vec![
            ChatMessage::user("Hi"),
            ChatMessage::assistant_calls("", vec![call.clone(), call]),
            ChatMessage::tool_result("one", Some("c1".into()), None),
            ChatMessage::tool_result("two", Some("c1".into()), None),
        ];
        let prompt = tool_prompt(
            Some(request(ToolChoice::Required)),
            messages,
            CHATML,
            &tokenizer(),
        );
        assert!(prompt.extras.is_empty());
        assert_eq!(prompt.format, Some(ToolCallFormat::Hermes));
        assert!(prompt.grammar.is_some());
        let roles: Vec<&str> = prompt.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(prompt.messages[0]
            .content
            .contains("<tools>\n{\"type\":\"function\""));
        let block = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":1}}\n</tool_call>";
        assert_eq!(prompt.messages[2].content, format!("{block}\n{block}"));
        assert_eq!(
            prompt.messages[3].content,
            "<tool_response>\none\n</tool_response>\n<tool_response>\ntwo\n</tool_response>"
        );
    }
}
