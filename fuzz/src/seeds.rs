//! Where seeds come from: files of the repository (real GGUF vocabularies and
//! a real tiny model, the chat templates of popular models, every `.tl`
//! program), the sample requests under `fuzz/seeds/`, and vocabularies cut
//! down from the real ones so that loading one takes microseconds, not tens of
//! milliseconds.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use tl_gguf::{Array, Value};

use crate::mutate::gguf::GgufParts;
use crate::mutate::gguf_values::with_strings;

/// The real tiny model the engine's tests run (Qwen3 layout, Q8_0, a small
/// byte-level BPE vocabulary and a chat template).
pub fn tiny_model(repo: &Path) -> PathBuf {
    repo.join("crates/tl-engine/tests/golden/tiny-qwen3-q8_0.gguf")
}

/// The GGUF vocabularies of `testdata/vocab` (gpt-2, llama-spm, phi-3,
/// starcoder), sorted.
pub fn vocab_files(repo: &Path) -> anyhow::Result<Vec<PathBuf>> {
    files_with_extension(&repo.join("testdata/vocab"), "gguf")
}

/// Every file under `dir` (recursively) whose name ends in `.{extension}`,
/// sorted so that seeds come in the same order on every run.
pub fn files_with_extension(dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            fs::read_dir(&dir).with_context(|| format!("listing seeds in {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

pub fn read_all(paths: &[PathBuf]) -> anyhow::Result<Vec<Vec<u8>>> {
    paths
        .iter()
        .map(|p| fs::read(p).with_context(|| format!("reading seed {}", p.display())))
        .collect()
}

pub fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("reading seed {}", path.display()))
}

/// `bytes` (a GGUF file with a vocabulary) cut down to its first `keep`
/// tokens, with the merges that only use those, the special ids that stay
/// inside, and no tensors. Byte-level BPE vocabularies keep their first 256
/// tokens (the byte alphabet), SPM ones their byte tokens, as long as `keep`
/// is above that.
pub fn shrink_vocab(bytes: &[u8], keep: usize) -> Option<Vec<u8>> {
    let mut parts = GgufParts::parse(bytes)?;
    parts.tensors.clear();
    let mut kept_tokens: HashSet<String> = HashSet::new();
    for (key, value) in &mut parts.metadata {
        match (key.as_str(), value) {
            ("tokenizer.ggml.tokens", Value::Array(Array::String(tokens))) => {
                with_strings(tokens, |tokens| tokens.truncate(keep));
                kept_tokens = tokens.iter().map(str::to_owned).collect();
            }
            ("tokenizer.ggml.scores", Value::Array(Array::F32(scores))) => scores.truncate(keep),
            ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))) => types.truncate(keep),
            _ => {}
        }
    }
    let keeps_merge = |line: &String| {
        line.split_once(' ').is_some_and(|(a, b)| {
            kept_tokens.contains(a)
                && kept_tokens.contains(b)
                && kept_tokens.contains(&format!("{a}{b}"))
        })
    };
    parts.metadata.retain_mut(|(key, value)| match value {
        Value::Array(Array::String(merges)) if key == "tokenizer.ggml.merges" => {
            with_strings(merges, |merges| merges.retain(keeps_merge));
            true
        }
        // Special ids past the cut would make the loader refuse the file.
        _ if key.ends_with("_token_id") => value.as_u64().is_some_and(|id| id < keep as u64),
        _ => true,
    });
    parts.to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn shrunk_vocabularies_still_load() {
        for path in vocab_files(&repo()).unwrap() {
            let bytes = fs::read(&path).unwrap();
            let small = shrink_vocab(&bytes, 400).unwrap();
            let file = tl_gguf::GgufFile::from_bytes(small).unwrap();
            let tokenizer = tl_tokenizer::Tokenizer::from_gguf(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(tokenizer.vocab_size(), 400);
        }
    }
}
