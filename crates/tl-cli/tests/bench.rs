//! `tl bench` through the real binary on a tiny synthetic model (CPU): the JSON
//! report names each test, sampled generation is its own test, and bad settings
//! give one-line errors.

mod common;

use std::path::Path;

use common::{run, stderr, stdout};

fn tiny_model(dir: &Path) -> String {
    let model = dir.join("tiny.gguf");
    let model = model.to_str().unwrap().to_owned();
    let out = run(&[
        "model", "synth", "--shape", "tiny", "--quant", "q4_0", "-o", &model,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    model
}

fn bench_json(args: &[&str]) -> serde_json::Value {
    let mut full = vec!["bench", "--device", "cpu", "--reps", "1", "--json"];
    full.extend_from_slice(args);
    let out = run(&full);
    assert!(out.status.success(), "{full:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn test_names(report: &serde_json::Value) -> Vec<String> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["test"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn reports_prompt_and_generation_tests() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let report = bench_json(&["-m", &model, "-p", "16,8", "-n", "4"]);
    assert_eq!(test_names(&report), ["pp16", "pp8", "tg4"]);
    for result in report["results"].as_array().unwrap() {
        assert!(result["tokens_per_second_median"].as_f64().unwrap() > 0.0);
        assert_eq!(
            result["syncs_per_token"].as_f64(),
            Some(0.0),
            "the CPU never syncs"
        );
    }
    let report = bench_json(&[
        "-m",
        &model,
        "-p",
        "0",
        "-n",
        "4",
        "--depth",
        "6",
        "--temperature",
        "0.7",
    ]);
    assert_eq!(test_names(&report), ["tg4 sampled @ d6"]);
}

#[test]
fn a_batch_of_sequences_counts_every_sequence_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let report = bench_json(&[
        "-m", &model, "-p", "0", "-n", "4", "-b", "3", "--depth", "5",
    ]);
    assert_eq!(test_names(&report), ["tg4 x3 @ d5"]);
    let result = &report["results"][0];
    assert_eq!(result["tokens"].as_u64(), Some(12));
    assert_eq!(result["batch"].as_u64(), Some(3));
    assert!(result["tokens_per_second_median"].as_f64().unwrap() > 0.0);
    let sampled = bench_json(&[
        "-m",
        &model,
        "-p",
        "0",
        "-n",
        "3",
        "-b",
        "2",
        "--temperature",
        "0.7",
    ]);
    assert_eq!(test_names(&sampled), ["tg3 sampled x2"]);

    let out = run(&["bench", "-m", &model, "--device", "cpu", "-b", "0"]);
    assert_eq!(out.status.code(), Some(2), "clap refuses a batch of 0");
    assert!(stderr(&out).contains("--batch"), "{}", stderr(&out));
}

#[test]
fn profiling_on_the_cpu_says_there_is_nothing_to_profile() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let out = run(&[
        "bench",
        "-m",
        &model,
        "--device",
        "cpu",
        "-p",
        "8",
        "-n",
        "2",
        "--reps",
        "1",
        "--profile",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no profile follows"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("profile of"), "{}", stdout(&out));
}

#[test]
fn a_context_too_small_for_the_tests_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let out = run(&[
        "bench", "-m", &model, "--device", "cpu", "-p", "16", "-n", "0", "--ctx", "8",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("need a context of 16 tokens"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A command may run past the training context (llama-bench's `-d` does);
/// it is warned, not cut, unlike `tl serve`, whose caches requests share.
#[test]
fn a_depth_past_the_training_context_runs_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    // The tiny shape was trained for 256 positions.
    let out = run(&[
        "bench", "-m", &model, "--device", "cpu", "-p", "0", "-n", "2", "--depth", "300", "--reps",
        "1", "--json",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("exceeds the 256 tokens"), "{err}");
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(test_names(&report), ["tg2 @ d300"]);
}
