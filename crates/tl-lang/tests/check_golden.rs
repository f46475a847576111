//! Golden tests of the static checker: every `tests/golden/check/NAME.tl` is
//! loaded (imports resolve next to it) and checked, and its rendered
//! diagnostics must equal `NAME.err` (the line `ok` when there are none).
//!
//! Regenerate the expected files after an intended change with
//!
//! ```text
//! TL_BLESS=1 cargo test -p tl-lang --test check_golden
//! ```
//!
//! and review the diff like code.

use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};

use tl_lang::check::check;
use tl_lang::loader::load_source;

/// The environment variable that rewrites the expected files.
const BLESS: &str = "TL_BLESS";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/check")
}

/// The checker's output for one program, as `tl check` prints it.
fn rendered(path: &Path) -> Result<String, String> {
    let text =
        fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let name = path
        .file_name()
        .map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned());
    let program = match load_source(&name, &text, &golden_dir()) {
        Ok(program) => program,
        // A case that does not parse shows the parse error: that is a mistake
        // in the case, and the golden file makes it visible.
        Err((sources, diagnostic)) => return Ok(diagnostic.render(&sources)),
    };
    let diagnostics = check(&program.items);
    if diagnostics.is_empty() {
        return Ok("ok\n".into());
    }
    Ok(diagnostics
        .iter()
        .map(|d| d.render(&program.sources))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// A line diff of expected and actual text (`-` expected, `+` actual).
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    // Longest common subsequence table, from the ends.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            let _ = writeln!(out, "  {}", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "- {}", a[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "+ {}", b[j]);
            j += 1;
        }
    }
    out
}

#[test]
fn checker_output_matches_golden_files() {
    let bless = std::env::var_os(BLESS).is_some_and(|v| v == "1");
    let mut cases: Vec<PathBuf> = match fs::read_dir(golden_dir()) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "tl"))
            .collect(),
        Err(e) => panic!("cannot list {}: {e}", golden_dir().display()),
    };
    cases.sort();
    assert!(
        !cases.is_empty(),
        "no golden cases in {}",
        golden_dir().display()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let expected_path = case.with_extension("err");
        let actual = match rendered(case) {
            Ok(actual) => actual,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        if bless {
            if let Err(e) = fs::write(&expected_path, &actual) {
                failures.push(format!("cannot write {}: {e}", expected_path.display()));
            }
            continue;
        }
        match fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{} differs from the checker's output (- expected, + actual):\n{}",
                expected_path.display(),
                diff(&expected, &actual)
            )),
            Err(_) => failures.push(format!(
                "{} is missing; the checker says:\n{actual}",
                expected_path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed (rerun with {BLESS}=1 to accept the new output):\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
