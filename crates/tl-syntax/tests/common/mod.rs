//! Helpers shared by the integration tests: finding the golden inputs and
//! comparing output with the expected files (or rewriting them when blessing).

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The environment variable that rewrites expected files instead of checking.
pub const BLESS_VAR: &str = "TL_BLESS";

/// `tests/golden/<suite>`.
pub fn golden_dir(suite: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
        .join(suite)
}

/// The `.tl` inputs of a suite, sorted by name.
pub fn inputs(suite: &str) -> Vec<PathBuf> {
    let dir = golden_dir(suite);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable golden directory").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "tl"))
        .collect();
    paths.sort();
    paths
}

/// The `.tl` inputs of every suite.
pub fn all_inputs() -> Vec<PathBuf> {
    ["lexer", "parse_errors", "parse_ok", "repl"]
        .iter()
        .flat_map(|suite| inputs(suite))
        .collect()
}

/// The file name of a path, which golden outputs use as the source name.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Renders every input of `suite` and compares with the file of the same stem
/// and extension `expected_ext`; panics listing every mismatch. With
/// `TL_BLESS=1` the expected files are rewritten instead.
pub fn check_suite(suite: &str, expected_ext: &str, render: impl Fn(&str, &str) -> String) {
    let bless = std::env::var(BLESS_VAR).is_ok_and(|value| value == "1");
    let mut failures = String::new();
    let paths = inputs(suite);
    assert!(!paths.is_empty(), "no inputs in {suite}");
    for input in paths {
        let text = std::fs::read_to_string(&input).expect("readable input");
        let actual = render(&file_name(&input), &text);
        let expected_path = input.with_extension(expected_ext);
        if bless {
            std::fs::write(&expected_path, &actual).expect("writable golden file");
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => {
                let _ = writeln!(failures, "{}", diff(&expected_path, &expected, &actual));
            }
            Err(_) => {
                let _ = writeln!(
                    failures,
                    "{} is missing; its output would be:\n{actual}",
                    expected_path.display()
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{failures}\nIf the new output is right, rerun with {BLESS_VAR}=1 to update the files."
    );
}

/// The differing middle of two texts, with a little context.
fn diff(path: &Path, expected: &str, actual: &str) -> String {
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = format!(
        "golden mismatch in {} at line {}\n--- expected\n+++ actual\n",
        path.display(),
        prefix + 1
    );
    for line in &old[prefix.saturating_sub(2)..prefix] {
        let _ = writeln!(out, " {line}");
    }
    for line in &old[prefix..old.len() - suffix] {
        let _ = writeln!(out, "-{line}");
    }
    for line in &new[prefix..new.len() - suffix] {
        let _ = writeln!(out, "+{line}");
    }
    if expected.ends_with('\n') != actual.ends_with('\n') {
        out.push_str("(the final newline differs)\n");
    }
    out
}
