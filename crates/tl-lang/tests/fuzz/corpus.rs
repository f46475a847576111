//! The programs of the repository: examples, the language tests, and the golden
//! inputs of the parser and the checker.

use std::path::{Path, PathBuf};

/// One program as read from disk.
pub struct Program {
    pub path: PathBuf,
    pub text: String,
}

impl Program {
    /// The folder imports and relative paths resolve against.
    pub fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .map_or_else(|| ".".into(), Path::to_path_buf)
    }
}

/// Folders (relative to the workspace root) whose `.tl` files, at any depth,
/// make up the corpus.
const FOLDERS: &[&str] = &[
    "examples",
    "tests/lang",
    "crates/tl-syntax/tests/golden",
    "crates/tl-lang/tests/golden/check",
];

/// Every `.tl` file of the corpus folders, sorted by path.
pub fn programs() -> Vec<Program> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    for folder in FOLDERS {
        collect_tl_files(&root.join(folder), &mut paths);
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            Some(Program { path, text })
        })
        .collect()
}

fn collect_tl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_tl_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "tl") {
            out.push(path);
        }
    }
}
