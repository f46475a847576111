//! Helpers shared by the end-to-end tests: running the real `tl` binary and finding
//! the default model (fetched once into the cache folder, as a user would get it).

#![allow(dead_code)]

pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use tl_testdata::ModelMissing;

/// A `tl` command.
pub fn tl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tl"))
}

/// Runs `tl` with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    tl().args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot start tl")
}

/// The default model: `$TL_TEST_MODEL` if set, else the cached copy, else
/// `tl model pull` (which fetches it on first use, as a user would get it).
/// Fails the test with the reason when it cannot be had.
pub fn default_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| match tl_testdata::default_model() {
        Ok(path) => path,
        Err(ModelMissing::NotPulled(_)) => pull_default_model(),
        Err(reason) => panic!("{reason}"),
    })
}

/// Runs `tl model pull` and returns the path it prints.
fn pull_default_model() -> PathBuf {
    let out = run(&["model", "pull"]);
    assert!(
        out.status.success(),
        "tl model pull failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The repository's golden test data (`testdata/`).
pub fn testdata() -> PathBuf {
    tl_testdata::testdata()
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
