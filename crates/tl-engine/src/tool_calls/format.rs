//! Which form of tool call a chat template asks for, read from its source.

/// How a model writes its tool calls (see the module's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// `<tool_call>{...}</tool_call>` blocks: Qwen2.5, Hermes.
    Hermes,
    /// One bare `{"name": ..., "parameters": ...}` object: Llama 3.1 to 3.3.
    Llama3Json,
    /// `[TOOL_CALLS][{...}, ...]`: Mistral.
    Mistral,
    /// A template whose form is not one of these: every form is tried.
    Generic,
}

/// Text only Llama 3.x templates write: their instruction for custom tools.
const LLAMA3_INSTRUCTION: &str = r#"{"name": function name, "parameters": "#;

impl ToolCallFormat {
    /// The form the template with this source teaches. A template that says
    /// nothing about tools gets [`Hermes`](Self::Hermes), the form the
    /// server describes to such a model itself (see
    /// [`renders_tools`](Self::renders_tools)).
    pub fn for_template(source: &str) -> Self {
        if source.contains("<tool_call>") {
            ToolCallFormat::Hermes
        } else if source.contains("[TOOL_CALLS]") {
            ToolCallFormat::Mistral
        } else if source.contains(LLAMA3_INSTRUCTION) {
            ToolCallFormat::Llama3Json
        } else if Self::renders_tools(source) {
            ToolCallFormat::Generic
        } else {
            ToolCallFormat::Hermes
        }
    }

    /// Whether the template reads the `tools` variable at all; one that does
    /// not shows the model no tools, so they must be described some other way.
    pub fn renders_tools(source: &str) -> bool {
        source.contains("tools")
    }

    /// The name used in messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes => "hermes",
            ToolCallFormat::Llama3Json => "llama3-json",
            ToolCallFormat::Mistral => "mistral",
            ToolCallFormat::Generic => "generic",
        }
    }

    /// The key a call's arguments go under.
    pub(crate) fn arguments_key(self) -> &'static str {
        match self {
            ToolCallFormat::Llama3Json => "parameters",
            _ => "arguments",
        }
    }
}
