//! The language's own test suite: every `tests/lang/*.tl` program's `test` blocks
//! run through `tl run --test`, plus the examples' tests (`examples/*.tl`).

mod common;

use std::path::{Path, PathBuf};

use common::{default_model, stderr, stdout, tl};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tl"))
        .collect();
    files.sort();
    files
}

/// Runs `tl run --test FILE ARGS` and fails with its output unless every test passed.
fn run_tests(file: &Path, args: &[&str]) -> String {
    let out = tl()
        .args(["run", "--test"])
        .arg(file)
        .args(args)
        .env("TL_TEST_MODEL", default_model())
        .output()
        .expect("cannot start tl");
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(
        out.status.success() && text.contains("test result: ok."),
        "{} failed:\n{text}\n{errors}",
        file.display()
    );
    assert!(
        !text.contains("running 0 tests"),
        "{} has no tests",
        file.display()
    );
    text
}

#[test]
fn every_language_test_program_passes() {
    let files = tl_files(&workspace().join("tests/lang"));
    assert!(files.len() >= 5, "the suite lost its files: {files:?}");
    for file in files {
        run_tests(&file, &[]);
    }
}

#[test]
fn llama_written_in_the_language_matches_the_engine() {
    let model = default_model().to_string_lossy().into_owned();
    let text = run_tests(&workspace().join("examples/llama.tl"), &[&model]);
    assert!(text.contains("worst relative logit error"), "{text}");
}

#[test]
fn a_failing_test_fails_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("failing.tl");
    std::fs::write(
        &file,
        "test passes { assert(true); }\ntest fails { assert_eq(1 + 1, 3); }\n",
    )
    .expect("write");
    let out = tl()
        .args(["run", "--test"])
        .arg(&file)
        .output()
        .expect("run");
    let text = stdout(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("test fails ... FAILED"), "{text}");
    assert!(text.contains("1 passed; 1 failed"), "{text}");
    assert!(
        text.contains("failing.tl:2:"),
        "the failure points at its line: {text}"
    );
}

#[test]
fn a_folder_runs_the_tests_of_every_file_in_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
    write("a.tl", "test first { assert(true); }\n");
    write("b.tl", "test second { assert_eq(2, 2); }\n");
    write("notes.txt", "not a program");
    let run = || {
        tl().args(["run", "--test"])
            .arg(dir.path())
            .output()
            .expect("run")
    };
    let out = run();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.contains("test first ... ok"), "{text}");
    assert!(text.contains("test second ... ok"), "{text}");

    write("c.tl", "test third { assert_eq(1, 2); }\n");
    let out = run();
    let text = stdout(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("test second ... ok"), "{text}");
    assert!(text.contains("test third ... FAILED"), "{text}");
    assert!(text.contains("files with failures:"), "{text}");
    assert!(text.contains("c.tl"), "{text}");

    let plain = tl().arg("run").arg(dir.path()).output().expect("run");
    assert!(!plain.status.success());
    assert!(stderr(&plain).contains("is a folder"), "{}", stderr(&plain));
}

#[test]
fn llama_example_refuses_another_architecture() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = dir.path().join("tiny-qwen3.gguf");
    let synth = tl()
        .args([
            "model",
            "synth",
            "--shape",
            "tiny-qwen3",
            "--quant",
            "q8_0",
            "-o",
        ])
        .arg(&model)
        .output()
        .expect("run tl model synth");
    assert!(synth.status.success(), "{}", stderr(&synth));
    let out = tl()
        .arg("run")
        .arg(workspace().join("examples/llama.tl"))
        .arg(&model)
        .output()
        .expect("run llama.tl");
    let errors = stderr(&out);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        errors.contains("llama-architecture models only")
            && errors.contains("general.architecture is `qwen3`"),
        "{errors}"
    );
}

#[test]
fn llama_example_writes_what_tl_generate_writes() {
    let model = default_model().to_string_lossy().into_owned();
    let question = "Name a primary color.";
    let script = tl()
        .arg("run")
        .arg(workspace().join("examples/llama.tl"))
        .args([&model, question])
        .output()
        .expect("run llama.tl");
    assert!(script.status.success(), "{}", stderr(&script));
    let engine = tl()
        .args([
            "generate",
            "-m",
            &model,
            "-p",
            question,
            "--temperature",
            "0",
            "-n",
            "128",
        ])
        .output()
        .expect("run tl generate");
    assert!(engine.status.success(), "{}", stderr(&engine));
    // `print` ends the script's text with a newline; `tl generate` writes none.
    assert_eq!(stdout(&script).trim_end(), stdout(&engine).trim_end());
    assert!(!stdout(&engine).trim().is_empty());
}

#[test]
fn chat_example_answers_and_leaves_on_an_empty_line() {
    let mut child = tl()
        .arg("run")
        .arg(workspace().join("examples/chat.tl"))
        .arg(default_model())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start chat.tl");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"Say hello.\n\n").expect("write");
    }
    let out = child.wait_with_output().expect("chat output");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let reply = text.split("> ").nth(1).unwrap_or("");
    assert!(reply.trim().len() > 1, "no reply in: {text}");
}
