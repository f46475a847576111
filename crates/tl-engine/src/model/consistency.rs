//! A model file's tensors and vocabulary checked against its configuration when
//! the file is opened, before any weight is read: metadata that disagrees with
//! the tensors (a `block_count` smaller or larger than the blocks present, a
//! head count whose widths do not match the projections, a vocabulary longer or
//! shorter than the embedding table) is refused here, with the tensor or key
//! named, rather than found by a loop that trusted the metadata.
//!
//! Since every tensor lies inside the file, a configuration that matches them
//! is also bounded by the file's size: no width derived from it can be larger
//! than the tensors the file holds.

use tl_gguf::GgufFile;

use crate::error::{Error, Result};
use crate::model::config::ModelConfig;
use crate::model::tensor_names::{self as names, BlockTensor};

/// The key holding the tokenizer's token texts, one per embedding row.
const KEY_TOKENS: &str = "tokenizer.ggml.tokens";

/// Errors unless every tensor the configuration asks for is in `file` in the
/// shape it gives, no block lies beyond `block_count`, and the tokenizer has one
/// token per row of the embedding table.
pub fn check_file(config: &ModelConfig, file: &GgufFile) -> Result<()> {
    check_blocks_present(config, file)?;
    check_no_extra_blocks(config, file)?;
    check_model_tensors(config, file)?;
    check_token_count(config, file)
}

/// Each block's tensors, in their shapes.
fn check_blocks_present(config: &ModelConfig, file: &GgufFile) -> Result<()> {
    // A cheap bound first, so a huge `block_count` fails at once.
    if config.block_count > file.tensors().len() {
        return Err(Error::InvalidModel(format!(
            "{}.block_count is {}, but the file has only {} tensors",
            config.architecture,
            config.block_count,
            file.tensors().len()
        )));
    }
    for block in 0..config.block_count {
        for tensor in BlockTensor::ALL {
            if let Some(shape) = tensor.shape(config) {
                expect_shape(file, &tensor.name(block), &shape, true)?;
            }
        }
    }
    Ok(())
}

/// No `blk.N.` tensor with `N` at or past `block_count` (a count smaller than
/// the blocks present would silently drop layers).
fn check_no_extra_blocks(config: &ModelConfig, file: &GgufFile) -> Result<()> {
    let beyond = file
        .tensors()
        .iter()
        .find(|t| names::block_of(&t.name).is_some_and(|block| block >= config.block_count as u64));
    match beyond {
        Some(tensor) => Err(Error::InvalidModel(format!(
            "tensor '{}' lies beyond the {} blocks {}.block_count declares",
            tensor.name, config.block_count, config.architecture
        ))),
        None => Ok(()),
    }
}

/// The tensors outside the blocks: the embedding table, the final norm, the
/// output head and the RoPE factors (the last two optional).
fn check_model_tensors(config: &ModelConfig, file: &GgufFile) -> Result<()> {
    let (vocab, hidden) = (config.vocab_size, config.embedding_length);
    expect_shape(file, names::TOKEN_EMBEDDING, &[vocab, hidden], true)?;
    expect_shape(file, names::OUTPUT_NORM, &[hidden], true)?;
    expect_shape(file, names::OUTPUT, &[vocab, hidden], false)?;
    expect_shape(file, names::ROPE_FREQS, &[config.head_dim / 2], false)
}

/// Errors unless tensor `name` has `shape`, or is absent and not `required`.
fn expect_shape(file: &GgufFile, name: &str, shape: &[usize], required: bool) -> Result<()> {
    let Some(info) = file.tensor_info(name) else {
        if required {
            return Err(Error::InvalidModel(format!("tensor '{name}' is missing")));
        }
        return Ok(());
    };
    if info.shape() != shape {
        return Err(Error::InvalidModel(format!(
            "tensor '{name}' has shape {:?}, but the metadata gives it {shape:?}",
            info.shape()
        )));
    }
    Ok(())
}

/// One token text per embedding row, when the file has a tokenizer.
fn check_token_count(config: &ModelConfig, file: &GgufFile) -> Result<()> {
    let Some(tokens) = file.get_array(KEY_TOKENS)? else {
        return Ok(());
    };
    if tokens.len() != config.vocab_size {
        return Err(Error::InvalidModel(format!(
            "{KEY_TOKENS} has {} tokens, but the embedding table has {} rows",
            tokens.len(),
            config.vocab_size
        )));
    }
    Ok(())
}
