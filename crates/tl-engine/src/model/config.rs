//! Hyperparameters of a llama-family model, read from GGUF metadata
//! (`{arch}.block_count`, `{arch}.attention.head_count`, ...) and validated into
//! one struct, so the forward pass never has to second-guess them: each value in
//! range, every width derived from them computable without overflow, and every
//! tensor of the file in the shape they give it (see [`consistency`]).

use tl_gguf::value::{Array, Value};
use tl_gguf::GgufFile;

use crate::error::{Error, Result};
use crate::model::arch::{Activation, AttentionScale};
use crate::model::rope::RopeStyle;
use crate::model::{arch, consistency};

/// The validated hyperparameters of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `general.architecture`.
    pub architecture: String,
    /// Number of transformer blocks.
    pub block_count: usize,
    /// Width of the residual stream.
    pub embedding_length: usize,
    /// Width of the MLP's hidden layer.
    pub feed_forward_length: usize,
    /// Query heads.
    pub head_count: usize,
    /// Key/value heads (fewer than `head_count` under grouped-query attention).
    pub head_count_kv: usize,
    /// Width of one attention head.
    pub head_dim: usize,
    /// Number of dimensions of each head that RoPE rotates.
    pub rope_dimension_count: usize,
    /// RoPE base frequency.
    pub rope_freq_base: f32,
    /// Epsilon of the RMS norms.
    pub rms_norm_eps: f32,
    /// Context length the model was trained for.
    pub context_length: usize,
    /// Vocabulary size (rows of the embedding table).
    pub vocab_size: usize,
    /// Which elements of a head RoPE pairs (from the architecture table).
    pub rope_style: RopeStyle,
    /// Whether each query and key head is RMS-normalised (with its own weight
    /// vector, `attn_q_norm` / `attn_k_norm`) before RoPE (from the
    /// architecture table).
    pub qk_norm: bool,
    /// Whether the query, key and value projections add a bias (from the
    /// architecture table).
    pub qkv_bias: bool,
    /// The gated MLP's activation (from the architecture table).
    pub activation: Activation,
    /// Whether the attention's and the MLP's outputs are RMS-normalised
    /// before they join the residual (from the architecture table).
    pub post_norms: bool,
    /// The factor on token embeddings (`√hidden`, or 1).
    pub embedding_scale: f32,
    /// The factor on the queries after RoPE (1 unless the architecture
    /// scales queries rather than scores).
    pub query_scale: f32,
    /// The factor on each attention score `q·k`.
    pub score_scale: f32,
    /// The layers that attend over a sliding window, when the model has any.
    pub sliding_window: Option<SlidingWindow>,
}

/// Layers that attend only to the latest positions, with their own RoPE base.
#[derive(Debug, Clone, PartialEq)]
pub struct SlidingWindow {
    /// Positions a token sees: itself and the `size − 1` before it.
    pub size: usize,
    /// RoPE base frequency of the windowed layers.
    pub rope_freq_base: f32,
    /// Whether each layer is windowed (`block_count` entries).
    pub local: Vec<bool>,
}

impl ModelConfig {
    /// Reads and validates the configuration from GGUF metadata.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let architecture = file
            .get_str("general.architecture")?
            .ok_or_else(|| {
                Error::InvalidModel("metadata key 'general.architecture' is missing".into())
            })?
            .to_string();
        let traits = arch::find(&architecture).ok_or_else(|| {
            Error::Unsupported(format!(
                "architecture '{architecture}' (supported: {})",
                arch::names().join(", ")
            ))
        })?;
        let keys = ArchKeys {
            file,
            arch: &architecture,
        };
        let embedding_length = keys.required_usize("embedding_length")?;
        let head_count = keys.required_usize("attention.head_count")?;
        let head_count_kv = keys
            .optional_usize("attention.head_count_kv")?
            .unwrap_or(head_count);
        let head_dim = match keys.optional_usize("attention.key_length")? {
            Some(dim) => dim,
            None if head_count > 0 => embedding_length / head_count,
            None => 0,
        };
        let block_count = keys.required_usize("block_count")?;
        let (query_scale, score_scale) = attention_scales(traits, &keys, head_dim, block_count)?;
        let config = ModelConfig {
            rope_style: traits.rope_style,
            qk_norm: traits.qk_norm,
            qkv_bias: traits.qkv_bias,
            activation: traits.activation,
            post_norms: traits.post_norms,
            embedding_scale: if traits.scaled_embedding {
                (embedding_length as f32).sqrt()
            } else {
                1.0
            },
            query_scale,
            score_scale,
            sliding_window: sliding_window(traits, &keys, block_count)?,
            block_count,
            feed_forward_length: keys.required_usize("feed_forward_length")?,
            rope_dimension_count: keys
                .optional_usize("rope.dimension_count")?
                .unwrap_or(head_dim),
            rope_freq_base: keys.optional_f32("rope.freq_base")?.unwrap_or(10_000.0),
            rms_norm_eps: keys
                .optional_f32("attention.layer_norm_rms_epsilon")?
                .unwrap_or(1e-5),
            context_length: keys.optional_usize("context_length")?.unwrap_or(2048),
            vocab_size: vocab_size(file, &keys)?,
            architecture,
            embedding_length,
            head_count,
            head_count_kv,
            head_dim,
        };
        config.validate()?;
        consistency::check_file(&config, file)?;
        Ok(config)
    }

    /// Values in one token's queries (all heads).
    pub fn query_width(&self) -> usize {
        self.head_count * self.head_dim
    }

    /// Values in one token's keys (or values), all key/value heads.
    pub fn key_value_width(&self) -> usize {
        self.head_count_kv * self.head_dim
    }

    /// Query heads that share one key/value head.
    pub fn group_size(&self) -> usize {
        self.head_count / self.head_count_kv
    }

    /// The positions a token of `layer` attends to: itself and up to
    /// `window − 1` before it, or `None` for every position before it.
    pub fn attention_window(&self, layer: usize) -> Option<usize> {
        let window = self.sliding_window.as_ref()?;
        window.local[layer].then_some(window.size)
    }

    fn validate(&self) -> Result<()> {
        let invalid = |msg: String| Err(Error::InvalidModel(msg));
        if self.block_count == 0 || self.embedding_length == 0 || self.feed_forward_length == 0 {
            return invalid(format!("zero-sized model: {self:?}"));
        }
        if self.head_count == 0
            || self.head_count_kv == 0
            || !self.head_count.is_multiple_of(self.head_count_kv)
        {
            return invalid(format!(
                "{} query heads cannot be grouped over {} key/value heads",
                self.head_count, self.head_count_kv
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return invalid(format!(
                "head dimension {} must be even and non-zero",
                self.head_dim
            ));
        }
        self.check_widths()?;
        if self.context_length == 0 {
            return invalid("context_length 0: the model was trained on no positions".into());
        }
        if u32::try_from(self.vocab_size).is_err() {
            return invalid(format!(
                "a vocabulary of {} tokens is more than u32 token ids can address",
                self.vocab_size
            ));
        }
        if self.rope_dimension_count != self.head_dim {
            return Err(Error::Unsupported(format!(
                "partial rotary embeddings (rope.dimension_count {} of head dimension {})",
                self.rope_dimension_count, self.head_dim
            )));
        }
        let local_base = self.sliding_window.as_ref().map(|w| w.rope_freq_base);
        for base in std::iter::once(self.rope_freq_base).chain(local_base) {
            if !(base.is_finite() && base > 0.0) {
                return invalid(format!("RoPE base frequency {base} must be positive"));
            }
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return invalid(format!(
                "RMS norm epsilon {} must be positive",
                self.rms_norm_eps
            ));
        }
        Ok(())
    }
}

impl ModelConfig {
    /// Errors unless the widths derived from the head counts and sizes
    /// ([`query_width`](Self::query_width), [`key_value_width`](Self::key_value_width)
    /// and the fused QKV width) are computable: a wrapped product would pass
    /// every shape check with small tensors while the loops run over the huge
    /// head counts.
    fn check_widths(&self) -> Result<()> {
        let widths = || {
            let query = self.head_count.checked_mul(self.head_dim)?;
            let key_value = self.head_count_kv.checked_mul(self.head_dim)?;
            query.checked_add(key_value.checked_mul(2)?)
        };
        if widths().is_none() {
            return Err(Error::InvalidModel(format!(
                "{} query and {} key/value heads of {} values overflow the size of a row",
                self.head_count, self.head_count_kv, self.head_dim
            )));
        }
        Ok(())
    }

    /// Bytes one sequence's KV cache of `positions` positions takes (keys and
    /// values of every layer, f16), or an error when it overflows.
    pub fn kv_cache_bytes(&self, positions: usize) -> Result<u64> {
        let bytes = (self.key_value_width() as u64)
            .checked_mul(positions as u64)
            .and_then(|n| n.checked_mul(self.block_count as u64))
            .and_then(|n| n.checked_mul(2 * size_of::<half::f16>() as u64));
        bytes.ok_or_else(|| too_many_positions(positions, "KV cache"))
    }

    /// Bytes of the RoPE tables for positions `0..positions` (a cosine and a
    /// sine for each pair of a head; a second table for windowed layers), or
    /// an error when it overflows.
    pub fn rope_table_bytes(&self, positions: usize) -> Result<u64> {
        let pairs = (self.head_dim / 2) as u64;
        let tables = 1 + u64::from(self.sliding_window.is_some());
        let bytes = (positions as u64)
            .checked_mul(pairs)
            .and_then(|n| n.checked_mul(tables * 2 * size_of::<f32>() as u64));
        bytes.ok_or_else(|| too_many_positions(positions, "RoPE table"))
    }
}

fn too_many_positions(positions: usize, what: &str) -> Error {
    Error::Memory(format!(
        "a context of {positions} positions is too large: the size of its {what} overflows"
    ))
}

/// Looks up `{arch}.{name}` keys.
struct ArchKeys<'a> {
    file: &'a GgufFile,
    arch: &'a str,
}

impl ArchKeys<'_> {
    fn key(&self, name: &str) -> String {
        format!("{}.{name}", self.arch)
    }

    fn optional_usize(&self, name: &str) -> Result<Option<usize>> {
        let key = self.key(name);
        match self.file.get_u64(&key)? {
            None => Ok(None),
            Some(v) => usize::try_from(v)
                .map(Some)
                .map_err(|_| Error::InvalidModel(format!("{key} = {v} is too large"))),
        }
    }

    fn required_usize(&self, name: &str) -> Result<usize> {
        self.optional_usize(name)?.ok_or_else(|| {
            Error::InvalidModel(format!("metadata key '{}' is missing", self.key(name)))
        })
    }

    fn optional_f32(&self, name: &str) -> Result<Option<f32>> {
        Ok(self.file.get_f64(&self.key(name))?.map(|v| v as f32))
    }
}

/// The factors on the queries and on the scores: `1/√d` on one of them, as
/// the architecture places it (see [`AttentionScale`]).
fn attention_scales(
    traits: &arch::Architecture,
    keys: &ArchKeys,
    head_dim: usize,
    block_count: usize,
) -> Result<(f32, f32)> {
    let inverse_sqrt = |d: usize| 1.0 / (d as f32).sqrt();
    Ok(match traits.attention_scale {
        AttentionScale::Scores => (1.0, inverse_sqrt(head_dim)),
        AttentionScale::Queries => {
            // Gemma 3 27B (62 blocks) scales by its hidden width per head.
            let dim = if block_count == 62 {
                let hidden = keys.required_usize("embedding_length")?;
                let heads = keys.required_usize("attention.head_count")?;
                hidden.checked_div(heads).unwrap_or(head_dim)
            } else {
                head_dim
            };
            (inverse_sqrt(dim), 1.0)
        }
    })
}

/// The windowed layers: for an architecture with groups of layers, those
/// the file's `sliding_window_pattern` (a period, or one flag per layer)
/// or the architecture's group marks, when the file gives a window.
fn sliding_window(
    traits: &arch::Architecture,
    keys: &ArchKeys,
    block_count: usize,
) -> Result<Option<SlidingWindow>> {
    let Some(group) = traits.local_layer_group else {
        return Ok(None);
    };
    let size = match keys.optional_usize("attention.sliding_window")? {
        Some(size) if size > 0 => size,
        _ => return Ok(None),
    };
    let pattern_key = keys.key("attention.sliding_window_pattern");
    let local = match keys.file.get(&pattern_key) {
        Some(Value::Array(Array::Bool(flags))) => {
            if flags.len() != block_count {
                return Err(Error::InvalidModel(format!(
                    "{pattern_key} has {} flags for {block_count} blocks",
                    flags.len()
                )));
            }
            flags.clone()
        }
        _ => {
            let period = keys
                .optional_usize("attention.sliding_window_pattern")?
                .unwrap_or(group);
            // As llama.cpp: period 0 windows every layer, otherwise the last
            // layer of each period attends globally.
            (0..block_count)
                .map(|layer| period == 0 || layer % period < period - 1)
                .collect()
        }
    };
    let rope_freq_base = keys.optional_f32("rope.freq_base_swa")?.unwrap_or(10_000.0);
    Ok(Some(SlidingWindow {
        size,
        rope_freq_base,
        local,
    }))
}

/// The vocabulary size: `{arch}.vocab_size` if present, else the embedding table's rows.
fn vocab_size(file: &GgufFile, keys: &ArchKeys) -> Result<usize> {
    if let Some(n) = keys.optional_usize("vocab_size")? {
        return Ok(n);
    }
    let embedding = file
        .tensor_info("token_embd.weight")
        .ok_or_else(|| Error::InvalidModel("tensor 'token_embd.weight' is missing".into()))?;
    Ok(embedding.dims.get(1).copied().unwrap_or(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tl_gguf::GgufWriter;

    /// A file holding only `entries` as metadata.
    fn metadata(entries: Vec<(&str, Value)>) -> GgufFile {
        let mut w = GgufWriter::new(3);
        for (key, value) in entries {
            w.set_metadata(key, value);
        }
        GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()
    }

    fn windows(entries: Vec<(&str, Value)>, blocks: usize) -> Result<Option<SlidingWindow>> {
        let file = metadata(entries);
        let keys = ArchKeys {
            file: &file,
            arch: "gemma3",
        };
        sliding_window(arch::find("gemma3").unwrap(), &keys, blocks)
    }

    #[test]
    fn gemma3_windows_all_but_every_sixth_layer_by_default() {
        let window = windows(
            vec![("gemma3.attention.sliding_window", Value::U32(512))],
            12,
        )
        .unwrap()
        .unwrap();
        assert_eq!(window.size, 512);
        assert_eq!(window.rope_freq_base, 10_000.0);
        let global: Vec<usize> = (0..12).filter(|&l| !window.local[l]).collect();
        assert_eq!(global, [5, 11]);
    }

    #[test]
    fn a_pattern_in_the_file_overrides_the_architecture_s() {
        let period = windows(
            vec![
                ("gemma3.attention.sliding_window", Value::U32(64)),
                ("gemma3.attention.sliding_window_pattern", Value::U32(2)),
                ("gemma3.rope.freq_base_swa", Value::F32(5e4)),
            ],
            4,
        )
        .unwrap()
        .unwrap();
        assert_eq!(period.local, [true, false, true, false]);
        assert_eq!(period.rope_freq_base, 5e4);
        let flags = Value::Array(Array::Bool(vec![false, true, true]));
        let listed = windows(
            vec![
                ("gemma3.attention.sliding_window", Value::U32(64)),
                ("gemma3.attention.sliding_window_pattern", flags.clone()),
            ],
            3,
        )
        .unwrap()
        .unwrap();
        assert_eq!(listed.local, [false, true, true]);
        let message = windows(
            vec![
                ("gemma3.attention.sliding_window", Value::U32(64)),
                ("gemma3.attention.sliding_window_pattern", flags),
            ],
            5,
        )
        .unwrap_err()
        .to_string();
        assert!(message.contains("3 flags for 5 blocks"), "{message}");
    }

    #[test]
    fn no_window_in_the_file_means_every_layer_is_global() {
        assert_eq!(windows(vec![], 6).unwrap(), None);
        let zero = vec![("gemma3.attention.sliding_window", Value::U32(0))];
        assert_eq!(windows(zero, 6).unwrap(), None);
    }
}
