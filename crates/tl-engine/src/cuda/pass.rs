//! The schedule's stages on the GPU. A pass is one of three shapes, which
//! decide the buffers and the kernels, not the order of the stages:
//! - a lone decode step, in the sequence's own step buffers (recorded once as
//!   a CUDA graph, so nothing here may wait for the device);
//! - a batched decode step, one row for each sequence, the kernels finding
//!   each sequence's cache through a table of addresses;
//! - a prompt chunk of one sequence, through the decode kernels row by row
//!   (short prompts of quantized weights: the CPU's bits) or through GEMMs and
//!   tensor-core attention.
//!
//! Decode steps fuse what the kernels allow (the norm, RoPE and the cache
//! write into the QKV GEMV's epilogue, the residual adds into the
//! projections), and each GEMV asks L2 for the weights of the matrix after it.

use std::ops::Range;

use tl_cuda::ops::attention::{self as attention_ops, AttentionBatch, CacheTables, LayerCache};
use tl_cuda::ops::gemv::{gemv, gemv_batched, gemv_batched_into, Epilogue, Output};
use tl_cuda::ops::rows::{self as row_ops, Rounding};
use tl_cuda::{DeviceMatrix, Span};

use super::batch::{BatchBuffers, MAX_BATCH};
use super::prefill::PrefillBuffers;
use super::{CudaCache, CudaModel};
use crate::error::{Error, Result};
use crate::model::schedule::Stages;

/// One forward pass of `rows` rows on the GPU.
pub(super) struct CudaPass<'a> {
    pub model: &'a CudaModel,
    pub rows: usize,
    pub shape: PassShape<'a>,
}

/// What a pass runs, and where its buffers are.
pub(super) enum PassShape<'a> {
    /// One token of one sequence, in its step buffers.
    Decode(&'a CudaCache),
    /// One token of each sequence, in the model's batch buffers.
    Batch {
        buffers: &'a BatchBuffers,
        caches: &'a [&'a CudaCache],
    },
    /// Prompt tokens of one sequence at consecutive positions.
    Prompt(PromptPass<'a>),
}

/// A prompt chunk's buffers and what it gives back.
pub(super) struct PromptPass<'a> {
    pub buffers: &'a PrefillBuffers,
    pub cache: &'a CudaCache,
    /// Through the decode kernels, row by row, rather than GEMMs.
    pub by_rows: bool,
    /// The rows whose logits are appended to `logits`.
    pub logit_rows: Range<usize>,
    pub logits: &'a mut Vec<f32>,
    /// Whether attention wrote the output projection's f16 GEMM input itself.
    pub attention_staged: bool,
}

/// A pass's activations, `[row][feature]`.
struct Activations<'a> {
    x: Span<'a, f32>,
    qkv: Span<'a, f32>,
    attention: Span<'a, f32>,
    /// The MLP's hidden layer (gate/up, then SwiGLU's output in its front).
    hidden: Span<'a, f32>,
    /// Each row's position (one value, the first row's, for a sequence).
    positions: Span<'a, i32>,
}

impl<'a> CudaPass<'a> {
    fn activations(&self) -> Result<Activations<'_>> {
        Ok(match &self.shape {
            PassShape::Decode(cache) => {
                let s = &cache.step;
                Activations {
                    x: s.x.all(),
                    qkv: s.qkv.all(),
                    attention: s.attention.all(),
                    hidden: s.hidden.all(),
                    positions: s.position.all(),
                }
            }
            PassShape::Batch { buffers: b, .. } => Activations {
                x: b.x.all(),
                qkv: b.qkv.all(),
                attention: b.attention.all(),
                hidden: b.hidden.all(),
                positions: b.positions.span(0, self.rows)?,
            },
            PassShape::Prompt(p) => {
                let b = p.buffers;
                Activations {
                    x: b.x.all(),
                    qkv: b.qkv.all(),
                    attention: b.attention.all(),
                    hidden: b.gate_up.all(),
                    positions: b.start.all(),
                }
            }
        })
    }

    /// Layer `layer`'s caches: the sequence's, or (batched) the first
    /// sequence's geometry with every sequence's addresses in tables.
    fn layer_cache(&self, layer: usize) -> Result<LayerCache<'_>> {
        match &self.shape {
            PassShape::Decode(cache) => cache.layer(layer),
            PassShape::Prompt(p) => p.cache.layer(layer),
            PassShape::Batch { buffers, caches } => {
                let n = self.rows;
                let first = caches
                    .first()
                    .ok_or_else(|| Error::InvalidRequest("a batched step of no sequences".into()))?
                    .layer(layer)?;
                Ok(LayerCache {
                    tables: Some(CacheTables {
                        keys: buffers.tables.span(layer * 2 * MAX_BATCH, n)?,
                        values: buffers.tables.span((layer * 2 + 1) * MAX_BATCH, n)?,
                    }),
                    ..first
                })
            }
        }
    }

    /// The kernels of this pass's matrix products.
    fn kernels(&self) -> Kernels<'a> {
        match &self.shape {
            PassShape::Decode(_) | PassShape::Batch { .. } => Kernels::Gemv { hints: true },
            PassShape::Prompt(p) if p.by_rows => Kernels::Gemv { hints: false },
            PassShape::Prompt(p) => Kernels::Gemm(p.buffers),
        }
    }
}

/// How a pass multiplies by the weights.
enum Kernels<'a> {
    /// The decode kernels (GEMVs, one launch for every row): each launch asks
    /// L2 for the next matrix's weights when `hints` (decode steps; a prompt's
    /// rows, whose launches follow each other closely anyway, do not).
    Gemv { hints: bool },
    /// GEMMs on f16 copies, staged in the prompt buffers.
    Gemm(&'a PrefillBuffers),
}

impl Stages for CudaPass<'_> {
    fn embed(&mut self) -> Result<()> {
        let ids = match &self.shape {
            PassShape::Decode(cache) => cache.step.token.all(),
            PassShape::Batch { buffers, .. } => buffers.tokens.all(),
            PassShape::Prompt(p) => p.buffers.ids.all(),
        };
        let m = self.model;
        let x = self.activations()?.x;
        let scale = m.config.embedding_scale;
        row_ops::embed(&m.gpu, &m.embedding, ids, self.rows, x, scale)?;
        Ok(())
    }

    fn attention_input(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let b = &m.blocks[layer];
        let a = self.activations()?;
        let kv = self.layer_cache(layer)?;
        match self.kernels() {
            Kernels::Gemv { hints: true } => m.project_qkv(layer, a.x, a.qkv, n, a.positions, kv),
            Kernels::Gemv { hints: false } => {
                m.project_qkv_parts(b, a.x, a.qkv, n, None)?;
                m.add_qkv_bias(b, a.qkv, n)?;
                m.rope_store(layer, a.qkv, n, a.positions, kv)
            }
            Kernels::Gemm(p) => {
                m.matmul_qkv(b, a.x, a.qkv, n, p)?;
                m.add_qkv_bias(b, a.qkv, n)?;
                m.rope_store(layer, a.qkv, n, a.positions, kv)
            }
        }
    }

    fn attention(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let gpu = &m.gpu;
        let a = self.activations()?;
        let batch = AttentionBatch {
            heads: m.heads(),
            scale: m.config.score_scale,
            window: m.config.attention_window(layer),
            queries: a.qkv,
            query_stride: m.blocks[layer].qkv.rows(),
            rows: n,
            cache: self.layer_cache(layer)?,
            start: a.positions,
            out: a.attention,
        };
        let staged = match &self.shape {
            PassShape::Decode(_) => {
                attention_ops::attention_f16_accumulator(gpu, &batch)?;
                false
            }
            PassShape::Batch { .. } => {
                let one_row_each = AttentionBatch { rows: 1, ..batch };
                attention_ops::attention_f16_accumulator_batched(gpu, &one_row_each, n)?;
                false
            }
            PassShape::Prompt(p) if p.by_rows => {
                attention_ops::attention_f16_accumulator(gpu, &batch)?;
                false
            }
            PassShape::Prompt(p) => {
                // The CPU backend's rule: small batches take the
                // f16-accumulator path. Tensor-core attention before float
                // output weights writes their f16 GEMM input itself (quantized
                // ones need Q8 rounding).
                let flash = n >= attention_ops::TILED_MIN_ROWS
                    && attention_ops::flash_supported(gpu, batch.heads.head_dim);
                let output = &m.blocks[layer].attention_output;
                let staged = flash && !output.weight_type().is_quantized();
                if staged {
                    let input = p.buffers.gemm_input.all();
                    attention_ops::attention_flash_to_f16(gpu, &batch, input)?;
                } else if n < attention_ops::TILED_MIN_ROWS {
                    attention_ops::attention_f16_accumulator(gpu, &batch)?;
                } else {
                    attention_ops::attention_prefill(gpu, &batch)?;
                }
                staged
            }
        };
        if let PassShape::Prompt(p) = &mut self.shape {
            p.attention_staged = staged;
        }
        Ok(())
    }

    fn attention_output(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let b = &m.blocks[layer];
        let a = self.activations()?;
        // With a post-norm the product goes to the QKV buffer (read by now),
        // to be normalised into the residual; else it is added in place.
        let post_norm = b.post_norms.as_ref().map(|[attention, _]| attention);
        let (y, accumulate) = match post_norm {
            Some(_) => (a.qkv, false),
            None => (a.x, true),
        };
        match self.kernels() {
            Kernels::Gemv { hints } => {
                let next = hints.then_some(&b.gate_up);
                let epilogue = if accumulate {
                    Epilogue::Residual
                } else {
                    Epilogue::Plain
                };
                let w = &b.attention_output;
                let y = Output {
                    y,
                    stride: w.rows(),
                };
                gemv_batched_into(&m.gpu, w, a.attention, y, epilogue, n, next)?;
            }
            Kernels::Gemm(p) => {
                let staged = matches!(&self.shape, PassShape::Prompt(p) if p.attention_staged);
                if staged {
                    m.gemm_staged(&b.attention_output, y, n, accumulate, p)?;
                } else {
                    m.matmul(&b.attention_output, a.attention, None, y, n, accumulate, p)?;
                }
            }
        }
        m.add_post_norm(post_norm, a.x, a.qkv, n)
    }

    fn feed_forward(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let gpu = &m.gpu;
        let b = &m.blocks[layer];
        let a = self.activations()?;
        let eps = m.config.rms_norm_eps;
        // As in attention_output: a post-norm's input goes to the QKV buffer.
        let post_norm = b.post_norms.as_ref().map(|[_, feed_forward]| feed_forward);
        let (y, accumulate) = match post_norm {
            Some(_) => (a.qkv, false),
            None => (a.x, true),
        };
        match self.kernels() {
            Kernels::Gemv { hints } => {
                let norm = Epilogue::NormGated {
                    weight: b.feed_forward_norm.all(),
                    eps,
                    gelu_table: m.gelu_table(),
                };
                let (down_hint, after_block) = match hints {
                    true => (Some(&b.down), Some(m.matrix_after_block(layer))),
                    false => (None, None),
                };
                gemv_batched(gpu, &b.gate_up, a.x, a.hidden, norm, n, down_hint)?;
                let epilogue = if accumulate {
                    Epilogue::Residual
                } else {
                    Epilogue::Plain
                };
                let y = Output {
                    y,
                    stride: b.down.rows(),
                };
                gemv_batched_into(gpu, &b.down, a.hidden, y, epilogue, n, after_block)?;
            }
            Kernels::Gemm(p) => {
                let norm = Some((b.feed_forward_norm.all(), eps));
                m.matmul(&b.gate_up, a.x, norm, a.hidden, n, false, p)?;
                // The activation writes the down projection's f16 GEMM input
                // itself.
                let rounding = Rounding::for_weights(b.down.weight_type());
                let ffn = m.config.feed_forward_length;
                let (input, table) = (p.gemm_input.all(), m.gelu_table());
                row_ops::swiglu_to_f16(gpu, a.hidden, input, (n, ffn), rounding, table)?;
                m.gemm_staged(&b.down, y, n, accumulate, p)?;
            }
        }
        m.add_post_norm(post_norm, a.x, a.qkv, n)
    }

    fn logits(&mut self) -> Result<()> {
        let m = self.model;
        let gpu = &m.gpu;
        let c = &m.config;
        let norm = Epilogue::Norm {
            weight: m.output_norm.all(),
            eps: c.rms_norm_eps,
        };
        let head = m.output_matrix();
        match &mut self.shape {
            PassShape::Decode(cache) => {
                let s = &cache.step;
                gemv(gpu, head, s.x.all(), s.logits.all(), norm)?;
                row_ops::argmax(gpu, s.logits.all(), c.vocab_size, s.next.all())?;
            }
            PassShape::Batch { buffers: b, .. } => {
                let (x, logits) = (b.x.all(), b.logits.all());
                gemv_batched(gpu, head, x, logits, norm, self.rows, None)?;
            }
            PassShape::Prompt(p) => {
                let hidden = c.embedding_length;
                let b = p.buffers;
                for row in p.logit_rows.clone() {
                    let x = b.x.span(row * hidden, hidden)?;
                    gemv(gpu, head, x, b.logits.all(), norm)?;
                    let at = p.logits.len();
                    p.logits.resize(at + c.vocab_size, 0.0);
                    gpu.download(b.logits.all(), &mut p.logits[at..])?;
                }
            }
        }
        Ok(())
    }
}

impl CudaModel {
    /// `x += rmsnorm(y)·weight` for `n` rows when there is a post-norm
    /// weight (the branch output `y` then holds the product).
    fn add_post_norm(
        &self,
        weight: Option<&tl_cuda::Buffer<f32>>,
        x: Span<'_, f32>,
        y: Span<'_, f32>,
        n: usize,
    ) -> Result<()> {
        if let Some(weight) = weight {
            let norm = (weight.all(), self.config.rms_norm_eps);
            row_ops::post_norm_add(&self.gpu, x, y, norm, n)?;
        }
        Ok(())
    }

    /// The matrix a decode step multiplies by after block `layer`'s last one:
    /// the next block's QKV projection, or the output head.
    fn matrix_after_block(&self, layer: usize) -> &DeviceMatrix {
        self.blocks
            .get(layer + 1)
            .map_or(self.output_matrix(), |next| next.qkv.first())
    }
}
