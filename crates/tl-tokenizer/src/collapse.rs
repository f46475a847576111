//! The "collapsed" regex input of llama.cpp's `unicode_regex_split`.
//!
//! A regex that names Unicode categories runs on a copy of the text in which
//! every non-ASCII code point is replaced by one stand-in character per category,
//! and each `\p{X}` in the regex by "the stand-in or the category's ASCII members".
//! That is what gives categories llama.cpp's meaning (`\p{Lu}` means any letter,
//! `\p{S}` misses `~`), so doing the same keeps results identical. Regexes without
//! categories run on the text with non-ASCII whitespace turned into `\x0B`, again
//! as llama.cpp does for `std::wregex`.

use crate::codepoint::{Category, CodepointFlags};
use crate::error::{Error, Result};

/// The category escapes llama.cpp understands; all letter kinds mean "letter".
fn category_of_escape(escape: &str) -> Option<Category> {
    match escape {
        r"\p{N}" => Some(Category::Number),
        r"\p{L}" | r"\p{Lu}" | r"\p{Ll}" | r"\p{Lt}" | r"\p{Lm}" | r"\p{Lo}" => {
            Some(Category::Letter)
        }
        r"\p{P}" => Some(Category::Punctuation),
        r"\p{M}" => Some(Category::Mark),
        r"\p{S}" => Some(Category::Symbol),
        _ => None,
    }
}

/// Every escape `category_of_escape` knows; a pattern using any is collapsed.
const CATEGORY_ESCAPES: [&str; 10] = [
    r"\p{N}", r"\p{L}", r"\p{P}", r"\p{M}", r"\p{S}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}",
    r"\p{Lo}",
];

/// Whether a pattern names a category and so must run on the collapsed text.
pub(crate) fn uses_categories(pattern: &str) -> bool {
    CATEGORY_ESCAPES
        .iter()
        .any(|escape| pattern.contains(escape))
}

/// The stand-in for non-ASCII code points of a category in the collapsed text.
/// Private-use code points: nothing in a pattern can name them by accident.
fn stand_in(category: Category) -> char {
    match category {
        Category::Other => '\u{E0D0}',
        Category::Number => '\u{E0D1}',
        Category::Letter => '\u{E0D2}',
        Category::Punctuation => '\u{E0D3}',
        Category::Mark => '\u{E0D4}',
        Category::Symbol => '\u{E0D5}',
    }
}

/// The ASCII members llama.cpp lists for each category (its list of symbols lacks `~`).
fn ascii_members(category: Category) -> &'static [(u8, u8)] {
    match category {
        Category::Number => &[(b'0', b'9')],
        Category::Letter => &[(b'A', b'Z'), (b'a', b'z')],
        Category::Punctuation => &[
            (b'!', b'#'),
            (b'%', b'*'),
            (b',', b'/'),
            (b':', b';'),
            (b'?', b'@'),
            (b'[', b']'),
            (b'_', b'_'),
            (b'{', b'{'),
            (b'}', b'}'),
        ],
        Category::Mark | Category::Other => &[],
        Category::Symbol => &[
            (b'$', b'$'),
            (b'+', b'+'),
            (b'<', b'>'),
            (b'^', b'^'),
            (b'`', b'`'),
            (b'|', b'|'),
        ],
    }
}

/// Class members for a category: its stand-in and its ASCII members.
fn class_members(category: Category) -> String {
    let mut members = format!(r"\x{{{:X}}}", u32::from(stand_in(category)));
    for &(first, last) in ascii_members(category) {
        members.push_str(&format!(r"\x{{{first:02X}}}"));
        if last != first {
            members.push_str(&format!(r"-\x{{{last:02X}}}"));
        }
    }
    members
}

/// Rewrites `\p{X}` escapes for the collapsed text, tracking `[...]` as llama.cpp
/// does (a bracket preceded by a backslash is a literal).
pub(crate) fn collapse_pattern(pattern: &str) -> Result<String> {
    if !pattern.is_ascii() {
        return Err(Error::Unsupported(format!(
            "pre-tokenizer regex mixes Unicode categories and non-ASCII text: {pattern}"
        )));
    }
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut inside_class = false;
    let mut i = 0;
    while i < bytes.len() {
        let escaped = i > 0 && bytes[i - 1] == b'\\';
        match bytes[i] {
            b'[' if !escaped => inside_class = true,
            b']' if inside_class && !escaped => inside_class = false,
            b'\\' => {
                if let Some((category, len)) = category_escape_at(pattern, i) {
                    let members = class_members(category);
                    if inside_class {
                        out.push_str(&members);
                    } else {
                        out.push_str(&format!("[{members}]"));
                    }
                    i += len;
                    continue;
                }
            }
            _ => {}
        }
        out.push(char::from(bytes[i]));
        i += 1;
    }
    Ok(out)
}

/// A `\p{..}` escape starting at byte `i`, with its length.
fn category_escape_at(pattern: &str, i: usize) -> Option<(Category, usize)> {
    let rest = pattern.get(i..)?;
    if !rest.starts_with(r"\p{") {
        return None;
    }
    let close = rest.find('}')?;
    category_of_escape(&rest[..=close]).map(|category| (category, close + 1))
}

/// The collapsed form of one code point.
pub(crate) fn collapse_char(c: char, flags: CodepointFlags) -> char {
    if c.is_ascii() {
        c
    } else if flags.is_whitespace() {
        '\u{0B}'
    } else {
        stand_in(flags.category())
    }
}

/// The whitespace-folded form of one code point.
pub(crate) fn fold_whitespace_char(c: char, flags: CodepointFlags) -> char {
    if !c.is_ascii() && flags.is_whitespace() {
        '\u{0B}'
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapsed_pattern_names_stand_ins_and_ascii() {
        let collapsed = collapse_pattern(r"[^\s\p{N}]+|\p{N}").unwrap();
        assert_eq!(
            collapsed,
            r"[^\s\x{E0D1}\x{30}-\x{39}]+|[\x{E0D1}\x{30}-\x{39}]"
        );
    }
}
