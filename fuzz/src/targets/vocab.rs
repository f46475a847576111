//! `vocab`: a tokenizer built from a stranger's GGUF metadata (tokens, scores,
//! types, merges, special ids, flags, pre-tokenizer name), then used: probe
//! texts are encoded with special tokens parsed and not, every id `encode`
//! makes must decode, every token's bytes are asked for, and the file's chat
//! template (if any) is parsed and rendered, as a server does at start.

use std::path::Path;

use tl_engine::chat_template::{ChatMessage, ChatTemplate};
use tl_gguf::GgufFile;
use tl_tokenizer::{StreamDecoder, Tokenizer};

use super::gguf::{STRINGS, TOKENIZER_KEYS};
use super::Runner;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::{magnitude, normalize};

/// Texts every loaded tokenizer encodes: plain words, leading and repeated
/// spaces, digits, every kind of special token text, bytes SPM has to fall
/// back on, and an unfinished special token.
const PROBES: &[&str] = &[
    "Hello world",
    "  leading spaces and\ttabs\n\nnewlines",
    "12345 67.8 don't I'm we've",
    "<s>[INST] hi [/INST]</s>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|eot_id|><end_of_turn><unk><pad>",
    "é中文🙂\u{0}\u{fffd}\u{200d}",
    "<|im_start",
    "",
];

/// Token ids decoded one by one, at most; the rest of a vocabulary adds time,
/// not paths.
const MAX_IDS_DECODED: usize = 2048;

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut seeds = Vec::new();
    for path in seeds::vocab_files(repo)? {
        let bytes = seeds::read(&path)?;
        seeds.extend(seeds::shrink_vocab(&bytes, 300));
        seeds.extend(seeds::shrink_vocab(&bytes, 1200));
    }
    let model = seeds::read(&seeds::tiny_model(repo))?;
    seeds.extend(seeds::shrink_vocab(&model, 400));
    Ok(seeds)
}

pub fn dictionary() -> (Shape, Dictionary) {
    let dictionary = Dictionary {
        keys: TOKENIZER_KEYS.to_vec(),
        strings: STRINGS.to_vec(),
        ..Dictionary::default()
    };
    (Shape::Gguf, dictionary)
}

pub struct VocabRunner;

impl Runner for VocabRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let file = match GgufFile::from_bytes(input.to_vec()) {
            Ok(file) => file,
            Err(e) => return super::gguf::reader_signature(&e),
        };
        let tokenizer = match Tokenizer::from_gguf(&file) {
            Ok(tokenizer) => tokenizer,
            Err(e) => return format!("tokenizer: {}", normalize(&e.to_string())),
        };
        let encoded = encode_probes(&tokenizer);
        decode_every_token(&tokenizer);
        format!(
            "{:?} pre {} vocab {} warnings {} encode [{}] template {}",
            tokenizer.kind(),
            tokenizer.pre_tokenizer_name(),
            magnitude(tokenizer.vocab_size()),
            tokenizer.warnings().len(),
            encoded,
            render_template(&file, &tokenizer)
        )
    }
}

/// Encodes every probe both ways; the ids must be in the vocabulary and
/// decode, whole and streamed. Returns the encode errors' signatures.
fn encode_probes(tokenizer: &Tokenizer) -> String {
    let mut errors = std::collections::BTreeSet::new();
    for text in PROBES {
        for (add_special, parse_special) in [(true, true), (false, false)] {
            match tokenizer.encode(text, add_special, parse_special) {
                Ok(ids) => check_round_trip(tokenizer, &ids),
                Err(e) => {
                    errors.insert(normalize(&e.to_string()));
                }
            }
        }
    }
    errors.into_iter().collect::<Vec<_>>().join("; ")
}

/// What `encode` made, `decode` and the stream decoder must take.
pub(super) fn check_round_trip(tokenizer: &Tokenizer, ids: &[u32]) {
    let vocab = tokenizer.vocab_size();
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
        panic!("encode made id {bad}, outside the vocabulary of {vocab}");
    }
    for skip_special in [false, true] {
        if let Err(e) = tokenizer.decode(ids, skip_special) {
            panic!("decode refused ids that encode made: {e}");
        }
        let mut stream = StreamDecoder::new(skip_special);
        for &id in ids {
            let _ = stream.push(tokenizer, id);
        }
        let _ = stream.finish();
    }
}

fn decode_every_token(tokenizer: &Tokenizer) {
    let vocab = tokenizer.vocab_size().min(MAX_IDS_DECODED) as u32;
    for id in 0..vocab {
        let _ = tokenizer.token_to_bytes(id, false);
        let _ = (tokenizer.is_control(id), tokenizer.is_end_of_generation(id));
        let _ = tokenizer.decode(&[id], true);
    }
    // Past the end: errors, not panics.
    let past = tokenizer.vocab_size() as u32;
    let _ = (
        tokenizer.decode(&[past], false),
        tokenizer.token_to_bytes(past, true),
    );
}

/// The file's chat template, rendered as the server renders a first turn.
fn render_template(file: &GgufFile, tokenizer: &Tokenizer) -> String {
    let template = match ChatTemplate::from_gguf(file, tokenizer) {
        Ok(Some(template)) => template,
        Ok(None) => return "none".into(),
        Err(e) => return normalize(&e.to_string()),
    };
    let messages = [ChatMessage::system("Be brief."), ChatMessage::user("Hi")];
    match template.render(&messages, true) {
        Ok(text) => {
            let ids = tokenizer.encode(&text, false, true).unwrap_or_default();
            check_round_trip(tokenizer, &ids);
            "rendered".into()
        }
        Err(e) => normalize(&e.to_string()),
    }
}
