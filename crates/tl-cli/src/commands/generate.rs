//! `tl generate`: one completion to stdout; logs and statistics go to stderr so
//! stdout holds exactly the generated text.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result};
use tl_engine::chat_template::ChatMessage;
use tl_engine::constraint::{
    Constraint, ConstraintCompiler, ConstraintVocabulary, Grammar, MAX_GRAMMAR_BYTES,
};
use tl_engine::sampler::Sampler;
use tl_engine::{GenerationConfig, Generator};

use crate::cli::{GenerateArgs, OutputFormatArgs};
use crate::loaded_model::{self, LoadedModel};

/// The prompt: `-p TEXT`, standard input for `-p -`, or `--file FILE`; read
/// text loses one final line break, as llama.cpp's `-f` does (an editor or
/// `echo` adds it).
fn prompt_text(args: &GenerateArgs) -> Result<String> {
    let without_final_newline = |mut text: String| {
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        text
    };
    if let Some(path) = &args.file {
        return std::fs::read_to_string(path)
            .map(without_final_newline)
            .with_context(|| format!("cannot read the prompt from {}", path.display()));
    }
    match args.prompt.as_deref() {
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the prompt from standard input")?;
            Ok(without_final_newline(text))
        }
        Some(text) => Ok(text.to_string()),
        None => anyhow::bail!("give a prompt with -p TEXT, -p - (standard input) or --file FILE"),
    }
}

pub fn run(args: &GenerateArgs, verbose: bool) -> Result<()> {
    let sampler_config = args.sampling.to_config();
    sampler_config.validate()?;
    // Before the model is loaded: a missing file should not wait for it.
    let text = prompt_text(args)?;
    let loaded = loaded_model::load(&args.model, verbose)?;
    let prompt = prompt_tokens(&loaded, &text, args.raw)?;
    let config = GenerationConfig {
        max_tokens: args.max_tokens,
        stop_strings: args.stop.clone(),
        prefill_chunk_tokens: args.model.prefill_chunk,
    };
    let generator = Generator {
        model: &loaded.backend,
        tokenizer: &loaded.file.tokenizer,
        config: &config,
    };
    let mut session = loaded.new_session()?;
    let constraint = output_constraint(&args.format, &loaded)?;
    let mut sampler = Sampler::new(sampler_config).with_constraint(constraint);
    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let generation = generator.generate(&mut session, &prompt, &mut sampler, &mut |text| {
        // A closed pipe (e.g. `| head`) or a full disk ends generation, and
        // the run, with an error.
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Ok(()) => true,
            Err(e) => {
                write_error = Some(e);
                false
            }
        }
    })?;
    if let Some(e) = write_error {
        return Err(output_failed(e));
    }
    writeln!(stdout)
        .and_then(|()| stdout.flush())
        .map_err(output_failed)?;
    if args.stats || verbose {
        let s = &generation.stats;
        eprintln!(
            "prompt {} tokens ({:.1} tok/s), generated {} tokens ({:.1} tok/s), stop: {:?}",
            s.prompt_tokens,
            s.prefill_tokens_per_second(),
            s.generated_tokens,
            s.decode_tokens_per_second(),
            generation.stop_reason
        );
    }
    Ok(())
}

/// The run's error when stdout cannot be written: a closed pipe (`| head`)
/// ends it quietly, since whoever read the output has gone; anything else
/// (a full disk) is reported. Either way the exit status is 1.
fn output_failed(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return super::ReportedFailure.into();
    }
    anyhow::anyhow!("cannot write the output: {e}")
}

/// The prompt's tokens: as is with `--raw`, else as one user message through the
/// model's chat template.
fn prompt_tokens(loaded: &LoadedModel, prompt: &str, raw: bool) -> Result<Vec<u32>> {
    if raw {
        return Ok(loaded.file.tokenizer.encode(prompt, true, true)?);
    }
    // The prompt's own text stays text; the template writes any BOS itself,
    // as Hugging Face's apply_chat_template does.
    let prompt =
        loaded
            .file
            .template
            .encode(&loaded.file.tokenizer, &[ChatMessage::user(prompt)], true)?;
    Ok(prompt.tokens)
}

/// The constraint `--grammar`, `--json-schema` or `--json` asks for, compiled
/// for the model's vocabulary.
fn output_constraint(
    format: &OutputFormatArgs,
    loaded: &LoadedModel,
) -> Result<Option<Constraint>> {
    let grammar = if let Some(path) = &format.grammar {
        Grammar::Lark(read_grammar_file(path)?)
    } else if let Some(path) = &format.json_schema {
        let text = read_grammar_file(path)?;
        let schema = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", path.display()))?;
        Grammar::JsonSchema(schema)
    } else if format.json {
        Grammar::any_json_object()
    } else {
        return Ok(None);
    };
    let vocabulary = ConstraintVocabulary::from_tokenizer(&loaded.file.tokenizer);
    let constraint = ConstraintCompiler::new(&vocabulary)?.compile(&grammar)?;
    Ok(Some(constraint))
}

/// A grammar or schema file's text, refused past [`MAX_GRAMMAR_BYTES`]
/// before it is read whole.
fn read_grammar_file(path: &Path) -> Result<String> {
    let cannot = |e: std::io::Error| anyhow::anyhow!("cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut text = String::new();
    let limit = MAX_GRAMMAR_BYTES as u64 + 1;
    file.take(limit).read_to_string(&mut text).map_err(cannot)?;
    if text.len() > MAX_GRAMMAR_BYTES {
        anyhow::bail!(
            "{} is larger than the {MAX_GRAMMAR_BYTES} bytes a grammar or schema may have",
            path.display()
        );
    }
    Ok(text)
}
