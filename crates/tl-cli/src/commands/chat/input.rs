//! Reading the user's message: line editing and history through rustyline, with
//! two ways to write several lines — a trailing `\` continues the line, and `"""`
//! opens and closes a block.

use std::path::PathBuf;

use anyhow::Result;
use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};

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

/// Messages kept in the history file.
const HISTORY_ENTRIES: usize = 1000;

/// The prompt and its history, kept in `history_file` when there is one.
pub struct InputReader {
    editor: DefaultEditor,
    history_file: Option<PathBuf>,
}

impl InputReader {
    pub fn new(history_file: Option<PathBuf>) -> Result<Self> {
        let config = Config::builder()
            .max_history_size(HISTORY_ENTRIES)?
            .auto_add_history(false)
            .build();
        let mut editor = DefaultEditor::with_config(config)?;
        if let Some(path) = history_file.as_ref().filter(|p| p.exists()) {
            if let Err(e) = editor.load_history(path) {
                tracing::warn!("cannot read the chat history {}: {e}", path.display());
            }
        }
        Ok(InputReader {
            editor,
            history_file,
        })
    }

    /// Writes the history file (after each message, so a killed chat keeps it).
    fn save_history(&mut self) {
        let Some(path) = &self.history_file else {
            return;
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = self.editor.save_history(path) {
            tracing::warn!("cannot write the chat history {}: {e}", path.display());
        }
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
            self.save_history();
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
