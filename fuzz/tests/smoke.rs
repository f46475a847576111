//! The harness's own tests, quick enough for every `cargo test`: each target
//! fuzzes for a few seconds (it must start, run inputs and write its
//! summary), and the hidden `selftest` target's inputs check that a panic, an
//! abort, a stack overflow, an allocation past the cap and a hang are each
//! caught, named, and followed by a fresh worker. Finding bugs is the
//! campaign's job (`scripts/fuzz.sh`), not this test's.

use std::path::Path;
use std::process::Command;

const FUZZER: &str = env!("CARGO_BIN_EXE_tl-fuzz");

/// Fuzzes `target` briefly and returns its summary.
fn fuzz_briefly(target: &str) -> String {
    let out = tempfile::tempdir().expect("a temporary folder");
    let output = Command::new(FUZZER)
        .args([target, "--seconds", "3", "--minimize-seconds", "2"])
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("tl-fuzz runs");
    assert!(
        output.status.success(),
        "tl-fuzz {target} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary =
        std::fs::read_to_string(out.path().join(target).join("summary.txt")).expect("a summary");
    eprintln!("{summary}");
    summary
}

fn field(summary: &str, key: &str) -> f64 {
    summary
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in:\n{summary}"))
}

fn smoke(target: &str) {
    let summary = fuzz_briefly(target);
    assert!(field(&summary, "executions") >= 10.0, "{summary}");
}

#[test]
fn gguf() {
    smoke("gguf");
}

#[test]
fn vocab() {
    smoke("vocab");
}

#[test]
fn tokenize() {
    smoke("tokenize");
}

#[test]
fn template() {
    smoke("template");
}

#[test]
fn lang() {
    smoke("lang");
}

#[test]
fn http() {
    smoke("http");
}

/// Replays `inputs` on the selftest target and returns the report.
fn replay(dir: &Path, inputs: &[&str]) -> (bool, String) {
    let paths: Vec<_> = inputs
        .iter()
        .map(|input| {
            let path = dir.join(input);
            std::fs::write(&path, input).expect("write an input");
            path
        })
        .collect();
    let output = Command::new(FUZZER)
        // Generous: a failed allocation prints a backtrace first, and
        // symbolising a test build takes a while.
        .args([
            "selftest",
            "--timeout-ms",
            "3000",
            "--memory-mb",
            "1024",
            "--replay",
        ])
        .args(&paths)
        .output()
        .expect("tl-fuzz runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn every_kind_of_failure_is_caught_and_named() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (passed, report) = replay(
        dir.path(),
        &[
            "ok", "panic", "ok2", "abort", "overflow", "oom", "hang", "ok3",
        ],
    );
    assert!(!passed, "{report}");
    let expect = [
        "ok: ok (ok)",
        "panic: FAILED: panic at fuzz/src/targets/selftest.rs",
        "ok2: ok (ok)",
        "abort: FAILED: crash (signal 6)",
        "overflow: FAILED: stack overflow",
        "oom: FAILED: out of memory (allocation failed)",
        "hang: FAILED: timeout",
        "ok3: ok (ok)",
    ];
    for line in expect {
        assert!(report.contains(line), "missing {line:?} in:\n{report}");
    }
}

#[test]
fn clean_inputs_replay_cleanly() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (passed, report) = replay(dir.path(), &["ok", "fine"]);
    assert!(passed, "{report}");
}

/// Every input a campaign found and kept in `fuzz/crashes/TARGET/` replays
/// cleanly: each finding stays fixed.
#[test]
fn kept_crashes_stay_fixed() {
    let crashes = Path::new(env!("CARGO_MANIFEST_DIR")).join("crashes");
    let mut replayed = 0;
    for target in std::fs::read_dir(&crashes).expect("fuzz/crashes") {
        let target = target.expect("a directory entry").path();
        if !target.is_dir() {
            continue;
        }
        let name = target.file_name().and_then(|n| n.to_str()).expect("a name");
        let mut inputs: Vec<_> = std::fs::read_dir(&target)
            .expect("a target's crashes")
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        inputs.sort();
        let output = Command::new(FUZZER)
            .args([name, "--timeout-ms", "20000", "--replay"])
            .args(&inputs)
            .output()
            .expect("tl-fuzz runs");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}:\n{report}");
        replayed += inputs.len();
    }
    assert!(replayed >= 2, "only {replayed} kept crashes found");
}
