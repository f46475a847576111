//! `tl model synth`: plans a random-weight model, checks the output folder can
//! take it, then writes it with a progress bar over the bytes.

mod free_space;
mod shape_table;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tl_engine::quantize::FileType;
use tl_engine::synth::{Architecture, ShapeName, SynthPlan, SynthRequest};
use tl_gguf::GgufFile;

use crate::cli::SynthArgs;

pub use shape_table::shape_table;

/// Room left beyond the estimated size, for the header estimate's slack and
/// whatever else writes to the disk meanwhile.
const SPACE_MARGIN_BYTES: u64 = 64 << 20;

pub fn run(args: &SynthArgs) -> Result<()> {
    let request = parse_request(args)?;
    let vocab_file = args
        .vocab
        .as_ref()
        .map(|path| {
            GgufFile::open(path)
                .with_context(|| format!("cannot read the vocabulary file {}", path.display()))
        })
        .transpose()?;
    let plan = SynthPlan::new(&request, vocab_file.as_ref())
        .with_context(|| format!("cannot synthesize {}", args.output.display()))?;
    for warning in plan.warnings() {
        eprintln!("warning: {warning}");
    }
    let file_bytes = plan.approximate_file_bytes();
    check_destination(&args.output, file_bytes)?;
    println!("{}", describe(&plan, &args.output, file_bytes));
    write(plan, &args.output)
}

fn parse_request(args: &SynthArgs) -> Result<SynthRequest> {
    Ok(SynthRequest {
        shape: args.shape.parse::<ShapeName>().context("--shape")?,
        architecture: args
            .arch
            .as_deref()
            .map(str::parse::<Architecture>)
            .transpose()
            .context("--arch")?,
        quant: args.quant.parse::<FileType>().context("--quant")?,
        seed: args.seed,
    })
}

/// `synthetic tinyllama q4_0: llama, 1.10 B parameters, 22 blocks, 32000 tokens, 619.6 MB -> OUT`
fn describe(plan: &SynthPlan, output: &Path, file_bytes: u64) -> String {
    let shape = plan.shape();
    format!(
        "{}: {}, {} parameters, {} blocks, {} tokens, {} -> {}",
        plan.model_name(),
        shape.architecture,
        human_count(plan.parameter_count()),
        shape.block_count,
        shape.vocab_size,
        human_bytes(file_bytes),
        output.display()
    )
}

/// Fails early for a destination that cannot be written: a missing folder, a
/// folder in the way, or too little free space (when `df` can tell).
pub(crate) fn check_destination(output: &Path, file_bytes: u64) -> Result<()> {
    let cannot = || format!("cannot write {}", output.display());
    if output.is_dir() {
        bail!("{}: it is a folder", cannot());
    }
    let folder = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !folder.is_dir() {
        bail!("{}: folder {} does not exist", cannot(), folder.display());
    }
    if let Some(free) = free_space::available_bytes(&folder) {
        let needed = file_bytes + SPACE_MARGIN_BYTES;
        if free < needed {
            bail!(
                "{}: the model takes {}, {} has {} free",
                cannot(),
                human_bytes(file_bytes),
                folder.display(),
                human_bytes(free)
            );
        }
    }
    Ok(())
}

fn write(plan: SynthPlan, output: &Path) -> Result<()> {
    let total = plan.tensor_bytes();
    write_with_progress(output, total, "writing", |progress| {
        plan.into_writer(progress)
            .context("cannot lay out the model")
    })
}

/// Writes the file `make_writer` lays out to `output`, with a progress bar
/// over `total` bytes that the writer's progress callback advances, then
/// says how long it took.
pub(crate) fn write_with_progress(
    output: &Path,
    total: u64,
    message: &'static str,
    make_writer: impl FnOnce(tl_engine::synth::Progress) -> Result<tl_gguf::GgufWriter>,
) -> Result<()> {
    let started = Instant::now();
    let bar = byte_bar(total, message);
    let counter = bar.clone();
    let writer = make_writer(Arc::new(move |bytes| counter.inc(bytes)))?;
    let written = writer
        .write_to_path(output)
        .with_context(|| format!("cannot write {}", output.display()));
    bar.finish_and_clear();
    written?;
    println!(
        "wrote {} in {:.1} s",
        output.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A progress bar over `total` bytes.
fn byte_bar(total: u64, message: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message);
    bar
}

/// Decimal units, as `tl model inspect` prints sizes: `2.20 GB`, `636.9 MB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes as f64 {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} KB", b / 1e3),
        b => format!("{b} bytes"),
    }
}

/// `1.10 B`, `135 M`, `140 K`.
fn human_count(n: u64) -> String {
    match n as f64 {
        n if n >= 1e9 => format!("{:.2} B", n / 1e9),
        n if n >= 1e6 => format!("{:.0} M", n / 1e6),
        n => format!("{:.0} K", n / 1e3),
    }
}
