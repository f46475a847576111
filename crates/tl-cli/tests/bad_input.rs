//! Bad model files give a one-line error and exit code 1, never a panic; unknown
//! architectures and tensor types are named.

mod common;

use common::{run, stderr};
use tl_gguf::{GgmlType, GgufWriter, TensorData, Value};

fn assert_one_line_error(args: &[&str], expected: &str) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit status for {args:?}; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "panic for {args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(expected), "{err:?} lacks {expected:?}");
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// A tiny model-shaped GGUF with the given architecture and tensor type.
fn tiny_gguf(architecture: &str, ty: GgmlType, type_bytes: usize) -> Vec<u8> {
    let mut w = GgufWriter::new(3);
    w.set_metadata("general.architecture", Value::String(architecture.into()));
    w.set_metadata(format!("{architecture}.block_count"), Value::U32(1));
    w.add_tensor(
        "token_embd.weight",
        vec![32, 4],
        ty,
        TensorData::Bytes(vec![0; type_bytes]),
    )
    .unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn non_gguf_file_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, "notes.txt", b"just some text, not a model\n");
    for command in ["generate", "chat"] {
        let args = [command, "-m", &path, "-p", "hi"];
        let args: &[&str] = if command == "chat" { &args[..3] } else { &args };
        assert_one_line_error(args, "not a GGUF file");
    }
    assert_one_line_error(&["model", "inspect", &path], "not a GGUF file");
}

/// A folder given as the model is named as one, once (the map's ENODEV,
/// "No such device", said nothing and was printed twice).
#[test]
fn a_directory_given_as_the_model_is_said_to_be_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_string_lossy().into_owned();
    let args = ["generate", "-m", &path, "-p", "hi"];
    assert_one_line_error(&args, &format!("cannot load {path}: is a directory"));
    let err = stderr(&run(&args));
    assert_eq!(err.matches(&path).count(), 1, "{err}");
    assert_one_line_error(&["model", "inspect", &path], "is a directory");
}

/// A negative value may follow a sampling flag without `=`: a penalty below
/// zero is a setting, and a negative temperature is refused by the sampler
/// with its reason, not by the argument parser as "unexpected argument".
#[test]
fn negative_sampling_values_reach_the_sampler() {
    let args = [
        "generate",
        "--raw",
        "-p",
        "hi",
        "-n",
        "1",
        "--temperature",
        "0",
    ];
    let out = run(&[&args[..], &["--presence-penalty", "-0.5"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&run(&["generate", "-p", "hi", "--temperature", "-1"]));
    assert!(!err.contains("unexpected argument"), "{err}");
    assert!(err.contains("temperature"), "{err}");
}

/// `tl run` on a model points to `tl chat -m`.
#[test]
fn running_a_model_file_points_to_chat() {
    let dir = tempfile::tempdir().unwrap();
    let model = write(
        &dir,
        "m.gguf",
        &tiny_gguf("llama", GgmlType::F32, 32 * 4 * 4),
    );
    let out = run(&["run", &model]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("tl chat -m {model}")), "{err}");
}

#[test]
fn truncated_and_corrupted_files_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let good = tiny_gguf("llama", GgmlType::F32, 32 * 4 * 4);
    let truncated = write(&dir, "truncated.gguf", &good[..good.len() / 2]);
    assert_one_line_error(
        &["generate", "-m", &truncated, "-p", "hi"],
        "malformed GGUF at byte",
    );
    let mut corrupted = good.clone();
    corrupted[8..16].copy_from_slice(&u64::MAX.to_le_bytes()); // tensor count
    let corrupted = write(&dir, "corrupted.gguf", &corrupted);
    assert_one_line_error(&["model", "inspect", &corrupted], "tensor_count");
    let missing = dir.path().join("missing.gguf");
    assert_one_line_error(
        &["generate", "-m", missing.to_str().unwrap(), "-p", "hi"],
        "missing.gguf",
    );
}

#[test]
fn unknown_architecture_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "mamba.gguf",
        &tiny_gguf("mamba-9000", GgmlType::F32, 32 * 4 * 4),
    );
    assert_one_line_error(
        &["generate", "-m", &path, "-p", "hi"],
        "architecture 'mamba-9000'",
    );
}

#[test]
fn unsupported_tensor_type_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = tiny_gguf("llama", GgmlType::F32, 32 * 4 * 4);
    // Rewrite the tensor's type id (F32 = 0) to IQ2_XXS (16): the u32 right after
    // the two u64 dims that follow the tensor's name in the header.
    let name = b"token_embd.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 16;
    bytes[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    let path = write(&dir, "iq.gguf", &bytes);
    assert_one_line_error(&["generate", "-m", &path, "-p", "hi"], "IQ2_XXS");
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["chat", "--help"],
        vec!["generate", "--help"],
        vec!["perplexity", "--help"],
        vec!["model", "--help"],
        vec!["model", "inspect", "--help"],
        vec!["model", "pull", "--help"],
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}");
        assert!(common::stdout(&out).contains("Usage:"), "{args:?}");
    }
}

#[test]
fn a_closed_pipe_stops_output_without_a_panic() {
    let mut child = common::tl()
        .args(["model", "inspect", "--all-tensors"])
        .arg(common::default_model())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tl");
    // Close the reading end at once, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(!errors.contains("panicked"), "{errors}");
}

#[test]
fn a_closed_pipe_or_a_full_disk_ends_the_run_with_status_1() {
    let model = common::default_model();
    let mut child = common::tl()
        .args([
            "generate",
            "--device",
            "cpu",
            "-n",
            "64",
            "-p",
            "Count to fifty.",
            "-m",
        ])
        .arg(model)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tl");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let errors = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{errors}");
    assert!(!errors.contains("panicked"), "{errors}");
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped the full-disk half: this system has no /dev/full");
        return;
    };
    for args in [
        vec!["model", "pull"],
        vec!["generate", "--device", "cpu", "-n", "2", "-p", "hi"],
    ] {
        let out = common::tl()
            .args(&args)
            .stdout(full.try_clone().expect("/dev/full"))
            .output()
            .expect("run tl");
        let errors = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {errors}");
        assert!(errors.contains("No space left"), "{args:?}: {errors}");
        assert!(!errors.contains("panicked"), "{args:?}: {errors}");
    }
}

#[test]
fn asking_for_no_tokens_generates_none_and_threads_are_checked() {
    let out = run(&["generate", "--device", "cpu", "-n", "0", "-p", "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(common::stdout(&out).trim(), "");
    let out = run(&[
        "--threads",
        "1",
        "generate",
        "--device",
        "cpu",
        "-n",
        "3",
        "-p",
        "hi",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["model", "pull", "--threads", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Asserts exit code 1, no panic or abort, and a last line that is the error
/// (a warning about the context may come before it).
fn assert_fails_cleanly(args: &[&str], expected: &str) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}; stderr: {err}");
    assert!(!err.contains("panicked"), "panic for {args:?}: {err}");
    let last = err.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: "), "{err}");
    assert!(last.contains(expected), "{last:?} lacks {expected:?}");
}

#[test]
fn contexts_too_large_for_memory_are_errors_before_loading() {
    let model = common::default_model().to_string_lossy().into_owned();
    // 10^8 positions of the default model's KV cache: 2.3 TB.
    assert_fails_cleanly(
        &[
            "generate", "-m", &model, "--device", "cpu", "--ctx", "99999999", "-p", "hi",
        ],
        "not enough memory",
    );
    let dir = tempfile::tempdir().unwrap();
    let text = write(
        &dir,
        "text.txt",
        "a few words to score\n".repeat(50).as_bytes(),
    );
    let max = u64::MAX.to_string();
    assert_fails_cleanly(
        &[
            "perplexity",
            "-m",
            &model,
            "--device",
            "cpu",
            "-f",
            &text,
            "-c",
            &max,
        ],
        "not enough memory",
    );
}

#[test]
fn perplexity_windows_that_score_nothing_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = write(&dir, "text.txt", b"some text\n");
    for window in ["0", "1", "2"] {
        assert_one_line_error(&["perplexity", "-f", &text, "-c", window], "scores nothing");
    }
}
