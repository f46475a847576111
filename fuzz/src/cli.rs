//! Command-line arguments: one target per run, limits for the worker process,
//! and where seeds, the corpus and the findings live.

use std::path::PathBuf;

use clap::Parser;

use crate::targets::TargetKind;

/// Fuzzes one of TensorLogic's input parsers on the stable toolchain: inputs
/// are mutated from seeds and run in a worker process that is watched for
/// panics, aborts, stack overflows, memory exhaustion and hangs.
#[derive(Debug, Parser)]
#[command(name = "tl-fuzz", version)]
pub struct Args {
    /// What to fuzz.
    #[arg(value_enum)]
    pub target: TargetKind,

    /// How long to fuzz, in seconds (seeds and minimisation included).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,

    /// Extra seeds are read from this folder, and inputs that reach a new
    /// outcome are written to it, so a later campaign starts where this one
    /// stopped.
    #[arg(long)]
    pub corpus: Option<PathBuf>,

    /// Seed of the mutation RNG; the same seed repeats the same campaign.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Where findings and the summary go (a folder per target is made in it).
    #[arg(long, default_value = "fuzz/out")]
    pub out: PathBuf,

    /// An input running longer than this is a hang.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,

    /// Address space the worker may map (`RLIMIT_AS`); an input needing more
    /// is an out-of-memory finding instead of a burden on the machine.
    #[arg(long, default_value_t = 2048)]
    pub memory_mb: u64,

    /// Longest input the mutator makes (default: the target's; bigger
    /// inputs find slow paths, smaller ones run faster).
    #[arg(long)]
    pub max_len: Option<usize>,

    /// Time spent shrinking each new failure's input.
    #[arg(long, default_value_t = 30)]
    pub minimize_seconds: u64,

    /// The repository checkout the seeds come from.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/.."))]
    pub repo: PathBuf,

    /// Run these inputs once each, report what they do and exit (non-zero when
    /// any fails): for reproducing findings, without fuzzing.
    #[arg(long, num_args = 1..)]
    pub replay: Vec<PathBuf>,

    /// Internal: serve as the worker process of a campaign.
    #[arg(long, hide = true)]
    pub worker: bool,
}
