//! `tl-fuzz TARGET --seconds N`: a fuzzer for the inputs strangers control,
//! written for the stable toolchain (no cargo-fuzz, no sanitizer coverage).
//!
//! The process started by the user is the supervisor (`campaign`): it keeps
//! the corpus, mutates inputs (`mutate`) and sends them one at a time to a
//! worker process, the same binary started again with `--worker` (`worker`),
//! which runs the target (`targets`) under `catch_unwind` with a capped
//! address space (`limits`). A reply that does not come in time is a hang; a
//! worker that dies took an abort, a stack overflow or an allocation failure
//! with it. The input is known either way (`child`), is shrunk (`minimize`)
//! and saved with its report (`findings`), and a fresh worker carries on.
//! Seeds come from the repository (`seeds`).
//!
//! Without coverage instrumentation the feedback is the outcome itself: each
//! run returns a signature (`signature`: the normalised error message, or a
//! coarse summary of a success), and an input reaching a signature not seen
//! before joins the corpus, so inputs that get past one check are kept to
//! reach the next.

mod campaign;
mod child;
mod cli;
mod findings;
mod limits;
mod minimize;
mod mutate;
mod protocol;
mod rng;
mod seeds;
mod signature;
mod targets;
mod worker;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = cli::Args::parse();
    if args.worker {
        return worker::serve(args.target, &args.repo, args.memory_mb);
    }
    limits::cap_address_space(limits::SUPERVISOR_MEMORY_MB.max(args.memory_mb))?;
    if !args.replay.is_empty() {
        let all_passed = campaign::replay(&args)?;
        std::process::exit(if all_passed { 0 } else { 1 });
    }
    campaign::run(&args)
}
