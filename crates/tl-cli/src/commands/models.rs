//! `tl model pull`, `tl model list` and `tl model rm`: the catalogue's
//! models in the cache folder.

use anyhow::{bail, Result};

use super::synth::human_bytes;
use crate::catalogue::{self, CATALOGUE};
use crate::cli::{PullArgs, RmArgs};

pub fn pull(args: &PullArgs) -> Result<()> {
    // Every name is checked before the first download starts.
    let entries = args
        .names
        .iter()
        .map(|name| catalogue::find(name))
        .collect::<Result<Vec<_>>>()?;
    for entry in entries {
        let path = catalogue::pull(entry, &mut catalogue::Terminal::default())?;
        println!("{}", path.display());
    }
    Ok(())
}

/// One line per model: name, size, where it is cached (or that it is not),
/// and what it is.
pub fn list() -> Result<()> {
    println!("{:<9} {:>9}  {:<60}  ABOUT", "NAME", "SIZE", "CACHED AT");
    for entry in CATALOGUE {
        let path = catalogue::cached_path(entry)?;
        let cached = if path.is_file() {
            path.display().to_string()
        } else {
            "-".to_string()
        };
        println!(
            "{:<9} {:>9}  {cached:<60}  {}",
            entry.name,
            human_bytes(entry.size),
            entry.about
        );
    }
    Ok(())
}

pub fn remove(args: &RmArgs) -> Result<()> {
    let entry = catalogue::find(&args.name)?;
    if !catalogue::remove(entry)? {
        bail!("{} is not cached", entry.name);
    }
    println!("removed {}", catalogue::cached_path(entry)?.display());
    Ok(())
}
