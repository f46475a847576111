//! The model on an NVIDIA GPU: the stages of the
//! [schedule](crate::model::schedule) in [`pass`]. Weights stay in their
//! GGUF quantized form on the device; a decode step is five launches per block
//! (fused QKV with its norm, RoPE and the cache write; attention; output
//! projection + residual; gate/up with norm and SwiGLU; down + residual; q/k
//! norms or half-head RoPE pairs add one, as they take RoPE and the cache
//! write out of the QKV GEMV) recorded once as a CUDA graph and replayed; a prompt runs in
//! batches through cuBLAS f16 GEMMs (on f16 copies of the weights kept at load
//! time when the device has room, else dequantized per GEMM) and tensor-core
//! flash attention.
//! Activations meet quantized weights as Q8 blocks and attention follows the CPU
//! backend's small/large batch rule. Decode steps and prompts of fewer than 64
//! tokens on quantized weights go through kernels that also round as the CPU
//! backend does (its order of f32 additions, its exp, its SiLU), so there
//! both backends compute the same bits; longer prompts use GEMMs and
//! tensor-core attention, the same numbers summed in another order.
//! The host waits for the device once per pass, to read the result.

mod batch;
mod cache;
mod pass;
mod plan;
mod prefill;
pub mod program;
mod weights;

use std::sync::{Arc, Mutex};

use candle_core::Device;
use tl_cuda::ops::attention::{self as attention_ops, Heads, LayerCache, QkNorm, Rotation};
use tl_cuda::ops::gemv::{gemv_batched_into, Batching, Epilogue, Output, PreAdd};
use tl_cuda::ops::rows::Rounding;
use tl_cuda::ops::{blas, rows as row_ops, sample as sample_ops};
use tl_cuda::{Buffer, DeviceMatrix, Gpu, Graph};
use tl_gguf::GgufFile;

use cache::heads_of;
pub use cache::CudaCache;
use pass::{CudaPass, PassShape, PromptPass};
use prefill::PrefillBuffers;
use weights::{BlockWeights, Uploader};

use crate::model::step::{check_tokens, Picked};

use crate::error::{Error, Result};
use crate::memory;
use crate::model::arch::Activation;
use crate::model::config::ModelConfig;
use crate::model::gelu::gelu_table;
use crate::model::rope::RopeStyle;
use crate::model::schedule::{self, Head};
use crate::model::step::Logits;
use crate::model::tensor_names as names;
use crate::sampler::SamplingParams;

/// Prompt tokens per GEMM batch: bounds the prefill buffers.
const MAX_PREFILL_ROWS: usize = 1024;

/// A model loaded on a GPU.
pub struct CudaModel {
    gpu: Arc<Gpu>,
    config: ModelConfig,
    embedding: DeviceMatrix,
    blocks: Vec<BlockWeights>,
    output_norm: Buffer<f32>,
    /// None when the output head is the embedding table.
    output: Option<DeviceMatrix>,
    /// The RoPE tables, and which one each layer rotates by.
    ropes: Vec<Buffer<f32>>,
    layer_rope: Vec<usize>,
    /// GELU's table, for a GeGLU architecture (shared with the CPU backend).
    gelu_table: Option<Buffer<u16>>,
    max_positions: usize,
    weight_bytes: usize,
    /// Bytes of f16 weight copies kept for prompt GEMMs (0: dequantized per GEMM).
    f16_copy_bytes: usize,
    prefill: Mutex<Option<PrefillBuffers>>,
    /// Buffers of batched decode steps, made on first use.
    batch: Mutex<Option<batch::BatchBuffers>>,
    use_graphs: bool,
}

/// Errors unless the RoPE table for `max_positions` (made on the host, then
/// copied flat for the upload) fits in host memory, and the weights, one
/// sequence's KV cache of `max_positions` and the workspace fit in the GPU's
/// free memory: checked before anything is uploaded.
fn check_memory(
    gpu: &Gpu,
    file: &GgufFile,
    config: &ModelConfig,
    max_positions: usize,
) -> Result<()> {
    let rope = config.rope_table_bytes(max_positions)?;
    memory::check_available(
        &format!("a context of {max_positions} positions"),
        &[(
            "the RoPE table and its copy for the GPU",
            rope.saturating_mul(2),
        )],
    )?;
    let plan = plan::DevicePlan::of(file, config, max_positions)?;
    plan.check(&gpu.info().name, gpu.memory_free()? as u64)
}

impl CudaModel {
    /// Uploads the model in `file` to `gpu`, for caches of up to `max_positions`.
    pub fn load(file: &GgufFile, max_positions: usize, gpu: Arc<Gpu>) -> Result<Self> {
        let config = ModelConfig::from_gguf(file)?;
        heads_of(&config).check()?;
        check_memory(&gpu, file, &config, max_positions)?;
        let cpu = Device::Cpu;
        let mut up = Uploader::new(file, &gpu, &cpu);
        let embedding = up.matrix(
            names::TOKEN_EMBEDDING,
            config.vocab_size,
            config.embedding_length,
        )?;
        let mut blocks = (0..config.block_count)
            .map(|i| up.block(&config, i))
            .collect::<Result<Vec<_>>>()?;
        let f16_copy_bytes = weights::keep_f16_copies(&gpu, &mut blocks)?;
        // Batched products of many sequences stage x here (tensor cores).
        let widest = config
            .embedding_length
            .max(config.feed_forward_length)
            .max(config.query_width());
        gpu.reserve_gemv_workspace(tl_cuda::ops::gemv_mma::workspace_bytes(widest))?;
        let output_norm = up.vector(names::OUTPUT_NORM, config.embedding_length)?;
        let output = up.output(&config)?;
        let tables = up.rope_tables(&config, max_positions)?;
        let ropes = tables
            .tables()
            .map(|table| Buffer::from_host(&gpu, &table.cos_sin_flat()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let layer_rope = (0..config.block_count)
            .map(|layer| tables.index_of(layer))
            .collect();
        let gelu_table = match config.activation {
            Activation::GeluTanh => {
                let bits: Vec<u16> = gelu_table().iter().map(|v| v.to_bits()).collect();
                Some(Buffer::from_host(&gpu, &bits)?)
            }
            Activation::Silu => None,
        };
        let use_graphs = gpu.options().graphs;
        Ok(CudaModel {
            weight_bytes: up.bytes(),
            f16_copy_bytes,
            gpu,
            config,
            embedding,
            blocks,
            output_norm,
            output,
            ropes,
            layer_rope,
            gelu_table,
            max_positions,
            prefill: Mutex::new(None),
            batch: Mutex::new(None),
            use_graphs,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> usize {
        self.weight_bytes
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Bytes of f16 weight copies kept for prompt GEMMs (0 when the device had
    /// no room, or `GpuOptions::f16_weights` is off).
    pub fn f16_copy_bytes(&self) -> usize {
        self.f16_copy_bytes
    }

    /// A fresh cache for up to `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> Result<CudaCache> {
        crate::model::step::check_capacity(capacity, self.max_positions)?;
        CudaCache::new(&self.gpu, &self.config, capacity)
    }

    fn heads(&self) -> Heads {
        heads_of(&self.config)
    }

    fn output_matrix(&self) -> &DeviceMatrix {
        self.output.as_ref().unwrap_or(&self.embedding)
    }

    /// How layer `layer`'s queries and keys are made ready for attention.
    fn rotation(&self, layer: usize) -> Rotation<'_> {
        let b = &self.blocks[layer];
        Rotation {
            cos_sin: self.ropes[self.layer_rope[layer]].all(),
            halves: self.config.rope_style == RopeStyle::Halves,
            qk_norm: b.qk_norm.as_ref().map(|[query, key]| QkNorm {
                query: query.all(),
                key: key.all(),
                eps: self.config.rms_norm_eps,
            }),
            query_scale: self.config.query_scale,
        }
    }

    /// GeGLU's table, when the architecture's MLP is GeGLU.
    fn gelu_table(&self) -> Option<tl_cuda::Span<'_, u16>> {
        self.gelu_table.as_ref().map(|table| table.all())
    }

    /// Layer `layer`'s normalised QKV projection for a decode step of `n`
    /// sequences (`positions` holds one position, or one per sequence when
    /// `kv` has cache tables), with RoPE and the cache write: in the GEMV's
    /// epilogue for adjacent pairs and no q/k norms; after it otherwise (a
    /// head's norm, or pairs half a head apart, need the whole head at once).
    fn project_qkv(
        &self,
        layer: usize,
        (x, pre): (tl_cuda::Span<'_, f32>, Option<PreAdd<'_>>),
        qkv: tl_cuda::Span<'_, f32>,
        n: usize,
        positions: tl_cuda::Span<'_, i32>,
        kv: LayerCache<'_>,
    ) -> Result<()> {
        let gpu = &self.gpu;
        let b = &self.blocks[layer];
        let (weight, eps) = (b.attention_norm.all(), self.config.rms_norm_eps);
        // The GEMV asks L2 for the matrix after it.
        let next = Some(&b.attention_output);
        let rotation = self.rotation(layer);
        if self.qkv_takes_rope(layer) {
            // Each part (one, or one per weight type) rotates and stores its
            // own rows.
            let (parts, stride) = (b.qkv.parts(), b.qkv.rows());
            let mut first_row = 0;
            for (i, part) in parts.iter().enumerate() {
                let norm_rope = Epilogue::NormRope {
                    weight,
                    eps,
                    heads: self.heads(),
                    cos_sin: rotation.cos_sin,
                    position: positions,
                    cache: kv,
                    first_row,
                };
                let y = qkv.sub(first_row, qkv.len() - first_row)?;
                let output = Output { y, stride };
                let (rows, hint) = ((n, Batching::Alone), parts.get(i + 1).or(next));
                gemv_batched_into(gpu, part, x, output, norm_rope, rows, hint, pre)?;
                first_row += part.rows();
            }
            return Ok(());
        }
        self.project_qkv_parts(b, (x, pre), qkv, (n, Batching::Alone), next)?;
        self.add_qkv_bias(b, qkv, n)?;
        self.rope_store(layer, qkv, n, positions, kv)
    }

    /// Whether layer `layer`'s QKV products rotate and store their own rows
    /// (`Epilogue::NormRope`): plain RoPE (no per-head norms, adjacent
    /// pairs, no biases, unscaled queries) and parts that start at the
    /// queries, the keys or the values.
    pub(crate) fn qkv_takes_rope(&self, layer: usize) -> bool {
        let (b, rotation) = (&self.blocks[layer], self.rotation(layer));
        let plain = rotation.qk_norm.is_none()
            && !rotation.halves
            && b.qkv_bias.is_none()
            && rotation.query_scale == 1.0;
        plain && self.parts_take_rope(b)
    }

    /// Whether each part of block `b`'s QKV weights starts at the queries,
    /// the keys or the values, so that its product can rotate and store its
    /// own rows (`Epilogue::NormRope`).
    fn parts_take_rope(&self, b: &BlockWeights) -> bool {
        let heads = self.heads();
        let mut first_row = 0;
        b.qkv.parts().iter().all(|part| {
            let fits =
                tl_cuda::ops::gemv::qkv_part_widths(&heads, first_row, part.rows()).is_some();
            first_row += part.rows();
            fits
        })
    }

    /// Block `b`'s normalised QKV projection of `n` rows (batched as
    /// `batching` says) without RoPE: one
    /// GEMV per part of the QKV weights, each writing its rows of `qkv` (and
    /// each doing the same pre-add, when given). Each launch asks L2 for the
    /// weights after it (the next part's, then `next`'s).
    fn project_qkv_parts(
        &self,
        b: &BlockWeights,
        (x, pre): (tl_cuda::Span<'_, f32>, Option<PreAdd<'_>>),
        qkv: tl_cuda::Span<'_, f32>,
        (n, batching): (usize, Batching),
        next: Option<&DeviceMatrix>,
    ) -> Result<()> {
        let norm = Epilogue::Norm {
            weight: b.attention_norm.all(),
            eps: self.config.rms_norm_eps,
        };
        let (parts, stride) = (b.qkv.parts(), b.qkv.rows());
        let mut offset = 0;
        for (i, part) in parts.iter().enumerate() {
            let y = qkv.sub(offset, qkv.len() - offset)?;
            let hint = parts.get(i + 1).or(next);
            let output = Output { y, stride };
            let rows = (n, batching);
            gemv_batched_into(&self.gpu, part, x, output, norm, rows, hint, pre)?;
            offset += part.rows();
        }
        Ok(())
    }

    /// Adds block `b`'s query, key and value biases (if any) to `n` rows of
    /// `qkv`, before RoPE as the CPU backend does.
    pub(crate) fn add_qkv_bias(
        &self,
        b: &BlockWeights,
        qkv: tl_cuda::Span<'_, f32>,
        n: usize,
    ) -> Result<()> {
        if let Some(bias) = &b.qkv_bias {
            row_ops::add_row_bias(&self.gpu, qkv, bias.all(), n)?;
        }
        Ok(())
    }

    /// Layer `layer`'s q/k norms and RoPE on `n` rows of `qkv`, keys and
    /// values written to `kv`: rows of one sequence at consecutive positions
    /// from `positions[0]`, or (with cache tables) one row per sequence.
    fn rope_store(
        &self,
        layer: usize,
        qkv: tl_cuda::Span<'_, f32>,
        n: usize,
        positions: tl_cuda::Span<'_, i32>,
        kv: LayerCache<'_>,
    ) -> Result<()> {
        let (gpu, heads, rotation) = (&self.gpu, self.heads(), self.rotation(layer));
        if kv.tables.is_some() {
            attention_ops::rope_store_kv_batched(gpu, heads, qkv, n, rotation, positions, kv)?;
        } else {
            attention_ops::rope_store_kv(gpu, heads, qkv, n, rotation, positions, kv)?;
        }
        Ok(())
    }

    /// Runs `tokens` at the positions after what `cache` holds and returns
    /// the logits of the last token or of every token (as the CPU model's
    /// `forward`).
    pub(crate) fn forward(
        &self,
        tokens: &[u32],
        cache: &mut CudaCache,
        which: Logits,
    ) -> Result<Vec<f32>> {
        let index_pos = cache.len();
        check_tokens(tokens, self.config.vocab_size)?;
        cache.check_room(index_pos, tokens.len())?;
        if tokens.len() == 1 && which == Logits::Last {
            self.decode(tokens[0], index_pos, cache)?;
            let mut logits = vec![0.0; self.config.vocab_size];
            self.gpu.download(cache.step.logits.all(), &mut logits)?;
            return Ok(logits);
        }
        let mut logits = Vec::new();
        let chunks = tokens.len().div_ceil(MAX_PREFILL_ROWS);
        for (i, chunk) in tokens.chunks(MAX_PREFILL_ROWS).enumerate() {
            let start = index_pos + i * MAX_PREFILL_ROWS;
            // Only the last chunk's last row matters for `Last`.
            let wanted = match which {
                Logits::Last if i + 1 < chunks => None,
                other => Some(other),
            };
            self.prefill_chunk(chunk, start, cache, (wanted, Head::Logits), &mut logits)?;
        }
        cache.commit(index_pos + tokens.len());
        Ok(logits)
    }

    /// Runs `tokens` at the positions after what `cache` holds and returns
    /// every token's final hidden state (after the final norm, `tokens ×
    /// embedding_length` values; as the CPU model's `forward_hidden`).
    pub(crate) fn forward_hidden(&self, tokens: &[u32], cache: &mut CudaCache) -> Result<Vec<f32>> {
        let index_pos = cache.len();
        check_tokens(tokens, self.config.vocab_size)?;
        cache.check_room(index_pos, tokens.len())?;
        let mut hidden = Vec::new();
        for (i, chunk) in tokens.chunks(MAX_PREFILL_ROWS).enumerate() {
            let start = index_pos + i * MAX_PREFILL_ROWS;
            let every_row = Some(Logits::All);
            let head = Head::HiddenStates;
            self.prefill_chunk(chunk, start, cache, (every_row, head), &mut hidden)?;
        }
        cache.commit(index_pos + tokens.len());
        Ok(hidden)
    }

    /// Runs one token and returns the most likely next token (argmax on the
    /// device; the host reads back 4 bytes).
    pub(crate) fn forward_greedy(&self, token: u32, cache: &mut CudaCache) -> Result<u32> {
        let index_pos = cache.len();
        check_tokens(&[token], self.config.vocab_size)?;
        cache.check_room(index_pos, 1)?;
        self.decode(token, index_pos, cache)?;
        let mut next = [0u32];
        self.gpu.download(cache.step.next.all(), &mut next)?;
        Ok(next[0])
    }

    /// Runs one token and picks the next on the device with the sampler
    /// settings `params`, its penalties looking at `window`: only the token
    /// id comes back (one sync), or the whole row when the device cannot
    /// decide (ties overflowing the selection, nothing usable) or the
    /// settings do not fit its buffers.
    pub(crate) fn forward_sample(
        &self,
        token: u32,
        cache: &mut CudaCache,
        params: &SamplingParams,
        window: &[u32],
    ) -> Result<Picked> {
        let index_pos = cache.len();
        check_tokens(&[token], self.config.vocab_size)?;
        cache.check_room(index_pos, 1)?;
        if !sample_ops::fits(params.top_k, window.len()) {
            let row = self.forward(&[token], cache, Logits::Last)?;
            return Ok(Picked::Row(row));
        }
        let job = sample_ops::SampleJob {
            row: 0,
            params: (*params).into(),
            window,
        };
        // Uploaded before the step is queued, so the copy does not wait for it.
        let prepared = sample_ops::prepare(&self.gpu, &[job], &cache.step.sampler)?;
        self.decode(token, index_pos, cache)?;
        let s = &cache.step;
        let vocab = self.config.vocab_size;
        let (logits, next) = (s.logits.all(), s.next.all());
        sample_ops::sample(&self.gpu, logits, vocab, prepared, &s.sampler, next, 1)?;
        let mut picked = [0u32];
        self.gpu.download(s.next.span(0, 1)?, &mut picked)?;
        if picked[0] != sample_ops::FALLBACK {
            return Ok(Picked::Token(picked[0]));
        }
        let mut logits = vec![0.0; vocab];
        self.gpu.download(s.logits.all(), &mut logits)?;
        Ok(Picked::Row(logits))
    }

    /// Queues one decode step (through the graph when enabled) and commits it.
    fn decode(&self, token: u32, position: usize, cache: &mut CudaCache) -> Result<()> {
        self.gpu.upload(&[token], cache.step.token.all())?;
        self.gpu
            .upload(&[position as i32], cache.step.position.all())?;
        // Attention's chunk slots grow with the context; a recording is
        // valid while they stay the same.
        let slots = attention_ops::chunk_slots(position, None);
        match &cache.graph {
            // A profile times launches one by one, which a replay would skip.
            _ if self.gpu.is_profiling() => self.record_decode(cache)?,
            Some((graph, recorded)) if *recorded == slots => graph.replay()?,
            _ => {
                // The first step runs eagerly (loading every kernel it uses);
                // later steps replay its recording.
                self.record_decode(cache)?;
                if self.use_graphs {
                    let graph = Graph::capture(&self.gpu, || self.record_decode(cache))?;
                    cache.graph = Some((graph, slots));
                }
            }
        }
        cache.commit(position + 1);
        Ok(())
    }

    /// The launches of one decode step, reading the token and position from
    /// the step buffers.
    fn record_decode(&self, cache: &CudaCache) -> Result<()> {
        let mut pass = CudaPass::new(self, 1, PassShape::Decode(cache));
        schedule::run(&mut pass, self.blocks.len(), Head::Logits)
    }

    /// Runs up to MAX_PREFILL_ROWS tokens at `start..`, appending what `head`
    /// gives (logits or hidden states) for the rows `which` asks for (none
    /// for `None`) to `output`.
    fn prefill_chunk(
        &self,
        tokens: &[u32],
        start: usize,
        cache: &CudaCache,
        (which, head): (Option<Logits>, Head),
        output: &mut Vec<f32>,
    ) -> Result<()> {
        let mut guard = self.prefill.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(PrefillBuffers::new(
                &self.gpu,
                &self.config,
                MAX_PREFILL_ROWS,
                &self.blocks[0],
            )?);
        }
        let p = guard
            .as_ref()
            .ok_or_else(|| Error::InvalidRequest("prefill buffers".into()))?;
        let gpu = &self.gpu;
        let n = tokens.len();
        gpu.upload(tokens, p.ids.all())?;
        gpu.upload(&[start as i32], p.start.all())?;
        let logit_rows = match which {
            None => 0..0,
            Some(Logits::Last) => n - 1..n,
            Some(Logits::All) => 0..n,
        };
        let mut pass = CudaPass::new(
            self,
            n,
            PassShape::Prompt(PromptPass {
                buffers: p,
                cache,
                by_rows: self.prompt_by_rows(n),
                start,
                logit_rows,
                output,
                attention_staged: false,
            }),
        );
        schedule::run(&mut pass, self.blocks.len(), head)
    }

    /// Whether a prompt batch of `n` rows runs through the decode kernels, row
    /// by row (batched GEMVs and the f16-accumulator attention), rather than
    /// GEMMs: below the CPU backend's tiled-attention threshold, with
    /// quantized weights. Those kernels compute the CPU backend's bits, so a
    /// short prompt (a chat turn, a test) gives the CPU's logits exactly;
    /// longer ones, or float weights, take the faster GEMMs, whose sums are
    /// rounded in another order.
    fn prompt_by_rows(&self, n: usize) -> bool {
        let quantized = |m: &DeviceMatrix| m.weight_type().is_quantized();
        n < attention_ops::TILED_MIN_ROWS && self.blocks.iter().all(|b| b.matrices().all(quantized))
    }

    /// `y (+)= W·x` for `n` rows (x normalised first when `norm` says so),
    /// through cuBLAS on f16 copies of x and W. For quantized W, x is rounded
    /// to Q8 blocks (Q8_K super-blocks for K-quants) first, as the CPU
    /// backend's (and llama.cpp's) matmul does.
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &self,
        w: &DeviceMatrix,
        x: tl_cuda::Span<'_, f32>,
        norm: Option<(tl_cuda::Span<'_, f32>, f32)>,
        y: tl_cuda::Span<'_, f32>,
        n: usize,
        accumulate: bool,
        p: &PrefillBuffers,
    ) -> Result<()> {
        let y = Output {
            y,
            stride: w.rows(),
        };
        self.matmul_into(w, x, norm, y, n, accumulate, p)
    }

    /// [`Self::matmul`] writing row t's products at `y[t·stride..]`.
    #[allow(clippy::too_many_arguments)]
    fn matmul_into(
        &self,
        w: &DeviceMatrix,
        x: tl_cuda::Span<'_, f32>,
        norm: Option<(tl_cuda::Span<'_, f32>, f32)>,
        y: Output<'_>,
        n: usize,
        accumulate: bool,
        p: &PrefillBuffers,
    ) -> Result<()> {
        let rounding = Rounding::for_weights(w.weight_type());
        row_ops::to_f16(
            &self.gpu,
            x,
            norm,
            rounding,
            p.gemm_input.all(),
            n,
            w.cols(),
        )?;
        self.gemm_staged_into(w, y, n, accumulate, p)
    }

    /// Block `b`'s normalised QKV projection of the `n` rows of `x` into
    /// `qkv` through GEMMs, one per part of the QKV weights.
    fn matmul_qkv(
        &self,
        b: &BlockWeights,
        x: tl_cuda::Span<'_, f32>,
        qkv: tl_cuda::Span<'_, f32>,
        n: usize,
        p: &PrefillBuffers,
    ) -> Result<()> {
        let norm = Some((b.attention_norm.all(), self.config.rms_norm_eps));
        let stride = b.qkv.rows();
        let mut offset = 0;
        for part in b.qkv.parts() {
            let y = qkv.sub(offset, qkv.len() - offset)?;
            self.matmul_into(part, x, norm, Output { y, stride }, n, false, p)?;
            offset += part.rows();
        }
        Ok(())
    }

    /// `y (+)= W·input` for the `n` rows already staged in `p.gemm_input` (f16,
    /// rounded as W's type asks), as [`Self::matmul`]'s second half.
    fn gemm_staged(
        &self,
        w: &DeviceMatrix,
        y: tl_cuda::Span<'_, f32>,
        n: usize,
        accumulate: bool,
        p: &PrefillBuffers,
    ) -> Result<()> {
        let y = Output {
            y,
            stride: w.rows(),
        };
        self.gemm_staged_into(w, y, n, accumulate, p)
    }

    /// [`Self::gemm_staged`] writing row t's products at `y[t·stride..]`.
    fn gemm_staged_into(
        &self,
        w: &DeviceMatrix,
        y: Output<'_>,
        n: usize,
        accumulate: bool,
        p: &PrefillBuffers,
    ) -> Result<()> {
        let (rows, cols) = (w.rows(), w.cols());
        let weights = match w.f16_values() {
            Some(values) => values,
            None => {
                row_ops::dequantize_f16(&self.gpu, w, p.weights.all())?;
                p.weights.all()
            }
        };
        let input = p.gemm_input.all();
        blas::gemm_f16_into(&self.gpu, weights, input, y, n, rows, cols, accumulate)?;
        Ok(())
    }
}
