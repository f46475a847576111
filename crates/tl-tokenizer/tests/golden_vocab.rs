//! Golden tokenizations from llama.cpp's `test-tokenizer-0`.
//!
//! For every `ggml-vocab-NAME.gguf` in `testdata/vocab`, each string of
//! `NAME.gguf.inp` (separated by `\n__ggml_vocab_test__\n`) must encode to the ids
//! of the same line of `NAME.gguf.out`, with `add_special = false` and
//! `parse_special = false` as in llama.cpp's test. The SmolLM2 model's vocabulary
//! is checked the same way against `smollm2-tokenize.inp/.out`.
//!
//! Round trips: the token pieces concatenate back to the input (after the
//! prefix space SPM adds), and `decode` returns the input exactly unless the
//! tokenizer cleans spaces before punctuation.

use std::path::{Path, PathBuf};

use tl_gguf::GgufFile;
use tl_tokenizer::{Tokenizer, TokenizerKind};

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn vocab_dir() -> PathBuf {
    tl_testdata::testdata().join("vocab")
}

/// Splits an `.inp` file the way `test-tokenizer-0` does.
fn read_inputs(path: &Path) -> Vec<String> {
    let raw = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut inputs = Vec::new();
    let mut rest = raw.as_str();
    while !rest.is_empty() {
        match rest.find(SEPARATOR) {
            Some(at) => {
                inputs.push(rest[..at].to_string());
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => {
                inputs.push(rest.to_string());
                break;
            }
        }
    }
    inputs
}

fn read_expected(path: &Path) -> Vec<Vec<u32>> {
    let raw = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    raw.lines()
        .map(|line| {
            line.split_whitespace()
                .map(|id| id.parse().unwrap_or_else(|e| panic!("bad id {id:?}: {e}")))
                .collect()
        })
        .collect()
}

/// Checks every string; returns the failures as readable lines.
fn check_golden(tokenizer: &Tokenizer, inp: &Path, out: &Path) -> (usize, Vec<String>) {
    let inputs = read_inputs(inp);
    let expected = read_expected(out);
    assert_eq!(
        inputs.len(),
        expected.len(),
        "{} has {} strings but {} has {} lines",
        inp.display(),
        inputs.len(),
        out.display(),
        expected.len()
    );
    let mut failures = Vec::new();
    for (text, want) in inputs.iter().zip(&expected) {
        let got = tokenizer.encode(text, false, false).expect("encode");
        if &got != want {
            failures.push(format!("{text:?}: got {got:?}, want {want:?}"));
            continue;
        }
        if let Some(problem) = round_trip_problem(tokenizer, text, &got) {
            failures.push(format!("{text:?}: {problem}"));
        }
    }
    (inputs.len(), failures)
}

fn round_trip_problem(tokenizer: &Tokenizer, text: &str, ids: &[u32]) -> Option<String> {
    let pieces: Vec<u8> = ids
        .iter()
        .flat_map(|&id| tokenizer.token_to_bytes(id, false))
        .collect();
    let prefixed =
        tokenizer.kind() == TokenizerKind::Spm && tokenizer.add_space_prefix() && !text.is_empty();
    let expected_pieces = if prefixed {
        format!(" {text}")
    } else {
        text.to_string()
    };
    if pieces != expected_pieces.as_bytes() {
        return Some(format!(
            "pieces give {:?}",
            String::from_utf8_lossy(&pieces)
        ));
    }
    let decoded = tokenizer.decode(ids, true).expect("decode");
    if !tokenizer.cleans_spaces() && decoded != text {
        return Some(format!("decodes to {decoded:?}"));
    }
    None
}

fn load(path: &Path) -> Tokenizer {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn llama_cpp_vocab_goldens() {
    let dir = vocab_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "the golden vocab directory {} is missing ({e}); it holds llama.cpp's \
             ggml-vocab-*.gguf test files and must exist beside the project",
            dir.display()
        )
    });
    let mut vocabs: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "gguf"))
        .collect();
    vocabs.sort();
    assert!(!vocabs.is_empty(), "no *.gguf files in {}", dir.display());

    let mut report = Vec::new();
    for vocab in &vocabs {
        let tokenizer = load(vocab);
        let inp = PathBuf::from(format!("{}.inp", vocab.display()));
        let out = PathBuf::from(format!("{}.out", vocab.display()));
        let (count, failures) = check_golden(&tokenizer, &inp, &out);
        let name = vocab.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        eprintln!("{name}: {}/{count} strings match", count - failures.len());
        report.extend(failures.into_iter().map(|f| format!("{name}: {f}")));
    }
    assert!(
        report.is_empty(),
        "golden mismatches:\n{}",
        report.join("\n")
    );
}

#[test]
fn smollm2_model_golden() {
    // The default model is SmolLM2: `TL_TEST_MODEL`, else the model cache
    // that `tl model pull` fills.
    let model = tl_testdata::default_model().unwrap_or_else(|e| panic!("{e}"));
    let tokenizer = load(&model);
    assert_eq!(tokenizer.pre_tokenizer_name(), "smollm");
    let dir = vocab_dir();
    let (count, failures) = check_golden(
        &tokenizer,
        &dir.join("smollm2-tokenize.inp"),
        &dir.join("smollm2-tokenize.out"),
    );
    eprintln!("smollm2: {}/{count} strings match", count - failures.len());
    assert!(
        failures.is_empty(),
        "golden mismatches:\n{}",
        failures.join("\n")
    );
}
