//! `tl check`: parse and check a program (and its imports) without running it.

use anyhow::Result;

use super::program::load_checked;
use crate::cli::CheckArgs;

pub fn run(args: &CheckArgs) -> Result<()> {
    load_checked(&args.file)?;
    println!("{}: no problems found", args.file.display());
    Ok(())
}
