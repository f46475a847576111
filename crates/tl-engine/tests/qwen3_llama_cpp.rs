//! Qwen3 on the CPU against llama.cpp: the logits of a tiny synthetic Qwen3
//! model (`golden/tiny-qwen3-q8_0.gguf`, norm weights varied per element)
//! for a prompt batch and for single-token decode steps, against those
//! llama.cpp computed for the same tokens
//! (`golden/llama_cpp_tiny_qwen3_logits.json`, written by
//! `scripts/llama_cpp_qwen3_references.py`, which says how).

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

/// The model on the CPU, whose arithmetic the references pin.
fn model() -> Backend {
    let file = GgufFile::open(golden("tiny-qwen3-q8_0.gguf")).unwrap();
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

fn references() -> Value {
    let text = std::fs::read_to_string(golden("llama_cpp_tiny_qwen3_logits.json")).unwrap();
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

#[test]
fn a_prompt_batch_gives_llama_cpp_logits() {
    let model = model();
    let case = &references()["prompt_batch"];
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

#[test]
fn decode_steps_give_llama_cpp_logits() {
    let model = model();
    let case = &references()["decode"];
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
