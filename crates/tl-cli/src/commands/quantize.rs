//! `tl model quantize`: plans the output (refusing what llama-quantize
//! refuses, before writing), checks the destination, then writes with a
//! progress bar over the input's tensor bytes.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use tl_engine::quantize::{FileType, QuantizeOptions, QuantizePlan};
use tl_gguf::GgufFile;

use super::synth::{check_destination, human_bytes, write_with_progress};
use crate::cli::QuantizeArgs;

pub fn run(args: &QuantizeArgs) -> Result<()> {
    let options = QuantizeOptions {
        file_type: args.file_type.parse::<FileType>().context("--type")?,
        allow_requantize: args.allow_requantize,
    };
    refuse_overwriting_input(&args.input, &args.output)?;
    let input = GgufFile::open(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?;
    let plan = QuantizePlan::new(input, options)
        .with_context(|| format!("cannot quantize {}", args.input.display()))?;
    check_destination(&args.output, plan.approximate_file_bytes())?;
    println!("{}", describe(&plan, options.file_type, &args.output));
    write(plan, &args.output)
}

/// Writing the output over the input would destroy what is being read.
fn refuse_overwriting_input(input: &Path, output: &Path) -> Result<()> {
    let same = match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        bail!("cannot write {}: it is the input file", output.display());
    }
    Ok(())
}

/// `q4_k_m: 272 tensors, 30 Q4_K, 5 Q6_K, ... 138.4 MB -> 105.5 MB -> OUT`
fn describe(plan: &QuantizePlan, file_type: FileType, output: &Path) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for step in plan.steps() {
        *counts.entry(step.to.to_string()).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(ty, n)| format!("{n} {ty}")).collect();
    format!(
        "{file_type}: {} tensors ({}), {} -> {} -> {}",
        plan.steps().len(),
        counts.join(", "),
        human_bytes(plan.input_tensor_bytes()),
        human_bytes(plan.output_tensor_bytes()),
        output.display()
    )
}

fn write(plan: QuantizePlan, output: &Path) -> Result<()> {
    let total = plan.input_tensor_bytes();
    write_with_progress(output, total, "quantizing", |progress| {
        plan.into_writer(progress)
            .context("cannot lay out the output")
    })
}
