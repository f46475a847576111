//! Building a [`Tokenizer`] from GGUF metadata, step by step in llama.cpp's order
//! (`llama_vocab::impl::load`): model kind and pre-tokenizer, token table,
//! special ids and flags, merges, then the text-based special-token fix-ups.

use tl_gguf::GgufFile;

use crate::bpe::{BpeMerges, KEY_MERGES};
use crate::codepoint::CodepointTable;
use crate::error::{Error, Result};
use crate::partition::special_token_order;
use crate::pieces::PieceTable;
use crate::pre_tokenizer::PreTokenizerConfig;
use crate::special_detection::{
    apply_phi3_rstrip, detect_by_text, end_of_generation_ids, mark_unused_controls,
};
use crate::special_ids::SpecialIds;
use crate::split::Splitter;
use crate::spm::SpmModel;
use crate::tokenizer::{BpeModel, EdgeRules, Model, Tokenizer, TokenizerKind};
use crate::vocab::Vocab;

const KEY_MODEL: &str = "tokenizer.ggml.model";
const KEY_PRE: &str = "tokenizer.ggml.pre";
const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const KEY_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";

/// Reads, validates and assembles everything a tokenizer needs.
pub(crate) fn load(file: &GgufFile) -> Result<Tokenizer> {
    let mut warnings = Vec::new();
    let kind = read_kind(file)?;
    let pre = match kind {
        TokenizerKind::Spm => PreTokenizerConfig::default_config(),
        TokenizerKind::Bpe => read_pre_tokenizer(file, &mut warnings)?,
    };
    let mut vocab = Vocab::from_gguf(file)?;
    let mut special = SpecialIds::defaults(kind);
    if pre.clears_default_bos {
        special.bos = None;
    }
    let mut special = special.read_keys(file, vocab.len())?;
    let edges = read_edge_rules(file, kind, &pre, &special)?;
    let model = build_model(file, kind, &pre, &vocab, &special)?;

    detect_by_text(&mut special, &mut vocab);
    mark_unused_controls(&mut vocab);
    let end_of_generation = end_of_generation_ids(&special, &mut vocab);
    let special_order = special_token_order(&vocab);
    let model_name = file.get_str("general.name").ok().flatten().unwrap_or("");
    apply_phi3_rstrip(model_name, &special_order, &mut vocab);
    let pieces = PieceTable::new(&vocab, kind)?;

    Ok(Tokenizer {
        vocab,
        kind,
        model,
        special,
        end_of_generation,
        special_order,
        pieces,
        edges,
        pre_tokenizer_name: pre.name.to_string(),
        warnings,
    })
}

fn read_kind(file: &GgufFile) -> Result<TokenizerKind> {
    let model = file
        .get_str(KEY_MODEL)?
        .ok_or_else(|| Error::InvalidVocab(format!("{KEY_MODEL} is missing")))?;
    match model {
        "llama" => Ok(TokenizerKind::Spm),
        "gpt2" => Ok(TokenizerKind::Bpe),
        other => Err(Error::Unsupported(format!(
            "{KEY_MODEL} = {other:?} (supported: \"llama\", \"gpt2\")"
        ))),
    }
}

/// The BPE pre-tokenizer; a missing or unknown name falls back to `default`
/// with a warning (llama.cpp refuses unknown names).
fn read_pre_tokenizer(file: &GgufFile, warnings: &mut Vec<String>) -> Result<PreTokenizerConfig> {
    let Some(name) = file.get_str(KEY_PRE)? else {
        warnings.push(format!(
            "{KEY_PRE} is missing; using the 'default' pre-tokenizer, tokenization may differ from the model's"
        ));
        return Ok(PreTokenizerConfig::default_config());
    };
    if let Some(config) = PreTokenizerConfig::for_name(name) {
        return Ok(config);
    }
    warnings.push(format!(
        "{KEY_PRE} = {name:?} is not supported; using the 'default' pre-tokenizer, tokenization may differ from the model's"
    ));
    Ok(PreTokenizerConfig::default_config())
}

/// BOS/EOS/space-prefix flags: defaults by kind and pre-tokenizer, then the keys.
fn read_edge_rules(
    file: &GgufFile,
    kind: TokenizerKind,
    pre: &PreTokenizerConfig,
    special: &SpecialIds,
) -> Result<EdgeRules> {
    let is_spm = kind == TokenizerKind::Spm;
    let edges = EdgeRules {
        add_bos: file.get_bool(KEY_ADD_BOS)?.unwrap_or(is_spm || pre.add_bos),
        add_eos: file.get_bool(KEY_ADD_EOS)?.unwrap_or(false),
        add_space_prefix: file.get_bool(KEY_ADD_SPACE_PREFIX)?.unwrap_or(is_spm),
        clean_spaces: !is_spm && pre.clean_spaces,
    };
    if edges.add_bos && special.bos.is_none() {
        return Err(Error::InvalidVocab(format!(
            "{KEY_ADD_BOS} is true, but tokenizer.ggml.bos_token_id is not set"
        )));
    }
    if edges.add_eos && special.eos.is_none() {
        return Err(Error::InvalidVocab(format!(
            "{KEY_ADD_EOS} is true, but tokenizer.ggml.eos_token_id is not set"
        )));
    }
    Ok(edges)
}

fn build_model(
    file: &GgufFile,
    kind: TokenizerKind,
    pre: &PreTokenizerConfig,
    vocab: &Vocab,
    special: &SpecialIds,
) -> Result<Model> {
    match kind {
        TokenizerKind::Spm => Ok(Model::Spm(Box::new(SpmModel::new(vocab, special.unk)))),
        TokenizerKind::Bpe => {
            let merges = file
                .get_string_array(KEY_MERGES)?
                .ok_or_else(|| Error::InvalidVocab(format!("{KEY_MERGES} is missing")))?;
            Ok(Model::Bpe(Box::new(BpeModel {
                merges: BpeMerges::new(merges, vocab)?,
                splitter: Splitter::new(pre.rules)?,
                codepoints: CodepointTable::new()?,
                ignore_merges: pre.ignore_merges,
            })))
        }
    }
}
