//! Word wrap for a reply streamed in pieces: words that would cross the
//! terminal's right edge start a new line, so the terminal does not cut them.
//! Text is written as it comes except for the word being typed. Markdown code
//! blocks (between ``` lines) are not wrapped, so copied code keeps its
//! lines; in colour, each of their lines is written once complete, with
//! syntax colour.

use unicode_width::UnicodeWidthStr;

use super::highlight::Language;

/// Wraps streamed text at `width` columns (`None`: no wrapping, as for a pipe).
pub struct Wrapper {
    width: Option<usize>,
    column: usize,
    word: String,
    /// The current line's first characters (enough to see a fence).
    line_start: String,
    in_code: bool,
    /// Whether code lines get syntax colour.
    colour: bool,
    /// The open code block's language, its line so far (in colour), and
    /// the current line's text (to read a fence's language from).
    language: Option<Language>,
    code_line: String,
    line: String,
}

const FENCE: &str = "```";

impl Wrapper {
    /// A wrapper without colour (tests).
    #[cfg(test)]
    pub fn new(width: Option<usize>) -> Wrapper {
        Wrapper::with_colour(width, false)
    }

    /// A wrapper that also colours code blocks when `colour` (only where it
    /// wraps: a terminal).
    pub fn with_colour(width: Option<usize>, colour: bool) -> Wrapper {
        Wrapper {
            width: width.filter(|&w| w >= 20),
            column: 0,
            word: String::new(),
            line_start: String::new(),
            in_code: false,
            colour,
            language: None,
            code_line: String::new(),
            line: String::new(),
        }
    }

    /// The terminal's width where stdout is one, and code in colour there
    /// unless `NO_COLOR` is set (the common convention).
    pub fn for_stdout() -> Wrapper {
        use std::io::IsTerminal;
        let terminal = std::io::stdout().is_terminal();
        let width = terminal
            .then(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
            .flatten();
        let colour = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Wrapper::with_colour(width, colour)
    }

    /// The text to print for `piece`: all of it but an unfinished word.
    pub fn push(&mut self, piece: &str) -> String {
        let Some(width) = self.width else {
            return piece.to_string();
        };
        let mut out = String::new();
        for c in piece.chars() {
            if self.colour && c != '\n' {
                self.line.push(c);
            }
            if self.line_start.len() < FENCE.len() && (c != ' ' || !self.line_start.is_empty()) {
                self.line_start.push(c);
            }
            if c == '\n' {
                self.flush_word(width, &mut out);
                self.flush_code_line(&mut out);
                out.push('\n');
                self.column = 0;
                if self.line_start.starts_with(FENCE) {
                    self.in_code = !self.in_code;
                }
                self.line_start.clear();
            } else if self.colour && self.in_code && !self.line_start.starts_with(FENCE) {
                // A code line waits whole for its colour (the closing fence
                // is written plain, once seen).
                self.code_line.push_str(&std::mem::take(&mut self.word));
                self.code_line.push(c);
            } else if self.in_code || self.line_start.starts_with(FENCE) {
                // The fence's first backticks may wait as a word.
                out.push_str(&std::mem::take(&mut self.word));
                out.push(c);
            } else if c.is_whitespace() {
                self.flush_word(width, &mut out);
                if self.column < width {
                    out.push(c);
                    self.column += 1;
                }
            } else {
                self.word.push(c);
            }
        }
        out
    }

    /// The unfinished word (or code line), at the end of the reply.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if let Some(width) = self.width {
            self.flush_word(width, &mut out);
            self.flush_code_line(&mut out);
        }
        self.in_code = false;
        out
    }

    /// Writes the code line held so far: coloured, or as the closing fence
    /// it turned out to be. An opening fence's line names the language.
    fn flush_code_line(&mut self, out: &mut String) {
        if !self.colour {
            return;
        }
        let line = std::mem::take(&mut self.code_line);
        let fence = self.line_start.starts_with(FENCE);
        let text = std::mem::take(&mut self.line);
        if fence && !self.in_code {
            let info = text.trim_start().strip_prefix(FENCE).unwrap_or_default();
            self.language = Some(Language::of_fence(info));
        }
        if line.is_empty() {
            return;
        }
        match &self.language {
            Some(language) if !fence => out.push_str(&language.colour(&line)),
            _ => out.push_str(&line),
        }
    }

    fn flush_word(&mut self, width: usize, out: &mut String) {
        if self.word.is_empty() {
            return;
        }
        let len = self.word.width();
        if self.column > 0 && self.column + len > width {
            // The space that ended the last line is left where it was.
            out.push('\n');
            self.column = 0;
        }
        out.push_str(&self.word);
        self.column += len;
        if self.column > width {
            // A word wider than the terminal wraps where the terminal puts it.
            self.column %= width;
        }
        self.word.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(width: usize, pieces: &[&str]) -> String {
        let mut w = Wrapper::new(Some(width));
        let mut out: String = pieces.iter().map(|p| w.push(p)).collect();
        out.push_str(&w.finish());
        out
    }

    #[test]
    fn words_that_cross_the_edge_move_to_the_next_line() {
        let text = "the quick brown fox jumps over the lazy dog again and again";
        let out = wrapped(
            20,
            &[
                "the qu",
                "ick brown fox jumps o",
                "ver the lazy dog again and again",
            ],
        );
        assert!(out.lines().all(|l| l.trim_end().width() <= 20), "{out}");
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(out.lines().next(), Some("the quick brown fox "));
    }

    #[test]
    fn a_word_ending_at_the_edge_drops_the_space_after_it() {
        assert_eq!(
            wrapped(20, &["abcdefghij klmnopqrs tuv"]),
            "abcdefghij klmnopqrs\ntuv"
        );
    }

    #[test]
    fn code_blocks_keep_their_lines() {
        let code = "```rust\nlet a_long_name = another_long_function_name(argument_one, argument_two);\n```\n";
        let out = wrapped(20, &["Here:\n", code, "done"]);
        assert_eq!(out, format!("Here:\n{code}done"));
    }

    #[test]
    fn code_lines_come_whole_and_coloured_in_colour_mode() {
        let mut w = Wrapper::with_colour(Some(40), true);
        let mut out = String::new();
        for piece in ["Run:\n``", "`py", "thon\nif x:", "  # yes\n", "```\nok"] {
            out.push_str(&w.push(piece));
        }
        out.push_str(&w.finish());
        let python = Language::of_fence("python");
        let expected = format!(
            "Run:\n```python\n{}\n```\nok",
            python.colour("if x:  # yes")
        );
        assert_eq!(out, expected);
        assert!(out.contains("\x1b["));
        // Without colour, code streams as it comes, unchanged.
        let mut plain = Wrapper::new(Some(40));
        assert_eq!(plain.push("```\nif x:"), "```\nif x:");
    }

    #[test]
    fn newlines_reset_the_column_and_pipes_are_not_wrapped() {
        assert_eq!(wrapped(20, &["a\nb c"]), "a\nb c");
        let mut pipe = Wrapper::new(None);
        assert_eq!(pipe.push("x ".repeat(50).as_str()), "x ".repeat(50));
        assert_eq!(pipe.finish(), "");
    }
}
