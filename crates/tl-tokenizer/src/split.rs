//! Pre-tokenization: cutting text into words with a list of split rules.
//!
//! Mirrors llama.cpp's `unicode_regex_split`. Each rule cuts every current piece
//! further: a match becomes a piece, and so does the text between matches. Rules
//! are either one of the hand-written splitters (`split_custom`) or a regex.
//!
//! Regexes run on a rewritten copy of the text, as llama.cpp's do (see `collapse`).

use fancy_regex::Regex;

use crate::codepoint::{CodepointFlags, CodepointTable};
use crate::collapse::{collapse_char, collapse_pattern, fold_whitespace_char, uses_categories};
use crate::error::{Error, Result};
use crate::pre_tokenizer::{GPT2_PATTERN, LLAMA3_PATTERNS};
use crate::split_custom::{split_gpt2, split_llama3};

/// The text being split, one entry per code point.
pub(crate) struct CodepointText {
    pub(crate) chars: Vec<char>,
    pub(crate) flags: Vec<CodepointFlags>,
    /// Byte offset of each code point in the original text, plus the total length.
    byte_offsets: Vec<usize>,
}

impl CodepointText {
    fn new(text: &str, table: &CodepointTable) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let flags = chars.iter().map(|&c| table.flags(c)).collect();
        let byte_offsets = text
            .char_indices()
            .map(|(offset, _)| offset)
            .chain(std::iter::once(text.len()))
            .collect();
        Self {
            chars,
            flags,
            byte_offsets,
        }
    }
}

/// One step of pre-tokenization.
#[derive(Debug)]
enum SplitRule {
    Gpt2,
    Llama3,
    Regex {
        regex: Box<Regex>,
        input: RegexInput,
    },
}

/// Which rewritten copy of the text a regex runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegexInput {
    Collapsed,
    WhitespaceFolded,
}

/// A compiled list of split rules.
#[derive(Debug)]
pub(crate) struct Splitter {
    rules: Vec<SplitRule>,
}

impl Splitter {
    pub(crate) fn new(patterns: &[&str]) -> Result<Self> {
        let rules = patterns
            .iter()
            .map(|pattern| compile_rule(pattern))
            .collect::<Result<_>>()?;
        Ok(Self { rules })
    }

    /// Cuts `text` into words, returned as slices of it in order.
    pub(crate) fn split<'t>(&self, text: &'t str, table: &CodepointTable) -> Result<Vec<&'t str>> {
        let cps = CodepointText::new(text, table);
        let mut inputs = RewrittenInputs::default();
        let mut segments = vec![cps.chars.len()];
        for rule in &self.rules {
            segments = match rule {
                SplitRule::Gpt2 => split_gpt2(&cps, &segments),
                SplitRule::Llama3 => split_llama3(&cps, &segments),
                SplitRule::Regex { regex, input } => {
                    let rewritten = inputs.get(*input, &cps);
                    split_with_regex(regex, rewritten, &segments)?
                }
            };
        }
        let mut words = Vec::with_capacity(segments.len());
        let mut start = 0;
        for len in segments {
            let (from, to) = (cps.byte_offsets[start], cps.byte_offsets[start + len]);
            words.push(&text[from..to]);
            start += len;
        }
        Ok(words)
    }
}

fn compile_rule(pattern: &str) -> Result<SplitRule> {
    if pattern == GPT2_PATTERN {
        return Ok(SplitRule::Gpt2);
    }
    if LLAMA3_PATTERNS.contains(&pattern) {
        return Ok(SplitRule::Llama3);
    }
    regex_rule(pattern)
}

/// A rule that runs `pattern` through the regex engine.
fn regex_rule(pattern: &str) -> Result<SplitRule> {
    let (source, input) = if uses_categories(pattern) {
        (collapse_pattern(pattern)?, RegexInput::Collapsed)
    } else {
        (pattern.to_string(), RegexInput::WhitespaceFolded)
    };
    let regex = Regex::new(&source).map_err(|e| Error::Regex {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })?;
    Ok(SplitRule::Regex {
        regex: Box::new(regex),
        input,
    })
}

/// The collapsed and whitespace-folded copies of a text, made on first use.
#[derive(Default)]
struct RewrittenInputs {
    collapsed: Option<RewrittenText>,
    folded: Option<RewrittenText>,
}

impl RewrittenInputs {
    fn get(&mut self, input: RegexInput, cps: &CodepointText) -> &RewrittenText {
        let (slot, rewrite): (_, fn(char, CodepointFlags) -> char) = match input {
            RegexInput::Collapsed => (&mut self.collapsed, collapse_char),
            RegexInput::WhitespaceFolded => (&mut self.folded, fold_whitespace_char),
        };
        slot.get_or_insert_with(|| RewrittenText::new(cps, rewrite))
    }
}

/// A rewritten text with the byte offset of each of its code points.
struct RewrittenText {
    text: String,
    byte_offsets: Vec<usize>,
}

impl RewrittenText {
    fn new(cps: &CodepointText, rewrite: fn(char, CodepointFlags) -> char) -> Self {
        let mut text = String::with_capacity(cps.chars.len());
        let mut byte_offsets = Vec::with_capacity(cps.chars.len() + 1);
        for (&c, &flags) in cps.chars.iter().zip(&cps.flags) {
            byte_offsets.push(text.len());
            text.push(rewrite(c, flags));
        }
        byte_offsets.push(text.len());
        Self { text, byte_offsets }
    }

    /// The code point index at a byte offset that starts a code point.
    fn index_of_byte(&self, offset: usize) -> usize {
        self.byte_offsets.partition_point(|&o| o < offset)
    }
}

/// Splits each segment at the regex's matches (matches and gaps both become pieces).
fn split_with_regex(
    regex: &Regex,
    input: &RewrittenText,
    segments: &[usize],
) -> Result<Vec<usize>> {
    let mut lengths = Vec::with_capacity(segments.len());
    let mut start = 0;
    for &len in segments {
        let end = start + len;
        let base = input.byte_offsets[start];
        let slice = &input.text[base..input.byte_offsets[end]];
        let mut last_end = start;
        for found in regex.find_iter(slice) {
            let found = found.map_err(|e| Error::Regex {
                pattern: regex.as_str().to_string(),
                message: e.to_string(),
            })?;
            let match_start = input.index_of_byte(base + found.start());
            let match_end = input.index_of_byte(base + found.end());
            if match_start > last_end {
                lengths.push(match_start - last_end);
            }
            if match_end > match_start {
                lengths.push(match_end - match_start);
            }
            last_end = match_end;
        }
        if end > last_end {
            lengths.push(end - last_end);
        }
        start = end;
    }
    Ok(lengths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(patterns: &[&str], text: &str) -> Vec<String> {
        let table = CodepointTable::new().unwrap();
        let splitter = Splitter::new(patterns).unwrap();
        splitter
            .split(text, &table)
            .unwrap()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn gpt2_splits_words_spaces_and_contractions() {
        let got = words(&[GPT2_PATTERN], "Hello world's  3.5 ok\n");
        assert_eq!(
            got,
            ["Hello", " world", "'s", " ", " 3", ".", "5", " ok", "\n"]
        );
    }

    #[test]
    fn digits_then_gpt2_like_starcoder() {
        let got = words(&[r"\p{N}", GPT2_PATTERN], "a 123");
        assert_eq!(got, ["a", " ", "1", "2", "3"]);
    }

    #[test]
    fn llama3_groups_digits_by_three() {
        let got = words(&[LLAMA3_PATTERNS[1]], "12345 don'T\n\n x");
        assert_eq!(got, ["123", "45", " don", "'T", "\n\n", " x"]);
    }

    fn split_by(rule: SplitRule, text: &str) -> Vec<String> {
        let table = CodepointTable::new().unwrap();
        let splitter = Splitter { rules: vec![rule] };
        let words = splitter.split(text, &table).unwrap();
        words.into_iter().map(str::to_string).collect()
    }

    /// Texts that exercise contractions, digits, newlines, runs of spaces,
    /// non-ASCII letters, numbers, marks and whitespace.
    const TRICKY_TEXTS: &[&str] = &[
        "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
        "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D",
        "\n \n\n \t\t \t   \r\n  x  \n\n\n  ",
        "  Hello\n    Hello\u{3000}\u{3000}a\u{A0}b\u{2028}",
        "3333333 ٣٣٣٣ ½¾ x²³ Ⅻ ----===== ''''```\"\"\"\"......!!!!!!??????",
        "café naïve e\u{301}\u{301} Führer нещо на Български ខលចេញ",
        "\u{378}\u{378} a\u{378} \u{E000}z \u{200B}\u{200B} \u{7F}",
        "'s'S' 'll'LL 'x\n'\n ' ",
    ];

    #[test]
    fn custom_splitters_agree_with_the_regex_engine() {
        // llama.cpp only uses its hand-written code for these patterns when they
        // are spelled exactly; the regex engine must cut the same words.
        let gpt2_with_tail = format!("{GPT2_PATTERN}|\\s+");
        for text in TRICKY_TEXTS {
            assert_eq!(
                split_by(SplitRule::Gpt2, text),
                split_by(regex_rule(&gpt2_with_tail).unwrap(), text),
                "gpt2 on {text:?}"
            );
            assert_eq!(
                split_by(SplitRule::Llama3, text),
                split_by(regex_rule(LLAMA3_PATTERNS[1]).unwrap(), text),
                "llama3 on {text:?}"
            );
        }
    }

    #[test]
    fn every_pre_tokenizer_handles_long_runs() {
        let table = CodepointTable::new().unwrap();
        let text = format!(
            "{}a{}\n{}{}",
            " ".repeat(50_000),
            "!".repeat(20_000),
            "\n".repeat(5_000),
            "x".repeat(20_000)
        );
        let names = [
            "default",
            "gpt-2",
            "llama3",
            "glm4",
            "starcoder",
            "smollm",
            "qwen2",
            "deepseek-llm",
            "deepseek-coder",
            "deepseek-v3",
            "falcon",
            "bloom",
            "viking",
        ];
        for name in names {
            let config = crate::pre_tokenizer::PreTokenizerConfig::for_name(name).unwrap();
            let words = Splitter::new(config.rules)
                .unwrap()
                .split(&text, &table)
                .unwrap();
            assert_eq!(words.concat(), text, "{name} lost text");
        }
    }

    #[test]
    fn collapsed_regex_sees_non_ascii_categories() {
        // '٣' is an Arabic-Indic digit: a number for \p{N}, split off on its own.
        let got = words(&[r"\p{N}"], "x٣y");
        assert_eq!(got, ["x", "٣", "y"]);
    }
}
