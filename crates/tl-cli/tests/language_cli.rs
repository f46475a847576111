//! The language through the real binary: `tl check` and `tl run` report errors
//! with the source line and a caret, `tl run` passes arguments and runs benches,
//! `tl repl` evaluates piped input, and a 1000-step decode loop keeps its memory flat.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{default_model, output_with_stdin, stderr, stdout, tl};

fn program(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write program");
    path
}

#[test]
fn check_reports_a_shape_mismatch_with_a_caret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = program(
        dir.path(),
        "shapes.tl",
        "fn f(a: float16[?, 2048], b: float16[1024, ?]) {\n    a @ b\n}\n",
    );
    let out = tl().arg("check").arg(&file).output().expect("run tl");
    let errors = stderr(&out);
    assert!(!out.status.success());
    assert!(
        errors.contains("cannot multiply float16[?, 2048] @ float16[1024, ?]"),
        "{errors}"
    );
    assert!(errors.contains("shapes.tl:2:5"), "{errors}");
    assert!(errors.contains("2 |     a @ b\n  |     ^^^^^"), "{errors}");
}

#[test]
fn runtime_errors_point_at_the_failing_expression() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = program(
        dir.path(),
        "oops.tl",
        "main {\n    let n = int(args()[0]);\n    let x = ones([2, n]);\n    print(x @ ones([3, 2]));\n}\n",
    );
    let out = tl()
        .arg("run")
        .arg(&file)
        .arg("4")
        .output()
        .expect("run tl");
    let errors = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        errors.contains("inner dimensions 4 and 3 differ"),
        "{errors}"
    );
    assert!(errors.contains("oops.tl:4:11"), "{errors}");
}

#[test]
fn runtime_errors_show_the_calls_that_led_there() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = program(
        dir.path(),
        "calls.tl",
        "fn inner(x) { x @ ones([3, 2]) }\nfn outer(x) { inner(x) }\nmain { outer(ones([2, 4])); }\n",
    );
    let out = tl().arg("run").arg(&file).output().expect("run tl");
    let errors = stderr(&out);
    assert!(!out.status.success());
    assert!(errors.contains("calls.tl:1:15"), "{errors}");
    assert!(errors.contains("= note: in `inner`, called at"), "{errors}");
    assert!(errors.contains("calls.tl:2:15"), "{errors}");
    assert!(errors.contains("= note: in `outer`, called at"), "{errors}");
    assert!(errors.contains("calls.tl:3:8"), "{errors}");
}

#[test]
fn parse_errors_and_a_missing_main_are_explained() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = program(dir.path(), "broken.tl", "main {\n    let x = (1 + ;\n}\n");
    let out = tl().arg("run").arg(&broken).output().expect("run tl");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("broken.tl:2:"), "{}", stderr(&out));
    let no_main = program(dir.path(), "lib.tl", "fn f() -> int { 1 }\n");
    let out = tl().arg("run").arg(&no_main).output().expect("run tl");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no `main"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--test"), "{}", stderr(&out));
}

#[test]
fn a_chain_of_thousands_of_operators_checks_and_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let terms = vec!["1"; 4000].join(" + ");
    let file = program(
        dir.path(),
        "chain.tl",
        &format!("main {{\n    print({terms});\n}}\n"),
    );
    let check = tl().arg("check").arg(&file).output().expect("run tl check");
    assert!(check.status.success(), "{}", stderr(&check));
    let run = tl().arg("run").arg(&file).output().expect("run tl run");
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stdout(&run).trim(), "4000");
}

/// A tensor too large for the process is an error, not an abort: under an
/// address-space limit (`ulimit -v`), where the machine's free memory still
/// looks ample, and under the program's own `--max-memory` budget.
#[test]
fn a_failed_allocation_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let big = program(
        dir.path(),
        "big.tl",
        "main {\n    let x = zeros([32768, 32768]);\n    print(x.shape);\n}\n",
    );
    let limited = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 3000000 && exec \"{}\" run \"{}\"",
            env!("CARGO_BIN_EXE_tl"),
            big.display()
        ))
        .output()
        .expect("run sh");
    let errors = stderr(&limited);
    assert_eq!(limited.status.code(), Some(1), "{errors}");
    assert!(errors.contains("cannot allocate 4.3 GB"), "{errors}");
    assert!(errors.contains("big.tl:2:"), "{errors}");

    let budget = tl()
        .args(["run", "--max-memory", "256M"])
        .arg(&big)
        .output()
        .expect("run tl");
    let errors = stderr(&budget);
    assert_eq!(budget.status.code(), Some(1), "{errors}");
    assert!(
        errors.contains("over its memory budget of 268.4 MB"),
        "{errors}"
    );

    // Holding more than the budget, a little at a time, stops at a loop iteration.
    let growing = program(
        dir.path(),
        "growing.tl",
        "main {\n    let kept = [];\n    for i in 0..100000 {\n        kept.push(ones([16384]));\n    }\n}\n",
    );
    let out = tl()
        .args(["run", "--max-memory", "256M"])
        .arg(&growing)
        .output()
        .expect("run tl");
    let errors = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{errors}");
    assert!(errors.contains("over its memory budget"), "{errors}");
    assert!(errors.contains("growing.tl:"), "{errors}");
}

#[test]
fn arguments_reach_the_program() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = program(dir.path(), "args.tl", "main { print(args()); }\n");
    let out = tl()
        .arg("run")
        .arg(&file)
        .args(["a", "--flag", "3"])
        .output()
        .expect("run tl");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "[\"a\", \"--flag\", \"3\"]\n");
}

#[test]
fn benches_print_timings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = program(
        dir.path(),
        "bench.tl",
        "bench small_matmul { let x = ones([16, 16]); x @ x; }\n",
    );
    let out = tl()
        .args(["run", "--bench"])
        .arg(&file)
        .output()
        .expect("run tl");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("bench small_matmul"), "{text}");
    assert!(text.contains("median"), "{text}");
}

/// `tl repl` with `args`, `input` piped in; its output once it has ended.
fn repl(args: &[&str], input: &str) -> std::process::Output {
    output_with_stdin(tl().arg("repl").args(args), input.as_bytes())
}

#[test]
fn repl_evaluates_piped_input() {
    let input = "let x = ones([2, 3]);\nx.sum()\n:type x @ transpose(x)\nfn f(a) {\n    a + 1\n}\nf(41)\n:vars\nnope\n:quit\n";
    let out = repl(&[], input);
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{errors}");
    assert!(text.contains("6.0"), "{text}");
    assert!(text.contains("float32[2, 2]"), "{text}");
    assert!(text.contains("42"), "{text}");
    assert!(text.contains("x: float32[2, 3]"), "{text}");
    assert!(errors.contains("unknown name `nope`"), "{errors}");
}

/// What `truncate` cut off is gone: `cache.keys`/`cache.values` refuse those
/// positions (and any never stored) instead of returning the old sequence's.
#[test]
fn cache_reads_stop_where_the_sequence_does() {
    let model = default_model().display().to_string();
    let input = format!(
        "let m = load_model(\"{model}\");\nlet c = new_cache(m, 8);\n\
         let k = ones([3, m.config.kv_heads, m.config.head_dim]);\n\
         c.store(0, 0, k, k * 2.0);\nc.keys(0, 3).shape\nc.truncate(1);\n\
         c.keys(0, 3)\nc.values(0, 2)\nc.values(0, 1).shape\n\
         let l = m.forward([1, 2, 3, 4], 0, c);\nc.keys(5, 4).shape\nc.truncate(2);\n\
         c.values(5, 4)\nc.keys(5, 2).shape\n:quit\n"
    );
    let out = repl(&[], &input);
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{errors}");
    for shape in ["[3, 3, 64]", "[3, 1, 64]", "[3, 4, 64]", "[3, 2, 64]"] {
        assert!(text.contains(shape), "{shape} missing from {text}");
    }
    for refused in [
        "end 3 is past what layer 0 of the cache holds: positions 0..1",
        "end 2 is past what layer 0 of the cache holds: positions 0..1",
        "end 4 is past what layer 5 of the cache holds: positions 0..2",
    ] {
        assert!(errors.contains(refused), "{refused} missing from {errors}");
    }
}

/// A `model.forward` that fails (no tokens, a token outside the vocabulary,
/// more than the cache holds) leaves the cache as it was, in the REPL where
/// the program goes on after the error.
#[test]
fn a_failed_forward_leaves_the_cache_as_it_was() {
    let model = default_model().display().to_string();
    let input = format!(
        "let m = load_model(\"{model}\");\nlet c = new_cache(m, 8);\nlet l = m.forward([1, 2, 3, 4], 0, c);\n\
         m.forward([], 1, c)\nm.forward([99999999], 1, c)\nm.forward([1, 2, 3, 4, 5, 6, 7, 8], 1, c)\n\
         c.len()\n:quit\n"
    );
    let out = repl(&["--device", "cpu"], &input);
    let (text, errors) = (stdout(&out), stderr(&out));
    assert!(errors.contains("at least one token"), "{errors}");
    assert!(errors.contains("outside the vocabulary"), "{errors}");
    assert!(errors.contains("do not fit a cache of 8"), "{errors}");
    assert_eq!(text.trim().lines().last(), Some("4"), "{text}\n{errors}");
}

/// Resident memory of a process, from /proc (Linux only).
fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn a_long_decode_loop_in_the_language_keeps_memory_flat() {
    if !Path::new("/proc/self/status").exists() {
        eprintln!("skipped: reading a process's memory needs Linux's /proc");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/decode_loop.tl");
    let mut child = tl()
        .arg("run")
        .arg(&script)
        .arg(default_model())
        .arg("500")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tl");
    let pid = child.id();
    let started = Instant::now();
    let mut samples = Vec::new();
    while child.try_wait().expect("poll").is_none() {
        if let Some(kib) = resident_kib(pid) {
            samples.push((started.elapsed(), kib));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("round 2: 500 steps"),
        "{}",
        stdout(&out)
    );
    // The rounds take about as long each: compare the first and second halves
    // of the second round.
    let total = samples.len();
    assert!(total >= 20, "too few memory samples ({total}) to judge");
    let peak = |range: &[(Duration, u64)]| range.iter().map(|s| s.1).max().unwrap_or(0);
    let early = peak(&samples[total / 2..total * 3 / 4]);
    let late = peak(&samples[total * 3 / 4..]);
    assert!(
        late <= early + early / 50,
        "memory grew from {early} KiB to {late} KiB during the second round"
    );
}
