//! Unicode code point classes as llama.cpp's `unicode.cpp` sees them.
//!
//! llama.cpp pre-tokenizes by general category (letter, number, punctuation, ...)
//! plus the `White_Space` property. Its table comes from `UnicodeData.txt`; ours
//! comes from the same data shipped in `regex-syntax`. The split rules only ever
//! ask "which category" and "is it whitespace", so that is all a [`CodepointFlags`]
//! holds.

use crate::error::{Error, Result};

/// The category and whitespace bits of one code point, with llama.cpp's bit values.
///
/// The all-zero value stands for "outside the text being split": llama.cpp's
/// hand-written splitters test `flags != 0` to stop at a segment's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CodepointFlags(u16);

impl CodepointFlags {
    pub(crate) const OUTSIDE: Self = Self(0);
    const UNDEFINED: u16 = 0x0001;
    const NUMBER: u16 = 0x0002;
    const LETTER: u16 = 0x0004;
    const SEPARATOR: u16 = 0x0008;
    const MARK: u16 = 0x0010;
    const PUNCTUATION: u16 = 0x0020;
    const SYMBOL: u16 = 0x0040;
    const CONTROL: u16 = 0x0080;
    const WHITESPACE: u16 = 0x0100;

    pub(crate) fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }

    pub(crate) fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }

    pub(crate) fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }

    /// False only for [`CodepointFlags::OUTSIDE`]; every real code point has a category,
    /// unassigned ones included.
    pub(crate) fn is_inside(self) -> bool {
        self.0 != 0
    }

    pub(crate) fn category(self) -> Category {
        match self.0 & 0xFF {
            Self::NUMBER => Category::Number,
            Self::LETTER => Category::Letter,
            Self::PUNCTUATION => Category::Punctuation,
            Self::MARK => Category::Mark,
            Self::SYMBOL => Category::Symbol,
            _ => Category::Other,
        }
    }
}

/// The categories a pre-tokenizer regex can name with `\p{..}`; the rest
/// (separators, controls, unassigned) are lumped together as llama.cpp does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    Number,
    Letter,
    Punctuation,
    Mark,
    Symbol,
    Other,
}

/// Category lookup for every code point: a direct table for ASCII, sorted ranges
/// with binary search above it.
#[derive(Debug, Clone)]
pub(crate) struct CodepointTable {
    ascii: [CodepointFlags; 128],
    /// `(first, last, category bits)`, sorted and disjoint; gaps are unassigned.
    ranges: Vec<(u32, u32, u16)>,
}

impl CodepointTable {
    /// Builds the table from the general-category data of `regex-syntax`.
    pub(crate) fn new() -> Result<Self> {
        let classes = [
            (r"\p{L}", CodepointFlags::LETTER),
            (r"\p{N}", CodepointFlags::NUMBER),
            (r"\p{P}", CodepointFlags::PUNCTUATION),
            (r"\p{S}", CodepointFlags::SYMBOL),
            (r"\p{M}", CodepointFlags::MARK),
            (r"\p{Z}", CodepointFlags::SEPARATOR),
            // Surrogates (Cs) cannot occur in a Rust string.
            (r"[\p{Cc}\p{Cf}\p{Co}]", CodepointFlags::CONTROL),
        ];
        let mut ranges = Vec::new();
        for (pattern, bits) in classes {
            for (first, last) in unicode_class_ranges(pattern)? {
                ranges.push((first, last, bits));
            }
        }
        ranges.sort_unstable_by_key(|&(first, _, _)| first);
        let mut table = Self {
            ascii: [CodepointFlags::OUTSIDE; 128],
            ranges,
        };
        let ascii = std::array::from_fn(|code| table.lookup_ranges(char::from(code as u8)));
        table.ascii = ascii;
        Ok(table)
    }

    /// The flags of one code point.
    pub(crate) fn flags(&self, c: char) -> CodepointFlags {
        match self.ascii.get(c as usize) {
            Some(&flags) => flags,
            None => self.lookup_ranges(c),
        }
    }

    fn lookup_ranges(&self, c: char) -> CodepointFlags {
        let code = u32::from(c);
        let index = self.ranges.partition_point(|&(_, last, _)| last < code);
        let category = match self.ranges.get(index) {
            Some(&(first, _, bits)) if first <= code => bits,
            _ => CodepointFlags::UNDEFINED,
        };
        let whitespace = if c.is_whitespace() {
            CodepointFlags::WHITESPACE
        } else {
            0
        };
        CodepointFlags(category | whitespace)
    }
}

/// The code point ranges of a Unicode class pattern such as `\p{L}`.
fn unicode_class_ranges(pattern: &str) -> Result<Vec<(u32, u32)>> {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::Parser::new()
        .parse(pattern)
        .map_err(|e| Error::Unsupported(format!("unicode class {pattern}: {e}")))?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => Ok(class
            .ranges()
            .iter()
            .map(|r| (u32::from(r.start()), u32::from(r.end())))
            .collect()),
        _ => Err(Error::Unsupported(format!(
            "unicode class {pattern} did not parse to a class"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_of_common_characters() {
        let table = CodepointTable::new().unwrap();
        assert!(table.flags('a').is_letter());
        assert!(table.flags('Ж').is_letter());
        assert!(table.flags('7').is_number());
        assert!(table.flags('½').is_number());
        assert!(table.flags(' ').is_whitespace());
        assert!(table.flags('\u{3000}').is_whitespace());
        assert!(!table.flags('\u{1C}').is_whitespace());
        assert_eq!(table.flags('!').category(), Category::Punctuation);
        assert_eq!(table.flags('~').category(), Category::Symbol);
        assert_eq!(table.flags('\u{301}').category(), Category::Mark);
        // Unassigned code points still count as inside the text.
        assert!(table.flags('\u{0378}').is_inside());
        assert_eq!(table.flags('\u{0378}').category(), Category::Other);
    }
}
