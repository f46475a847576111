//! `docs/language.md` is tested: every ```tl example in it is run (a `main` is
//! run, `test` blocks are run with --test, both when it has both, anything
//! else is checked), an example followed by a ```text block must print
//! exactly that, and every builtin of the language is documented.

mod common;

use std::path::{Path, PathBuf};

use common::{default_model, stderr, stdout, tl};

fn language_md() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    (path, text)
}

/// A fenced code block: its language tag, body, and the lines of its opening
/// and closing fences.
struct Fence {
    lang: String,
    body: String,
    line: usize,
    end: usize,
}

fn fences(markdown: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut current: Option<Fence> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match (&mut current, trimmed.strip_prefix("```")) {
            (None, Some(lang)) => {
                current = Some(Fence {
                    lang: lang.trim().to_string(),
                    body: String::new(),
                    line: i + 1,
                    end: 0,
                })
            }
            (Some(fence), Some("")) => {
                fence.end = i + 1;
                out.extend(current.take());
            }
            (Some(fence), _) => {
                fence.body.push_str(line);
                fence.body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

#[test]
fn every_example_runs_and_prints_what_the_docs_say() {
    let (path, text) = language_md();
    let blocks = fences(&text);
    let dir = tempfile::tempdir().expect("temp dir");
    // The `read_file` example reads this.
    std::fs::write(dir.path().join("data.txt"), "hello from data.txt\n").expect("write data.txt");
    let mut examples = 0;
    for (i, fence) in blocks.iter().enumerate() {
        if fence.lang != "tl" {
            continue;
        }
        examples += 1;
        let file = dir.path().join(format!("example_line_{}.tl", fence.line));
        std::fs::write(&file, &fence.body).expect("write example");
        let has_tests = fence.body.contains("\ntest ") || fence.body.starts_with("test ");
        let mode: &[&str] = if fence.body.contains("main {") {
            &["run"]
        } else if has_tests {
            &["run", "--test"]
        } else {
            &["check"]
        };
        // An example with both runs its `main` below, and its tests here.
        if has_tests && mode == ["run"] {
            let tests = tl()
                .args(["run", "--test"])
                .arg(&file)
                .env("TL_TEST_MODEL", default_model())
                .output()
                .expect("cannot start tl");
            assert!(
                tests.status.success(),
                "{}:{}: the example's tests fail:\n{}{}",
                path.display(),
                fence.line,
                stdout(&tests),
                stderr(&tests)
            );
        }
        let out = tl()
            .args(mode)
            .arg(&file)
            .env("TL_TEST_MODEL", default_model())
            .output()
            .expect("cannot start tl");
        assert!(
            out.status.success(),
            "{}:{}: the example fails:\n{}\n{}{}",
            path.display(),
            fence.line,
            fence.body,
            stdout(&out),
            stderr(&out)
        );
        // The output is the ```text block right after the example (a blank line apart).
        let output = blocks
            .get(i + 1)
            .filter(|next| next.lang == "text" && next.line <= fence.end + 2);
        if let Some(expected) = output {
            assert_eq!(
                stdout(&out),
                expected.body,
                "{}:{}: the example prints something else than the docs say",
                path.display(),
                fence.line
            );
        }
    }
    assert!(
        examples >= 15,
        "only {examples} examples in docs/language.md"
    );
}

#[test]
fn every_builtin_is_documented_with_its_signature_and_an_example() {
    let (_, text) = language_md();
    let examples: String = fences(&text)
        .into_iter()
        .filter(|f| f.lang == "tl")
        .map(|f| f.body)
        .collect();
    let missing: Vec<&str> = tl_lang::builtins::all()
        .filter(|b| !text.contains(&format!("`{}`", b.signature)))
        .map(|b| b.signature)
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md lacks these builtins (write each signature in backticks):\n{}",
        missing.join("\n")
    );
    let unused: Vec<&str> = tl_lang::builtins::all()
        .filter(|b| !calls(&examples, b.name))
        .map(|b| b.name)
        .collect();
    assert!(
        unused.is_empty(),
        "no example in docs/language.md calls these builtins: {}",
        unused.join(", ")
    );
}

/// Whether `code` calls `name` (as `name(` or `.name(`, not as part of a longer name).
fn calls(code: &str, name: &str) -> bool {
    let pattern = format!("{name}(");
    code.match_indices(&pattern).any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
