//! Syntax colour for the lines of a Markdown code block in a terminal:
//! keywords, strings, comments and numbers, by a small lexer that knows the
//! comment and keyword conventions of common languages (a block's fence names
//! its language; unknown ones get a generic set). One line at a time, so a
//! string or comment never colours past its line.

/// ANSI colours: keywords bold blue, strings green, comments grey, numbers
/// cyan; each span ends with a reset.
const KEYWORD: &str = "\x1b[1;34m";
const STRING: &str = "\x1b[32m";
const COMMENT: &str = "\x1b[90m";
const NUMBER: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// How a block's language writes comments and which words are keywords.
pub struct Language {
    line_comments: &'static [&'static str],
    keywords: &'static [&'static str],
}

const RUST: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "false",
    "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while",
];
const PYTHON: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while",
    "with", "yield",
];
const C_LIKE: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "float",
    "for",
    "function",
    "func",
    "go",
    "if",
    "import",
    "int",
    "interface",
    "let",
    "long",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "short",
    "static",
    "struct",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "unsigned",
    "var",
    "void",
    "while",
];
const SHELL: &[&str] = &[
    "case", "do", "done", "elif", "else", "esac", "export", "fi", "for", "function", "if", "in",
    "local", "return", "then", "until", "while",
];
const SQL: &[&str] = &[
    "AND", "AS", "BY", "CREATE", "DELETE", "FROM", "GROUP", "INSERT", "INTO", "JOIN", "NOT",
    "NULL", "ON", "OR", "ORDER", "SELECT", "SET", "TABLE", "UPDATE", "VALUES", "WHERE",
];

impl Language {
    /// The language a fence's info string names (```rust, ```py, ...).
    pub fn of_fence(info: &str) -> Language {
        let name = info.split_whitespace().next().unwrap_or("");
        let (line_comments, keywords): (&[&str], &[&str]) = match name.to_ascii_lowercase().as_str()
        {
            "rust" | "rs" => (&["//"], RUST),
            "python" | "py" => (&["#"], PYTHON),
            "sh" | "bash" | "shell" | "zsh" | "console" => (&["#"], SHELL),
            "sql" => (&["--"], SQL),
            "" => (&["//", "#"], C_LIKE),
            _ => (&["//"], C_LIKE),
        };
        Language {
            line_comments,
            keywords,
        }
    }

    /// `line` with colour codes around its keywords, strings, comments and
    /// numbers (its text unchanged otherwise).
    pub fn colour(&self, line: &str) -> String {
        let mut out = String::with_capacity(line.len() + 16);
        let mut rest = line;
        while let Some(c) = rest.chars().next() {
            if self.line_comments.iter().any(|m| rest.starts_with(m)) {
                paint(&mut out, COMMENT, rest);
                break;
            }
            let len = if c == '"' || c == '\'' || c == '`' {
                let len = string_len(rest, c);
                paint(&mut out, STRING, &rest[..len]);
                len
            } else if c.is_ascii_digit() {
                let len = word_len(rest);
                paint(&mut out, NUMBER, &rest[..len]);
                len
            } else if c.is_alphabetic() || c == '_' {
                let len = word_len(rest);
                let word = &rest[..len];
                if self.keywords.contains(&word) {
                    paint(&mut out, KEYWORD, word);
                } else {
                    out.push_str(word);
                }
                len
            } else {
                out.push(c);
                c.len_utf8()
            };
            rest = &rest[len..];
        }
        out
    }
}

fn paint(out: &mut String, colour: &str, text: &str) {
    out.push_str(colour);
    out.push_str(text);
    out.push_str(RESET);
}

/// Bytes of the identifier or number at the start of `text`.
fn word_len(text: &str) -> usize {
    text.char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map_or(text.len(), |(i, _)| i)
}

/// Bytes of the string literal opened by `quote` at the start of `text`, to
/// its closing quote (a backslash escapes one character) or the line's end.
fn string_len(text: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return i + c.len_utf8();
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> String {
        let mut out = String::new();
        let mut in_escape = false;
        for c in text.chars() {
            match (in_escape, c) {
                (false, '\x1b') => in_escape = true,
                (true, 'm') => in_escape = false,
                (false, c) => out.push(c),
                _ => {}
            }
        }
        out
    }

    #[test]
    fn keywords_strings_comments_and_numbers_are_coloured() {
        let rust = Language::of_fence("rust");
        let line = r#"let s = "a \" // b"; // note 42"#;
        let out = rust.colour(line);
        assert_eq!(plain(&out), line);
        assert!(out.starts_with(&format!("{KEYWORD}let{RESET}")), "{out:?}");
        assert!(
            out.contains(&format!("{STRING}\"a \\\" // b\"{RESET}")),
            "{out:?}"
        );
        assert!(
            out.ends_with(&format!("{COMMENT}// note 42{RESET}")),
            "{out:?}"
        );
        let python = Language::of_fence("py");
        let out = python.colour("return x + 1.5  # done");
        assert!(out.contains(&format!("{NUMBER}1.5{RESET}")), "{out:?}");
        assert!(out.contains(&format!("{COMMENT}# done{RESET}")), "{out:?}");
        // A word merely containing a keyword is left alone.
        assert_eq!(python.colour("format_if"), "format_if");
    }

    #[test]
    fn unterminated_strings_and_any_text_keep_their_characters() {
        let any = Language::of_fence("");
        for line in ["printf(\"unterminated", "é ü 中文 'x", "`a`b`", "\\\\", ""] {
            assert_eq!(plain(&any.colour(line)), line);
        }
    }
}
