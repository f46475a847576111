//! The public tokenizer: encoding text to ids and decoding ids to text, with the
//! special-token, BOS/EOS and leading-space rules of llama.cpp's `llama_vocab`.

use std::collections::BTreeSet;
use std::ops::Range;

use crate::bpe::BpeMerges;
use crate::clean_spaces::clean_spaces;
use crate::codepoint::CodepointTable;
use crate::error::{Error, Result};
use crate::partition::{partition, partition_with, Fragment, SpecialParsing};
use crate::pieces::PieceTable;
use crate::special_ids::SpecialIds;
use crate::split::Splitter;
use crate::spm::SpmModel;
use crate::token_attr::TokenAttr;
use crate::vocab::Vocab;

/// The tokenization algorithm of a vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece-style BPE over characters with scores and byte fallback
    /// (`tokenizer.ggml.model = "llama"`).
    Spm,
    /// Byte-level BPE with ranked merges and a pre-tokenizer
    /// (`tokenizer.ggml.model = "gpt2"`).
    Bpe,
}

/// The algorithm-specific part of a tokenizer.
#[derive(Debug)]
pub(crate) enum Model {
    Spm(Box<SpmModel>),
    Bpe(Box<BpeModel>),
}

/// Byte-level BPE: pre-tokenizer plus merges.
#[derive(Debug)]
pub(crate) struct BpeModel {
    pub(crate) merges: BpeMerges,
    pub(crate) splitter: Splitter,
    pub(crate) codepoints: CodepointTable,
    /// Words that are already a token skip the merges (Llama 3 and kin).
    pub(crate) ignore_merges: bool,
}

/// How encoding and decoding treat the edges of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EdgeRules {
    pub(crate) add_bos: bool,
    pub(crate) add_eos: bool,
    /// SPM: a space is put before the text (and after each special token), and
    /// removed again from the first decoded token.
    pub(crate) add_space_prefix: bool,
    /// Decoding removes spaces before punctuation (see `clean_spaces`).
    pub(crate) clean_spaces: bool,
}

/// A tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata.
pub struct Tokenizer {
    pub(crate) vocab: Vocab,
    pub(crate) kind: TokenizerKind,
    pub(crate) model: Model,
    pub(crate) special: SpecialIds,
    pub(crate) end_of_generation: BTreeSet<u32>,
    /// Ids that `encode` cuts out of the text, longest text first.
    pub(crate) special_order: Vec<u32>,
    pub(crate) pieces: PieceTable,
    pub(crate) edges: EdgeRules,
    pub(crate) pre_tokenizer_name: String,
    pub(crate) warnings: Vec<String>,
}

impl std::fmt::Debug for Tokenizer {
    /// A summary; the vocabulary itself is too large to print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("kind", &self.kind)
            .field("vocab_size", &self.vocab.len())
            .field("pre_tokenizer", &self.pre_tokenizer_name)
            .field("bos", &self.special.bos)
            .field("eos", &self.special.eos)
            .field("add_bos", &self.edges.add_bos)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds the tokenizer described by a GGUF file's metadata.
    pub fn from_gguf(file: &tl_gguf::GgufFile) -> Result<Tokenizer> {
        crate::loader::load(file)
    }

    /// Tokenizes `text`. With `add_special`, BOS/EOS are added as the model asks;
    /// with `parse_special`, control tokens written in the text (`<|im_start|>`)
    /// become those tokens instead of being tokenized as text.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let fragments = partition(text, &self.special_order, &self.vocab, parse_special);
        self.encode_fragments(text, &fragments, add_special)
    }

    /// Tokenizes a prompt of which only some text may become control tokens,
    /// such as a rendered chat, where the template's markup must give
    /// `<|im_start|>` but a user's message must not. Control and unknown tokens
    /// written in `text` become those tokens (as with `parse_special`) except
    /// where they would overlap a byte range of `plain`; there the text is
    /// tokenized as `encode(.., parse_special = false)` tokenizes it. A token
    /// that would straddle the edge of a plain range stays text too.
    pub fn encode_with_plain_text(
        &self,
        text: &str,
        add_special: bool,
        plain: &[Range<usize>],
    ) -> Result<Vec<u32>> {
        let plain = sorted_disjoint(plain);
        let parsing = SpecialParsing::OutsidePlain(&plain);
        let fragments = partition_with(text, &self.special_order, &self.vocab, parsing);
        self.encode_fragments(text, &fragments, add_special)
    }

    /// The texts of the tokens that only `parse_special` turns into tokens:
    /// control tokens (`<|im_start|>`, `</s>`) and the unknown token. Text a
    /// user wrote should never become one of them.
    pub fn special_token_texts(&self) -> impl Iterator<Item = &str> + '_ {
        let kinds = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN);
        self.special_order
            .iter()
            .filter(move |&&id| self.vocab.attr(id).has_any(kinds))
            .filter_map(|&id| self.vocab.text(id))
    }

    fn encode_fragments(
        &self,
        text: &str,
        fragments: &[Fragment<'_>],
        add_special: bool,
    ) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.edges.add_bos {
            ids.extend(self.special.bos);
        }
        match &self.model {
            Model::Spm(spm) => self.encode_spm(spm, fragments, &mut ids),
            Model::Bpe(bpe) => self.encode_bpe(bpe, fragments, &mut ids)?,
        }
        if add_special && self.edges.add_eos {
            ids.extend(self.special.eos);
        }
        Ok(ids)
    }

    fn encode_spm(&self, spm: &SpmModel, fragments: &[Fragment<'_>], ids: &mut Vec<u32>) {
        // llama.cpp prefixes the first text and every text after a special token.
        let mut after_special = true;
        for fragment in fragments {
            match *fragment {
                Fragment::Text(text) => {
                    let prefix = if self.edges.add_space_prefix && after_special {
                        " "
                    } else {
                        ""
                    };
                    let escaped = format!("{prefix}{text}").replace(' ', "\u{2581}");
                    spm.encode(&escaped, &self.vocab, ids);
                    after_special = false;
                }
                Fragment::Token(id) => {
                    ids.push(id);
                    after_special = true;
                }
            }
        }
    }

    fn encode_bpe(
        &self,
        bpe: &BpeModel,
        fragments: &[Fragment<'_>],
        ids: &mut Vec<u32>,
    ) -> Result<()> {
        for fragment in fragments {
            match *fragment {
                Fragment::Text(text) => {
                    for word in bpe.splitter.split(text, &bpe.codepoints)? {
                        bpe.merges.encode_word(
                            word.as_bytes(),
                            &self.vocab,
                            bpe.ignore_merges,
                            ids,
                        );
                    }
                }
                Fragment::Token(id) => ids.push(id),
            }
        }
        Ok(())
    }

    /// Turns ids back into text. With `skip_special`, control and unknown tokens
    /// give no text and the BOS/EOS that `encode` added are dropped. Invalid UTF-8
    /// (an incomplete character at the end) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        if let Some(&id) = ids.iter().find(|&&id| !self.vocab.contains(id)) {
            return Err(Error::UnknownTokenId {
                id,
                vocab_size: self.vocab.len(),
            });
        }
        let bytes = self.decode_bytes(ids, skip_special);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn decode_bytes(&self, mut ids: &[u32], skip_special: bool) -> Vec<u8> {
        let mut strip_leading_space = self.edges.add_space_prefix;
        if skip_special && self.edges.add_bos && ids.first().copied() == self.special.bos {
            // As llama.cpp does: once BOS is removed, the next space is kept.
            strip_leading_space = false;
            ids = &ids[1..];
        }
        if skip_special && self.edges.add_eos && ids.last().copied() == self.special.eos {
            ids = &ids[..ids.len() - 1];
        }
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for (position, &id) in ids.iter().enumerate() {
            let mut piece = self.piece(id, skip_special);
            if position == 0 && strip_leading_space {
                piece = piece.strip_prefix(b" ").unwrap_or(piece);
            }
            bytes.extend_from_slice(piece);
        }
        if self.edges.clean_spaces {
            clean_spaces(&mut bytes);
        }
        bytes
    }

    /// The bytes of one token as a stream would show them (no leading-space
    /// removal, no space cleaning). Empty for ids outside the vocabulary, and for
    /// control/unknown tokens when `skip_special`.
    pub fn token_to_bytes(&self, id: u32, skip_special: bool) -> Vec<u8> {
        self.piece(id, skip_special).to_vec()
    }

    fn piece(&self, id: u32, skip_special: bool) -> &[u8] {
        let hidden = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN);
        if skip_special && self.vocab.attr(id).has_any(hidden) {
            return &[];
        }
        self.pieces.piece(id)
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos_id(&self) -> Option<u32> {
        self.special.bos
    }

    /// The end-of-sequence token.
    pub fn eos_id(&self) -> Option<u32> {
        self.special.eos
    }

    /// The end-of-turn token (from metadata, or found by its text).
    pub fn eot_id(&self) -> Option<u32> {
        self.special.eot
    }

    /// The end-of-message token (Llama 3.1 tool calls).
    pub fn eom_id(&self) -> Option<u32> {
        self.special.eom
    }

    /// The unknown token.
    pub fn unk_id(&self) -> Option<u32> {
        self.special.unk
    }

    /// The padding token.
    pub fn pad_id(&self) -> Option<u32> {
        self.special.pad
    }

    /// Whether `encode(.., add_special = true, ..)` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.edges.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` ends with EOS.
    pub fn add_eos(&self) -> bool {
        self.edges.add_eos
    }

    /// Whether SPM encoding puts a space before the text.
    pub fn add_space_prefix(&self) -> bool {
        self.edges.add_space_prefix
    }

    /// Whether decoding removes spaces before punctuation (llama.cpp's `clean_spaces`).
    pub fn cleans_spaces(&self) -> bool {
        self.edges.clean_spaces
    }

    /// Whether generating `id` ends the answer: EOS, EOT, EOM and the tokens
    /// llama.cpp recognises by text (`<|im_end|>`, `<end_of_turn>`, ...).
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.end_of_generation.contains(&id)
    }

    /// All end-of-generation ids, ascending.
    pub fn end_of_generation_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.end_of_generation.iter().copied()
    }

    /// Whether `id` is a control token (hidden by `skip_special`).
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id).has_any(TokenAttr::CONTROL)
    }

    /// The vocabulary text of a token, as stored (e.g. `▁Hello`, `ĠHello`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.text(id)
    }

    /// The id of a token by its exact vocabulary text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id_of(text)
    }

    /// SPM or byte-level BPE.
    pub fn kind(&self) -> TokenizerKind {
        self.kind
    }

    /// The pre-tokenizer in use (`"default"` for SPM and for unknown names).
    pub fn pre_tokenizer_name(&self) -> &str {
        &self.pre_tokenizer_name
    }

    /// Problems found while loading that did not stop it (e.g. an unknown
    /// pre-tokenizer replaced by the default one).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// `ranges` sorted by start, with overlapping or touching ones merged (and
/// empty ones dropped), as [`SpecialParsing::OutsidePlain`] needs them.
fn sorted_disjoint(ranges: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut sorted: Vec<Range<usize>> = ranges
        .iter()
        .filter(|range| range.start < range.end)
        .cloned()
        .collect();
    sorted.sort_by_key(|range| range.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for range in sorted {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
#[path = "tokenizer_tests.rs"]
mod tests;
