//! Outcome signatures, the fuzzer's only feedback: an error message with its
//! input-dependent parts (numbers, quoted text, words copied from the input)
//! blanked out names the check that refused the input, so a new signature
//! means a new path was reached. Blanking keeps the count of signatures
//! bounded by the number of checks rather than by the number of inputs.

/// Longest signature kept; the start of a message names its check.
const MAX_CHARS: usize = 160;

/// `message` with digit runs as `#`, quoted and bracketed text as `…`, and
/// cut to a bounded length.
pub fn normalize(message: &str) -> String {
    collapse_blanked_words(&blank_quotes_and_numbers(message))
}

/// A word with a blank in it becomes one blank (keeping the punctuation
/// after it): quotes inside quoted text (`'a'b'`) otherwise leave a
/// different residue each time.
fn collapse_blanked_words(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            if !word.contains('…') {
                return word.to_string();
            }
            match word.chars().last() {
                Some(end @ (':' | ',' | ';' | ')')) => format!("…{end}"),
                _ => "…".to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn blank_quotes_and_numbers(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len().min(MAX_CHARS));
    let (mut at, mut written) = (0, 0);
    while at < chars.len() && written < MAX_CHARS {
        written += 1;
        let c = chars[at];
        at = match c {
            '0'..='9' => {
                out.push('#');
                at + chars[at..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count()
            }
            // Quoted text from a stranger may hold the same quotes (a model
            // name, a metadata key): the segment runs to the last one.
            '\'' | '"' => {
                out.push('…');
                chars[at + 1..]
                    .iter()
                    .rposition(|&q| q == c)
                    .map_or(chars.len(), |last| at + 1 + last + 1)
            }
            // Identifiers (`name`) and lists ([a, b]) do not nest quotes.
            '`' | '[' => {
                out.push('…');
                let close = if c == '[' { ']' } else { c };
                chars[at + 1..]
                    .iter()
                    .position(|&q| q == close)
                    .map_or(chars.len(), |end| at + 1 + end + 1)
            }
            _ => {
                out.push(c);
                at + 1
            }
        };
    }
    out
}

/// [`normalize`], after blanking the words of the message that occur in
/// `input`: an error that quotes the input without quote marks ("unknown
/// statement fortool") still names one check. Words are compared before
/// digits are blanked, since the input has its digits, and as substrings,
/// since the input's own word boundaries may differ from the product's.
pub fn normalize_against(message: &str, input: &[u8]) -> String {
    let input_text = String::from_utf8_lossy(input);
    let mut blanked = String::with_capacity(message.len());
    let mut word = String::new();
    for c in message.chars().chain(std::iter::once(' ')) {
        if is_word_char(c) {
            word.push(c);
            continue;
        }
        let copied = word.chars().count() >= 2
            && !MESSAGE_WORDS.contains(&word.as_str())
            && input_text.contains(word.as_str());
        if copied {
            blanked.push('…');
        } else {
            blanked.push_str(&word);
        }
        word.clear();
        blanked.push(c);
    }
    blanked.pop();
    normalize(&blanked)
}

/// Words error messages are made of (the product's messages, counted), never
/// blanked even when the input has them: inputs are made of the same words
/// (templates, programs and prompts are English-like), and blanking them in
/// one input but not the next would turn one message into many.
const MESSAGE_WORDS: &[&str] = &[
    "a",
    "add",
    "after",
    "an",
    "and",
    "api",
    "are",
    "argument",
    "arguments",
    "as",
    "assignment",
    "assistant",
    "at",
    "base",
    "be",
    "before",
    "bench",
    "block",
    "body",
    "bool",
    "boolean",
    "bools",
    "brace",
    "bracket",
    "break",
    "but",
    "by",
    "call",
    "can",
    "cannot",
    "character",
    "characters",
    "chat",
    "close",
    "closing",
    "column",
    "combine",
    "comma",
    "comment",
    "completion",
    "condition",
    "content",
    "context",
    "continue",
    "convert",
    "declaration",
    "declared",
    "deeply",
    "defined",
    "did",
    "differ",
    "digits",
    "dimension",
    "dimensions",
    "does",
    "dropped",
    "dtype",
    "each",
    "element",
    "else",
    "empty",
    "end",
    "engine",
    "eof",
    "err",
    "error",
    "escape",
    "every",
    "expected",
    "expression",
    "false",
    "field",
    "fields",
    "file",
    "filter",
    "first",
    "float",
    "fn",
    "follow",
    "for",
    "format",
    "found",
    "from",
    "function",
    "give",
    "has",
    "have",
    "ident",
    "identifier",
    "if",
    "in",
    "include",
    "index",
    "inner",
    "input",
    "inside",
    "int",
    "integer",
    "into",
    "invalid",
    "is",
    "it",
    "item",
    "its",
    "key",
    "keyword",
    "large",
    "least",
    "let",
    "line",
    "linear",
    "list",
    "literal",
    "logical",
    "logprobs",
    "loop",
    "macro",
    "main",
    "map",
    "mean",
    "message",
    "method",
    "missing",
    "model",
    "most",
    "multiply",
    "must",
    "name",
    "needs",
    "neg",
    "nested",
    "new",
    "no",
    "not",
    "number",
    "object",
    "of",
    "on",
    "one",
    "only",
    "open",
    "operator",
    "or",
    "out",
    "outside",
    "parameter",
    "parse",
    "parsing",
    "path",
    "placeholder",
    "placeholders",
    "print",
    "prompt",
    "range",
    "rename",
    "render",
    "request",
    "requests",
    "reshape",
    "result",
    "return",
    "returns",
    "role",
    "scalar",
    "self",
    "sequence",
    "shape",
    "side",
    "size",
    "softmax",
    "start",
    "statement",
    "string",
    "struct",
    "such",
    "suffix",
    "supported",
    "syntax",
    "tail",
    "template",
    "tensor",
    "tensors",
    "test",
    "text",
    "than",
    "the",
    "there",
    "this",
    "to",
    "token",
    "tokens",
    "too",
    "trailing",
    "transpose",
    "true",
    "twice",
    "two",
    "type",
    "types",
    "unclosed",
    "undeclared",
    "undefined",
    "unexpected",
    "unicode",
    "unknown",
    "unreachable",
    "unterminated",
    "use",
    "value",
    "values",
    "variable",
    "version",
    "weight",
    "what",
    "while",
    "with",
    "without",
    "write",
    "you",
    "zeros",
];

/// Letters, digits, `_`, and everything outside ASCII: combining marks and
/// symbols copied from the input belong to the word they are in.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || !c.is_ascii()
}

/// A number's order of magnitude, for signatures of successes: "how big"
/// matters to which paths run, the exact count does not.
pub fn magnitude(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_quotes_are_blanked() {
        assert_eq!(
            normalize("key 'general.x' has 12 entries at offset 0x40 [a, b]"),
            "key … has # entries at offset #x# …"
        );
        assert_eq!(normalize("token \"unterminated"), "token …");
        assert_eq!(
            normalize("metadata 'a'b'c': too long"),
            "metadata …: too long"
        );
    }

    #[test]
    fn quotes_inside_quoted_text_stay_blanked() {
        assert_eq!(normalize(r#"bad "a"b c" here"#), "bad … here");
        assert_eq!(normalize("`x` has no `y`"), "… has no …");
    }

    #[test]
    fn words_from_the_input_are_blanked() {
        assert_eq!(
            normalize_against("unknown statement fortool here", b"{% fortool %}"),
            "unknown statement … here"
        );
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(1000);
        assert_eq!(normalize(&long).chars().count(), MAX_CHARS);
    }

    #[test]
    fn magnitudes() {
        assert_eq!(magnitude(0), 0);
        assert_eq!(magnitude(1), 1);
        assert_eq!(magnitude(255), 8);
        assert_eq!(magnitude(256), 9);
    }
}
