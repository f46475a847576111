//! Reading the user's message: line editing and history through rustyline, with
//! two ways to write several lines — a trailing `\` continues the line, and `"""`
//! opens and closes a block.

use anyhow::Result;
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

const PROMPT: &str = ">>> ";
const CONTINUATION: &str = "... ";
const BLOCK_FENCE: &str = "\"\"\"";

/// What the user did at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A complete message or command.
    Text(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D or the end of piped input.
    End,
}

/// The prompt and its history.
pub struct InputReader {
    editor: DefaultEditor,
}

impl InputReader {
    pub fn new() -> Result<Self> {
        Ok(InputReader {
            editor: DefaultEditor::new()?,
        })
    }

    /// Reads one message (possibly spanning several lines).
    pub fn read(&mut self) -> Result<Input> {
        let first = match self.line(PROMPT)? {
            Some(Ok(line)) => line,
            Some(Err(input)) => return Ok(input),
            None => return Ok(Input::End),
        };
        let text = if let Some(rest) = first.trim_start().strip_prefix(BLOCK_FENCE) {
            self.read_block(rest)?
        } else {
            self.read_continued(first)?
        };
        if !text.trim().is_empty() {
            let _ = self.editor.add_history_entry(text.as_str());
        }
        Ok(Input::Text(text))
    }

    /// Lines until one ends with the closing fence.
    fn read_block(&mut self, first_rest: &str) -> Result<String> {
        if let Some(body) = first_rest.strip_suffix(BLOCK_FENCE) {
            return Ok(body.to_string());
        }
        let mut lines = vec![first_rest.to_string()];
        while let Some(Ok(line)) = self.line(CONTINUATION)? {
            if let Some(last) = line.strip_suffix(BLOCK_FENCE) {
                lines.push(last.to_string());
                break;
            }
            lines.push(line);
        }
        Ok(lines.join("\n").trim_matches('\n').to_string())
    }

    /// Follows trailing backslashes onto the next lines.
    fn read_continued(&mut self, first: String) -> Result<String> {
        let mut text = first;
        while text.ends_with('\\') {
            text.pop();
            text.push('\n');
            match self.line(CONTINUATION)? {
                Some(Ok(line)) => text.push_str(&line),
                _ => break,
            }
        }
        Ok(text)
    }

    /// One line; `None` at the end of input, `Some(Err(..))` for Ctrl-C.
    fn line(&mut self, prompt: &str) -> Result<Option<std::result::Result<String, Input>>> {
        match self.editor.readline(prompt) {
            Ok(line) => Ok(Some(Ok(line))),
            Err(ReadlineError::Interrupted) => Ok(Some(Err(Input::Interrupted))),
            Err(ReadlineError::Eof) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
