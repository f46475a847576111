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

use tl_cuda::ops::attention::{
    self as attention_ops, AttentionBatch, CacheTables, KvSplit, LayerCache,
};
use tl_cuda::ops::gemv::{gemv, gemv_batched_into, Batching, Epilogue, Output, PreAdd};
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
    /// A decode pass's residual under post-norms (see [`Residual`]).
    residual: Residual<'a>,
    /// The layer's queries and keys wait for the attention kernel's own
    /// norms and RoPE (a lone decode step whose QKV product cannot rotate).
    rope_pending: bool,
}

impl<'a> CudaPass<'a> {
    pub fn new(model: &'a CudaModel, rows: usize, shape: PassShape<'a>) -> Self {
        CudaPass {
            model,
            rows,
            shape,
            residual: Residual::default(),
            rope_pending: false,
        }
    }
}

/// In a decode pass of a post-norm architecture, a branch's output is not
/// added by a kernel of its own: it waits in the post-norm buffers' `branch`
/// and the next product adds it (normalised) to the residual as it stages
/// its input, writing the sum to the residual's other buffer. This is where
/// the residual is and what waits.
#[derive(Default)]
struct Residual<'a> {
    /// In the post-norm buffers' `x_alt`, not `x`.
    in_alt: bool,
    /// The norm weight of the branch output waiting to join.
    pending: Option<&'a tl_cuda::Buffer<f32>>,
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
    /// The first row's position.
    pub start: usize,
    /// The rows whose logits (or hidden states) are appended to `output`.
    pub logit_rows: Range<usize>,
    pub output: &'a mut Vec<f32>,
    /// Whether attention wrote the output projection's f16 GEMM input itself.
    pub attention_staged: bool,
}

/// A pass's activations, `[row][feature]`.
struct Activations<'a> {
    /// The residual stream (where it is now).
    x: Span<'a, f32>,
    /// A decode pass's post-norm buffers: the residual's other buffer and
    /// the waiting branch output (see [`Residual`]).
    post_norm: Option<(Span<'a, f32>, Span<'a, f32>)>,
    qkv: Span<'a, f32>,
    attention: Span<'a, f32>,
    /// The MLP's hidden layer (gate/up, then SwiGLU's output in its front).
    hidden: Span<'a, f32>,
    /// Each row's position (one value, the first row's, for a sequence).
    positions: Span<'a, i32>,
}

impl<'a> CudaPass<'a> {
    /// The pass's activations (borrowed from its buffers, not from the
    /// pass, so stages can update the pass's state while they hold them).
    fn activations(&self) -> Result<Activations<'a>> {
        let mut a = match &self.shape {
            PassShape::Decode(cache) => {
                let cache: &'a CudaCache = cache;
                let s = &cache.step;
                Activations {
                    x: s.x.all(),
                    post_norm: Some((s.post_norm.x_alt.all(), s.post_norm.branch.all())),
                    qkv: s.qkv.all(),
                    attention: s.attention.all(),
                    hidden: s.hidden.all(),
                    positions: s.position.all(),
                }
            }
            PassShape::Batch { buffers, .. } => {
                let b: &'a BatchBuffers = buffers;
                Activations {
                    x: b.x.all(),
                    post_norm: Some((b.post_norm.x_alt.all(), b.post_norm.branch.all())),
                    qkv: b.qkv.all(),
                    attention: b.attention.all(),
                    hidden: b.hidden.all(),
                    positions: b.positions.span(0, self.rows)?,
                }
            }
            PassShape::Prompt(p) => {
                let b: &'a PrefillBuffers = p.buffers;
                Activations {
                    x: b.x.all(),
                    post_norm: None,
                    qkv: b.qkv.all(),
                    attention: b.attention.all(),
                    hidden: b.gate_up.all(),
                    positions: b.start.all(),
                }
            }
        };
        if self.residual.in_alt {
            if let Some((x_alt, branch)) = a.post_norm {
                a.post_norm = Some((a.x, branch));
                a.x = x_alt;
            }
        }
        Ok(a)
    }

    /// Whether branch outputs wait for the next product's pre-add (decode
    /// passes of a post-norm architecture) rather than being added at once.
    fn defers_post_norms(&self) -> bool {
        self.model.config.post_norms && !matches!(self.shape, PassShape::Prompt(_))
    }

    /// The pre-add of the waiting branch, if one waits: the product it is
    /// given to reads the sum; call [`Self::branch_joined`] after it.
    fn pending_pre_add(&self, a: &Activations<'a>) -> Option<PreAdd<'a>> {
        let weight = self.residual.pending?;
        let (out, branch) = a.post_norm?;
        Some(PreAdd {
            branch,
            weight: weight.all(),
            out,
        })
    }

    /// The waiting branch has joined the residual, which is now in the
    /// other buffer.
    fn branch_joined(&mut self) {
        if self.residual.pending.take().is_some() {
            self.residual.in_alt = !self.residual.in_alt;
        }
    }

    /// Where a branch's product goes, and whether it is added there: into
    /// the residual without a post-norm; else into the waiting branch's
    /// buffer (decode) or the QKV buffer, read by now (prompts).
    fn branch_output(&self, a: &Activations<'a>, post_norm: bool) -> (Span<'a, f32>, bool) {
        match (post_norm, a.post_norm) {
            (false, _) => (a.x, true),
            (true, Some((_, branch))) if self.defers_post_norms() => (branch, false),
            (true, _) => (a.qkv, false),
        }
    }

    /// After a branch's product: with a post-norm, the branch waits for the
    /// next product (decode) or joins the residual now (prompts).
    fn branch_done(
        &mut self,
        post_norm: Option<&'a tl_cuda::Buffer<f32>>,
        a: &Activations<'a>,
    ) -> Result<()> {
        if self.defers_post_norms() {
            self.residual.pending = post_norm;
            return Ok(());
        }
        self.model.add_post_norm(post_norm, a.x, a.qkv, self.rows)
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

    /// Where attention's chunks of a long context meet, for a layer of
    /// `window`: only a lone row of a sequence is split (a decode step, or
    /// a prompt of one token), at positions of KV_CHUNK or more.
    fn kv_split(&self, window: Option<usize>) -> Result<Option<KvSplit<'_>>> {
        let slots = |position: usize| attention_ops::chunk_slots(position, window);
        let split = match &self.shape {
            PassShape::Decode(cache) => cache.split.view(slots(cache.len()))?,
            PassShape::Prompt(p) if self.rows == 1 => p.cache.split.view(slots(p.start))?,
            PassShape::Prompt(_) => None,
            PassShape::Batch { buffers, caches } => {
                let last = caches.iter().map(|c| c.len()).max().unwrap_or(0);
                buffers.split.view(slots(last))?
            }
        };
        Ok(split)
    }

    /// How llama.cpp batches this pass's rows, which decides how K-quant
    /// products round them: a decode step's each alone, a prompt's together.
    fn batching(&self) -> Batching {
        match self.shape {
            PassShape::Prompt(_) => Batching::Together,
            PassShape::Decode(_) | PassShape::Batch { .. } => Batching::Alone,
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
    fn keep_logit_rows(&mut self) -> Result<()> {
        // Decode passes return every row's logits.
        let PassShape::Prompt(p) = &mut self.shape else {
            return Ok(());
        };
        let (rows, n) = (p.logit_rows.clone(), self.rows);
        if rows.len() == n {
            return Ok(());
        }
        let hidden = self.model.config.embedding_length;
        if !rows.is_empty() {
            let x = p.buffers.x.all();
            let kept = x.sub(rows.start * hidden, rows.len() * hidden)?;
            self.model.gpu.copy(kept, x.sub(0, rows.len() * hidden)?)?;
        }
        self.rows = rows.len();
        p.logit_rows = 0..rows.len();
        // The kept rows (one, a prompt's last) take the kernels a batch of
        // their size would.
        p.by_rows = self.model.prompt_by_rows(rows.len());
        Ok(())
    }

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
        let pre = self.pending_pre_add(&a);
        match self.kernels() {
            Kernels::Gemv { hints: true }
                if matches!(self.shape, PassShape::Decode(_)) && !m.qkv_takes_rope(layer) =>
            {
                // The attention kernel normalises, rotates and stores.
                let hint = Some(&b.attention_output);
                m.project_qkv_parts(b, (a.x, pre), a.qkv, (n, Batching::Alone), hint)?;
                m.add_qkv_bias(b, a.qkv, n)?;
                self.rope_pending = true;
            }
            Kernels::Gemv { hints: true } => {
                m.project_qkv(layer, (a.x, pre), a.qkv, n, a.positions, kv)?
            }
            Kernels::Gemv { hints: false } => {
                m.project_qkv_parts(b, (a.x, pre), a.qkv, (n, self.batching()), None)?;
                m.add_qkv_bias(b, a.qkv, n)?;
                m.rope_store(layer, a.qkv, n, a.positions, kv)?
            }
            Kernels::Gemm(p) => {
                m.matmul_qkv(b, a.x, a.qkv, n, p)?;
                m.add_qkv_bias(b, a.qkv, n)?;
                m.rope_store(layer, a.qkv, n, a.positions, kv)?
            }
        }
        self.branch_joined();
        Ok(())
    }

    fn attention(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let rope_pending = std::mem::take(&mut self.rope_pending);
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
        let split = self.kv_split(batch.window)?;
        let staged = match &self.shape {
            PassShape::Decode(_) if rope_pending => {
                let rotation = m.rotation(layer);
                attention_ops::attention_f16_accumulator_rope(gpu, &batch, rotation, split)?;
                false
            }
            PassShape::Decode(_) => {
                attention_ops::attention_f16_accumulator(gpu, &batch, split)?;
                false
            }
            PassShape::Batch { .. } => {
                let one_row_each = AttentionBatch { rows: 1, ..batch };
                attention_ops::attention_f16_accumulator_batched(gpu, &one_row_each, n, split)?;
                false
            }
            PassShape::Prompt(p) if p.by_rows => {
                attention_ops::attention_f16_accumulator(gpu, &batch, split)?;
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
                    attention_ops::attention_f16_accumulator(gpu, &batch, split)?;
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
        // With a post-norm the product is a branch to normalise into the
        // residual: later, in a decode pass (see `Residual`), else by
        // `add_post_norm` from the QKV buffer (read by now). Without one it
        // is added in place.
        let post_norm = b.post_norms.as_ref().map(|[attention, _]| attention);
        let (y, accumulate) = self.branch_output(&a, post_norm.is_some());
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
                let rows = (n, self.batching());
                gemv_batched_into(&m.gpu, w, a.attention, y, epilogue, rows, next, None)?;
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
        self.branch_done(post_norm, &a)
    }

    fn feed_forward(&mut self, layer: usize) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        if n == 0 {
            // A prompt chunk whose logits nobody asked for, past its last
            // block's attention.
            return Ok(());
        }
        let gpu = &m.gpu;
        let b = &m.blocks[layer];
        let a = self.activations()?;
        let eps = m.config.rms_norm_eps;
        // As in attention_output.
        let post_norm = b.post_norms.as_ref().map(|[_, feed_forward]| feed_forward);
        let (y, accumulate) = self.branch_output(&a, post_norm.is_some());
        let pre = self.pending_pre_add(&a);
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
                let hidden = Output {
                    y: a.hidden,
                    stride: b.gate_up.rows() / 2,
                };
                let rows = (n, self.batching());
                gemv_batched_into(gpu, &b.gate_up, a.x, hidden, norm, rows, down_hint, pre)?;
                let epilogue = if accumulate {
                    Epilogue::Residual
                } else {
                    Epilogue::Plain
                };
                let y = Output {
                    y,
                    stride: b.down.rows(),
                };
                gemv_batched_into(gpu, &b.down, a.hidden, y, epilogue, rows, after_block, None)?;
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
        self.branch_joined();
        self.branch_done(post_norm, &a)
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
        let a = self.activations()?;
        let pre = self.pending_pre_add(&a);
        self.branch_joined();
        let logits_of = |logits: Span<'_, f32>, rows: usize| {
            let out = Output {
                y: logits,
                stride: c.vocab_size,
            };
            // Decode rows only: each alone.
            let rows = (rows, Batching::Alone);
            gemv_batched_into(gpu, head, a.x, out, norm, rows, None, pre)
        };
        match &mut self.shape {
            PassShape::Decode(cache) => {
                let s = &cache.step;
                logits_of(s.logits.all(), 1)?;
                row_ops::argmax(gpu, s.logits.all(), c.vocab_size, s.next.all())?;
            }
            PassShape::Batch { buffers: b, .. } => logits_of(b.logits.all(), self.rows)?,
            PassShape::Prompt(p) => {
                let hidden = c.embedding_length;
                let b = p.buffers;
                for row in p.logit_rows.clone() {
                    let x = b.x.span(row * hidden, hidden)?;
                    gemv(gpu, head, x, b.logits.all(), norm)?;
                    let at = p.output.len();
                    p.output.resize(at + c.vocab_size, 0.0);
                    gpu.download(b.logits.all(), &mut p.output[at..])?;
                }
            }
        }
        Ok(())
    }

    fn hidden_states(&mut self) -> Result<()> {
        let (m, n) = (self.model, self.rows);
        let PassShape::Prompt(p) = &mut self.shape else {
            return Err(Error::InvalidRequest(
                "hidden states come from prompt passes, not decode steps".into(),
            ));
        };
        if n == 0 {
            return Ok(());
        }
        let hidden = m.config.embedding_length;
        // The MLP is done with its buffer: the normalised rows go there.
        let normed = p.buffers.gate_up.span(0, n * hidden)?;
        let (weight, eps) = (m.output_norm.all(), m.config.rms_norm_eps);
        // The programs' row norm: the CPU backend's arithmetic, as the
        // head's fused norm has it.
        tl_cuda::ops::program::rms_norm(&m.gpu, p.buffers.x.all(), weight, eps, normed, n)?;
        let at = p.output.len();
        p.output.resize(at + n * hidden, 0.0);
        m.gpu.download(normed, &mut p.output[at..])?;
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
