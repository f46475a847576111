//! Constrained decoding: output that must follow a JSON schema or a Lark
//! grammar, through the `llguidance` crate (the engine llama.cpp and vLLM
//! use) rather than a parser of our own.
//!
//! Three pieces, from the longest-lived to the shortest:
//!
//! - [`ConstraintVocabulary`]: every token's bytes and the tokens that end
//!   an answer, read once from a model's tokenizer ([`vocabulary`]).
//! - [`ConstraintCompiler`]: llguidance's tokenizer state (a byte trie of the
//!   vocabulary and its precomputed slices) for one model; building it takes
//!   tens of milliseconds, so a server keeps one per model.
//! - [`Constraint`]: one sequence's parser. Before each draw the sampler asks
//!   it to mask the logits ([`Constraint::mask_logits`]: tokens that cannot
//!   continue a valid output get `-inf`), and after the draw it advances
//!   ([`Constraint::accept`]). Once nothing but the end can follow
//!   ([`Constraint::is_complete`]), generation stops.
//!
//! Compiling takes untrusted text, so it is bounded: the grammar's or
//! schema's size ([`MAX_GRAMMAR_BYTES`]) and llguidance's own fuel and
//! size limits on the lexer and parser, which also bound the work of each
//! mask. A grammar that allows no output at all is refused when compiled.

mod vocabulary;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{ApproximateTokEnv, SimpleVob, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use crate::error::{Error, Result};

pub use vocabulary::ConstraintVocabulary;

/// Largest grammar or JSON schema accepted, in bytes (a schema counts as its
/// compact JSON text). Real schemas (OpenAI's, Pydantic's) are a few KiB;
/// the bound keeps a hostile one from costing seconds of compilation.
pub const MAX_GRAMMAR_BYTES: usize = 64 * 1024;

/// What the output must follow.
#[derive(Debug, Clone, PartialEq)]
pub enum Grammar {
    /// A JSON Schema (draft 2020-12 as llguidance supports it).
    JsonSchema(Value),
    /// A grammar in llguidance's Lark dialect.
    Lark(String),
}

impl Grammar {
    /// Any JSON object: OpenAI's `json_object` mode and Ollama's `"json"`.
    pub fn any_json_object() -> Self {
        Grammar::JsonSchema(serde_json::json!({"type": "object"}))
    }

    /// The grammar's size as [`MAX_GRAMMAR_BYTES`] counts it.
    pub fn size_bytes(&self) -> usize {
        match self {
            Grammar::JsonSchema(schema) => serde_json::to_string(schema).map_or(0, |s| s.len()),
            Grammar::Lark(text) => text.len(),
        }
    }
}

/// How JSON is written under a schema unless the schema says otherwise
/// (llguidance's `x-guidance` key): Python's `json.dumps` separators and no
/// other whitespace. Flexible whitespace would let a sampled answer fill
/// its token budget with newlines and never finish.
pub(crate) fn json_layout() -> Value {
    serde_json::json!({
        "item_separator": ", ",
        "key_separator": ": ",
        "whitespace_flexible": false,
    })
}

/// Compiles grammars for one tokenizer; cheap to share between threads.
#[derive(Clone)]
pub struct ConstraintCompiler {
    factory: Arc<ParserFactory>,
}

impl std::fmt::Debug for ConstraintCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstraintCompiler")
            .field(
                "vocab_size",
                &self.factory.tok_env().tok_trie().vocab_size(),
            )
            .finish_non_exhaustive()
    }
}

impl ConstraintCompiler {
    /// llguidance's state for `vocabulary`.
    pub fn new(vocabulary: &ConstraintVocabulary) -> Result<Self> {
        let trie = byte_trie(vocabulary)?;
        // We never force tokens, so greedy tokenization over the trie (only
        // used to read special-token names in grammars) is enough.
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| Error::Grammar(format!("cannot index the vocabulary: {e}")))?;
        // A library does not print: warnings go to `tracing`, errors to the caller.
        factory.quiet();
        *factory.limits_mut() = ParserLimits {
            // Errors name the grammar's problem, not the parser's state.
            verbose_errors: false,
            ..ParserLimits::default()
        };
        Ok(ConstraintCompiler {
            factory: Arc::new(factory),
        })
    }

    /// A fresh constraint for one sequence, or [`Error::Grammar`] saying
    /// what is wrong with `grammar`: too large, invalid, or allowing no
    /// output.
    pub fn compile(&self, grammar: &Grammar) -> Result<Constraint> {
        let size = grammar.size_bytes();
        if size > MAX_GRAMMAR_BYTES {
            return Err(Error::Grammar(format!(
                "the grammar or schema has {size} bytes, more than the {MAX_GRAMMAR_BYTES} allowed"
            )));
        }
        let top = match grammar {
            Grammar::JsonSchema(schema) => TopLevelGrammar::from_json_schema(laid_out(schema)?),
            Grammar::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
        };
        let parser = self
            .factory
            .create_parser(top)
            .map_err(|e| Error::Grammar(brief(&e.to_string())))?;
        let mut matcher = Box::new(Matcher::new(Ok(parser)));
        for warning in matcher.grammar_warnings() {
            tracing::debug!("grammar warning: {warning}");
        }
        let mut constraint = Constraint {
            matcher,
            end_tokens: self.factory.tok_env().tok_trie().eos_tokens().to_vec(),
            next_mask: None,
        };
        match constraint.matcher.compute_mask() {
            Ok(first) if !first.is_zero() => Ok(constraint),
            Ok(_) => Err(Error::Grammar("the grammar allows no output".into())),
            // llguidance's name for "no byte can come next".
            Err(e) if e.to_string().contains("NoExtension") => {
                Err(Error::Grammar("the grammar allows no output".into()))
            }
            Err(e) => Err(Error::Grammar(format!(
                "the grammar's first step failed: {}",
                brief(&e.to_string())
            ))),
        }
    }
}

/// `schema` with our JSON layout unless it sets its own; a schema must be
/// an object (or `true`, any JSON at all).
fn laid_out(schema: &Value) -> Result<Value> {
    let mut schema = match schema {
        Value::Bool(true) => serde_json::json!({}),
        Value::Bool(false) => {
            return Err(Error::Grammar("the schema `false` allows no output".into()))
        }
        Value::Object(_) => schema.clone(),
        _ => {
            return Err(Error::Grammar(
                "a JSON schema must be an object, such as {\"type\": \"object\"}".into(),
            ))
        }
    };
    if let Value::Object(map) = &mut schema {
        map.entry("x-guidance").or_insert_with(json_layout);
    }
    Ok(schema)
}

/// llguidance's byte trie of the vocabulary.
fn byte_trie(vocabulary: &ConstraintVocabulary) -> Result<TokTrie> {
    let words = &vocabulary.token_bytes;
    let vocab_size = u32::try_from(words.len())
        .map_err(|_| Error::Grammar(format!("a vocabulary of {} tokens", words.len())))?;
    let Some(&eos) = vocabulary.end_tokens.first() else {
        return Err(Error::Grammar(
            "the model has no end-of-sequence token, which constrained decoding needs".into(),
        ));
    };
    if let Some(&bad) = vocabulary.end_tokens.iter().find(|&&t| t >= vocab_size) {
        return Err(Error::Grammar(format!(
            "end token {bad} is outside the vocabulary of {vocab_size}"
        )));
    }
    let trie = TokTrie::from(&TokRxInfo::new(vocab_size, eos), words);
    Ok(trie.with_eos_tokens(&vocabulary.end_tokens))
}

/// One sequence's constraint: which tokens may come next, given the ones
/// accepted so far.
#[derive(Clone)]
pub struct Constraint {
    /// Boxed: llguidance's parser state is over a kilobyte, and constraints
    /// travel in requests and samplers that mostly have none.
    matcher: Box<Matcher>,
    /// Tokens that end the answer; the grammar allows them where it may end.
    end_tokens: Vec<u32>,
    /// The next step's mask, when computed ahead ([`Constraint::prepare_mask`]);
    /// boxed, like the matcher, to keep requests small.
    next_mask: Option<Box<SimpleVob>>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("complete", &self.is_complete())
            .finish_non_exhaustive()
    }
}

impl Constraint {
    /// Sets the logits of the tokens that may not come next to `-inf`
    /// (ids beyond the vocabulary included). Fails when the grammar's work
    /// limits are hit or it allows nothing here.
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<()> {
        let allowed = match self.next_mask.take() {
            Some(ready) => *ready,
            None => self.allowed()?,
        };
        let mut any = false;
        for (token, logit) in logits.iter_mut().enumerate() {
            if token < allowed.len() && allowed.get(token) {
                any |= *logit > f32::NEG_INFINITY;
            } else {
                *logit = f32::NEG_INFINITY;
            }
        }
        if !any {
            return Err(Error::Grammar(
                "the grammar allows no token the model can produce here".into(),
            ));
        }
        Ok(())
    }

    /// Moves past `token`, which the last mask allowed. An end token ends
    /// the constraint (the generation ends on it anyway).
    pub fn accept(&mut self, token: u32) -> Result<()> {
        self.next_mask = None;
        if self.end_tokens.contains(&token) {
            return Ok(());
        }
        self.matcher
            .consume_token(token)
            .map_err(|e| Error::Grammar(format!("token {token} broke the grammar: {e}")))
    }

    /// Computes the next step's mask now, so that [`Constraint::mask_logits`]
    /// finds it ready: called on another thread while a device runs the
    /// step, it takes the mask off the token's critical path. A failure is
    /// left for `mask_logits` to report.
    pub fn prepare_mask(&mut self) {
        if self.next_mask.is_none() {
            self.next_mask = self.allowed().ok().map(Box::new);
        }
    }

    /// Whether the output is complete: the grammar accepts it and nothing
    /// but the end may follow.
    pub fn is_complete(&self) -> bool {
        self.matcher.is_stopped() && !self.matcher.is_error()
    }

    fn allowed(&mut self) -> Result<SimpleVob> {
        self.matcher.compute_mask_or_eos().map_err(|e| {
            Error::Grammar(format!(
                "cannot compute the grammar's mask: {}",
                brief(&e.to_string())
            ))
        })
    }
}

/// Longest llguidance message passed on: its errors quote the grammar's
/// line, which may be the whole 64 KiB grammar.
const MAX_MESSAGE_CHARS: usize = 300;

/// An llguidance message fit for a client: without the marker of the
/// details we turned off, cut to [`MAX_MESSAGE_CHARS`].
fn brief(message: &str) -> String {
    let message = message.replace("<non-verbose/>", "");
    let message = message.trim();
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}...", &message[..end]),
        None => message.to_owned(),
    }
}
