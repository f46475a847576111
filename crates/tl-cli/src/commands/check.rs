//! `tl check`: parse and check a program (and its imports) without running it.

use anyhow::Result;

use super::program::{load_checked, on_interpreter_thread};
use crate::cli::CheckArgs;

pub fn run(args: &CheckArgs) -> Result<()> {
    let file = args.file.clone();
    // The checker recurses per level of the syntax tree, as the interpreter does.
    on_interpreter_thread(move || load_checked(&file))??;
    println!("{}: no problems found", args.file.display());
    Ok(())
}
