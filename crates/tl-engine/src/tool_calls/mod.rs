//! Tool calls in a model's output: which form a chat template teaches its
//! model to write them in ([`ToolCallFormat`]), reading them back out of the
//! text, whole ([`parse_tool_calls`]) or as it streams ([`ToolCallSplitter`]),
//! and the grammar that makes a model write a well-formed call
//! ([`tool_call_grammar`]).
//!
//! The forms, as the templates in `testdata/templates` describe them:
//!
//! | format | a call is written as |
//! |---|---|
//! | Hermes (Qwen2.5, Hermes 2 Pro / 3) | `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, one block per call |
//! | Llama 3.1 JSON (Llama 3.1 / 3.2 / 3.3) | `{"name": ..., "parameters": {...}}` as the whole answer |
//! | Mistral (Nemo) | `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` |
//! | generic (other templates) | any of these, or `{"name": ..., "arguments": {...}}` |
//!
//! Reading is forgiving and never fails: text that does not parse as a call
//! stays text. Control tokens (`[TOOL_CALLS]`, `<|python_tag|>`) are not in
//! the text the engine streams, so each form is also recognized without them.

mod format;
mod grammar;
mod parse;
mod stream;

#[cfg(test)]
mod tests;

pub use format::ToolCallFormat;
pub use grammar::{tool_call_grammar, ToolCallMode, ToolSchema};
pub use parse::{parse_tool_calls, ParsedOutput};
pub use stream::{Piece, ToolCallSplitter};

/// One call read from a model's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The function's name, as the model wrote it.
    pub name: String,
    /// The arguments: always a JSON object.
    pub arguments: serde_json::Value,
}
