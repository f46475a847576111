//! The llama-architecture transformer (Llama 1/2/3, TinyLlama, SmolLM, Mistral):
//! pre-norm blocks of grouped-query attention with RoPE and a SwiGLU MLP. Qwen3
//! is the same with each query and key head RMS-normalised before RoPE, which
//! pairs elements half a head apart (see [`ModelConfig`]).
//!
//! Weights are immutable; all per-sequence state lives in the [`KvCache`], so one
//! model can serve many sequences: `forward(&self, tokens, index_pos, &mut cache)`.
//! Activations are plain row-major f32 buffers `[token][feature]`; every step that
//! shapes the numerics (norms, RoPE, attention, matmuls) follows llama.cpp's CPU
//! arithmetic so greedy decoding picks the same tokens.

use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};
use tl_gguf::GgufFile;

use crate::cpu::parallel;
use crate::error::{Error, Result};
use crate::model::activation::swiglu_in_place;
use crate::model::attention::{attend, attend_row, AttentionShape, RowPlace};
use crate::model::cache::KvCache;
use crate::model::config::ModelConfig;
use crate::model::linear::Linear;
use crate::model::norm::{rms_norm, rms_norm_in_place};
use crate::model::rope::RopeTable;
use crate::model::tensor_names::{self as names, BlockTensor};
use crate::model::weights::WeightLoader;

/// Which positions' logits a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position's: `vocab` values (generation).
    Last,
    /// Every position's: `seq × vocab` values, row-major (perplexity, checks).
    All,
}

/// A loaded llama-architecture (or Qwen3) model.
pub struct Model {
    config: ModelConfig,
    embedding: Arc<QTensor>,
    blocks: Vec<Block>,
    output_norm: Vec<f32>,
    output: Linear,
    rope: RopeTable,
    weight_bytes: usize,
}

struct Block {
    attention_norm: Vec<f32>,
    query: Linear,
    key: Linear,
    value: Linear,
    attention_output: Linear,
    /// Qwen3's per-head norms (None for llama).
    qk_norm: Option<QkNorm>,
    feed_forward_norm: Vec<f32>,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// The RMS norm weights of every query head and every key head (`head_dim`
/// values each).
struct QkNorm {
    query: Vec<f32>,
    key: Vec<f32>,
}

impl Model {
    /// Loads the model from a validated GGUF file. `max_positions` bounds the
    /// positions any cache of this model may hold (the RoPE table's length).
    pub fn load(file: &GgufFile, max_positions: usize) -> Result<Self> {
        let config = ModelConfig::from_gguf(file)?;
        let device = Device::Cpu;
        let mut loader = WeightLoader::new(file, &device);
        let hidden = config.embedding_length;
        let embedding =
            Arc::new(loader.qtensor(names::TOKEN_EMBEDDING, &[config.vocab_size, hidden])?);
        let blocks = (0..config.block_count)
            .map(|i| Block::load(&mut loader, &config, i))
            .collect::<Result<Vec<_>>>()?;
        let output_norm = loader.vector(names::OUTPUT_NORM, hidden)?;
        let output = if loader.has(names::OUTPUT) {
            loader.linear(names::OUTPUT, config.vocab_size, hidden)?
        } else {
            // Tied: the output head is the embedding table.
            loader.linear(names::TOKEN_EMBEDDING, config.vocab_size, hidden)?
        };
        let rope = RopeTable::for_model(&mut loader, &config, max_positions)?;
        Ok(Model {
            weight_bytes: loader.loaded_bytes(),
            config,
            embedding,
            blocks,
            output_norm,
            output,
            rope,
        })
    }

    /// The model's hyperparameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Bytes of weights held in memory.
    pub fn weight_bytes(&self) -> usize {
        self.weight_bytes
    }

    /// The longest context a cache of this model may have.
    pub fn max_positions(&self) -> usize {
        self.rope.max_positions()
    }

    /// A fresh cache for up to `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> Result<KvCache> {
        if capacity > self.max_positions() {
            return Err(Error::InvalidRequest(format!(
                "a cache of {capacity} positions exceeds the {} the model was loaded for",
                self.max_positions()
            )));
        }
        Ok(KvCache::new(&self.config, capacity))
    }

    /// Runs `tokens` at positions `index_pos..`, appending their keys and values to
    /// `cache` (which must hold exactly `index_pos` positions of this sequence).
    /// Returns the logits of the last token (`vocab` values) or of every token.
    pub fn forward(
        &self,
        tokens: &[u32],
        index_pos: usize,
        cache: &mut KvCache,
        which: Logits,
    ) -> Result<Vec<f32>> {
        check_tokens(tokens, self.config.vocab_size)?;
        cache.check_room(index_pos, tokens.len())?;
        let mut rows = Rows::Sequence {
            start: index_pos,
            cache,
        };
        let x = self.run_blocks(tokens, &mut rows)?;
        cache_commit(&mut rows, tokens.len());
        let hidden = self.config.embedding_length;
        let x = match which {
            Logits::Last => &x[(tokens.len() - 1) * hidden..],
            Logits::All => &x[..],
        };
        self.logits(x)
    }

    /// One decode step for several sequences at once: row `i` is token
    /// `tokens[i]` of the sequence whose cache is `steps[i].cache`, at position
    /// `steps[i].position`. The matrix products run on all rows together (each
    /// weight is read once for the whole batch); attention runs per row against
    /// its own cache, exactly as a lone decode step does, so each row's logits
    /// equal those of [`Model::forward`] on that sequence alone. Returns
    /// `rows × vocab` logits.
    pub fn forward_batch(&self, tokens: &[u32], steps: &mut [BatchStep<'_>]) -> Result<Vec<f32>> {
        check_tokens(tokens, self.config.vocab_size)?;
        if tokens.len() != steps.len() {
            return Err(Error::InvalidRequest(format!(
                "a batch of {} tokens for {} sequences",
                tokens.len(),
                steps.len()
            )));
        }
        for step in steps.iter() {
            step.cache.check_room(step.position, 1)?;
        }
        let mut rows = Rows::Batch(steps);
        let x = self.run_blocks(tokens, &mut rows)?;
        cache_commit(&mut rows, 1);
        self.logits(&x)
    }

    /// Embeds `tokens` and runs every block over them.
    fn run_blocks(&self, tokens: &[u32], rows: &mut Rows<'_, '_>) -> Result<Vec<f32>> {
        let ids = Tensor::new(tokens, &Device::Cpu)?;
        let mut x = self
            .embedding
            .embedding(&ids)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let mut scratch = Scratch::new(&self.config, tokens.len());
        for (layer, block) in self.blocks.iter().enumerate() {
            block.forward(&mut x, layer, rows, &mut scratch, self)?;
        }
        Ok(x)
    }

    /// The output head over the rows of `x`.
    fn logits(&self, x: &[f32]) -> Result<Vec<f32>> {
        let hidden = self.config.embedding_length;
        let mut normed = vec![0.0; x.len()];
        rms_norm(x, &self.output_norm, self.config.rms_norm_eps, &mut normed);
        let mut logits = vec![0.0; x.len() / hidden * self.output.out_features()];
        self.output.forward(&normed, &mut logits)?;
        Ok(logits)
    }
}

/// One sequence's place in a batched decode step.
pub struct BatchStep<'c> {
    /// The position of the new token (the number of tokens the cache holds).
    pub position: usize,
    pub cache: &'c mut KvCache,
}

/// Which sequence and position each row of a pass belongs to.
enum Rows<'a, 'c> {
    /// Every row from one sequence, at consecutive positions from `start`.
    Sequence {
        start: usize,
        cache: &'a mut KvCache,
    },
    /// Row `i` is the next token of sequence `i`.
    Batch(&'a mut [BatchStep<'c>]),
}

/// Marks the new positions as filled in every cache of the pass.
fn cache_commit(rows: &mut Rows<'_, '_>, count: usize) {
    match rows {
        Rows::Sequence { start, cache } => cache.commit(*start + count),
        Rows::Batch(steps) => {
            for step in steps.iter_mut() {
                step.cache.commit(step.position + count);
            }
        }
    }
}

/// Buffers for one forward pass, `[token][feature]`.
struct Scratch {
    normed: Vec<f32>,
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
    attention: Vec<f32>,
    projected: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
}

impl Scratch {
    fn new(c: &ModelConfig, rows: usize) -> Self {
        let (q_width, kv_width) = (c.query_width(), c.key_value_width());
        Scratch {
            normed: vec![0.0; rows * c.embedding_length],
            query: vec![0.0; rows * q_width],
            key: vec![0.0; rows * kv_width],
            value: vec![0.0; rows * kv_width],
            attention: vec![0.0; rows * q_width],
            projected: vec![0.0; rows * c.embedding_length],
            gate: vec![0.0; rows * c.feed_forward_length],
            up: vec![0.0; rows * c.feed_forward_length],
        }
    }
}

impl Block {
    fn load(loader: &mut WeightLoader, config: &ModelConfig, i: usize) -> Result<Self> {
        let hidden = config.embedding_length;
        let (q_width, kv_width) = (config.query_width(), config.key_value_width());
        let ffn = config.feed_forward_length;
        let name = |t: BlockTensor| t.name(i);
        let qk_norm = if config.qk_norm {
            Some(QkNorm {
                query: loader.vector(&name(BlockTensor::QueryNorm), config.head_dim)?,
                key: loader.vector(&name(BlockTensor::KeyNorm), config.head_dim)?,
            })
        } else {
            None
        };
        Ok(Block {
            qk_norm,
            attention_norm: loader.vector(&name(BlockTensor::AttentionNorm), hidden)?,
            query: loader.linear(&name(BlockTensor::Query), q_width, hidden)?,
            key: loader.linear(&name(BlockTensor::Key), kv_width, hidden)?,
            value: loader.linear(&name(BlockTensor::Value), kv_width, hidden)?,
            attention_output: loader.linear(
                &name(BlockTensor::AttentionOutput),
                hidden,
                q_width,
            )?,
            feed_forward_norm: loader.vector(&name(BlockTensor::FeedForwardNorm), hidden)?,
            gate: loader.linear(&name(BlockTensor::Gate), ffn, hidden)?,
            up: loader.linear(&name(BlockTensor::Up), ffn, hidden)?,
            down: loader.linear(&name(BlockTensor::Down), hidden, ffn)?,
        })
    }

    /// One block, in place: `x += attention(norm(x))`, then `x += mlp(norm(x))`.
    fn forward(
        &self,
        x: &mut [f32],
        layer: usize,
        rows: &mut Rows<'_, '_>,
        s: &mut Scratch,
        model: &Model,
    ) -> Result<()> {
        let c = &model.config;
        rms_norm(x, &self.attention_norm, c.rms_norm_eps, &mut s.normed);
        Linear::forward_shared_input(
            &mut [
                (&self.query, &mut s.query),
                (&self.key, &mut s.key),
                (&self.value, &mut s.value),
            ],
            &s.normed,
        )?;
        match rows {
            Rows::Sequence { start, cache } => {
                attend_sequence(model, self, layer, *start, cache, s);
            }
            Rows::Batch(steps) => attend_batch(model, self, layer, steps, s),
        }
        self.attention_output
            .forward(&s.attention, &mut s.projected)?;
        add_in_place(x, &s.projected);
        rms_norm(x, &self.feed_forward_norm, c.rms_norm_eps, &mut s.normed);
        Linear::forward_shared_input(
            &mut [(&self.gate, &mut s.gate), (&self.up, &mut s.up)],
            &s.normed,
        )?;
        swiglu_rows(&mut s.gate, &s.up, c.feed_forward_length);
        self.down.forward(&s.gate, &mut s.projected)?;
        add_in_place(x, &s.projected);
        Ok(())
    }

    /// One row's query and key made ready for attention at `position`: each
    /// head normalised (Qwen3), then rotated.
    fn position_query_key(
        &self,
        model: &Model,
        query: &mut [f32],
        key: &mut [f32],
        position: usize,
    ) {
        if let Some(norm) = &self.qk_norm {
            let eps = model.config.rms_norm_eps;
            rms_norm_in_place(query, &norm.query, eps);
            rms_norm_in_place(key, &norm.key, eps);
        }
        model.rope.rotate(query, position);
        model.rope.rotate(key, position);
    }
}

fn attention_shape(c: &ModelConfig) -> AttentionShape {
    AttentionShape {
        heads: c.head_count,
        kv_heads: c.head_count_kv,
        head_dim: c.head_dim,
    }
}

/// RoPE, the K/V write and attention for rows of one sequence at positions
/// `start..`.
fn attend_sequence(
    model: &Model,
    block: &Block,
    layer: usize,
    start: usize,
    cache: &mut KvCache,
    s: &mut Scratch,
) {
    let c = &model.config;
    let (q_width, kv_width) = (c.query_width(), c.key_value_width());
    let rows = s
        .query
        .chunks_exact_mut(q_width)
        .zip(s.key.chunks_exact_mut(kv_width));
    for (row, ((query, key), value)) in rows.zip(s.value.chunks_exact(kv_width)).enumerate() {
        let position = start + row;
        block.position_query_key(model, query, key, position);
        cache.store(layer, position, key, value);
    }
    attend(
        attention_shape(c),
        cache,
        layer,
        start,
        &s.query,
        &mut s.attention,
    );
}

/// The same for a batch of sequences, one row each: every row is rotated,
/// stored and attended as a lone decode step of its sequence would be. Rows
/// touch only their own sequence's cache, so all of it runs on all threads
/// (on one, the rotations and the cold cache lines of the stores left the
/// other thread waiting).
fn attend_batch(
    model: &Model,
    block: &Block,
    layer: usize,
    steps: &mut [BatchStep<'_>],
    s: &mut Scratch,
) {
    let c = &model.config;
    let (q_width, kv_width) = (c.query_width(), c.key_value_width());
    let rows = s
        .query
        .chunks_exact_mut(q_width)
        .zip(s.key.chunks_exact_mut(kv_width))
        .zip(s.value.chunks_exact(kv_width))
        .zip(s.attention.chunks_exact_mut(q_width))
        .zip(steps.iter_mut());
    let threads = rayon::current_num_threads();
    parallel::for_each(rows, threads, |((((query, key), value), out), step)| {
        block.position_query_key(model, query, key, step.position);
        step.cache.store(layer, step.position, key, value);
        let place = RowPlace {
            cache: step.cache,
            layer,
            position: step.position,
        };
        // Each is a lone decode step's row: a batch of one.
        attend_row(attention_shape(c), place, 1, query, out);
    });
}

/// Errors unless `tokens` is non-empty and every id is inside the vocabulary
/// (both backends check a pass's input this way).
pub(crate) fn check_tokens(tokens: &[u32], vocab_size: usize) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::InvalidRequest(
            "forward pass over zero tokens".into(),
        ));
    }
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab_size) {
        return Err(Error::InvalidRequest(format!(
            "token id {bad} is outside the vocabulary of {vocab_size}"
        )));
    }
    Ok(())
}

/// SwiGLU on each row of `gate` (`width` values a row), rows on all threads:
/// with a batch of rows the exponentials are worth sharing.
fn swiglu_rows(gate: &mut [f32], up: &[f32], width: usize) {
    let rows = gate.chunks_mut(width).zip(up.chunks(width));
    parallel::for_each(rows, rayon::current_num_threads(), |(gate, up)| {
        swiglu_in_place(gate, up)
    });
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
