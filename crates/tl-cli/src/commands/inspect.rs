//! `tl model inspect`: what is inside a GGUF file, without loading the weights.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use tl_engine::ModelConfig;
use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use crate::cli::InspectArgs;

/// Tensors listed when `--all-tensors` is not given.
const TENSORS_SHOWN: usize = 12;

pub fn run(args: &InspectArgs) -> Result<()> {
    let path = crate::catalogue::resolve(Some(&args.file))?;
    let file = GgufFile::open(&path).with_context(|| format!("cannot load {}", path.display()))?;
    println!("file: {}", path.display());
    println!(
        "GGUF v{}, {:.1} MB, {} metadata entries, {} tensors",
        file.version(),
        file.file_size() as f64 / 1e6,
        file.metadata().len(),
        file.tensors().len()
    );
    print_architecture(&file);
    print_tensors(&file, args.all_tensors);
    print_vocabulary(&file);
    print_template(&file);
    print_metadata(&file);
    Ok(())
}

fn print_architecture(file: &GgufFile) {
    println!("\n== architecture");
    match ModelConfig::from_gguf(file) {
        Ok(c) => {
            println!("architecture      {}", c.architecture);
            println!("blocks            {}", c.block_count);
            println!("hidden size       {}", c.embedding_length);
            println!("feed-forward size {}", c.feed_forward_length);
            println!("heads (q / kv)    {} / {}", c.head_count, c.head_count_kv);
            println!("head dimension    {}", c.head_dim);
            println!("rope base         {}", c.rope_freq_base);
            if let Some(w) = &c.sliding_window {
                let local = w.local.iter().filter(|&&l| l).count();
                println!(
                    "sliding window    {} positions on {local} of {} layers (rope base {})",
                    w.size,
                    w.local.len(),
                    w.rope_freq_base
                );
            }
            println!("rms norm epsilon  {:e}", c.rms_norm_eps);
            println!("context length    {}", c.context_length);
            println!("vocabulary size   {}", c.vocab_size);
            let tied = file.tensor_info("output.weight").is_none();
            println!(
                "output head       {}",
                if tied {
                    "tied to the token embedding"
                } else {
                    "separate"
                }
            );
        }
        Err(e) => println!("cannot run this model: {e}"),
    }
}

fn print_tensors(file: &GgufFile, all: bool) {
    println!("\n== tensors");
    let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in file.tensors() {
        let entry = by_type.entry(t.ggml_type.to_string()).or_default();
        entry.0 += 1;
        entry.1 += t.size_bytes;
    }
    for (ty, (count, bytes)) in &by_type {
        println!(
            "{ty:<6} {count:>5} tensors {:>10.1} MB",
            *bytes as f64 / 1e6
        );
    }
    let shown = if all {
        file.tensors().len()
    } else {
        TENSORS_SHOWN
    };
    for t in file.tensors().iter().take(shown) {
        println!(
            "  {:<32} {:<6} {:?}",
            t.name,
            t.ggml_type.to_string(),
            t.shape()
        );
    }
    if file.tensors().len() > shown {
        println!(
            "  ... {} more (--all-tensors lists them)",
            file.tensors().len() - shown
        );
    }
}

fn print_vocabulary(file: &GgufFile) {
    println!("\n== vocabulary");
    match Tokenizer::from_gguf(file) {
        Ok(t) => {
            let name = |id: Option<u32>| match id {
                Some(id) => format!("{id} {:?}", t.token_text(id).unwrap_or("?")),
                None => "none".to_string(),
            };
            println!(
                "kind              {:?} (pre-tokenizer {})",
                t.kind(),
                t.pre_tokenizer_name()
            );
            println!("tokens            {}", t.vocab_size());
            println!("bos               {}", name(t.bos_id()));
            println!("eos               {}", name(t.eos_id()));
            println!("adds bos          {}", t.add_bos());
        }
        Err(e) => println!("no usable tokenizer: {e}"),
    }
}

fn print_template(file: &GgufFile) {
    println!("\n== chat template");
    match file.get_str("tokenizer.chat_template") {
        Ok(Some(source)) => {
            let kind = if source.contains("<|im_start|>") {
                " (ChatML)"
            } else {
                ""
            };
            println!("{} characters{kind}", source.len());
        }
        _ => {
            let architecture = file.get_str("general.architecture").ok().flatten();
            let own = architecture.and_then(tl_engine::architecture_template);
            match (own, architecture) {
                (Some(_), Some(name)) => println!("none in the file ({name}'s own turns are used)"),
                _ => println!("none (ChatML is used)"),
            }
        }
    }
}

fn print_metadata(file: &GgufFile) {
    println!("\n== metadata");
    for (key, value) in file.metadata() {
        if key == "tokenizer.chat_template" {
            continue;
        }
        println!("{key} = {value}");
    }
}
