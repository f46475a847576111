//! Special tokens recognised by their text, as llama.cpp does for models whose
//! GGUF lacks the keys: end of turn, end of message, fill-in-the-middle, and the
//! set of tokens that end generation.
//!
//! llama.cpp walks an unordered map, so when several candidate texts exist the one
//! it picks is unspecified; here the first text of each list that is in the
//! vocabulary wins. A token found this way is forced to CONTROL, as in llama.cpp,
//! so it decodes to nothing when special tokens are skipped.

use std::collections::BTreeSet;

use crate::special_ids::SpecialIds;
use crate::token_attr::TokenAttr;
use crate::vocab::Vocab;

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

/// Texts that end generation wherever they are in the vocabulary.
const END_OF_GENERATION_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// gpt-oss formatting tokens that llama.cpp always renders, even when skipping specials.
const ALWAYS_RENDERED_TEXTS: &[&str] =
    &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// Fills ids the GGUF left unset from the token texts.
pub(crate) fn detect_by_text(ids: &mut SpecialIds, vocab: &mut Vocab) {
    let slots: [(&mut Option<u32>, &[&str]); 8] = [
        (&mut ids.eot, EOT_TEXTS),
        (&mut ids.eom, EOM_TEXTS),
        (&mut ids.fim_pre, FIM_PRE_TEXTS),
        (&mut ids.fim_suf, FIM_SUF_TEXTS),
        (&mut ids.fim_mid, FIM_MID_TEXTS),
        (&mut ids.fim_pad, FIM_PAD_TEXTS),
        (&mut ids.fim_rep, FIM_REP_TEXTS),
        (&mut ids.fim_sep, FIM_SEP_TEXTS),
    ];
    for (slot, texts) in slots {
        if slot.is_some() {
            continue;
        }
        if let Some(id) = texts.iter().find_map(|text| vocab.id_of(text)) {
            *slot = Some(id);
            force_control(vocab, id);
        }
    }
}

/// Control tokens whose text says "unused" are marked unused (they stay control).
pub(crate) fn mark_unused_controls(vocab: &mut Vocab) {
    let unused: Vec<u32> = vocab
        .iter()
        .filter(|(_, text)| text.contains("unused"))
        .map(|(id, _)| id)
        .filter(|&id| vocab.attr(id).has_any(TokenAttr::CONTROL))
        .collect();
    for id in unused {
        let attr = vocab.attr(id).with(TokenAttr::UNUSED);
        vocab.set_attr(id, attr);
    }
}

/// The ids that end generation, with llama.cpp's attribute fix-ups applied on the way.
pub(crate) fn end_of_generation_ids(ids: &SpecialIds, vocab: &mut Vocab) -> BTreeSet<u32> {
    let mut eog: BTreeSet<u32> = [ids.fim_pad, ids.fim_rep, ids.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for text in END_OF_GENERATION_TEXTS {
        if let Some(id) = vocab.id_of(text) {
            eog.insert(id);
            force_control(vocab, id);
        }
    }
    for text in ALWAYS_RENDERED_TEXTS {
        if let Some(id) = vocab.id_of(text) {
            vocab.set_attr(id, TokenAttr::USER_DEFINED);
        }
    }
    eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());
    drop_harmony_end(&mut eog, vocab);
    drop_gemma4_eos(&mut eog, vocab);
    eog
}

/// o200k_harmony / solar-open: `<|end|>` separates messages there, it does not end
/// generation, when `<|return|>`+`<|call|>` or `<|calls|>`+`<|flush|>` exist.
fn drop_harmony_end(eog: &mut BTreeSet<u32>, vocab: &mut Vocab) {
    let has =
        |eog: &BTreeSet<u32>, text: &str| vocab.id_of(text).is_some_and(|id| eog.contains(&id));
    let has_return = has(eog, "<|return|>");
    let has_call = has(eog, "<|call|>") || has(eog, "<|calls|>");
    let has_flush = has(eog, "<|flush|>");
    let Some(end_id) = vocab.id_of("<|end|>").filter(|id| eog.contains(id)) else {
        return;
    };
    if has_call && (has_return || has_flush) {
        eog.remove(&end_id);
        vocab.set_attr(end_id, TokenAttr::USER_DEFINED);
    }
}

/// Gemma 4 and PaddleOCR: `</s>` is an ordinary token when `<|tool_response>` ends turns.
fn drop_gemma4_eos(eog: &mut BTreeSet<u32>, vocab: &mut Vocab) {
    let in_eog = |text: &str| vocab.id_of(text).filter(|id| eog.contains(id));
    if let (Some(_), Some(s_id)) = (in_eog("<|tool_response>"), in_eog("</s>")) {
        eog.remove(&s_id);
        vocab.set_attr(s_id, TokenAttr::NORMAL);
    }
}

fn force_control(vocab: &mut Vocab, id: u32) {
    let attr = vocab.attr(id);
    if !attr.has_any(TokenAttr::CONTROL) {
        vocab.set_attr(id, attr.with(TokenAttr::CONTROL));
    }
}

/// Phi-3 GGUFs (recognised by `general.name`, as llama.cpp does) strip whitespace
/// after their special tokens, except after `<unk>`, `<s>` and `<|endoftext|>`.
pub(crate) fn apply_phi3_rstrip(model_name: &str, special_cache: &[u32], vocab: &mut Vocab) {
    let name = model_name.to_lowercase();
    if !(name.contains("phi-3") || name.contains("phi3")) {
        return;
    }
    let stripped = special_cache.iter().copied().chain(vocab.id_of("</s>"));
    let stripped: Vec<u32> = stripped.collect();
    for id in stripped {
        let attr = vocab.attr(id).with(TokenAttr::RSTRIP);
        vocab.set_attr(id, attr);
    }
    for text in ["<unk>", "<s>", "<|endoftext|>"] {
        if let Some(id) = vocab.id_of(text) {
            let attr = vocab.attr(id).without(TokenAttr::RSTRIP);
            vocab.set_attr(id, attr);
        }
    }
}
