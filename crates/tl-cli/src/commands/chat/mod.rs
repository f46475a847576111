//! `tl chat`: a ChatGPT-like conversation in the terminal. Replies stream as they
//! are generated, the whole conversation goes through the model's chat template on
//! every turn (only the new tokens are run, the rest is reused from the KV cache),
//! and Ctrl-C stops a reply without leaving.

mod conversation;
mod highlight;
mod input;
mod quiet_input;
mod slash;
mod spinner;
mod wrap;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use tl_engine::chat_template::ChatMessage;
use tl_engine::sampler::{Sampler, SamplerConfig};
use tl_engine::{GenerationConfig, GenerationStats, Generator, Session, StopReason};

use crate::cli::ChatArgs;
use crate::loaded_model::{self, LoadedModel};
use conversation::Conversation;
use input::{Input, InputReader};
use quiet_input::QuietInput;
use slash::SlashCommand;
use spinner::Spinner;
use wrap::Wrapper;

/// The history of typed messages, in the cache folder.
fn history_file() -> Option<std::path::PathBuf> {
    crate::catalogue::cache_dir()
        .ok()
        .map(|dir| dir.join("chat_history.txt"))
}

pub fn run(args: &ChatArgs, verbose: bool) -> Result<()> {
    let sampler_config = args.sampling.to_config();
    sampler_config.validate()?;
    let loaded = loaded_model::load(&args.model, verbose)?;
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = interrupted.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))?;
    let mut chat = Chat {
        session: loaded.new_session()?,
        loaded: &loaded,
        conversation: Conversation {
            system: args.system.clone(),
            turns: Vec::new(),
        },
        sampler: Sampler::new(sampler_config),
        generation: GenerationConfig {
            max_tokens: args.max_tokens,
            stop_strings: Vec::new(),
            prefill_chunk_tokens: args.model.prefill_chunk,
        },
        interrupted,
        last_stats: None,
        totals: GenerationStats::default(),
    };
    if let Some(message) = &args.message {
        return chat.reply(message.clone());
    }
    eprintln!(
        "Chatting with {} (context {} tokens). /help for commands, Ctrl-D or /quit to leave.",
        chat.model_name(),
        loaded.context
    );
    let mut reader = InputReader::new(history_file())?;
    loop {
        match reader.read()? {
            Input::End => break,
            Input::Interrupted => eprintln!("(Ctrl-D or /quit to leave)"),
            Input::Text(text) if text.trim().is_empty() => {}
            Input::Text(text) if text.trim_start().starts_with('/') => match slash::parse(&text) {
                Ok(SlashCommand::Quit) => break,
                Ok(command) => chat.command(command),
                Err(message) => eprintln!("{message}"),
            },
            Input::Text(text) => {
                if let Err(e) = chat.reply(text) {
                    eprintln!("error: {e:#}");
                }
            }
        }
    }
    Ok(())
}

/// The REPL's state.
struct Chat<'a> {
    loaded: &'a LoadedModel,
    session: Session,
    conversation: Conversation,
    sampler: Sampler,
    generation: GenerationConfig,
    interrupted: Arc<AtomicBool>,
    last_stats: Option<GenerationStats>,
    totals: GenerationStats,
}

impl Chat<'_> {
    fn model_name(&self) -> String {
        let path = &self.loaded.file.path;
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        )
    }

    fn command(&mut self, command: SlashCommand) {
        let outcome = match command {
            SlashCommand::Help => {
                eprintln!("{}", slash::HELP);
                Ok(())
            }
            SlashCommand::Reset => {
                self.conversation.turns.clear();
                self.session.reset();
                eprintln!("(conversation cleared)");
                Ok(())
            }
            SlashCommand::System(text) => {
                let set = text.is_some();
                self.conversation = Conversation {
                    system: text,
                    turns: Vec::new(),
                };
                if set {
                    eprintln!("(system prompt set; conversation cleared)");
                } else {
                    eprintln!("(system prompt cleared; conversation cleared)");
                }
                Ok(())
            }
            SlashCommand::Show => {
                self.show();
                Ok(())
            }
            SlashCommand::Set { name, value } => self.set(&name, &value),
            SlashCommand::Save(path) => self
                .conversation
                .save(&path)
                .map(|()| eprintln!("(saved to {})", path.display())),
            SlashCommand::Load(path) => Conversation::load(&path).map(|c| {
                eprintln!("(loaded {} turns from {})", c.turns.len(), path.display());
                self.conversation = c;
            }),
            SlashCommand::Stats => {
                self.print_stats();
                Ok(())
            }
            SlashCommand::Quit => Ok(()),
        };
        if let Err(e) = outcome {
            eprintln!("error: {e:#}");
        }
    }

    fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let mut config: SamplerConfig = self.sampler.config().clone();
        let number = || {
            value
                .parse::<f32>()
                .map_err(|_| anyhow::anyhow!("{value} is not a number"))
        };
        let whole = || {
            value
                .parse::<u64>()
                .map_err(|_| anyhow::anyhow!("{value} is not a whole number"))
        };
        match name {
            "temperature" => config.temperature = number()?,
            "top_p" => config.top_p = number()?,
            "top_k" => config.top_k = whole()? as usize,
            "min_p" => config.min_p = number()?,
            "repeat_penalty" => config.repeat_penalty = number()?,
            "repeat_last_n" => config.repeat_last_n = whole()? as usize,
            "presence_penalty" => config.presence_penalty = number()?,
            "frequency_penalty" => config.frequency_penalty = number()?,
            "seed" => config.seed = whole()?,
            "max_tokens" => {
                let max = whole()? as usize;
                if max == 0 {
                    bail!("max_tokens must be at least 1");
                }
                self.generation.max_tokens = max;
                eprintln!("({name} = {value})");
                return Ok(());
            }
            other => bail!(
                "unknown setting {other} (temperature, top_p, top_k, min_p, repeat_penalty, \
                 repeat_last_n, presence_penalty, frequency_penalty, seed, max_tokens)"
            ),
        }
        config.validate()?;
        self.sampler = Sampler::new(config);
        eprintln!("({name} = {value})");
        Ok(())
    }

    fn show(&self) {
        let c = self.sampler.config();
        eprintln!(
            "model: {} (context {} tokens)",
            self.model_name(),
            self.loaded.context
        );
        match &self.conversation.system {
            Some(system) => eprintln!("system: {system}"),
            None => eprintln!("system: (none)"),
        }
        eprintln!(
            "temperature {}, top_p {}, top_k {}, min_p {}, repeat_penalty {}, repeat_last_n {}, \
             presence_penalty {}, frequency_penalty {}, seed {}, max_tokens {}",
            c.temperature,
            c.top_p,
            c.top_k,
            c.min_p,
            c.repeat_penalty,
            c.repeat_last_n,
            c.presence_penalty,
            c.frequency_penalty,
            c.seed,
            self.generation.max_tokens
        );
    }

    /// Runs the whole chunks of the new part of `prompt` but the last, one
    /// chunk at a time, checking for Ctrl-C between them; false if it came.
    /// Generation then runs the last chunk, so the chunks are those it would
    /// have cut itself, and the reply the same.
    fn prefill_ahead(&mut self, prompt: &[u32]) -> Result<bool> {
        let chunk = self.generation.prefill_chunk_tokens;
        let reused = self.session.reusable_prefix(prompt);
        let new = prompt.len() - reused;
        if chunk == 0 || new <= chunk {
            return Ok(true);
        }
        let ahead = reused + (new - 1) / chunk * chunk;
        let interrupted = self.interrupted.clone();
        let ran =
            self.session
                .prefill(&self.loaded.backend, &prompt[..ahead], chunk, &mut || {
                    !interrupted.load(Ordering::SeqCst)
                })?;
        Ok(ran.is_some())
    }

    /// Adds the user's message, generates and streams the reply, records it.
    /// A reply stopped by Ctrl-C while the prompt is read leaves the
    /// conversation as it was.
    fn reply(&mut self, text: String) -> Result<()> {
        self.conversation.turns.push(ChatMessage::user(text));
        let prompt = match self.fit_prompt() {
            Ok(prompt) => prompt,
            Err(e) => {
                self.conversation.turns.pop();
                return Err(e);
            }
        };
        self.interrupted.store(false, Ordering::SeqCst);
        let _quiet = QuietInput::start();
        let mut spinner = Some(Spinner::start());
        match self.prefill_ahead(&prompt) {
            Ok(true) => {}
            Ok(false) => {
                drop(spinner);
                self.conversation.turns.pop();
                eprintln!("(stopped)");
                return Ok(());
            }
            Err(e) => {
                self.conversation.turns.pop();
                return Err(e);
            }
        }
        let generator = Generator {
            model: &self.loaded.backend,
            tokenizer: &self.loaded.file.tokenizer,
            config: &self.generation,
        };
        let interrupted = self.interrupted.clone();
        let mut stdout = std::io::stdout();
        let mut wrapper = Wrapper::for_stdout();
        let generation = generator.generate(
            &mut self.session,
            &prompt,
            &mut self.sampler,
            &mut |piece| {
                if let Some(spinner) = spinner.take() {
                    spinner.stop();
                }
                let _ = stdout.write_all(wrapper.push(piece).as_bytes());
                let _ = stdout.flush();
                !interrupted.load(Ordering::SeqCst)
            },
        );
        drop(spinner);
        println!("{}", wrapper.finish());
        let generation = match generation {
            Ok(generation) => generation,
            Err(e) => {
                self.conversation.turns.pop();
                return Err(e.into());
            }
        };
        match generation.stop_reason {
            StopReason::Cancelled => eprintln!("(stopped)"),
            StopReason::ContextFull => eprintln!("(reply cut: the context is full)"),
            StopReason::MaxTokens => {
                eprintln!("(reply cut at {} tokens)", self.generation.max_tokens)
            }
            _ => {}
        }
        self.conversation
            .turns
            .push(ChatMessage::assistant(generation.text));
        self.record(generation.stats);
        Ok(())
    }

    /// The conversation's tokens, dropping the oldest exchanges until the prompt
    /// leaves room for a reply.
    fn fit_prompt(&mut self) -> Result<Vec<u32>> {
        let context = self.session.capacity();
        let reserve = self.generation.max_tokens.min(context / 2);
        let mut dropped = 0;
        loop {
            // What the user typed (and the model answered) stays text: only
            // the template's markup becomes control tokens.
            let tokens = self
                .loaded
                .file
                .template
                .encode(
                    &self.loaded.file.tokenizer,
                    &self.conversation.messages(),
                    true,
                )?
                .tokens;
            if tokens.len() + reserve <= context {
                if dropped > 0 {
                    eprintln!("(context full: dropped the {dropped} oldest exchange(s))");
                }
                return Ok(tokens);
            }
            if !self.conversation.drop_oldest_exchange() {
                bail!(
                    "the message needs {} tokens, and with room for a reply that exceeds the context of {context}; \
                     shorten it or restart with a larger --ctx",
                    tokens.len()
                );
            }
            dropped += 1;
        }
    }

    fn record(&mut self, stats: GenerationStats) {
        eprintln!(
            "[{} tokens, {:.1} tok/s; prompt {} tokens ({} new), {:.1} tok/s]",
            stats.generated_tokens,
            stats.decode_tokens_per_second(),
            stats.prompt_tokens,
            stats.prefilled_tokens,
            stats.prefill_tokens_per_second()
        );
        self.totals.prompt_tokens += stats.prompt_tokens;
        self.totals.prefilled_tokens += stats.prefilled_tokens;
        self.totals.generated_tokens += stats.generated_tokens;
        self.totals.prefill_time += stats.prefill_time;
        self.totals.decode_time += stats.decode_time;
        self.last_stats = Some(stats);
    }

    fn print_stats(&self) {
        if let Some(s) = &self.last_stats {
            eprintln!(
                "last reply: {} tokens in {:.2} s ({:.1} tok/s); prompt {} tokens, {} run in {:.2} s ({:.1} tok/s)",
                s.generated_tokens,
                s.decode_time.as_secs_f64(),
                s.decode_tokens_per_second(),
                s.prompt_tokens,
                s.prefilled_tokens,
                s.prefill_time.as_secs_f64(),
                s.prefill_tokens_per_second()
            );
        } else {
            eprintln!("no reply yet");
        }
        let t = &self.totals;
        eprintln!(
            "session: {} turns, {} tokens generated, {} prompt tokens run; {} of {} context tokens in use, KV cache {:.1} MB",
            self.conversation.turns.len(),
            t.generated_tokens,
            t.prefilled_tokens,
            self.session.tokens().len(),
            self.session.capacity(),
            self.session.cache_bytes() as f64 / 1e6
        );
    }
}
