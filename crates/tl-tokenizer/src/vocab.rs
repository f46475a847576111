//! The token table: text, score and attributes of every id, and the reverse map.
//!
//! Read from `tokenizer.ggml.tokens`, `.scores` and `.token_type`, validated the way
//! llama.cpp's `llama_vocab::impl::load` does (plus equal array lengths, which
//! llama.cpp only checks as "at least as long", and token types inside the enum).
//!
//! The texts live in one buffer and the reverse map holds ids only, so a token
//! costs its text plus about 20 bytes: a file's vocabulary of millions of empty
//! strings (8 bytes each in the file) must not become hundreds of bytes a token.

use std::hash::Hasher;

use tl_gguf::{Array, GgufFile, StringArray};

use crate::error::{Error, Result};
use crate::fast_hash::FxHasher;
use crate::token_attr::TokenAttr;

pub(crate) const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub(crate) const KEY_SCORES: &str = "tokenizer.ggml.scores";
pub(crate) const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";

/// Every token's text, score and attributes.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    /// Every token's text, one after another.
    text: String,
    /// Where each token's text ends in `text`; it starts where the previous ends.
    ends: Vec<u32>,
    /// Every token's score; empty when the file has none (all score 0).
    scores: Vec<f32>,
    attrs: Vec<TokenAttr>,
    ids_by_text: IdIndex,
}

impl Vocab {
    /// Reads and validates the token arrays of a GGUF file.
    pub(crate) fn from_gguf(file: &GgufFile) -> Result<Self> {
        let texts = file
            .get_string_array(KEY_TOKENS)?
            .ok_or_else(|| Error::InvalidVocab(format!("{KEY_TOKENS} is missing")))?;
        let token_count = texts.len();
        if u32::try_from(token_count).is_err() {
            return Err(Error::InvalidVocab(format!(
                "{KEY_TOKENS} has {token_count} entries, more than token ids can address"
            )));
        }
        let scores = read_scores(file, token_count)?;
        let attrs = read_attrs(file, token_count)?;
        Self::from_texts(texts, scores, attrs)
    }

    /// Builds the table from parallel arrays of equal length.
    #[cfg(test)]
    pub(crate) fn new(texts: Vec<String>, scores: Vec<f32>, attrs: Vec<TokenAttr>) -> Result<Self> {
        Self::from_texts(&texts.into(), scores, attrs)
    }

    fn from_texts(texts: &StringArray, scores: Vec<f32>, attrs: Vec<TokenAttr>) -> Result<Self> {
        let mut vocab = Self {
            text: String::with_capacity(text_bytes(texts)),
            ends: Vec::with_capacity(texts.len()),
            scores,
            attrs,
            ids_by_text: IdIndex::with_capacity(texts.len()),
        };
        for (id, text) in (0u32..).zip(texts.iter()) {
            vocab.push(id, text)?;
        }
        Ok(vocab)
    }

    /// Appends token `id` (the next one) and indexes it by its text.
    fn push(&mut self, id: u32, text: &str) -> Result<()> {
        if text.is_empty() {
            use std::fmt::Write;
            // llama.cpp renames empty tokens so that text lookups stay unambiguous.
            let _ = write!(self.text, "{}", EmptyName(id));
        } else {
            self.text.push_str(text);
        }
        let end = u32::try_from(self.text.len()).map_err(|_| {
            Error::InvalidVocab(format!(
                "{KEY_TOKENS}: the tokens' text exceeds 4 GiB at id {id}"
            ))
        })?;
        self.ends.push(end);
        let (all, ends) = (&self.text, &self.ends);
        let text = text_of(all, ends, id);
        let hash = hash_text(text);
        if let Some(first) = self
            .ids_by_text
            .find(hash, |other| text_of(all, ends, other) == text)
        {
            return Err(Error::InvalidVocab(format!(
                "{KEY_TOKENS}: duplicate token {text:?} at ids {first} and {id}"
            )));
        }
        self.ids_by_text
            .insert(hash, id, |other| hash_text(text_of(all, ends, other)));
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Bytes of all the tokens' text together.
    pub(crate) fn text_bytes(&self) -> usize {
        self.text.len()
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        (id as usize) < self.ends.len()
    }

    pub(crate) fn text(&self, id: u32) -> Option<&str> {
        self.contains(id)
            .then(|| text_of(&self.text, &self.ends, id))
    }

    pub(crate) fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    pub(crate) fn attr(&self, id: u32) -> TokenAttr {
        self.attrs
            .get(id as usize)
            .copied()
            .unwrap_or(TokenAttr::UNDEFINED)
    }

    pub(crate) fn set_attr(&mut self, id: u32, attr: TokenAttr) {
        if let Some(slot) = self.attrs.get_mut(id as usize) {
            *slot = attr;
        }
    }

    pub(crate) fn id_of(&self, text: &str) -> Option<u32> {
        self.ids_by_text.find(hash_text(text), |id| {
            text_of(&self.text, &self.ends, id) == text
        })
    }

    /// All ids in order with their text.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        (0..self.ends.len() as u32).map(|id| (id, text_of(&self.text, &self.ends, id)))
    }
}

/// The text of token `id` in `all`, the texts laid end to end; `id` must be
/// below `ends.len()` (every id the index holds, or checked by the caller).
fn text_of<'v>(all: &'v str, ends: &[u32], id: u32) -> &'v str {
    let index = id as usize;
    let start = match index {
        0 => 0,
        _ => ends[index - 1] as usize,
    };
    &all[start..ends[index] as usize]
}

/// The name llama.cpp gives the empty token `id`: `[EMPTY_{id}]`.
struct EmptyName(u32);

impl std::fmt::Display for EmptyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[EMPTY_{}]", self.0)
    }
}

/// Bytes of the texts as the table keeps them (empty ones renamed), so its
/// buffer is allocated once, at its size: growing it by doubling could leave
/// half of it unused.
fn text_bytes(texts: &StringArray) -> usize {
    let renamed: usize = (0u32..)
        .zip(texts.iter())
        .filter(|(_, text)| text.is_empty())
        .map(|(id, _)| "[EMPTY_]".len() + digits(id))
        .sum();
    texts.text_bytes() + renamed
}

fn digits(n: u32) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

fn hash_text(text: &str) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(text.as_bytes());
    hasher.finish()
}

/// Token ids by the hash of their text: open addressing with linear probing over
/// a table at most half full, about 8 bytes a token where a map of `String`s
/// took about 70. The caller compares texts, so the table holds no text itself.
#[derive(Debug, Clone)]
struct IdIndex {
    /// An id, or [`IdIndex::EMPTY`].
    slots: Vec<u32>,
    len: usize,
}

impl IdIndex {
    const EMPTY: u32 = u32::MAX;

    fn with_capacity(ids: usize) -> Self {
        Self {
            slots: vec![Self::EMPTY; Self::slots_for(ids)],
            len: 0,
        }
    }

    fn slots_for(ids: usize) -> usize {
        ids.saturating_mul(2).max(8).next_power_of_two()
    }

    /// Slots to probe for `hash`, in order, starting at its home slot.
    fn probe(&self, hash: u64) -> impl Iterator<Item = usize> {
        let mask = self.slots.len() - 1;
        // Fold the high bits in: Fx mixes them best.
        let home = ((hash >> 32) ^ hash) as usize;
        (0..self.slots.len()).map(move |step| (home + step) & mask)
    }

    /// The id among those hashed to `hash` that `is_match` accepts.
    fn find(&self, hash: u64, is_match: impl Fn(u32) -> bool) -> Option<u32> {
        for slot in self.probe(hash) {
            match self.slots[slot] {
                Self::EMPTY => return None,
                id if is_match(id) => return Some(id),
                _ => {}
            }
        }
        None
    }

    /// Adds `id`, which is not in the table yet; `hash_of` gives the hash of any
    /// id already in it, for when the table grows.
    fn insert(&mut self, hash: u64, id: u32, hash_of: impl Fn(u32) -> u64) {
        if Self::slots_for(self.len + 1) > self.slots.len() {
            let old = std::mem::replace(
                &mut self.slots,
                vec![Self::EMPTY; Self::slots_for(self.len + 1)],
            );
            for kept in old.into_iter().filter(|&id| id != Self::EMPTY) {
                self.place(hash_of(kept), kept);
            }
        }
        self.place(hash, id);
        self.len += 1;
    }

    /// Puts `id` in the first free slot of its probe sequence (the table is at
    /// most half full, so there is one).
    fn place(&mut self, hash: u64, id: u32) {
        if let Some(slot) = self.probe(hash).find(|&s| self.slots[s] == Self::EMPTY) {
            self.slots[slot] = id;
        }
    }
}

/// Scores as f32 (or i32, which llama.cpp also accepts); none when absent
/// (`Vocab::score` gives 0 then).
fn read_scores(file: &GgufFile, token_count: usize) -> Result<Vec<f32>> {
    let scores = match file.get_array(KEY_SCORES)? {
        None => return Ok(Vec::new()),
        Some(Array::F32(values)) => values.clone(),
        // Integer scores are small ranks; f32 represents them exactly enough for ordering.
        Some(Array::I32(values)) => values.iter().map(|&v| v as f32).collect(),
        Some(_) => {
            return Err(Error::InvalidVocab(format!(
                "{KEY_SCORES} must be an array of f32 or i32"
            )))
        }
    };
    check_length(KEY_SCORES, scores.len(), token_count)?;
    Ok(scores)
}

/// Attributes from token types; every token is normal when the key is absent.
fn read_attrs(file: &GgufFile, token_count: usize) -> Result<Vec<TokenAttr>> {
    let Some(array) = file.get_array(KEY_TOKEN_TYPE)? else {
        return Ok(vec![TokenAttr::NORMAL; token_count]);
    };
    let types = array.to_i64_vec().ok_or_else(|| {
        Error::InvalidVocab(format!("{KEY_TOKEN_TYPE} must be an array of integers"))
    })?;
    check_length(KEY_TOKEN_TYPE, types.len(), token_count)?;
    (0u32..)
        .zip(types)
        .map(|(id, token_type)| {
            TokenAttr::from_gguf_type(token_type).ok_or_else(|| {
                Error::InvalidVocab(format!(
                    "{KEY_TOKEN_TYPE}[{id}] = {token_type} is not a token type (0 to 6)"
                ))
            })
        })
        .collect()
}

fn check_length(key: &str, found: usize, token_count: usize) -> Result<()> {
    if found == token_count {
        return Ok(());
    }
    Err(Error::InvalidVocab(format!(
        "{key} has {found} entries but {KEY_TOKENS} has {token_count}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(texts: &[&str]) -> Result<Vocab> {
        let n = texts.len();
        let texts = texts.iter().map(|t| t.to_string()).collect();
        Vocab::new(texts, vec![0.0; n], vec![TokenAttr::NORMAL; n])
    }

    #[test]
    fn texts_and_ids_find_each_other() -> Result<()> {
        let texts: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vocab = vocab(&refs)?;
        for (id, text) in (0u32..).zip(&texts) {
            assert_eq!(vocab.id_of(text), Some(id));
            assert_eq!(vocab.text(id), Some(text.as_str()));
        }
        assert_eq!(vocab.id_of("t1000"), None);
        assert_eq!(vocab.text(1000), None);
        assert_eq!(vocab.iter().count(), 1000);
        Ok(())
    }

    #[test]
    fn empty_tokens_are_renamed_and_the_buffer_is_exact() -> Result<()> {
        let vocab = vocab(&["a", "", "b", ""])?;
        assert_eq!(vocab.text(1), Some("[EMPTY_1]"));
        assert_eq!(vocab.id_of("[EMPTY_3]"), Some(3));
        assert_eq!(vocab.text.capacity(), vocab.text.len());
        Ok(())
    }

    #[test]
    fn duplicates_are_refused() {
        let error = vocab(&["a", "b", "a"]).err().map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.contains("duplicate token \"a\" at ids 0 and 2")));
        // A renamed empty token collides with a token of that text.
        assert!(vocab(&["[EMPTY_1]", ""]).is_err());
    }

    #[test]
    fn the_index_grows_when_sized_too_small() {
        let mut index = IdIndex::with_capacity(0);
        let hash_of = |id: u32| u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for id in 0..100 {
            index.insert(hash_of(id), id, hash_of);
        }
        for id in 0..100 {
            assert_eq!(index.find(hash_of(id), |found| found == id), Some(id));
        }
    }
}
