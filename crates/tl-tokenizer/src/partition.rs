//! Cutting special tokens out of the input before tokenization (llama.cpp's
//! `tokenizer_st_partition`).
//!
//! Special tokens are tried longest first; each one is cut out of every text
//! fragment left by the longer ones. Control and unknown tokens are only
//! recognised when the caller parses special tokens; user-defined tokens always
//! are (as in Hugging Face tokenizers). Cost: O(special tokens × text length).

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

/// Splits `text` at the special tokens of `order` (see [`special_token_order`]).
pub(crate) fn partition<'t>(
    text: &'t str,
    order: &[u32],
    vocab: &Vocab,
    parse_special: bool,
) -> Vec<Fragment<'t>> {
    let mut fragments = Vec::new();
    if text.is_empty() {
        return fragments;
    }
    fragments.push(Fragment::Text(text));
    let only_when_parsing = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN);
    for &id in order {
        let attr = vocab.attr(id);
        if !parse_special && attr.has_any(only_when_parsing) {
            continue;
        }
        let Some(special) = vocab.text(id) else {
            continue;
        };
        if !fragments
            .iter()
            .any(|f| matches!(f, Fragment::Text(t) if t.contains(special)))
        {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            match fragment {
                Fragment::Text(piece) => cut_out(piece, id, special, attr, &mut next),
                token => next.push(token),
            }
        }
        fragments = next;
    }
    fragments
}

/// Replaces every occurrence of `special` in `piece` by the token, honouring the
/// token's LSTRIP/RSTRIP (drop whitespace to its left/right).
fn cut_out<'t>(
    piece: &'t str,
    id: u32,
    special: &str,
    attr: TokenAttr,
    out: &mut Vec<Fragment<'t>>,
) {
    let mut rest = piece;
    while let Some(at) = rest.find(special) {
        let mut left = &rest[..at];
        if attr.has_any(TokenAttr::LSTRIP) {
            left = left.trim_end_matches(is_c_space);
        }
        if !left.is_empty() {
            out.push(Fragment::Text(left));
        }
        out.push(Fragment::Token(id));
        rest = &rest[at + special.len()..];
        if attr.has_any(TokenAttr::RSTRIP) {
            rest = rest.trim_start_matches(is_c_space);
        }
    }
    if !rest.is_empty() {
        out.push(Fragment::Text(rest));
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
}
