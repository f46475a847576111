//! The architectures beside llama on the CPU against llama.cpp: the logits
//! of tiny synthetic models for a prompt batch and for single-token decode
//! steps, against those llama.cpp computed for the same tokens
//! (`golden/llama_cpp_tiny_ARCH_logits.json`):
//! - Qwen3, `golden/tiny-qwen3-q8_0.gguf` with norm weights varied per
//!   element, references by `scripts/llama_cpp_qwen3_references.py`;
//! - Qwen2, `golden/tiny-qwen2-q8_0.gguf` (`tl model synth --shape
//!   tiny-qwen2 --quant q8_0`: biases normal(0, 0.5)), references by
//!   `scripts/llama_cpp_logits.cpp` (the same cases through llama.cpp's C
//!   API; it reproduces the Qwen3 file's numbers exactly);
//! - Gemma 3, `golden/tiny-gemma3-q8_0.gguf` (`tl model synth --shape
//!   tiny-gemma3 --quant q8_0`: a window of 32 positions on its first layer,
//!   which the 80-token prompt reaches past), references
//!   by `scripts/llama_cpp_logits.cpp`.

use std::path::PathBuf;

use serde_json::Value;
use tl_engine::{Backend, DeviceChoice, GpuOptions, Picked, SequenceCache, Wanted};
use tl_gguf::GgufFile;

const CONTEXT: usize = 256;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// The model of `arch` on the CPU, whose arithmetic the references pin.
fn model(arch: &str) -> Backend {
    let file = GgufFile::open(golden(&format!("tiny-{arch}-q8_0.gguf"))).unwrap();
    let options = GpuOptions::default();
    Backend::load(&file, CONTEXT, DeviceChoice::Cpu, &options)
        .unwrap()
        .backend
}

/// The logits after `tokens` (every row's, or the last row's).
fn logits(model: &Backend, tokens: &[u32], cache: &mut SequenceCache, want: Wanted) -> Vec<f32> {
    match model.step_one(tokens, cache, want).unwrap() {
        Picked::Row(logits) => logits,
        Picked::Token(_) => panic!("a step asked for logits gave a token"),
    }
}

fn references(arch: &str) -> Value {
    let name = format!("llama_cpp_tiny_{arch}_logits.json");
    let text = std::fs::read_to_string(golden(&name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// The largest difference between two rows, relative to the largest
/// magnitude in llama.cpp's.
fn worst_difference(ours: &[f32], theirs: &[f32]) -> f32 {
    assert_eq!(ours.len(), theirs.len());
    let scale = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let worst = ours
        .iter()
        .zip(theirs)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    worst / scale
}

/// The CPU backend follows llama.cpp's arithmetic step by step: on the
/// machine that wrote the references the logits were the same bits (a
/// difference of 0). The bound leaves room for a libm that rounds the RoPE
/// table's cos/sin differently, no more.
const TOLERANCE: f32 = 1e-6;

fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)))
        .unwrap()
}

fn a_prompt_batch_gives_llama_cpp_logits(arch: &str) {
    let model = model(arch);
    let case = &references(arch)["prompt_batch"];
    let tokens = ids(&case["tokens"]);
    let mut cache = model.new_cache(CONTEXT).unwrap();
    let logits = logits(&model, &tokens, &mut cache, Wanted::EveryRow);
    let vocab = model.config().vocab_size;
    for (row, want) in ids(&case["rows"])
        .iter()
        .zip(case["logits"].as_array().unwrap())
    {
        let ours = &logits[*row as usize * vocab..][..vocab];
        let theirs = floats(want);
        let difference = worst_difference(ours, &theirs);
        eprintln!("row {row}: worst difference {difference:.1e}");
        assert!(difference < TOLERANCE, "row {row}: {difference:e}");
        assert_eq!(argmax(ours), argmax(&theirs), "row {row}");
    }
}

fn decode_steps_give_llama_cpp_logits(arch: &str) {
    let model = model(arch);
    let case = &references(arch)["decode"];
    let prompt = ids(&case["prompt"]);
    let mut cache = model.new_cache(CONTEXT).unwrap();
    logits(&model, &prompt, &mut cache, Wanted::Logits);
    let steps = ids(&case["steps"]);
    for (i, (token, want)) in steps
        .iter()
        .zip(case["logits"].as_array().unwrap())
        .enumerate()
    {
        let ours = logits(&model, &[*token], &mut cache, Wanted::Logits);
        let theirs = floats(want);
        let difference = worst_difference(&ours, &theirs);
        eprintln!("step {i}: worst difference {difference:.1e}");
        assert!(difference < TOLERANCE, "step {i}: {difference:e}");
        assert_eq!(argmax(&ours), argmax(&theirs), "step {i}");
    }
}

#[test]
fn qwen3_prompt_batch_gives_llama_cpp_logits() {
    a_prompt_batch_gives_llama_cpp_logits("qwen3");
}

#[test]
fn qwen3_decode_steps_give_llama_cpp_logits() {
    decode_steps_give_llama_cpp_logits("qwen3");
}

#[test]
fn qwen2_prompt_batch_gives_llama_cpp_logits() {
    a_prompt_batch_gives_llama_cpp_logits("qwen2");
}

#[test]
fn qwen2_decode_steps_give_llama_cpp_logits() {
    decode_steps_give_llama_cpp_logits("qwen2");
}

#[test]
fn gemma3_prompt_batch_gives_llama_cpp_logits() {
    a_prompt_batch_gives_llama_cpp_logits("gemma3");
}

#[test]
fn gemma3_decode_steps_give_llama_cpp_logits() {
    decode_steps_give_llama_cpp_logits("gemma3");
}
