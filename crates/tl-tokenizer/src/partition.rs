//! Cutting special tokens out of the input before tokenization (llama.cpp's
//! `tokenizer_st_partition`).
//!
//! Special tokens are tried longest first; each one is cut out of every text
//! fragment left by the longer ones. Control and unknown tokens are only
//! recognised when the caller parses special tokens, and then only outside the
//! byte ranges it marks as plain text (a chat prompt's message contents);
//! user-defined tokens always are (as in Hugging Face tokenizers).
//! Cost: O(special tokens × text length).

use std::ops::Range;

use crate::token_attr::TokenAttr;
use crate::vocab::Vocab;

/// A piece of the input: plain text still to tokenize, or a recognised token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// The ids that can be cut out of text, longest text first (ties by id).
pub(crate) fn special_token_order(vocab: &Vocab) -> Vec<u32> {
    let kinds = TokenAttr::CONTROL
        .with(TokenAttr::USER_DEFINED)
        .with(TokenAttr::UNKNOWN);
    let mut ids: Vec<u32> = vocab
        .iter()
        .filter(|&(id, _)| vocab.attr(id).has_any(kinds))
        .map(|(id, _)| id)
        .collect();
    ids.sort_by_key(|&id| std::cmp::Reverse(vocab.text(id).map_or(0, str::len)));
    ids
}

/// Where control and unknown tokens are recognised.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SpecialParsing<'r> {
    /// Nowhere: their text is plain text.
    Never,
    /// Everywhere.
    Everywhere,
    /// Everywhere except where they would overlap one of these byte ranges,
    /// which are sorted and do not overlap each other.
    OutsidePlain(&'r [Range<usize>]),
}

impl SpecialParsing<'_> {
    /// Whether a control token may be cut at `at` (byte range of the input).
    fn allows(self, at: Range<usize>) -> bool {
        match self {
            SpecialParsing::Never => false,
            SpecialParsing::Everywhere => true,
            SpecialParsing::OutsidePlain(plain) => {
                // The first plain range ending after `at` starts; the token is
                // allowed unless that range also starts before `at` ends.
                let next = plain.partition_point(|range| range.end <= at.start);
                plain.get(next).is_none_or(|range| range.start >= at.end)
            }
        }
    }
}

/// Splits `text` at the special tokens of `order` (see [`special_token_order`]).
pub(crate) fn partition<'t>(
    text: &'t str,
    order: &[u32],
    vocab: &Vocab,
    parse_special: bool,
) -> Vec<Fragment<'t>> {
    let parsing = if parse_special {
        SpecialParsing::Everywhere
    } else {
        SpecialParsing::Never
    };
    partition_with(text, order, vocab, parsing)
}

/// A text fragment and where it starts in the input.
#[derive(Debug, Clone, Copy)]
enum Piece<'t> {
    Text(usize, &'t str),
    Token(u32),
}

/// [`partition`] with control and unknown tokens recognised as `parsing` says.
pub(crate) fn partition_with<'t>(
    text: &'t str,
    order: &[u32],
    vocab: &Vocab,
    parsing: SpecialParsing<'_>,
) -> Vec<Fragment<'t>> {
    let mut pieces = Vec::new();
    if text.is_empty() {
        return Vec::new();
    }
    pieces.push(Piece::Text(0, text));
    let only_when_parsing = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN);
    for &id in order {
        let attr = vocab.attr(id);
        let restricted = attr.has_any(only_when_parsing);
        if restricted && matches!(parsing, SpecialParsing::Never) {
            continue;
        }
        let Some(special) = vocab.text(id).filter(|special| !special.is_empty()) else {
            continue;
        };
        if !pieces
            .iter()
            .any(|piece| matches!(piece, Piece::Text(_, t) if t.contains(special)))
        {
            continue;
        }
        let token = Cut {
            id,
            special,
            attr,
            parsing: if restricted {
                parsing
            } else {
                SpecialParsing::Everywhere
            },
        };
        let mut next = Vec::with_capacity(pieces.len() + 2);
        for piece in pieces {
            match piece {
                Piece::Text(start, text) => token.cut_out(start, text, &mut next),
                token => next.push(token),
            }
        }
        pieces = next;
    }
    pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Text(_, text) => Fragment::Text(text),
            Piece::Token(id) => Fragment::Token(id),
        })
        .collect()
}

/// One special token being cut out of the text.
struct Cut<'s, 'r> {
    id: u32,
    special: &'s str,
    attr: TokenAttr,
    parsing: SpecialParsing<'r>,
}

impl Cut<'_, '_> {
    /// Replaces every allowed occurrence of the token's text in `piece` (which
    /// starts at byte `start` of the input) by the token, honouring its
    /// LSTRIP/RSTRIP (drop whitespace to its left/right).
    fn cut_out<'t>(&self, start: usize, piece: &'t str, out: &mut Vec<Piece<'t>>) {
        // `kept` is where the text not yet pushed begins, `from` where the
        // next occurrence is looked for (past occurrences left as text).
        let mut kept = 0;
        let mut from = 0;
        while let Some(found) = piece[from..].find(self.special) {
            let at = from + found;
            let end = at + self.special.len();
            if !self.parsing.allows(start + at..start + end) {
                from = at + self.special.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let mut left = &piece[kept..at];
            if self.attr.has_any(TokenAttr::LSTRIP) {
                left = left.trim_end_matches(is_c_space);
            }
            if !left.is_empty() {
                out.push(Piece::Text(start + kept, left));
            }
            out.push(Piece::Token(self.id));
            kept = end;
            if self.attr.has_any(TokenAttr::RSTRIP) {
                let rest = &piece[end..];
                kept += rest.len() - rest.trim_start_matches(is_c_space).len();
            }
            from = kept;
        }
        if kept < piece.len() {
            out.push(Piece::Text(start + kept, &piece[kept..]));
        }
    }
}

/// C's `isspace` in the "C" locale, which llama.cpp uses for stripping.
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        let entries = [
            ("<|im_start|>", TokenAttr::CONTROL),
            ("<|im_end|>", TokenAttr::CONTROL),
            ("<tool>", TokenAttr::USER_DEFINED),
            ("a", TokenAttr::NORMAL),
        ];
        let texts = entries.iter().map(|(t, _)| t.to_string()).collect();
        let attrs = entries.iter().map(|&(_, a)| a).collect();
        Vocab::new(texts, vec![0.0; entries.len()], attrs).unwrap()
    }

    #[test]
    fn control_tokens_only_when_parsing_special() {
        let v = vocab();
        let order = special_token_order(&v);
        let text = "<|im_start|>user\nhi<|im_end|>";
        let parsed = partition(text, &order, &v, true);
        assert_eq!(
            parsed,
            [
                Fragment::Token(0),
                Fragment::Text("user\nhi"),
                Fragment::Token(1)
            ]
        );
        assert_eq!(partition(text, &order, &v, false), [Fragment::Text(text)]);
    }

    #[test]
    fn user_defined_tokens_always_cut() {
        let v = vocab();
        let order = special_token_order(&v);
        let parsed = partition("x<tool>y", &order, &v, false);
        assert_eq!(
            parsed,
            [Fragment::Text("x"), Fragment::Token(2), Fragment::Text("y")]
        );
    }

    #[test]
    fn control_tokens_are_not_cut_where_they_touch_plain_text() {
        let v = vocab();
        let order = special_token_order(&v);
        // bytes: <|im_start|> 0..12, "x" 12..13, <tool> 13..19, <|im_end|> 19..29
        let text = "<|im_start|>x<tool><|im_end|>";
        let user = 12..19;
        let plain = std::slice::from_ref(&user);
        let parsed = partition_with(text, &order, &v, SpecialParsing::OutsidePlain(plain));
        assert_eq!(
            parsed,
            [
                Fragment::Token(0),
                Fragment::Text("x"),
                Fragment::Token(2),
                Fragment::Token(1)
            ]
        );
        // The end marker's first byte is plain: it stays text.
        let first_byte = 19..20;
        let plain = std::slice::from_ref(&first_byte);
        let parsed = partition_with(text, &order, &v, SpecialParsing::OutsidePlain(plain));
        assert_eq!(
            parsed,
            [
                Fragment::Token(0),
                Fragment::Text("x"),
                Fragment::Token(2),
                Fragment::Text("<|im_end|>")
            ]
        );
    }
}
