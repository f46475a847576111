//! One module per command; `run` dispatches.

mod bench;
mod chat;
mod check;
mod embed;
mod generate;
mod inspect;
mod models;
mod perplexity;
mod program;
mod quantize;
mod repl;
mod run;
mod serve;
mod synth;

use anyhow::Result;

pub use program::ReportedFailure;
pub use synth::shape_table as synth_shape_table;

use crate::cli::{Cli, Command, ModelCommand};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Repl(args) => repl::run(&args),
        Command::Chat(args) => chat::run(&args, cli.verbose),
        Command::Generate(args) => generate::run(&args, cli.verbose),
        Command::Embed(args) => embed::run(&args, cli.verbose),
        Command::Perplexity(args) => perplexity::run(&args, cli.verbose),
        Command::Bench(args) => bench::run(&args, cli.verbose),
        Command::Serve(args) => serve::run(&args),
        Command::Model(ModelCommand::Inspect(args)) => inspect::run(&args),
        Command::Model(ModelCommand::Synth(args)) => synth::run(&args),
        Command::Model(ModelCommand::Quantize(args)) => quantize::run(&args),
        Command::Model(ModelCommand::Pull(args)) => models::pull(&args),
        Command::Model(ModelCommand::List) => models::list(),
        Command::Model(ModelCommand::Rm(args)) => models::remove(&args),
    }
}
