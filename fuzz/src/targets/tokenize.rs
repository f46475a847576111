//! `tokenize`: arbitrary text through real tokenizers (the four vocabularies
//! of `testdata/vocab`: gpt-2 and starcoder byte-level BPE, llama-spm and
//! phi-3 SentencePiece; and the tiny Qwen3 model's), encoded as a prompt is
//! (BOS added, special-token text parsed) and as message text is (neither),
//! every id decoded whole and streamed; then the input's bytes read as token
//! ids, in and out of range, decoded.

use std::path::Path;

use anyhow::Context;
use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use super::vocab::check_round_trip;
use super::Runner;
use crate::mutate::text::harvest;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::{magnitude, normalize_against};

/// llama.cpp's tokenizer test files separate their cases with this line.
const CASE_SEPARATOR: &str = "\n__ggml_vocab_test__\n";

/// Special-token text of the vocabularies above, and text near it.
const SPECIAL_TEXT: &[&str] = &[
    "<s>",
    "</s>",
    "<unk>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<|im_start",
    "<|",
    "|>",
    "<0x0A>",
    "<0x00>",
    "▁",
    "Ġ",
    "Ċ",
    "'s",
    "'ll",
    "'VE",
    "  ",
    "\n\n\n",
    "\r\n",
];

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut cases = std::collections::BTreeSet::new();
    for path in seeds::files_with_extension(&repo.join("testdata/vocab"), "inp")? {
        let text = String::from_utf8_lossy(&seeds::read(&path)?).into_owned();
        cases.extend(text.split(CASE_SEPARATOR).map(|c| c.as_bytes().to_vec()));
    }
    cases.extend(SPECIAL_TEXT.iter().map(|s| s.as_bytes().to_vec()));
    Ok(cases.into_iter().collect())
}

pub fn dictionary(seeds: &[Vec<u8>]) -> (Shape, Dictionary) {
    let mut words = harvest(seeds, 500);
    words.extend(SPECIAL_TEXT.iter().map(|s| s.as_bytes().to_vec()));
    (
        Shape::Text,
        Dictionary {
            words,
            ..Dictionary::default()
        },
    )
}

pub struct TokenizeRunner {
    tokenizers: Vec<(String, Tokenizer)>,
}

impl TokenizeRunner {
    pub fn new(repo: &Path) -> anyhow::Result<Self> {
        let mut paths = seeds::vocab_files(repo)?;
        paths.push(seeds::tiny_model(repo));
        let tokenizers = paths
            .iter()
            .map(|path| {
                let file = GgufFile::open(path)?;
                let tokenizer = Tokenizer::from_gguf(&file)?;
                let name = path
                    .file_stem()
                    .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
                Ok((name, tokenizer))
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .context("loading the tokenizers")?;
        Ok(Self { tokenizers })
    }
}

impl Runner for TokenizeRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let text = String::from_utf8_lossy(input);
        let mut signature = Vec::new();
        for (name, tokenizer) in &self.tokenizers {
            let prompt = tokenizer.encode(&text, true, true);
            let message = tokenizer.encode(&text, false, false);
            for ids in prompt.iter().chain(message.iter()) {
                check_round_trip(tokenizer, ids);
            }
            decode_input_as_ids(tokenizer, input);
            signature.push(match (prompt, message) {
                (Ok(prompt), Ok(message)) => format!(
                    "{name} {} {}",
                    magnitude(prompt.len()),
                    magnitude(message.len())
                ),
                (Err(e), _) | (_, Err(e)) => {
                    format!("{name} error {}", normalize_against(&e.to_string(), input))
                }
            });
        }
        signature.join("\n")
    }
}

/// The input's bytes, two at a time, as token ids up to a little past the
/// vocabulary: decoding must refuse the ones outside, not panic.
fn decode_input_as_ids(tokenizer: &Tokenizer, input: &[u8]) {
    let range = tokenizer.vocab_size() as u32 + 4;
    let ids: Vec<u32> = input
        .chunks(2)
        .map(|pair| pair.iter().fold(0u32, |acc, &b| acc << 8 | u32::from(b)) % range)
        .collect();
    for skip_special in [false, true] {
        let _ = tokenizer.decode(&ids, skip_special);
    }
    for &id in &ids {
        let _ = tokenizer.token_to_bytes(id, true);
    }
}
