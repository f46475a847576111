//! Failures found, one per key (a panic's location, "timeout", "stack
//! overflow", ...), each saved as a folder under `OUT/TARGET/failures/`:
//! `input` (the first input that failed this way), `minimized` (the smallest
//! found that fails the same way) and `report.txt` (the key, the panic
//! message and backtrace or the worker's stderr, and how to replay it).

use std::collections::BTreeMap;
use std::fs;
use std::hash::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::child::Failure;
use crate::targets::TargetKind;

#[derive(Debug)]
pub struct Finding {
    pub folder: PathBuf,
    pub count: u64,
    pub minimized_len: usize,
}

#[derive(Debug)]
pub struct Findings {
    target: TargetKind,
    dir: PathBuf,
    by_key: BTreeMap<String, Finding>,
}

impl Findings {
    pub fn new(target: TargetKind, dir: PathBuf) -> Self {
        Self {
            target,
            dir,
            by_key: BTreeMap::new(),
        }
    }

    pub fn is_new(&self, key: &str) -> bool {
        !self.by_key.contains_key(key)
    }

    /// Counts another input failing the way of a known finding.
    pub fn count_again(&mut self, key: &str) {
        if let Some(finding) = self.by_key.get_mut(key) {
            finding.count += 1;
        }
    }

    /// Saves a new finding.
    pub fn record(
        &mut self,
        failure: &Failure,
        input: &[u8],
        minimized: &[u8],
    ) -> anyhow::Result<&Finding> {
        let folder = self.dir.join(slug(&failure.key));
        fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
        fs::write(folder.join("input"), input)?;
        fs::write(folder.join("minimized"), minimized)?;
        fs::write(
            folder.join("report.txt"),
            self.report(failure, input, minimized, &folder),
        )?;
        let finding = Finding {
            folder,
            count: 1,
            minimized_len: minimized.len(),
        };
        Ok(self.by_key.entry(failure.key.clone()).or_insert(finding))
    }

    fn report(&self, failure: &Failure, input: &[u8], minimized: &[u8], folder: &Path) -> String {
        format!(
            "target: {}\nkey: {}\ninput: {} bytes\nminimized: {} bytes\nreplay: tl-fuzz {} --replay {}\n\n{}\n",
            self.target.name(),
            failure.key,
            input.len(),
            minimized.len(),
            self.target.name(),
            folder.join("minimized").display(),
            failure.details
        )
    }

    pub fn unique(&self) -> usize {
        self.by_key.len()
    }

    pub fn total(&self) -> u64 {
        self.by_key.values().map(|f| f.count).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Finding)> {
        self.by_key.iter()
    }
}

/// A folder name for a key: its words, and a hash so that keys whose words
/// agree stay apart.
pub fn slug(key: &str) -> String {
    let words: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    let cut: String = words
        .chars()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{cut}-{:08x}", hasher.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn slugs_are_file_names() {
        let s = slug("panic at crates/tl-gguf/src/header.rs:12:5");
        assert!(s.contains("tl-gguf-src-header-rs-12-5-"), "{s}");
        assert!(s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert_ne!(slug("a b"), slug("a-b"));
    }
}
