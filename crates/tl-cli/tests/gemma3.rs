//! End-to-end checks on a real Gemma 3 (270M, Q4_K_M: Q5_0, Q8_0, Q4_K and
//! Q6_K tensors, a sliding window of 512 on five layers of every six),
//! fetched by `tl model pull gemma3` (the README's test command does):
//! llama.cpp's perplexities and greedy text, and chat with Gemma's turns.

mod common;

use std::path::PathBuf;

use common::{gpl_perplexity_at, greedy_of, run, stderr, stdout, testdata};

fn model() -> PathBuf {
    tl_testdata::gemma3_model().unwrap_or_else(|reason| panic!("{reason}"))
}

/// llama.cpp 0c1e570's `llama-perplexity -c 512` on the GPL text
/// (reference/README.md): windows of 512 never reach past the window.
#[test]
fn perplexity_at_512_equals_llama_cpp() {
    let value = gpl_perplexity_at(&model(), 512);
    assert_eq!(format!("{value:.4}"), "13.8844");
}

/// At `-c 2048` the windowed layers matter. llama.cpp prints 14.4730 when
/// each window is one micro-batch (`-ub 2048`) or its sliding-window cache
/// is full-size (`--swa-full`); with its defaults (micro-batches of 512 into
/// a window cache of 1024 cells) it prints 14.5067, the reference README's
/// value, measured to depend on that cache, not on the model.
#[test]
fn perplexity_at_2048_equals_llama_cpp_with_whole_windows() {
    let value = gpl_perplexity_at(&model(), 2048);
    assert_eq!(format!("{value:.4}"), "14.4730");
}

fn greedy(prompt: &str, tokens: usize) -> String {
    greedy_of(&model(), prompt, tokens)
}

/// The greedy text of every reference prompt is `llama-completion`'s, all
/// 16 tokens: decode steps round K-quant products as llama.cpp's
/// single-row kernels do, a prompt as its batch kernels.
#[test]
fn greedy_text_equals_llama_cpp_s() {
    let file = testdata().join("reference/gemma3_public_greedy_16.jsonl");
    let text = std::fs::read_to_string(file).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let reference: serde_json::Value = serde_json::from_str(line).unwrap();
        let prompt = reference["prompt"].as_str().unwrap();
        let completion = reference["completion"].as_str().unwrap();
        let tokens = reference["n_predict"].as_u64().unwrap() as usize;
        assert_eq!(greedy(prompt, tokens), completion, "{prompt:?}");
    }
}

/// Without a template in the file, a chat prompt is Gemma's turns after
/// BOS: the reply equals the raw completion of that markup, which is also
/// llama.cpp's (`llama-completion -sp` on it: "What is the capital of
/// France?修理\nWhat is the" over 12 tokens; this 270M model is not
/// instruction-tuned).
#[test]
fn chat_prompts_use_gemma_turns() {
    let question = "What is the capital of France?";
    let model = model();
    let out = run(&[
        "generate",
        "-m",
        model.to_str().unwrap(),
        "--temperature",
        "0",
        "-n",
        "12",
        "-v",
        "-p",
        question,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("ChatML"), "{}", stderr(&out));
    let reply = stdout(&out);
    let markup = format!("<start_of_turn>user\n{question}<end_of_turn>\n<start_of_turn>model\n");
    let raw = greedy(&markup, 12);
    assert_eq!(reply.strip_suffix('\n').unwrap_or(&reply), raw);
    assert_eq!(raw, "What is the capital of France?修理\nWhat is the");
}

/// `tl model inspect` shows the windowed layers and their RoPE base.
#[test]
fn inspect_shows_the_sliding_window() {
    let model = model();
    let out = run(&["model", "inspect", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("sliding window    512 positions on 15 of 18 layers (rope base 10000)"),
        "{text}"
    );
    assert!(
        text.contains("none in the file (gemma3's own turns are used)"),
        "{text}"
    );
}
