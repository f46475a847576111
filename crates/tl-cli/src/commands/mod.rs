//! One module per command; `run` dispatches.

mod chat;
mod generate;
mod inspect;
mod perplexity;

use anyhow::Result;

use crate::cli::{Cli, Command, ModelCommand};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Chat(args) => chat::run(&args, cli.verbose),
        Command::Generate(args) => generate::run(&args, cli.verbose),
        Command::Perplexity(args) => perplexity::run(&args, cli.verbose),
        Command::Model(ModelCommand::Inspect(args)) => inspect::run(&args),
        Command::Model(ModelCommand::Pull) => {
            println!("{}", crate::default_model::ensure()?.display());
            Ok(())
        }
    }
}
