//! `tl embed`: embeddings of texts as JSON on stdout, computed as the
//! server's `/v1/embeddings` computes them (`tl_engine::embedding`).

use std::io::Read;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tl_engine::embedding::{check_dimensions, embed};

use crate::cli::EmbedArgs;
use crate::loaded_model;

pub fn run(args: &EmbedArgs, verbose: bool) -> Result<()> {
    let texts = texts(args)?;
    let loaded = loaded_model::load(&args.model, verbose)?;
    let width = loaded.config().embedding_length;
    check_dimensions(args.dimensions, width)?;
    let mut session = loaded.new_session()?;
    let mut embeddings = Vec::with_capacity(texts.len());
    let mut prompt_tokens = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        let tokens =
            tokens_of(&loaded, text, args.truncate).with_context(|| format!("text {index}"))?;
        let vector = embed(
            &loaded.backend,
            &mut session,
            &tokens,
            args.model.prefill_chunk,
            args.dimensions,
        )?;
        prompt_tokens.push(tokens.len());
        embeddings.push(vector);
    }
    let output = Output {
        model: loaded.file.name(),
        embeddings,
        prompt_tokens,
    };
    println!("{}", serde_json::to_string(&output)?);
    Ok(())
}

/// What `tl embed` prints: typed, so the vectors print as f32s (their
/// shortest exact form), not widened to f64's 17 digits.
#[derive(Serialize)]
struct Output {
    model: String,
    embeddings: Vec<Vec<f32>>,
    prompt_tokens: Vec<usize>,
}

/// The texts to embed: the arguments (`-` for stdin) and the files' texts,
/// else stdin; each line a text of its own with --lines. A file or stdin
/// loses one final line break (`echo text |` embeds `text`, as llama.cpp's
/// `-f` reads a file).
fn texts(args: &EmbedArgs) -> Result<Vec<String>> {
    let mut sources = Vec::new();
    for text in &args.texts {
        sources.push(match text.as_str() {
            "-" => read_stdin()?,
            _ => text.clone(),
        });
    }
    for path in &args.file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        sources.push(without_final_line_break(text));
    }
    if args.texts.is_empty() && args.file.is_empty() {
        sources.push(read_stdin()?);
    }
    let texts: Vec<String> = match args.lines {
        true => sources
            .iter()
            .flat_map(|s| s.lines())
            .filter(|line| !line.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        false => sources,
    };
    if let Some(index) = texts.iter().position(String::is_empty) {
        bail!("text {index} is empty: there is nothing to embed");
    }
    if texts.is_empty() {
        bail!("no text to embed: give texts, --file FILE, or text on stdin");
    }
    Ok(texts)
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read stdin")?;
    Ok(without_final_line_break(text))
}

fn without_final_line_break(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

/// A text's tokens as the server's embeddings take them (BOS when the
/// model adds one; special-token text parsed, as llama.cpp does), within
/// the context or cut to it when `truncate`.
fn tokens_of(loaded: &loaded_model::LoadedModel, text: &str, truncate: bool) -> Result<Vec<u32>> {
    let mut tokens = loaded.tokenizer().encode(text, true, true)?;
    let context = loaded.context;
    if tokens.len() > context {
        if !truncate {
            bail!(
                "{} tokens, more than the context of {context} (--ctx N for more, or --truncate)",
                tokens.len()
            );
        }
        tokens.truncate(context);
    }
    Ok(tokens)
}
