//! `tl`: the TensorLogic command. Parses arguments, sends the libraries'
//! diagnostics to stderr (`logging`), runs the command, and turns any error
//! into one line on stderr and exit code 1.

mod cli;
mod commands;
mod default_model;
mod loaded_model;
mod logging;

use clap::Parser;

fn main() {
    stop_quietly_on_broken_pipe();
    let cli = cli::Cli::parse();
    logging::init(cli.verbose);
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

/// `tl model inspect FILE | head`: when whoever reads our output goes away, stop
/// as Unix tools do (exit status 141, as if killed by SIGPIPE) instead of
/// panicking inside `println!`, which is where Rust reports the broken pipe.
fn stop_quietly_on_broken_pipe() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map_or("", String::as_str);
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
}
