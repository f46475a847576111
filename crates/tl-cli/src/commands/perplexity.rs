//! `tl perplexity`: llama.cpp-compatible perplexity of a model on a text file.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tl_engine::perplexity::{check_window, perplexity};
use tl_engine::ModelFile;

use crate::cli::PerplexityArgs;
use crate::loaded_model;

pub fn run(args: &PerplexityArgs, verbose: bool) -> Result<()> {
    // Before the model is loaded: a window that scores nothing would only
    // waste the load.
    check_window(args.ctx)?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let path = loaded_model::resolve_path(args.model.as_ref())?;
    let file = ModelFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    let loaded = file
        .load(args.ctx, args.device, &args.gpu.to_options())
        .with_context(|| format!("cannot load {}", path.display()))?;
    loaded_model::report_fallback(loaded.fallback.as_ref(), verbose);
    let tokenizer = &loaded.file.tokenizer;
    if !loaded.backend.is_cpu() {
        eprintln!(
            "running on {}: windows of 64 tokens or more (any window, for float weights) are \
             summed in another order there, so the last digits can differ from llama.cpp's \
             (--device cpu gives its digits)",
            loaded.backend.device_name()
        );
    }
    // Tokenized once, as llama.cpp does: BOS in front if the model adds it, and
    // special-token text treated as plain text.
    let tokens = tokenizer.encode(&text, true, false)?;
    let bos = if tokenizer.add_bos() {
        tokenizer.bos_id()
    } else {
        None
    };
    eprintln!(
        "{} tokens, {} windows of {} (scoring the second half of each)",
        tokens.len(),
        tokens.len() / args.ctx.max(1),
        args.ctx
    );
    let bar = ProgressBar::new((tokens.len() / args.ctx.max(1)) as u64).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} windows, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message("perplexity");
    let report = perplexity(
        &loaded.backend,
        &tokens,
        args.ctx,
        bos,
        &mut |done, _, so_far| {
            bar.set_position(done as u64);
            if verbose {
                bar.println(format!("[{done}] {:.4}", so_far.perplexity()));
            }
        },
    )?;
    bar.finish_and_clear();
    println!("perplexity: {:.4}", report.perplexity());
    Ok(())
}
