//! `tl model list`, `tl model rm` and catalogue names for `-m`, in a cache
//! folder of the test's own (`TL_CACHE_DIR`), so nothing is fetched: a
//! fetch is what `default_model.rs` does through `tl model pull`.

mod common;

use std::path::Path;
use std::process::{Output, Stdio};

use common::{stderr, stdout, tl};

fn run_in(cache: &Path, args: &[&str]) -> Output {
    tl().args(args)
        .env("TL_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .output()
        .expect("cannot start tl")
}

/// The line of `tl model list` for `name`.
fn listed(cache: &Path, name: &str) -> String {
    let out = run_in(cache, &["model", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .to_string()
}

#[test]
fn list_shows_every_model_and_whether_it_is_cached() {
    let cache = tempfile::tempdir().unwrap();
    let line = listed(cache.path(), "gemma3");
    assert!(line.contains("253.1 MB") && line.contains(" - "), "{line}");
    assert!(listed(cache.path(), "smollm2").contains("(the default)"));
    // A cached file shows its path, and `rm` removes it.
    let file = cache.path().join("gemma-3-270m-q4_k_m.gguf");
    std::fs::write(&file, "stand-in").unwrap();
    assert!(listed(cache.path(), "gemma3").contains(file.to_str().unwrap()));
    let out = run_in(cache.path(), &["model", "rm", "gemma3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("removed"), "{}", stdout(&out));
    assert!(!file.exists());
}

#[test]
fn unknown_names_and_uncached_models_are_one_line_errors() {
    let cache = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["model", "rm", "gemma3"], "gemma3 is not cached"),
        (
            &["model", "pull", "gpt-5"],
            "no model named 'gpt-5' in the catalogue (known: smollm2, gemma3)",
        ),
        (&["model", "rm", "gpt-5"], "no model named 'gpt-5'"),
        (
            &["generate", "-m", "gpt-5", "-p", "hi"],
            "gpt-5 does not exist (and is not a catalogue name: smollm2, gemma3)",
        ),
    ];
    for (args, expected) in cases {
        let out = run_in(cache.path(), args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn an_existing_file_wins_over_a_catalogue_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gemma3"), "not a model").unwrap();
    let out = tl()
        .args(["model", "inspect", "gemma3"])
        .current_dir(dir.path())
        .env("TL_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The file was read (and is not GGUF); nothing was fetched.
    assert!(err.contains("cannot load gemma3"), "{err}");
    assert!(!dir.path().join("cache").exists());
}
