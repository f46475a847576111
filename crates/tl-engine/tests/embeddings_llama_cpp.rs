//! Embeddings against llama.cpp's: `testdata/reference/embeddings.jsonl`
//! holds `llama-embedding --pooling mean --embd-normalize 2` vectors of a
//! few texts for the default model and Gemma 3 270M
//! (`scripts/llama_cpp_embedding_references.py`). Each must come back
//! within 1e-4 cosine distance, on the CPU and, where one can be opened, a
//! GPU; and a prompt cut into chunks pools as one pass does.

mod common;

use std::path::Path;

use common::load;
use tl_engine::embedding::{cosine_distance, embed};
use tl_engine::{Backend, DeviceChoice, ModelFile, Session};

/// The most a vector may differ from llama.cpp's (`1 − cos`).
const MAX_COSINE_DISTANCE: f64 = 1e-4;

struct Reference {
    text: String,
    prompt_tokens: usize,
    embedding: Vec<f32>,
}

/// The reference rows of model `name` (`smollm2` or `gemma3`).
fn references(name: &str) -> Vec<Reference> {
    let path = tl_testdata::testdata().join("reference/embeddings.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<Reference> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|row| row["model"] == name)
        .map(|row| Reference {
            text: row["text"].as_str().unwrap().to_owned(),
            prompt_tokens: row["prompt_tokens"].as_u64().unwrap() as usize,
            embedding: row["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect(),
        })
        .collect();
    assert!(!rows.is_empty(), "no references for {name}");
    rows
}

/// Embeds every reference text of `name` with the model at `path` on
/// `device` and checks each against llama.cpp's; returns the largest
/// distance (`None` where `device` is a GPU this machine lacks).
fn check_references(name: &str, path: &Path, device: DeviceChoice) -> Option<f64> {
    let backend = load(path, device)?;
    let file = ModelFile::open(path).unwrap();
    let mut session = Session::new(&backend, common::CONTEXT).unwrap();
    let mut worst: f64 = 0.0;
    for reference in references(name) {
        let tokens = file.tokenizer.encode(&reference.text, true, true).unwrap();
        assert_eq!(
            tokens.len(),
            reference.prompt_tokens,
            "{:?}",
            reference.text
        );
        let ours = embed(&backend, &mut session, &tokens, 0, None).unwrap();
        let distance = cosine_distance(&ours, &reference.embedding);
        eprintln!(
            "{name} on {device:?}: {distance:.2e} for {:?}",
            reference.text
        );
        assert!(
            distance < MAX_COSINE_DISTANCE,
            "{name}: {distance:e} from llama.cpp for {:?}",
            reference.text
        );
        worst = worst.max(distance);
    }
    eprintln!("{name} on {device:?}: largest cosine distance {worst:.2e}");
    Some(worst)
}

fn gemma3() -> std::path::PathBuf {
    tl_testdata::gemma3_model().unwrap_or_else(|reason| panic!("{reason}"))
}

#[test]
fn default_model_equals_llama_cpp_on_cpu() {
    check_references("smollm2", &common::default_model(), DeviceChoice::Cpu);
}

#[test]
fn default_model_equals_llama_cpp_on_cuda() {
    check_references("smollm2", &common::default_model(), DeviceChoice::Cuda);
}

#[test]
fn gemma3_equals_llama_cpp_on_cpu() {
    check_references("gemma3", &gemma3(), DeviceChoice::Cpu);
}

#[test]
fn gemma3_equals_llama_cpp_on_cuda() {
    check_references("gemma3", &gemma3(), DeviceChoice::Cuda);
}

/// The embedding of `tokens` in chunks of `chunk` tokens (0: one pass).
fn embedding_in_chunks(backend: &Backend, tokens: &[u32], chunk: usize) -> Vec<f32> {
    let mut session = Session::new(backend, common::CONTEXT).unwrap();
    embed(backend, &mut session, tokens, chunk, None).unwrap()
}

common::backend_tests! {
    /// A prompt run in chunks (the server's prefill chunks) pools to the
    /// embedding of one pass: each token's hidden state sees the same
    /// tokens either way. The chunks' passes are shaped differently, so the
    /// last bits may differ, not the direction.
    fn chunks_pool_as_one_pass(backend: &Backend, model: &Path) {
        let vocab = backend.config().vocab_size as u32;
        let tokens: Vec<u32> = (0..40u32).map(|i| (i * 7919 + 13) % vocab).collect();
        let whole = embedding_in_chunks(backend, &tokens, 0);
        for chunk in [1, 7, 16] {
            let parts = embedding_in_chunks(backend, &tokens, chunk);
            let distance = cosine_distance(&whole, &parts);
            assert!(distance < 1e-5, "{}: chunks of {chunk}: {distance:e}", model.display());
        }
        let norm: f64 = whole.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        assert!((norm - 1.0).abs() < 1e-5, "not unit length: {norm}");
    }
}
