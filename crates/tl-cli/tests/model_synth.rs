//! `tl model synth` through the real binary: a tiny synthetic model that
//! `tl model inspect` describes and `tl generate` runs, byte-identical files for a
//! seed, and one-line errors (exit 1, no panic, no file left) for bad input.

mod common;

use std::path::{Path, PathBuf};

use common::{run, stderr, stdout, testdata};
use tl_gguf::{GgmlType, GgufWriter, TensorData, Value};

/// Runs `tl model synth ARGS -o OUT` and checks it succeeded.
fn synth(args: &[&str], out: &Path) {
    let out_arg = out.to_str().unwrap();
    let mut full = vec!["model", "synth"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", out_arg]);
    let output = run(&full);
    assert!(
        output.status.success(),
        "{full:?} failed: {}",
        stderr(&output)
    );
    assert!(stdout(&output).contains("wrote"), "{}", stdout(&output));
}

fn spm_vocab() -> PathBuf {
    testdata().join("vocab/ggml-vocab-llama-spm.gguf")
}

#[test]
fn a_tiny_model_is_inspected_and_generates() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    synth(&["--shape", "tiny", "--quant", "q4_0"], &model);
    let model = model.to_str().unwrap();

    let inspect = run(&["model", "inspect", model]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let text = stdout(&inspect);
    for expected in [
        "architecture      llama",
        "blocks            2",
        "heads (q / kv)    4 / 2",
        "vocabulary size   512",
        "Q4_0      16 tensors",
        "tokens            512",
        "general.name = \"synthetic tiny q4_0\"",
    ] {
        assert!(
            text.contains(expected),
            "inspect lacks {expected:?}:\n{text}"
        );
    }

    let generate = run(&[
        "generate", "-m", model, "--raw", "-p", "hi", "-n", "4", "--stats",
    ]);
    let err = stderr(&generate);
    assert!(generate.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // BOS, "▁h", "i": the made-up vocabulary of 512 has no two-letter "hi".
    assert!(err.contains("prompt 3 tokens"), "{err}");
    assert!(err.contains("generated"), "{err}");
}

#[test]
fn a_tiny_qwen3_model_is_inspected_and_generates_the_same_text_twice() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-qwen3.gguf");
    synth(&["--shape", "tiny-qwen3", "--quant", "q8_0"], &model);
    let model = model.to_str().unwrap();
    let inspect = stdout(&run(&["model", "inspect", model]));
    for expected in [
        "architecture      qwen3",
        "head dimension    32",
        "blk.0.attn_q_norm.weight",
    ] {
        assert!(
            inspect.contains(expected),
            "inspect lacks {expected:?}:\n{inspect}"
        );
    }
    let generate = || {
        let out = run(&[
            "generate", "-m", model, "--raw", "-p", "hi", "-n", "12", "--seed", "3",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let first = generate();
    assert!(!first.is_empty());
    assert_eq!(first, generate());
}

#[test]
fn every_weight_type_runs() {
    let dir = tempfile::tempdir().unwrap();
    for quant in ["f16", "q8_0", "q4_1"] {
        let model = dir.path().join(format!("tiny-{quant}.gguf"));
        synth(&["--shape", "tiny", "--quant", quant], &model);
        let out = run(&[
            "generate",
            "-m",
            model.to_str().unwrap(),
            "--raw",
            "-p",
            "hi",
            "-n",
            "2",
        ]);
        assert!(out.status.success(), "{quant}: {}", stderr(&out));
    }
}

#[test]
fn a_vocabulary_file_gives_the_model_its_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-spm.gguf");
    let vocab = spm_vocab();
    let vocab = vocab.to_str().unwrap();
    synth(
        &["--shape", "tiny", "--quant", "q8_0", "--vocab", vocab],
        &model,
    );
    let model = model.to_str().unwrap();
    let inspect = stdout(&run(&["model", "inspect", model]));
    assert!(inspect.contains("tokens            32000"), "{inspect}");
    assert!(inspect.contains("vocabulary size   32000"), "{inspect}");
    let out = run(&[
        "generate",
        "-m",
        model,
        "--raw",
        "-p",
        "Hello world",
        "-n",
        "3",
        "--stats",
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    // llama-spm: BOS, "▁Hello", "▁world".
    assert!(err.contains("prompt 3 tokens"), "{err}");
}

#[test]
fn the_seed_decides_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    synth(&["--shape", "tiny", "--quant", "q4_1"], &path("a.gguf"));
    synth(
        &["--shape", "tiny", "--quant", "q4_1", "--seed", "0"],
        &path("b.gguf"),
    );
    synth(
        &["--shape", "tiny", "--quant", "q4_1", "--seed", "9"],
        &path("c.gguf"),
    );
    let read = |name: &str| std::fs::read(path(name)).unwrap();
    assert_eq!(read("a.gguf"), read("b.gguf"));
    assert_ne!(read("a.gguf"), read("c.gguf"));
}

/// Runs a synth that must fail with one line naming `expected`, leaving no file.
fn assert_refused(args: &[&str], out: &Path, expected: &str) {
    let mut full = vec!["model", "synth"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let output = run(&full);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{full:?}: {err}");
    assert!(!err.contains("panicked"), "{full:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(expected), "{err:?} lacks {expected:?}");
    if !out.is_dir() {
        assert!(!out.exists(), "{} was written", out.display());
    }
    let mut temp = out.as_os_str().to_owned();
    temp.push(".tmp");
    assert!(!Path::new(&temp).exists(), "temporary file left behind");
}

#[test]
fn bad_names_are_refused_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    assert_refused(
        &["--shape", "gpt-5", "--quant", "q4_0"],
        &out,
        "--shape: unknown shape 'gpt-5' (known: tiny, tiny-qwen3, tiny-qwen2, tiny-gemma3, tiny-wide, tinyllama, smollm2, qwen3-0.6b, llama-8b, gemma3-270m)",
    );
    assert_refused(
        &["--shape", "tiny", "--quant", "q5_k"],
        &out,
        "--quant: unknown weight type 'q5_k' (known: f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k)",
    );
    assert_refused(
        &["--shape", "tiny", "--quant", "f16", "--arch", "mamba"],
        &out,
        "--arch: unknown architecture 'mamba'",
    );
}

#[test]
fn an_architecture_that_disagrees_with_the_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    assert_refused(
        &[
            "--shape",
            "qwen3-0.6b",
            "--quant",
            "q8_0",
            "--arch",
            "llama",
        ],
        &out,
        "shape qwen3-0.6b is a qwen3 model, not llama",
    );
    // Agreeing is fine.
    synth(
        &["--shape", "tiny", "--quant", "q8_0", "--arch", "llama"],
        &out,
    );
}

#[test]
fn unwritable_outputs_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let missing_folder = dir.path().join("no/such/folder/out.gguf");
    assert_refused(
        &["--shape", "llama-8b", "--quant", "f16"],
        &missing_folder,
        "does not exist",
    );
    assert_refused(
        &["--shape", "tiny", "--quant", "f16"],
        dir.path(),
        "it is a folder",
    );
}

#[test]
fn bad_vocabulary_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.gguf");
    let missing = dir.path().join("missing-vocab.gguf");
    assert_refused(
        &[
            "--shape",
            "tiny",
            "--quant",
            "q4_0",
            "--vocab",
            missing.to_str().unwrap(),
        ],
        &out,
        "cannot read the vocabulary file",
    );

    let mut writer = GgufWriter::new(3);
    writer.set_metadata("general.architecture", Value::String("llama".into()));
    writer
        .add_tensor(
            "x",
            vec![32],
            GgmlType::F32,
            TensorData::Bytes(vec![0; 128]),
        )
        .unwrap();
    let no_tokens = dir.path().join("no-tokens.gguf");
    writer.write_to_path(&no_tokens).unwrap();
    assert_refused(
        &[
            "--shape",
            "tiny",
            "--quant",
            "q4_0",
            "--vocab",
            no_tokens.to_str().unwrap(),
        ],
        &out,
        "no token list (tokenizer.ggml.tokens)",
    );
}

#[test]
fn help_lists_the_shapes_and_their_sizes() {
    let out = run(&["model", "synth", "--help"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for expected in [
        "Usage:",
        "--shape",
        "--vocab",
        "qwen3-0.6b",
        "tinyllama",
        "2.2 GB",
        "16.1 GB",
    ] {
        assert!(text.contains(expected), "help lacks {expected:?}:\n{text}");
    }
}

/// A K-quant mix takes the types `tl model quantize` would give each tensor,
/// and runs.
#[test]
fn a_k_quant_mix_has_the_recipes_types_and_generates() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-wide-q4_k_m.gguf");
    synth(&["--shape", "tiny-wide", "--quant", "q4_k_m"], &model);
    let model = model.to_str().unwrap();
    let inspect = stdout(&run(&["model", "inspect", model, "--all-tensors"]));
    // Of two layers only the last is in llama.cpp's "last eighth", so its
    // attn_v and ffn_down get Q6_K, as does the separate output matrix.
    let type_of = |name: &str| {
        let line = inspect
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{inspect}"));
        line.split_whitespace().nth(1).unwrap().to_string()
    };
    for (name, ty) in [
        ("blk.0.attn_v.weight", "Q4_K"),
        ("blk.0.ffn_down.weight", "Q4_K"),
        ("blk.1.attn_v.weight", "Q6_K"),
        ("blk.1.ffn_down.weight", "Q6_K"),
        ("output.weight", "Q6_K"),
        ("token_embd.weight", "Q4_K"),
        ("blk.1.ffn_norm.weight", "F32"),
    ] {
        assert_eq!(type_of(name), ty, "{name}");
    }
    let generate = run(&["generate", "-m", model, "--raw", "-p", "hi", "-n", "4"]);
    assert!(generate.status.success(), "{}", stderr(&generate));
}
