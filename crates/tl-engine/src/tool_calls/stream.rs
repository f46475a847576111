//! Reading calls out of an answer as it streams: text goes out as soon as it
//! cannot be the start of a call; from a call's start on, text is held until
//! the call is complete (a Hermes block's closing tag) or the answer ends,
//! and then goes out as calls, or as text when it does not parse.

use super::parse::parse_tool_calls;
use super::{ToolCall, ToolCallFormat};

/// What goes out of the splitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Calls(Vec<ToolCall>),
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";

/// Splits a stream of text into text and calls, in the given format.
#[derive(Debug, Clone)]
pub struct ToolCallSplitter {
    format: ToolCallFormat,
    /// Text not yet sent: a possible call, or the start of one.
    held: String,
    /// Whether the answer began with text, so that a call can no longer be
    /// the whole answer (for forms where it must be).
    said_text: bool,
    /// Whether a call has begun.
    in_calls: bool,
}

/// Whether text could open a call.
enum Opening {
    Yes,
    NotYet,
    No,
}

impl ToolCallSplitter {
    pub fn new(format: ToolCallFormat) -> Self {
        ToolCallSplitter {
            format,
            held: String::new(),
            said_text: false,
            in_calls: false,
        }
    }

    /// Takes the next piece of text; returns what can go out now.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.held.push_str(text);
        let mut out = Vec::new();
        self.advance(&mut out);
        out
    }

    /// Ends the answer: what was held goes out, as calls where it parses.
    pub fn finish(self) -> Vec<Piece> {
        let mut out = Vec::new();
        if self.in_calls {
            let parsed = parse_tool_calls(self.format, &self.held);
            push_text(&mut out, parsed.content);
            if !parsed.calls.is_empty() {
                out.push(Piece::Calls(parsed.calls));
            }
        } else {
            push_text(&mut out, self.held);
        }
        out
    }

    fn advance(&mut self, out: &mut Vec<Piece>) {
        loop {
            if self.in_calls {
                if !self.take_hermes_block(out) {
                    return;
                }
                continue;
            }
            if !self.said_text {
                let start = self.held.trim_start();
                if start.is_empty() {
                    return;
                }
                match opening(start, self.start_openers()) {
                    Opening::Yes => {
                        self.in_calls = true;
                        continue;
                    }
                    Opening::NotYet => return,
                    Opening::No => self.said_text = true,
                }
            }
            if let Some(at) = self
                .held
                .find(HERMES_OPEN)
                .filter(|_| self.blocks_anywhere())
            {
                let text: String = self.held.drain(..at).collect();
                push_text(out, text);
                self.in_calls = true;
                continue;
            }
            let keep = if self.blocks_anywhere() {
                partial_suffix_len(&self.held, HERMES_OPEN)
            } else {
                0
            };
            let text: String = self.held.drain(..self.held.len() - keep).collect();
            push_text(out, text);
            return;
        }
    }

    /// In calls: sends one complete `<tool_call>` block; whether there may
    /// be more to do. Forms without blocks wait for the end of the answer.
    fn take_hermes_block(&mut self, out: &mut Vec<Piece>) -> bool {
        if !self.blocks_anywhere() {
            return false;
        }
        let lead = self.held.len() - self.held.trim_start().len();
        let body = &self.held[lead..];
        if body.is_empty() || (body.len() < HERMES_OPEN.len() && HERMES_OPEN.starts_with(body)) {
            return false;
        }
        if !body.starts_with(HERMES_OPEN) {
            if self.format == ToolCallFormat::Hermes {
                // Text after the calls.
                self.in_calls = false;
                self.said_text = true;
                return true;
            }
            return false;
        }
        let Some(end) = body.find(HERMES_CLOSE) else {
            return false;
        };
        let block_end = lead + end + HERMES_CLOSE.len();
        let block: String = self.held.drain(..block_end).collect();
        let parsed = parse_tool_calls(ToolCallFormat::Hermes, &block);
        if parsed.calls.is_empty() {
            push_text(out, block);
        } else {
            push_text(out, parsed.content);
            out.push(Piece::Calls(parsed.calls));
        }
        true
    }

    /// What may open a call at the start of the answer.
    fn start_openers(&self) -> &'static [&'static str] {
        match self.format {
            ToolCallFormat::Hermes => &[HERMES_OPEN],
            ToolCallFormat::Llama3Json => &["{", "<|python_tag|>"],
            ToolCallFormat::Mistral => &["[TOOL_CALLS]", "["],
            ToolCallFormat::Generic => &[HERMES_OPEN, "{", "[", "```"],
        }
    }

    /// Whether `<tool_call>` blocks may come anywhere, after text too.
    fn blocks_anywhere(&self) -> bool {
        matches!(
            self.format,
            ToolCallFormat::Hermes | ToolCallFormat::Generic
        )
    }
}

fn push_text(out: &mut Vec<Piece>, text: String) {
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
}

/// Whether `text` starts with one of `openers`, could still grow into one,
/// or cannot.
fn opening(text: &str, openers: &[&str]) -> Opening {
    if openers.iter().any(|opener| text.starts_with(opener)) {
        Opening::Yes
    } else if openers.iter().any(|opener| opener.starts_with(text)) {
        Opening::NotYet
    } else {
        Opening::No
    }
}

/// The length of the longest end of `text` that is a proper start of
/// `opener` (ASCII, so any such end starts on a character boundary).
fn partial_suffix_len(text: &str, opener: &str) -> usize {
    (1..opener.len())
        .rev()
        .find(|&len| text.ends_with(&opener[..len]))
        .unwrap_or(0)
}
