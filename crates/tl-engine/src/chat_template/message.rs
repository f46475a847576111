//! One turn of a conversation, in the shape chat templates expect: a map with
//! `role` and `content`, as in Hugging Face's `messages` list, and for tool
//! use the assistant's `tool_calls` and a tool result's `tool_call_id`.

use serde::{Deserialize, Serialize};

/// A single chat turn. Templates read it as `message.role` / `message['content']`.
///
/// The tool fields are left out of the map when empty, not set to `none`:
/// templates test them with `'tool_calls' in message` (Llama 3.1) and
/// `message.tool_calls is defined` (Mistral, Hermes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// The calls an assistant turn made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatToolCall>>,
    /// The call a `tool` turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The function a `tool` turn answers for (Ollama's `tool_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A call in an assistant turn, in OpenAI's shape but with `arguments` as a
/// JSON value: templates print it with `tojson` or iterate over its items,
/// as Hugging Face's do with the objects transformers users pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ChatFunctionCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatFunctionCall {
    pub name: String,
    pub arguments: serde_json::Value,
}

impl ChatToolCall {
    /// A call of `name` with `arguments`, of type `function`.
    pub fn function(
        id: Option<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        Self {
            id,
            kind: "function".into(),
            function: ChatFunctionCall {
                name: name.into(),
                arguments,
            },
        }
    }
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }

    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }

    /// An assistant turn that made `calls` (with `content` said beside them).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ChatToolCall>) -> Self {
        Self {
            tool_calls: Some(calls),
            ..Self::assistant(content)
        }
    }

    /// A `tool` turn: the result of the call `tool_call_id` of function `name`.
    pub fn tool_result(
        content: impl Into<String>,
        tool_call_id: Option<String>,
        name: Option<String>,
    ) -> Self {
        Self {
            tool_call_id,
            name,
            ..Self::new("tool", content)
        }
    }

    /// Bytes of text the turn brings to a render (role, content, and the
    /// tool fields as JSON).
    pub(crate) fn input_bytes(&self) -> usize {
        let calls = self.tool_calls.as_ref().map_or(0, super::json_len);
        let optional = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        self.role.len()
            + self.content.len()
            + calls
            + optional(&self.tool_call_id)
            + optional(&self.name)
    }
}
