//! The ids of special tokens (BOS, EOS, end of turn, fill-in-the-middle, ...).
//!
//! Each id starts from the tokenizer kind's default (as in llama.cpp: SPM
//! BOS 1 / EOS 2 / UNK 0, byte-level BPE BOS = EOS = 11) and is replaced by its
//! GGUF key when present. Unlike llama.cpp, which warns and keeps the default, an
//! id outside the vocabulary is an error naming the key.

use tl_gguf::GgufFile;

use crate::error::{Error, Result};
use crate::TokenizerKind;

/// Special token ids; `None` where the model has no such token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SpecialIds {
    pub(crate) bos: Option<u32>,
    pub(crate) eos: Option<u32>,
    pub(crate) eot: Option<u32>,
    pub(crate) eom: Option<u32>,
    pub(crate) unk: Option<u32>,
    pub(crate) sep: Option<u32>,
    pub(crate) pad: Option<u32>,
    pub(crate) mask: Option<u32>,
    pub(crate) fim_pre: Option<u32>,
    pub(crate) fim_suf: Option<u32>,
    pub(crate) fim_mid: Option<u32>,
    pub(crate) fim_pad: Option<u32>,
    pub(crate) fim_rep: Option<u32>,
    pub(crate) fim_sep: Option<u32>,
}

impl SpecialIds {
    /// llama.cpp's defaults for a tokenizer kind, before any key is read.
    pub(crate) fn defaults(kind: TokenizerKind) -> Self {
        match kind {
            TokenizerKind::Spm => Self {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..Self::default()
            },
            TokenizerKind::Bpe => Self {
                bos: Some(11),
                eos: Some(11),
                ..Self::default()
            },
        }
    }

    /// Applies the GGUF keys over `self`; defaults outside the vocabulary are dropped.
    pub(crate) fn read_keys(mut self, file: &GgufFile, vocab_size: usize) -> Result<Self> {
        for (key, slot) in ID_KEYS {
            let slot = slot(&mut self);
            if slot.is_some_and(|id| id as usize >= vocab_size) {
                *slot = None;
            }
            if let Some(id) = read_id(file, key, vocab_size)? {
                *slot = Some(id);
            }
        }
        Ok(self)
    }
}

/// Where each id key goes. Deprecated spellings come last so that, as in
/// llama.cpp, they win.
type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;
const ID_KEYS: [(&str, Slot); 17] = [
    ("tokenizer.ggml.bos_token_id", |s| &mut s.bos),
    ("tokenizer.ggml.eos_token_id", |s| &mut s.eos),
    ("tokenizer.ggml.eot_token_id", |s| &mut s.eot),
    ("tokenizer.ggml.eom_token_id", |s| &mut s.eom),
    ("tokenizer.ggml.unknown_token_id", |s| &mut s.unk),
    ("tokenizer.ggml.seperator_token_id", |s| &mut s.sep),
    ("tokenizer.ggml.padding_token_id", |s| &mut s.pad),
    ("tokenizer.ggml.mask_token_id", |s| &mut s.mask),
    ("tokenizer.ggml.fim_pre_token_id", |s| &mut s.fim_pre),
    ("tokenizer.ggml.fim_suf_token_id", |s| &mut s.fim_suf),
    ("tokenizer.ggml.fim_mid_token_id", |s| &mut s.fim_mid),
    ("tokenizer.ggml.fim_pad_token_id", |s| &mut s.fim_pad),
    ("tokenizer.ggml.fim_rep_token_id", |s| &mut s.fim_rep),
    ("tokenizer.ggml.fim_sep_token_id", |s| &mut s.fim_sep),
    ("tokenizer.ggml.prefix_token_id", |s| &mut s.fim_pre),
    ("tokenizer.ggml.suffix_token_id", |s| &mut s.fim_suf),
    ("tokenizer.ggml.middle_token_id", |s| &mut s.fim_mid),
];

/// One id key: absent or negative means "not set".
fn read_id(file: &GgufFile, key: &str, vocab_size: usize) -> Result<Option<u32>> {
    let Some(value) = file.get_i64(key)? else {
        return Ok(None);
    };
    if value < 0 {
        return Ok(None);
    }
    match u32::try_from(value) {
        Ok(id) if (id as usize) < vocab_size => Ok(Some(id)),
        _ => Err(Error::InvalidVocab(format!(
            "{key} = {value} is outside the vocabulary of {vocab_size} tokens"
        ))),
    }
}
