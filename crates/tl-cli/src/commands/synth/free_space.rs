//! Free space of a folder's file system, asked of POSIX `df` (the standard
//! library has no call for it, and one check does not justify a dependency).
//! `None` when `df` is missing or says something unexpected: the check is
//! best-effort, and the write itself still fails cleanly on a full disk.

use std::path::Path;
use std::process::Command;

/// Bytes available to this user on the file system holding `folder`.
pub fn available_bytes(folder: &Path) -> Option<u64> {
    let output = Command::new("df").arg("-Pk").arg(folder).output().ok()?;
    if !output.status.success() {
        return None;
    }
    parse_df(&String::from_utf8_lossy(&output.stdout))
}

/// The "Available" column (1024-byte blocks) of `df -P` output's data line.
fn parse_df(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_available_column() {
        let text = "Filesystem 1024-blocks Used Available Capacity Mounted on\n\
                    /dev/sda1 1000 400 600 40% /\n";
        assert_eq!(parse_df(text), Some(600 * 1024));
        assert_eq!(parse_df("Filesystem\n"), None);
    }

    #[test]
    fn the_current_folder_has_some_space() {
        // Where df exists (every CI machine here), it answers for ".".
        if let Some(bytes) = available_bytes(Path::new(".")) {
            assert!(bytes > 0);
        }
    }
}
