//! Tokenizers built from GGUF metadata, producing the same ids as llama.cpp.
//!
//! Two algorithms are supported: SentencePiece-style BPE with scores and byte
//! fallback (`tokenizer.ggml.model = "llama"`: LLaMA 1/2, Mistral, Phi-3) and
//! byte-level BPE with ranked merges behind a regex pre-tokenizer
//! (`"gpt2"`: GPT-2, StarCoder, SmolLM, Llama 3, Qwen2, DeepSeek).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = tl_gguf::GgufFile::open("model.gguf")?;
//! let tokenizer = tl_tokenizer::Tokenizer::from_gguf(&file)?;
//! let ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>", true, true)?;
//! let text = tokenizer.decode(&ids, true)?;
//! # Ok(()) }
//! ```
//!
//! Layout: `loader` reads the metadata; `vocab`, `special_ids` and
//! `special_detection` hold the token table; `partition` cuts special tokens out
//! of the input; `spm`, or `split` (with `split_custom` and `collapse`) then
//! `bpe`, tokenize the text in between; `pieces`, `clean_spaces` and `stream`
//! turn ids back into text.

mod bpe;
mod byte_encoding;
mod clean_spaces;
mod codepoint;
mod collapse;
pub mod error;
mod fast_hash;
mod loader;
mod partition;
mod pieces;
mod pre_tokenizer;
mod special_detection;
mod special_ids;
mod split;
mod split_custom;
mod spm;
mod stream;
mod token_attr;
mod tokenizer;
mod vocab;

#[cfg(test)]
mod test_vocab;

pub use error::{Error, Result};
pub use stream::StreamDecoder;
pub use tokenizer::{Tokenizer, TokenizerKind};
