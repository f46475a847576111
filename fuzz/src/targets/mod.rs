//! The fuzz targets: what each one feeds to the product, the seeds it starts
//! from, and how its inputs are mutated.
//!
//! | target     | input                            | runs                                                          |
//! |------------|----------------------------------|---------------------------------------------------------------|
//! | `gguf`     | a GGUF file                      | the reader, every accessor, the model configuration, the CPU weight load |
//! | `vocab`    | a GGUF file with a vocabulary    | tokenizer loading, then encode/decode of probe texts          |
//! | `tokenize` | text                             | encode/decode with five real vocabularies, special tokens on/off |
//! | `template` | template `\0` messages `\0` flags | chat-template parsing and rendering                           |
//! | `lang`     | a `.tl` program                  | lexer, parser (file and REPL), dump, checker, diagnostics     |
//! | `http`     | `METHOD PATH` `\n` JSON body     | the server's router, in process, up to the engine's queue     |

mod gguf;
mod http;
mod lang;
mod selftest;
mod template;
mod tokenize;
mod vocab;

use std::path::Path;

use crate::mutate::Mutator;

/// Runs inputs inside the worker. Returning is success; the signature names
/// the outcome for the corpus, one feature per line (an input with any
/// feature not seen before is kept). A bug is a panic, so a check of the
/// product's own promises (an id `encode` made that `decode` refuses) is an
/// assertion.
pub trait Runner {
    fn run(&mut self, input: &[u8]) -> String;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetKind {
    Gguf,
    Vocab,
    Tokenize,
    Template,
    Lang,
    Http,
    /// Fails on demand; for the harness's own tests.
    #[value(hide = true)]
    Selftest,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Gguf => "gguf",
            TargetKind::Vocab => "vocab",
            TargetKind::Tokenize => "tokenize",
            TargetKind::Template => "template",
            TargetKind::Lang => "lang",
            TargetKind::Http => "http",
            TargetKind::Selftest => "selftest",
        }
    }

    /// The stack of the thread the target runs on: the one its code has in
    /// the product, so that a stack overflow here is one there. The server
    /// templates and tokenizes on tokio's blocking threads (2 MiB); `tl check`
    /// and `tl chat` run on the main thread (8 MiB on Linux). The `http`
    /// target runs the real runtime, whose threads have their own stacks.
    pub fn stack_bytes(self) -> usize {
        const MIB: usize = 1 << 20;
        match self {
            TargetKind::Lang => 8 * MIB,
            TargetKind::Gguf
            | TargetKind::Vocab
            | TargetKind::Tokenize
            | TargetKind::Template
            | TargetKind::Http
            | TargetKind::Selftest => 2 * MIB,
        }
    }

    /// Longest input made unless `--max-len` says otherwise: room for the
    /// seeds to grow (the tiny model is 150 KB), small enough that one input
    /// runs in milliseconds.
    pub fn default_max_len(self) -> usize {
        const KIB: usize = 1024;
        match self {
            TargetKind::Gguf | TargetKind::Vocab => 512 * KIB,
            TargetKind::Tokenize => 16 * KIB,
            TargetKind::Template | TargetKind::Lang | TargetKind::Http => 64 * KIB,
            TargetKind::Selftest => KIB,
        }
    }

    /// The inputs a campaign starts from (before any `--corpus` folder).
    pub fn seeds(self, repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
        match self {
            TargetKind::Gguf => gguf::seeds(repo),
            TargetKind::Vocab => vocab::seeds(repo),
            TargetKind::Tokenize => tokenize::seeds(repo),
            TargetKind::Template => template::seeds(repo),
            TargetKind::Lang => lang::seeds(repo),
            TargetKind::Http => http::seeds(repo),
            TargetKind::Selftest => Ok(selftest::seeds()),
        }
    }

    pub fn mutator(self, seeds: &[Vec<u8>], max_len: usize) -> Mutator {
        let (shape, dictionary) = match self {
            TargetKind::Gguf => gguf::dictionary(),
            TargetKind::Vocab => vocab::dictionary(),
            TargetKind::Tokenize => tokenize::dictionary(seeds),
            TargetKind::Template => template::dictionary(seeds),
            TargetKind::Lang => lang::dictionary(seeds),
            TargetKind::Http => http::dictionary(),
            TargetKind::Selftest => selftest::dictionary(),
        };
        Mutator {
            shape,
            dictionary,
            max_len,
        }
    }

    /// Sets the target up (inside the worker): loads what every input needs.
    pub fn runner(self, repo: &Path) -> anyhow::Result<Box<dyn Runner>> {
        Ok(match self {
            TargetKind::Gguf => Box::new(gguf::GgufRunner),
            TargetKind::Vocab => Box::new(vocab::VocabRunner),
            TargetKind::Tokenize => Box::new(tokenize::TokenizeRunner::new(repo)?),
            TargetKind::Template => Box::new(template::TemplateRunner),
            TargetKind::Lang => Box::new(lang::LangRunner),
            TargetKind::Http => Box::new(http::HttpRunner::new(repo)?),
            TargetKind::Selftest => Box::new(selftest::SelftestRunner),
        })
    }
}
