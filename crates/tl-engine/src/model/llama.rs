//! The llama-architecture transformer (Llama 1/2/3, TinyLlama, SmolLM, Mistral):
//! pre-norm blocks of grouped-query attention with RoPE and a SwiGLU MLP.
//!
//! Weights are immutable; all per-sequence state lives in the [`KvCache`], so one
//! model can serve many sequences: `forward(&self, tokens, index_pos, &mut cache)`.

use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{Device, Module, Tensor, D};
use tl_gguf::GgufFile;

use crate::error::{Error, Result};
use crate::model::cache::KvCache;
use crate::model::config::ModelConfig;
use crate::model::rope::RopeTable;
use crate::model::tensor_names::{self as names, BlockTensor};
use crate::model::weights::WeightLoader;

/// Which positions' logits a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position's: `[vocab]` (generation).
    Last,
    /// Every position's: `[seq, vocab]` (perplexity, verification).
    All,
}

/// A loaded llama-architecture model.
pub struct Model {
    config: ModelConfig,
    embedding: Arc<QTensor>,
    blocks: Vec<Block>,
    output_norm: Tensor,
    output: QMatMul,
    rope: RopeTable,
    device: Device,
    weight_bytes: usize,
}

struct Block {
    attention_norm: Tensor,
    query: QMatMul,
    key: QMatMul,
    value: QMatMul,
    attention_output: QMatMul,
    feed_forward_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
}

impl Model {
    /// Loads the model from a validated GGUF file. `max_positions` bounds the
    /// positions any cache of this model may hold (the RoPE tables' length).
    pub fn load(file: &GgufFile, device: &Device, max_positions: usize) -> Result<Self> {
        let config = ModelConfig::from_gguf(file)?;
        let mut loader = WeightLoader::new(file, device);
        let hidden = config.embedding_length;
        let embedding =
            Arc::new(loader.qtensor(names::TOKEN_EMBEDDING, &[config.vocab_size, hidden])?);
        let blocks = (0..config.block_count)
            .map(|i| Block::load(&mut loader, &config, i))
            .collect::<Result<Vec<_>>>()?;
        let output_norm = loader.vector(names::OUTPUT_NORM, hidden)?;
        let output = if loader.has(names::OUTPUT) {
            loader.matmul(names::OUTPUT, config.vocab_size, hidden)?
        } else {
            QMatMul::from_arc(embedding.clone())?
        };
        let freq_factors = rope_freq_factors(&mut loader, &config)?;
        let rope = RopeTable::new(
            config.head_dim,
            config.rope_freq_base,
            freq_factors.as_deref(),
            max_positions,
            device,
        )?;
        Ok(Model {
            weight_bytes: loader.loaded_bytes(),
            config,
            embedding,
            blocks,
            output_norm,
            output,
            rope,
            device: device.clone(),
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
        KvCache::new(&self.config, capacity, &self.device)
    }

    /// Runs `tokens` at positions `index_pos..`, appending their keys and values to
    /// `cache` (which must hold exactly `index_pos` positions of this sequence).
    /// Returns `[vocab]` logits of the last token, or `[seq, vocab]` for all.
    pub fn forward(
        &self,
        tokens: &[u32],
        index_pos: usize,
        cache: &mut KvCache,
        which: Logits,
    ) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(Error::InvalidRequest(
                "forward pass over zero tokens".into(),
            ));
        }
        if let Some(&bad) = tokens
            .iter()
            .find(|&&t| t as usize >= self.config.vocab_size)
        {
            return Err(Error::InvalidRequest(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        cache.check_room(index_pos, tokens.len())?;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = self.embedding.embedding(&ids)?;
        let mask = causal_mask(tokens.len(), index_pos, &self.device)?;
        for (layer, block) in self.blocks.iter().enumerate() {
            x = block.forward(&x, layer, index_pos, cache, mask.as_ref(), self)?;
        }
        cache.commit(index_pos + tokens.len());
        let x = match which {
            Logits::Last => x.narrow(0, tokens.len() - 1, 1)?,
            Logits::All => x,
        };
        let x = candle_nn::ops::rms_norm(&x, &self.output_norm, self.config.rms_norm_eps)?;
        let logits = self.output.forward(&x)?;
        Ok(match which {
            Logits::Last => logits.squeeze(0)?,
            Logits::All => logits,
        })
    }
}

impl Block {
    fn load(loader: &mut WeightLoader, config: &ModelConfig, i: usize) -> Result<Self> {
        let hidden = config.embedding_length;
        let q_width = config.head_count * config.head_dim;
        let kv_width = config.head_count_kv * config.head_dim;
        let ffn = config.feed_forward_length;
        let name = |t: BlockTensor| t.name(i);
        Ok(Block {
            attention_norm: loader.vector(&name(BlockTensor::AttentionNorm), hidden)?,
            query: loader.matmul(&name(BlockTensor::Query), q_width, hidden)?,
            key: loader.matmul(&name(BlockTensor::Key), kv_width, hidden)?,
            value: loader.matmul(&name(BlockTensor::Value), kv_width, hidden)?,
            attention_output: loader.matmul(
                &name(BlockTensor::AttentionOutput),
                hidden,
                q_width,
            )?,
            feed_forward_norm: loader.vector(&name(BlockTensor::FeedForwardNorm), hidden)?,
            gate: loader.matmul(&name(BlockTensor::Gate), ffn, hidden)?,
            up: loader.matmul(&name(BlockTensor::Up), ffn, hidden)?,
            down: loader.matmul(&name(BlockTensor::Down), hidden, ffn)?,
        })
    }

    /// One block: `x + attention(norm(x))`, then `x + mlp(norm(x))`; `x` is `[seq, hidden]`.
    fn forward(
        &self,
        x: &Tensor,
        layer: usize,
        index_pos: usize,
        cache: &mut KvCache,
        mask: Option<&Tensor>,
        model: &Model,
    ) -> Result<Tensor> {
        let eps = model.config.rms_norm_eps;
        let h = candle_nn::ops::rms_norm(x, &self.attention_norm, eps)?;
        let attention = self.attention(&h, layer, index_pos, cache, mask, model)?;
        let x = (x + attention)?;
        let h = candle_nn::ops::rms_norm(&x, &self.feed_forward_norm, eps)?;
        let mlp = self
            .down
            .forward(&(self.gate.forward(&h)?.silu()? * self.up.forward(&h)?)?)?;
        Ok((x + mlp)?)
    }

    fn attention(
        &self,
        h: &Tensor,
        layer: usize,
        index_pos: usize,
        cache: &mut KvCache,
        mask: Option<&Tensor>,
        model: &Model,
    ) -> Result<Tensor> {
        let c = &model.config;
        let seq = h.dim(0)?;
        let (n_head, n_kv, head_dim) = (c.head_count, c.head_count_kv, c.head_dim);
        let heads_first = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((1, seq, heads, head_dim))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = model
            .rope
            .apply(&heads_first(self.query.forward(h)?, n_head)?, index_pos)?;
        let k = model
            .rope
            .apply(&heads_first(self.key.forward(h)?, n_kv)?, index_pos)?;
        let v = heads_first(self.value.forward(h)?, n_kv)?;
        let (keys, values) = cache.append(layer, index_pos, &k.squeeze(0)?, &v.squeeze(0)?)?;
        // Grouped-query attention without copying keys per query head: the query
        // heads that share a key/value head are stacked along the sequence axis.
        let group = c.group_size();
        let q = q.reshape((n_kv, group * seq, head_dim))?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let scores = (q.matmul(&keys.t()?)? * scale)?;
        let scores = match mask {
            Some(mask) => {
                let total = scores.dim(D::Minus1)?;
                scores
                    .reshape((n_kv, group, seq, total))?
                    .broadcast_add(mask)?
                    .reshape((n_kv, group * seq, total))?
            }
            None => scores,
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = weights.matmul(&values)?; // [n_kv, group * seq, head_dim]
        let out = out
            .reshape((n_head, seq, head_dim))?
            .transpose(0, 1)?
            .contiguous()?
            .reshape((seq, n_head * head_dim))?;
        Ok(self.attention_output.forward(&out)?)
    }
}

/// `[seq, index_pos + seq]` additive mask hiding later positions; none for one token.
fn causal_mask(seq: usize, index_pos: usize, device: &Device) -> Result<Option<Tensor>> {
    if seq == 1 {
        return Ok(None);
    }
    let total = index_pos + seq;
    let values: Vec<f32> = (0..seq)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if j > index_pos + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Ok(Some(Tensor::from_vec(values, (seq, total), device)?))
}

fn rope_freq_factors(loader: &mut WeightLoader, config: &ModelConfig) -> Result<Option<Vec<f32>>> {
    if !loader.has(names::ROPE_FREQS) {
        return Ok(None);
    }
    let factors = loader.vector(names::ROPE_FREQS, config.head_dim / 2)?;
    Ok(Some(factors.to_vec1::<f32>()?))
}
