//! `tl`: the TensorLogic command. Parses arguments, sends the libraries'
//! diagnostics to stderr (`logging`), runs the command, and turns any error
//! into one line on stderr and exit code 1.

mod catalogue;
mod cli;
mod commands;
mod loaded_model;
mod logging;

use clap::Parser;

fn main() {
    stop_cleanly_when_output_fails();
    let cli = cli::Cli::parse();
    logging::init(cli.verbose);
    if let Some(threads) = cli.threads {
        use_threads(usize::from(threads));
    }
    if let Err(error) = commands::run(cli) {
        // Program failures were already reported with their source lines.
        if error.downcast_ref::<commands::ReportedFailure>().is_none() {
            eprintln!("error: {}", one_line(&error));
        }
        std::process::exit(1);
    }
}

/// Sizes the global thread pool, which every CPU product and parallel loop
/// sizes itself by. Runs before anything else starts threads, so it cannot
/// find the pool already built.
fn use_threads(threads: usize) {
    if let Err(e) = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
    {
        eprintln!("warning: cannot use {threads} threads: {e}");
    }
}

/// The error and its causes on one line: `cannot load x: malformed GGUF at ...`.
/// Each thing is said once: a cause its parent already ends with (an error
/// that prints its source and also returns it) is left out, and so is a
/// cause's leading `PATH: ` when its parent ends with that path.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain().map(|cause| cause.to_string()) {
        if line.ends_with(&cause) {
            continue;
        }
        let repeated_head = cause
            .split_once(": ")
            .filter(|(head, _)| line.ends_with(head))
            .map(|(_, rest)| rest);
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(repeated_head.unwrap_or(&cause));
    }
    line.replace('\n', " ")
}

/// Output that cannot be written (`tl model inspect FILE | head`, a full disk)
/// ends the run with an error and exit code 1, instead of a panic inside
/// `println!`, which is where Rust reports it. A closed pipe ends it quietly:
/// whoever read the output has gone.
fn stop_cleanly_when_output_fails() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map_or("", String::as_str);
        if let Some(why) = message.strip_prefix("failed printing to stdout: ") {
            if !why.contains("Broken pipe") {
                eprintln!("error: cannot write the output: {why}");
            }
            std::process::exit(1);
        }
        default_hook(info);
    }));
}
