//! The token table: text, score and attributes of every id, and the reverse map.
//!
//! Read from `tokenizer.ggml.tokens`, `.scores` and `.token_type`, validated the way
//! llama.cpp's `llama_vocab::impl::load` does (plus equal array lengths, which
//! llama.cpp only checks as "at least as long").

use tl_gguf::{Array, GgufFile};

use crate::error::{Error, Result};
use crate::fast_hash::FastHashMap;
use crate::token_attr::TokenAttr;

pub(crate) const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub(crate) const KEY_SCORES: &str = "tokenizer.ggml.scores";
pub(crate) const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";

/// Every token's text, score and attributes.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    texts: Vec<String>,
    scores: Vec<f32>,
    attrs: Vec<TokenAttr>,
    ids_by_text: FastHashMap<String, u32>,
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
        Self::new(texts.to_vec(), scores, attrs)
    }

    /// Builds the table from parallel arrays of equal length.
    pub(crate) fn new(
        mut texts: Vec<String>,
        scores: Vec<f32>,
        attrs: Vec<TokenAttr>,
    ) -> Result<Self> {
        let mut ids_by_text =
            FastHashMap::with_capacity_and_hasher(texts.len(), Default::default());
        for (id, text) in (0u32..).zip(texts.iter_mut()) {
            if text.is_empty() {
                // llama.cpp renames empty tokens so that text lookups stay unambiguous.
                *text = format!("[EMPTY_{id}]");
            }
            if let Some(first) = ids_by_text.insert(text.clone(), id) {
                return Err(Error::InvalidVocab(format!(
                    "{KEY_TOKENS}: duplicate token {text:?} at ids {first} and {id}"
                )));
            }
        }
        Ok(Self {
            texts,
            scores,
            attrs,
            ids_by_text,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        (id as usize) < self.texts.len()
    }

    pub(crate) fn text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize).map(String::as_str)
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
        self.ids_by_text.get(text).copied()
    }

    /// All ids in order with their text.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        (0u32..).zip(self.texts.iter().map(String::as_str))
    }
}

/// Scores as f32 (or i32, which llama.cpp also accepts); all zero when absent.
fn read_scores(file: &GgufFile, token_count: usize) -> Result<Vec<f32>> {
    let scores = match file.get_array(KEY_SCORES)? {
        None => return Ok(vec![0.0; token_count]),
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
    Ok(types.into_iter().map(TokenAttr::from_gguf_type).collect())
}

fn check_length(key: &str, found: usize, token_count: usize) -> Result<()> {
    if found == token_count {
        return Ok(());
    }
    Err(Error::InvalidVocab(format!(
        "{key} has {found} entries but {KEY_TOKENS} has {token_count}"
    )))
}
