//! Helpers shared by the end-to-end tests: running the real `tl` binary and finding
//! the default model (fetched once into the cache folder, as a user would get it).

#![allow(dead_code)]

pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

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

/// The default model: `$TL_TEST_MODEL` if set, else `tl model pull` (which fetches
/// it on first use). Fails the test with the pull's error when it cannot be had.
pub fn default_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| {
        if let Some(path) = std::env::var_os("TL_TEST_MODEL") {
            return PathBuf::from(path);
        }
        let out = run(&["model", "pull"]);
        assert!(
            out.status.success(),
            "tl model pull failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// The folder of golden data shared by the project (`../shared/testdata`).
pub fn testdata() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata");
    assert!(
        dir.is_dir(),
        "golden test data missing at {}",
        dir.display()
    );
    dir
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
