//! SentencePiece-style BPE (`tokenizer.ggml.model = llama`), as llama.cpp's
//! `llm_tokenizer_spm` does it.
//!
//! The text (spaces already escaped to U+2581) starts as one symbol per UTF-8
//! character. Repeatedly, the adjacent pair whose concatenation is the
//! highest-scoring token is merged (ties: leftmost). Symbols that are not tokens at
//! the end (characters missing from the vocabulary) become `<0xXX>` byte tokens.
//! A text of n characters costs O(n log n).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::vocab::Vocab;

/// The SPM tokenizer's byte fallback table.
#[derive(Debug, Clone)]
pub(crate) struct SpmModel {
    byte_tokens: [Option<u32>; 256],
    unknown: Option<u32>,
}

impl SpmModel {
    pub(crate) fn new(vocab: &Vocab, unknown: Option<u32>) -> Self {
        let mut byte_tokens = [None; 256];
        for (byte, slot) in (0..=255u8).zip(byte_tokens.iter_mut()) {
            // llama.cpp's byte_to_token: `<0xXX>`, else the byte itself as a token.
            *slot = vocab.id_of(&format!("<0x{byte:02X}>")).or_else(|| {
                byte.is_ascii()
                    .then(|| vocab.id_of(char::from(byte).encode_utf8(&mut [0; 4])))
                    .flatten()
            });
        }
        Self {
            byte_tokens,
            unknown,
        }
    }

    /// Appends the tokens of an already escaped text.
    pub(crate) fn encode(&self, text: &str, vocab: &Vocab, out: &mut Vec<u32>) {
        let symbols = merge(text, vocab);
        let live = symbols.iter().filter(|s| s.len > 0);
        for symbol in live {
            let piece = &text[symbol.start..symbol.start + symbol.len];
            match vocab.id_of(piece) {
                Some(id) => out.push(id),
                None => self.push_bytes(piece.as_bytes(), out),
            }
        }
    }

    /// Byte fallback. llama.cpp throws when a byte has no token; the unknown token
    /// (if any) stands in for it here.
    fn push_bytes(&self, bytes: &[u8], out: &mut Vec<u32>) {
        for &byte in bytes {
            out.extend(self.byte_tokens[usize::from(byte)].or(self.unknown));
        }
    }
}

/// A run of characters, linked to its live neighbours.
#[derive(Debug, Clone)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge, ordered by score then leftmost position (max-heap order).
#[derive(Debug, Clone, Copy)]
struct ScoredPair {
    score: f32,
    left: usize,
    right: usize,
    merged_len: usize,
}

impl Ord for ScoredPair {
    fn cmp(&self, other: &Self) -> Ordering {
        // Compared like llama.cpp's `<` on floats: unordered scores count as equal.
        let by_score = self
            .score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal);
        by_score.then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for ScoredPair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ScoredPair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ScoredPair {}

fn merge(text: &str, vocab: &Vocab) -> Vec<Symbol> {
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let count = starts.len();
    let mut symbols: Vec<Symbol> = starts
        .iter()
        .enumerate()
        .map(|(i, &start)| Symbol {
            start,
            len: starts.get(i + 1).copied().unwrap_or(text.len()) - start,
            prev: i.checked_sub(1),
            next: (i + 1 < count).then_some(i + 1),
        })
        .collect();
    let mut queue = BinaryHeap::new();
    for right in 1..count {
        push_pair(text, vocab, &symbols, right - 1, right, &mut queue);
    }
    while let Some(pair) = queue.pop() {
        let (left, right) = (pair.left, pair.right);
        let stale = symbols[left].len == 0
            || symbols[right].len == 0
            || symbols[left].len + symbols[right].len != pair.merged_len;
        if stale {
            continue;
        }
        symbols[left].len += symbols[right].len;
        symbols[right].len = 0;
        symbols[left].next = symbols[right].next;
        if let Some(next) = symbols[right].next {
            symbols[next].prev = Some(left);
        }
        if let Some(prev) = symbols[left].prev {
            push_pair(text, vocab, &symbols, prev, left, &mut queue);
        }
        if let Some(next) = symbols[left].next {
            push_pair(text, vocab, &symbols, left, next, &mut queue);
        }
    }
    symbols
}

fn push_pair(
    text: &str,
    vocab: &Vocab,
    symbols: &[Symbol],
    left: usize,
    right: usize,
    queue: &mut BinaryHeap<ScoredPair>,
) {
    let start = symbols[left].start;
    let merged_len = symbols[left].len + symbols[right].len;
    if let Some(id) = vocab.id_of(&text[start..start + merged_len]) {
        queue.push(ScoredPair {
            score: vocab.score(id),
            left,
            right,
            merged_len,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_attr::TokenAttr;

    fn vocab(entries: &[(&str, f32)]) -> Vocab {
        let texts = entries.iter().map(|(t, _)| t.to_string()).collect();
        let scores = entries.iter().map(|&(_, s)| s).collect();
        Vocab::new(texts, scores, vec![TokenAttr::NORMAL; entries.len()]).unwrap()
    }

    #[test]
    fn highest_score_merges_first() {
        let v = vocab(&[
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", -2.0),
            ("bc", -1.0),
        ]);
        let mut out = Vec::new();
        SpmModel::new(&v, None).encode("abc", &v, &mut out);
        assert_eq!(out, [0, 4]);
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let mut entries = vec![("<unk>", 0.0), ("a", 0.0)];
        let byte_names: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
        entries.extend(byte_names.iter().map(|n| (n.as_str(), 0.0)));
        let v = vocab(&entries);
        let mut out = Vec::new();
        SpmModel::new(&v, Some(0)).encode("aé", &v, &mut out);
        // 'é' is C3 A9; byte token <0xXX> has id 2 + XX.
        assert_eq!(out, [1, 2 + 0xC3, 2 + 0xA9]);
    }
}
