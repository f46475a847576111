//! Word wrap for a reply streamed in pieces: words that would cross the
//! terminal's right edge start a new line, so the terminal does not cut them.
//! Text is written as it comes except for the word being typed. Markdown code
//! blocks (between ``` lines) are left as they are, so copied code keeps its
//! lines.

use unicode_width::UnicodeWidthStr;

/// Wraps streamed text at `width` columns (`None`: no wrapping, as for a pipe).
pub struct Wrapper {
    width: Option<usize>,
    column: usize,
    word: String,
    /// The current line's first characters (enough to see a fence).
    line_start: String,
    in_code: bool,
}

const FENCE: &str = "```";

impl Wrapper {
    pub fn new(width: Option<usize>) -> Wrapper {
        Wrapper {
            width: width.filter(|&w| w >= 20),
            column: 0,
            word: String::new(),
            line_start: String::new(),
            in_code: false,
        }
    }

    /// The terminal's width where stdout is one.
    pub fn for_stdout() -> Wrapper {
        use std::io::IsTerminal;
        let width = std::io::stdout()
            .is_terminal()
            .then(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
            .flatten();
        Wrapper::new(width)
    }

    /// The text to print for `piece`: all of it but an unfinished word.
    pub fn push(&mut self, piece: &str) -> String {
        let Some(width) = self.width else {
            return piece.to_string();
        };
        let mut out = String::new();
        for c in piece.chars() {
            if self.line_start.len() < FENCE.len() && (c != ' ' || !self.line_start.is_empty()) {
                self.line_start.push(c);
            }
            if c == '\n' {
                self.flush_word(width, &mut out);
                out.push('\n');
                self.column = 0;
                if self.line_start.starts_with(FENCE) {
                    self.in_code = !self.in_code;
                }
                self.line_start.clear();
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

    /// The unfinished word, at the end of the reply.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if let Some(width) = self.width {
            self.flush_word(width, &mut out);
        }
        out
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
    fn newlines_reset_the_column_and_pipes_are_not_wrapped() {
        assert_eq!(wrapped(20, &["a\nb c"]), "a\nb c");
        let mut pipe = Wrapper::new(None);
        assert_eq!(pipe.push("x ".repeat(50).as_str()), "x ".repeat(50));
        assert_eq!(pipe.finish(), "");
    }
}
