//! Byte-level BPE (`tokenizer.ggml.model = gpt2`): merge ranks and the merge loop.
//!
//! Each pre-tokenized word starts as one symbol per byte (the vocabulary spells
//! bytes with GPT-2's byte characters). The lowest-ranked adjacent pair is merged
//! until no ranked pair is left — ties go to the leftmost pair, as in llama.cpp's
//! priority queue. Pairs are keyed by token ids instead of strings, so a lookup is
//! one hash of a `u64`. A word of n bytes costs O(n log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tl_gguf::StringArray;

use crate::byte_encoding::ByteEncoding;
use crate::error::{Error, Result};
use crate::fast_hash::FastHashMap;
use crate::vocab::Vocab;

pub(crate) const KEY_MERGES: &str = "tokenizer.ggml.merges";

/// What merging a ranked pair produces.
#[derive(Debug, Clone, Copy)]
struct Merge {
    rank: u32,
    /// The merged token; `None` when the merged text is not in the vocabulary
    /// (llama.cpp still merges, and the symbol falls back to bytes at the end).
    merged: Option<u32>,
}

/// The merge table of a byte-level BPE vocabulary.
#[derive(Debug, Clone)]
pub(crate) struct BpeMerges {
    by_pair: FastHashMap<u64, Merge>,
    byte_tokens: [Option<u32>; 256],
    encoding: ByteEncoding,
}

fn pair_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

impl BpeMerges {
    /// Parses `"left right"` merge lines; earlier lines rank higher.
    pub(crate) fn new(merges: &StringArray, vocab: &Vocab) -> Result<Self> {
        let mut by_pair = FastHashMap::with_capacity_and_hasher(merges.len(), Default::default());
        let mut merged_text = String::new();
        for (rank, line) in (0u32..).zip(merges.iter()) {
            let (left, right) = split_merge_line(line).ok_or_else(|| {
                Error::InvalidVocab(format!(
                    "{KEY_MERGES}[{rank}] = {line:?} is not two tokens separated by a space"
                ))
            })?;
            let id_of = |part: &str| {
                vocab.id_of(part).ok_or_else(|| {
                    Error::InvalidVocab(format!(
                        "{KEY_MERGES}[{rank}] = {line:?} names {part:?}, which is not a token"
                    ))
                })
            };
            let key = pair_key(id_of(left)?, id_of(right)?);
            merged_text.clear();
            merged_text.push_str(left);
            merged_text.push_str(right);
            let merged = vocab.id_of(&merged_text);
            // Duplicate pairs keep their first (best) rank, like llama.cpp's emplace.
            by_pair.entry(key).or_insert(Merge { rank, merged });
        }
        let encoding = ByteEncoding::new();
        let mut byte_tokens = [None; 256];
        for (byte, slot) in (0..=255u8).zip(byte_tokens.iter_mut()) {
            *slot = vocab.id_of(encoding.char_of(byte).encode_utf8(&mut [0; 4]));
        }
        Ok(Self {
            by_pair,
            byte_tokens,
            encoding,
        })
    }

    /// Appends the tokens of one pre-tokenized word (raw UTF-8 bytes).
    pub(crate) fn encode_word(
        &self,
        word: &[u8],
        vocab: &Vocab,
        ignore_merges: bool,
        out: &mut Vec<u32>,
    ) {
        if ignore_merges {
            if let Some(id) = vocab.id_of(&self.encoding.encode(word)) {
                out.push(id);
                return;
            }
        }
        let symbols = self.merge(word);
        for symbol in symbols.iter().filter(|s| s.len > 0) {
            match symbol.id {
                Some(id) => out.push(id),
                None => self.push_fallback_bytes(
                    &word[symbol.start..symbol.start + symbol.len],
                    vocab,
                    out,
                ),
            }
        }
    }

    /// Runs the merge loop; the live symbols are those with `len > 0`, in order.
    fn merge(&self, word: &[u8]) -> Vec<Symbol> {
        let mut symbols: Vec<Symbol> = (0..word.len())
            .map(|i| Symbol {
                start: i,
                len: 1,
                next: (i + 1 < word.len()).then_some(i + 1),
                prev: i.checked_sub(1),
                id: self.byte_tokens[usize::from(word[i])],
            })
            .collect();
        let mut queue = BinaryHeap::new();
        for left in 1..symbols.len() {
            self.push_pair(&symbols, left - 1, left, &mut queue);
        }
        while let Some(Reverse(pair)) = queue.pop() {
            let (left, right) = (pair.left, pair.right);
            let still_valid = symbols[left].len > 0
                && symbols[right].len > 0
                && symbols[left].id == Some(pair.left_id)
                && symbols[right].id == Some(pair.right_id);
            if !still_valid {
                continue;
            }
            symbols[left].len += symbols[right].len;
            symbols[left].id = pair.merged;
            symbols[right].len = 0;
            symbols[left].next = symbols[right].next;
            if let Some(next) = symbols[right].next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = symbols[left].prev {
                self.push_pair(&symbols, prev, left, &mut queue);
            }
            if let Some(next) = symbols[left].next {
                self.push_pair(&symbols, left, next, &mut queue);
            }
        }
        symbols
    }

    fn push_pair(
        &self,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Reverse<RankedPair>>,
    ) {
        let (Some(left_id), Some(right_id)) = (symbols[left].id, symbols[right].id) else {
            return;
        };
        if let Some(merge) = self.by_pair.get(&pair_key(left_id, right_id)) {
            queue.push(Reverse(RankedPair {
                rank: merge.rank,
                left,
                right,
                left_id,
                right_id,
                merged: merge.merged,
            }));
        }
    }

    /// A symbol that is not a token: llama.cpp looks each byte of its spelling up
    /// as a one-byte token, which only printable ASCII can match.
    fn push_fallback_bytes(&self, bytes: &[u8], vocab: &Vocab, out: &mut Vec<u32>) {
        for &byte in bytes {
            if (0x21..=0x7E).contains(&byte) {
                out.extend(vocab.id_of(char::from(byte).encode_utf8(&mut [0; 4])));
            }
        }
    }
}

/// Splits a merge line at its first space after the first byte (llama.cpp's
/// `find(' ', 1)`).
fn split_merge_line(line: &str) -> Option<(&str, &str)> {
    let space = line.bytes().skip(1).position(|b| b == b' ')? + 1;
    Some((&line[..space], &line[space + 1..]))
}

/// A run of the word's bytes, linked to its live neighbours.
#[derive(Debug, Clone)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
    id: Option<u32>,
}

/// A candidate merge; ordered by rank, then leftmost position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct RankedPair {
    rank: u32,
    left: usize,
    right: usize,
    left_id: u32,
    right_id: u32,
    merged: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_attr::TokenAttr;

    fn vocab(texts: &[&str]) -> Vocab {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let n = texts.len();
        Vocab::new(texts, vec![0.0; n], vec![TokenAttr::NORMAL; n]).unwrap()
    }

    #[test]
    fn merges_by_rank_leftmost_first() {
        let v = vocab(&["a", "b", "ab", "aa", "aab"]);
        let merges = BpeMerges::new(&vec!["a a", "a b", "aa b"].into(), &v).unwrap();
        let mut out = Vec::new();
        merges.encode_word(b"aab", &v, false, &mut out);
        assert_eq!(out, [4]);
        out.clear();
        merges.encode_word(b"aaa", &v, false, &mut out);
        assert_eq!(out, [3, 0]);
    }

    #[test]
    fn merge_naming_unknown_token_is_an_error() {
        let v = vocab(&["a", "b"]);
        let err = BpeMerges::new(&vec!["a c"].into(), &v).unwrap_err();
        assert!(err.to_string().contains(KEY_MERGES), "{err}");
        let err = BpeMerges::new(&vec!["ab"].into(), &v).unwrap_err();
        assert!(err.to_string().contains("separated by a space"), "{err}");
    }
}
