//! `tl`: the TensorLogic command. Parses arguments, runs the command, and turns any
//! error into one line on stderr and exit code 1.

mod cli;
mod commands;
mod default_model;
mod loaded_model;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    if let Err(error) = commands::run(cli) {
        // Program failures were already reported with their source lines.
        if error.downcast_ref::<commands::ReportedFailure>().is_none() {
            eprintln!("error: {}", one_line(&error));
        }
        std::process::exit(1);
    }
}

/// The error and its causes on one line: `cannot load x: malformed GGUF at ...`.
fn one_line(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(|cause| cause.to_string())
        .collect::<Vec<_>>()
        .join(": ")
        .replace('\n', " ")
}
