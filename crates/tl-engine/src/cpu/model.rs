//! The model on the CPU: the stages of the [schedule](crate::model::schedule)
//! over plain row-major f32 buffers, with the architecture's traits (q/k
//! norms, RoPE style) read from its [`ModelConfig`].
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

use crate::cpu::activation::gated_in_place;
use crate::cpu::attention::{attend, attend_row, AttentionShape, RowPlace};
use crate::cpu::kv_cache::KvCache;
use crate::cpu::linear::Linear;
use crate::cpu::norm::{rms_norm, rms_norm_in_place};
use crate::cpu::parallel;
use crate::error::{Error, Result};
use crate::memory;
use crate::model::config::ModelConfig;
use crate::model::rope::LayerRopes;
use crate::model::schedule::{self, Head, Stages};
use crate::model::step::{check_tokens, Logits};
use crate::model::tensor_names::{self as names, BlockTensor};
use crate::model::weights::WeightLoader;

/// A model loaded for the CPU.
pub struct Model {
    config: ModelConfig,
    embedding: Arc<QTensor>,
    blocks: Vec<Block>,
    output_norm: Vec<f32>,
    output: Linear,
    rope: LayerRopes,
    weight_bytes: usize,
}

struct Block {
    attention_norm: Vec<f32>,
    query: Linear,
    key: Linear,
    value: Linear,
    attention_output: Linear,
    /// Per-head query and key norms, when the architecture has them.
    qk_norm: Option<QkNorm>,
    /// Query, key and value biases, when the architecture has them.
    qkv_bias: Option<QkvBias>,
    feed_forward_norm: Vec<f32>,
    gate: Linear,
    up: Linear,
    down: Linear,
    /// Norms of the attention's and the MLP's outputs, when the
    /// architecture has them.
    post_norms: Option<PostNorms>,
}

/// The RMS norm weights applied to the attention's and the MLP's outputs
/// before each joins the residual.
struct PostNorms {
    attention: Vec<f32>,
    feed_forward: Vec<f32>,
}

/// The RMS norm weights of every query head and every key head (`head_dim`
/// values each).
struct QkNorm {
    query: Vec<f32>,
    key: Vec<f32>,
}

/// The biases added to the query, key and value projections.
struct QkvBias {
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
}

impl QkvBias {
    /// Adds each bias to every row of its projection (`[row][feature]`), as
    /// llama.cpp's `ggml_add` does.
    fn add_to(&self, query: &mut [f32], key: &mut [f32], value: &mut [f32]) {
        for (rows, bias) in [(query, &self.query), (key, &self.key), (value, &self.value)] {
            for row in rows.chunks_exact_mut(bias.len()) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
    }
}

impl Model {
    /// Loads the model from a validated GGUF file. `max_positions` bounds the
    /// positions any cache of this model may hold (the RoPE table's length).
    pub fn load(file: &GgufFile, max_positions: usize) -> Result<Self> {
        let config = ModelConfig::from_gguf(file)?;
        check_host_memory(file, &config, max_positions)?;
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
        let rope = LayerRopes::for_model(&mut loader, &config, max_positions)?;
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
        crate::model::step::check_capacity(capacity, self.max_positions())?;
        KvCache::new(&self.config, capacity)
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
        let rows = self.sequence_rows(tokens, index_pos, cache)?;
        let logit_rows = match which {
            Logits::Last => tokens.len() - 1..tokens.len(),
            Logits::All => 0..tokens.len(),
        };
        self.run_pass(tokens, rows, logit_rows, Head::Logits)
    }

    /// Runs `tokens` as [`Model::forward`] does, but returns every token's
    /// final hidden state (after the final norm; `tokens × embedding_length`
    /// values) instead of logits: what an embedding pools.
    pub fn forward_hidden(
        &self,
        tokens: &[u32],
        index_pos: usize,
        cache: &mut KvCache,
    ) -> Result<Vec<f32>> {
        let rows = self.sequence_rows(tokens, index_pos, cache)?;
        self.run_pass(tokens, rows, 0..tokens.len(), Head::HiddenStates)
    }

    /// The rows of one sequence's pass over `tokens` from `index_pos`, once
    /// the tokens and the cache's room are checked.
    fn sequence_rows<'c>(
        &self,
        tokens: &[u32],
        index_pos: usize,
        cache: &'c mut KvCache,
    ) -> Result<Rows<'c, 'c>> {
        check_tokens(tokens, self.config.vocab_size)?;
        cache.check_room(index_pos, tokens.len())?;
        Ok(Rows::Sequence {
            start: index_pos,
            cache,
        })
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
        self.run_pass(tokens, Rows::Batch(steps), 0..tokens.len(), Head::Logits)
    }

    /// Runs the schedule over `tokens` placed by `rows`, returning what
    /// `head` gives (logits or hidden states) for the rows `logit_rows` names.
    fn run_pass(
        &self,
        tokens: &[u32],
        rows: Rows<'_, '_>,
        logit_rows: std::ops::Range<usize>,
        head: Head,
    ) -> Result<Vec<f32>> {
        let mut pass = CpuPass {
            model: self,
            tokens,
            rows,
            x: Vec::new(),
            scratch: Scratch::new(&self.config, tokens.len())?,
            logit_rows,
            output: Vec::new(),
        };
        schedule::run(&mut pass, self.blocks.len(), head)?;
        pass.rows.commit(tokens.len());
        Ok(pass.output)
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

/// The micro-batch llama.cpp runs a prompt's rows in (`n_ubatch`'s default).
const PROMPT_MICRO_BATCH: usize = 512;

impl Rows<'_, '_> {
    /// How llama.cpp batches these rows, which decides a K-quant product's
    /// rounding: a prompt in micro-batches, a decode step alone (whatever
    /// else is in our batch, so a sequence's tokens never depend on it).
    fn micro_batch(&self) -> usize {
        match self {
            Rows::Sequence { .. } => PROMPT_MICRO_BATCH,
            Rows::Batch(_) => 1,
        }
    }

    /// Marks the positions of a pass of `rows` rows as filled: `rows` new
    /// positions of one sequence, or one of each sequence of a batch.
    fn commit(&mut self, rows: usize) {
        match self {
            Rows::Sequence { start, cache } => cache.commit(*start + rows),
            Rows::Batch(steps) => {
                for step in steps.iter_mut() {
                    step.cache.commit(step.position + 1);
                }
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
    /// Shortens the buffers the last MLP uses to `rows` rows.
    fn keep_rows(&mut self, c: &ModelConfig, rows: usize) {
        self.normed.truncate(rows * c.embedding_length);
        self.projected.truncate(rows * c.embedding_length);
        self.gate.truncate(rows * c.feed_forward_length);
        self.up.truncate(rows * c.feed_forward_length);
    }

    /// Buffers for `rows` rows, or an error when the memory is not there (a
    /// prompt of a whole long context in one pass can need gigabytes).
    fn new(c: &ModelConfig, rows: usize) -> Result<Self> {
        let (q_width, kv_width) = (c.query_width(), c.key_value_width());
        let buffer = |width: usize| {
            let len = rows.checked_mul(width).ok_or_else(|| {
                Error::Memory(format!("{rows} rows of {width} values overflow a buffer"))
            })?;
            memory::filled_vec(len, 0.0, "forward pass's activations")
        };
        Ok(Scratch {
            normed: buffer(c.embedding_length)?,
            query: buffer(q_width)?,
            key: buffer(kv_width)?,
            value: buffer(kv_width)?,
            attention: buffer(q_width)?,
            projected: buffer(c.embedding_length)?,
            gate: buffer(c.feed_forward_length)?,
            up: buffer(c.feed_forward_length)?,
        })
    }
}

/// Errors unless the weights, the RoPE table and one sequence's KV cache for
/// `max_positions` fit in the memory available: checked before the first
/// weight is copied, so an impossible context fails at once.
fn check_host_memory(file: &GgufFile, config: &ModelConfig, max_positions: usize) -> Result<()> {
    // Each tensor lies inside the file, so the sum does not overflow.
    let weights: u64 = file.tensors().iter().map(|t| t.size_bytes).sum();
    memory::check_available(
        &format!("loading the model for a context of {max_positions} positions"),
        &[
            ("weights", weights),
            ("the RoPE table", config.rope_table_bytes(max_positions)?),
            (
                "one sequence's KV cache",
                config.kv_cache_bytes(max_positions)?,
            ),
        ],
    )
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
        let post_norms = if config.post_norms {
            Some(PostNorms {
                attention: loader.vector(&name(BlockTensor::AttentionPostNorm), hidden)?,
                feed_forward: loader.vector(&name(BlockTensor::FeedForwardPostNorm), hidden)?,
            })
        } else {
            None
        };
        let qkv_bias = if config.qkv_bias {
            Some(QkvBias {
                query: loader.vector(&name(BlockTensor::QueryBias), q_width)?,
                key: loader.vector(&name(BlockTensor::KeyBias), kv_width)?,
                value: loader.vector(&name(BlockTensor::ValueBias), kv_width)?,
            })
        } else {
            None
        };
        Ok(Block {
            qk_norm,
            qkv_bias,
            post_norms,
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

    /// One row's query and key made ready for attention at `position` in
    /// `layer`: each head normalised (when the architecture says so), then
    /// rotated, and the query scaled (when the architecture scales queries).
    fn position_query_key(
        &self,
        (model, layer): (&Model, usize),
        query: &mut [f32],
        key: &mut [f32],
        position: usize,
    ) {
        if let Some(norm) = &self.qk_norm {
            let eps = model.config.rms_norm_eps;
            rms_norm_in_place(query, &norm.query, eps);
            rms_norm_in_place(key, &norm.key, eps);
        }
        let rope = model.rope.for_layer(layer);
        rope.rotate(query, position);
        rope.rotate(key, position);
        let scale = model.config.query_scale;
        if scale != 1.0 {
            query.iter_mut().for_each(|q| *q *= scale);
        }
    }
}

fn attention_shape(c: &ModelConfig, layer: usize) -> AttentionShape {
    AttentionShape {
        heads: c.head_count,
        kv_heads: c.head_count_kv,
        head_dim: c.head_dim,
        scale: c.score_scale,
        window: c.attention_window(layer),
    }
}

/// Normalises each row of `x` by `weight` in place when there is one (an
/// architecture's post-norm).
fn post_norm(x: &mut [f32], weight: Option<&Vec<f32>>, eps: f32) {
    if let Some(weight) = weight {
        rms_norm_in_place(x, weight, eps);
    }
}

/// One forward pass on the CPU: the model, the rows and their caches, and
/// the pass's buffers (`[row][feature]`).
struct CpuPass<'m, 'a, 'c> {
    model: &'m Model,
    tokens: &'a [u32],
    rows: Rows<'a, 'c>,
    /// The residual stream.
    x: Vec<f32>,
    scratch: Scratch,
    /// The rows whose logits (or hidden states) the pass returns.
    logit_rows: std::ops::Range<usize>,
    /// What the pass returns: the kept rows' logits or hidden states.
    output: Vec<f32>,
}

impl Stages for CpuPass<'_, '_, '_> {
    fn embed(&mut self) -> Result<()> {
        let ids = Tensor::new(self.tokens, &Device::Cpu)?;
        self.x = self
            .model
            .embedding
            .embedding(&ids)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let scale = self.model.config.embedding_scale;
        if scale != 1.0 {
            self.x.iter_mut().for_each(|x| *x *= scale);
        }
        Ok(())
    }

    fn attention_input(&mut self, layer: usize) -> Result<()> {
        let (model, block, s) = (self.model, &self.model.blocks[layer], &mut self.scratch);
        let eps = model.config.rms_norm_eps;
        rms_norm(&self.x, &block.attention_norm, eps, &mut s.normed);
        Linear::forward_shared_input(
            &mut [
                (&block.query, &mut s.query),
                (&block.key, &mut s.key),
                (&block.value, &mut s.value),
            ],
            &s.normed,
            self.rows.micro_batch(),
        )?;
        if let Some(bias) = &block.qkv_bias {
            bias.add_to(&mut s.query, &mut s.key, &mut s.value);
        }
        match &mut self.rows {
            Rows::Sequence { start, cache } => {
                position_sequence(model, block, layer, *start, cache, s)
            }
            Rows::Batch(steps) => position_batch(model, block, layer, steps, s),
        }
        Ok(())
    }

    fn attention(&mut self, layer: usize) -> Result<()> {
        let shape = attention_shape(&self.model.config, layer);
        let s = &mut self.scratch;
        match &mut self.rows {
            Rows::Sequence { start, cache } => {
                attend(shape, cache, layer, *start, &s.query, &mut s.attention)
            }
            Rows::Batch(steps) => attend_batch(shape, layer, steps, s),
        }
        Ok(())
    }

    fn attention_output(&mut self, layer: usize) -> Result<()> {
        let (block, s) = (&self.model.blocks[layer], &mut self.scratch);
        block.attention_output.forward_in(
            &s.attention,
            &mut s.projected,
            self.rows.micro_batch(),
        )?;
        let weight = block.post_norms.as_ref().map(|n| &n.attention);
        post_norm(&mut s.projected, weight, self.model.config.rms_norm_eps);
        add_in_place(&mut self.x, &s.projected);
        Ok(())
    }

    fn feed_forward(&mut self, layer: usize) -> Result<()> {
        let c = &self.model.config;
        let (block, s) = (&self.model.blocks[layer], &mut self.scratch);
        rms_norm(
            &self.x,
            &block.feed_forward_norm,
            c.rms_norm_eps,
            &mut s.normed,
        );
        let micro_batch = self.rows.micro_batch();
        Linear::forward_shared_input(
            &mut [(&block.gate, &mut s.gate), (&block.up, &mut s.up)],
            &s.normed,
            micro_batch,
        )?;
        gated_rows(c, &mut s.gate, &s.up);
        block
            .down
            .forward_in(&s.gate, &mut s.projected, micro_batch)?;
        let weight = block.post_norms.as_ref().map(|n| &n.feed_forward);
        post_norm(&mut s.projected, weight, c.rms_norm_eps);
        add_in_place(&mut self.x, &s.projected);
        Ok(())
    }

    fn keep_logit_rows(&mut self) -> Result<()> {
        let hidden = self.model.config.embedding_length;
        let rows = std::mem::replace(&mut self.logit_rows, 0..0);
        self.x.truncate(rows.end * hidden);
        self.x.drain(..rows.start * hidden);
        self.scratch.keep_rows(&self.model.config, rows.len());
        self.logit_rows = 0..rows.len();
        Ok(())
    }

    fn logits(&mut self) -> Result<()> {
        let model = self.model;
        let normed = self.final_norm()?;
        let len = self
            .logit_rows
            .len()
            .saturating_mul(model.output.out_features());
        self.output = memory::filled_vec(len, 0.0, "logits")?;
        let micro_batch = self.rows.micro_batch();
        model
            .output
            .forward_in(&normed, &mut self.output, micro_batch)?;
        Ok(())
    }

    fn hidden_states(&mut self) -> Result<()> {
        self.output = self.final_norm()?;
        Ok(())
    }
}

impl CpuPass<'_, '_, '_> {
    /// The kept rows of the residual through the final norm.
    fn final_norm(&self) -> Result<Vec<f32>> {
        let model = self.model;
        let mut normed = memory::filled_vec(self.x.len(), 0.0, "final norm's output")?;
        rms_norm(
            &self.x,
            &model.output_norm,
            model.config.rms_norm_eps,
            &mut normed,
        );
        Ok(normed)
    }
}

/// RoPE and the K/V write for rows of one sequence at positions `start..`.
fn position_sequence(
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
        block.position_query_key((model, layer), query, key, position);
        cache.store(layer, position, key, value);
    }
}

/// The same for a batch of sequences, one row each, every row at its own
/// sequence's position. Rows touch only their own sequence's cache, so they
/// run on all threads (on one, the rotations and the cold cache lines of the
/// stores left the other thread waiting).
fn position_batch(
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
        .zip(steps.iter_mut());
    let threads = rayon::current_num_threads();
    parallel::for_each(rows, threads, |(((query, key), value), step)| {
        block.position_query_key((model, layer), query, key, step.position);
        step.cache.store(layer, step.position, key, value);
    });
}

/// Attention for a batch of sequences, one row each: every row is attended
/// as a lone decode step of its sequence would be, rows on all threads.
fn attend_batch(shape: AttentionShape, layer: usize, steps: &mut [BatchStep<'_>], s: &mut Scratch) {
    let q_width = shape.heads * shape.head_dim;
    let rows = s
        .query
        .chunks_exact(q_width)
        .zip(s.attention.chunks_exact_mut(q_width))
        .zip(steps.iter());
    let threads = rayon::current_num_threads();
    parallel::for_each(rows, threads, |((query, out), step)| {
        let place = RowPlace {
            cache: step.cache,
            layer,
            position: step.position,
        };
        // Each is a lone decode step's row: a batch of one.
        attend_row(shape, place, 1, query, out);
    });
}

/// The gated activation on each row of `gate` (`feed_forward_length` values
/// a row), rows on all threads: with a batch of rows the exponentials are
/// worth sharing.
fn gated_rows(c: &ModelConfig, gate: &mut [f32], up: &[f32]) {
    let width = c.feed_forward_length;
    let rows = gate.chunks_mut(width).zip(up.chunks(width));
    parallel::for_each(rows, rayon::current_num_threads(), |(gate, up)| {
        gated_in_place(c.activation, gate, up)
    });
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
