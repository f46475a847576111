//! The public ops on the GPU a model was loaded on, for programs that run
//! their own forward pass there (the language's `linear`, `rms_norm`, `rope`,
//! `attention`, `silu`, `embedding`, `+` and `*` on tensors that live on the
//! device). Each op launches the kernels the model's own passes compute with,
//! unfused, so a program gets the numbers `model.forward` gets on this GPU.
//! `matmul` (a cuBLAS batched product) is the language's index equations'
//! contraction, which a GPU opened without a model also runs.
//! Tensors stay on the device between ops; reading one back is a download,
//! the only wait for the GPU (temporaries are freed in stream order, after the
//! launches that read them).

use std::sync::Arc;

use candle_core::Device;
use half::f16;
use tl_cuda::ops::attention::{self as attention_ops, AttentionBatch, Heads, LayerCache};
use tl_cuda::ops::blas::{gemm_f32_batched, BatchedProduct};
use tl_cuda::ops::gemv::{gemv_batched, Batching, Epilogue};
use tl_cuda::ops::program::{self as program_ops, CacheRows, SwapAxes};
use tl_cuda::ops::rows as row_ops;
use tl_cuda::{Buffer, DeviceMatrix, Gpu, GpuOptions, Span};
use tl_gguf::GgufFile;

pub use tl_cuda::ops::program::Elementwise;

use super::cache::CudaCache;
use super::weights::Uploader;
use crate::error::{Error, Result};
use crate::model::rope::{RopeStyle, RopeTable};

/// The ops of one GPU; cheap to clone.
#[derive(Clone)]
pub struct GpuOps {
    gpu: Arc<Gpu>,
}

/// A tensor of f32 or f16 values on the GPU, row-major. Clones and reshapes
/// share the values; ops never write into their inputs.
#[derive(Clone)]
pub struct GpuTensor {
    values: Values,
    offset: usize,
    dims: Vec<usize>,
}

#[derive(Clone)]
enum Values {
    F32(Arc<Buffer<f32>>),
    F16(Arc<Buffer<u16>>),
}

/// A tensor's values read back to the host.
pub enum HostValues {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

/// A weight matrix of a GGUF file on the GPU, in its quantized layout.
pub struct GpuMatrix(DeviceMatrix);

impl GpuTensor {
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the values are f16 (else f32).
    pub fn is_f16(&self) -> bool {
        matches!(self.values, Values::F16(_))
    }

    /// The same values seen with `dims` (which must hold as many).
    pub fn reshape(&self, dims: Vec<usize>) -> Result<GpuTensor> {
        if dims.iter().product::<usize>() != self.len() {
            return Err(Error::InvalidRequest(format!(
                "{} values cannot be seen as {dims:?}",
                self.len()
            )));
        }
        Ok(GpuTensor {
            dims,
            ..self.clone()
        })
    }

    /// Entry `index` of the first axis (no copy).
    pub fn index_first(&self, index: usize) -> Result<GpuTensor> {
        let Some((&count, rest)) = self.dims.split_first() else {
            return Err(Error::InvalidRequest("a scalar has no rows".into()));
        };
        if index >= count {
            return Err(Error::InvalidRequest(format!(
                "index {index} is out of range for {count} rows"
            )));
        }
        let row: usize = rest.iter().product();
        Ok(GpuTensor {
            values: self.values.clone(),
            offset: self.offset + index * row,
            dims: rest.to_vec(),
        })
    }

    fn f32_span(&self, what: &str) -> Result<Span<'_, f32>> {
        match &self.values {
            Values::F32(b) => Ok(b.span(self.offset, self.len())?),
            Values::F16(_) => Err(Error::Unsupported(format!(
                "{what} on the GPU takes float32 values, not float16"
            ))),
        }
    }

    fn f16_span(&self, what: &str) -> Result<Span<'_, u16>> {
        match &self.values {
            Values::F16(b) => Ok(b.span(self.offset, self.len())?),
            Values::F32(_) => Err(Error::Unsupported(format!(
                "{what} on the GPU takes float16 values, not float32"
            ))),
        }
    }
}

impl GpuMatrix {
    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        (self.0.rows(), self.0.cols())
    }
}

impl GpuOps {
    pub(crate) fn new(gpu: Arc<Gpu>) -> Self {
        GpuOps { gpu }
    }

    /// The ops of the first GPU, opened with `options` for a program that
    /// computes there without a model (its index equations under
    /// `--device cuda`).
    pub fn open(options: GpuOptions) -> Result<GpuOps> {
        Ok(GpuOps::new(Arc::new(Gpu::open(0, options)?)))
    }

    /// Whether `other` queues its work on the same stream as these ops, so
    /// that a tensor of one can be read by the other's ops without a wait.
    pub fn same_queue(&self, other: &GpuOps) -> bool {
        Arc::ptr_eq(&self.gpu, &other.gpu)
    }

    /// A new f32 tensor of `dims` on the GPU (uninitialised values are never
    /// read: every op writes all of its output).
    fn alloc(&self, dims: Vec<usize>) -> Result<GpuTensor> {
        let len = dims.iter().product();
        Ok(GpuTensor {
            values: Values::F32(Arc::new(Buffer::zeros(&self.gpu, len)?)),
            offset: 0,
            dims,
        })
    }

    fn alloc_f16(&self, dims: Vec<usize>) -> Result<GpuTensor> {
        let len = dims.iter().product();
        Ok(GpuTensor {
            values: Values::F16(Arc::new(Buffer::zeros(&self.gpu, len)?)),
            offset: 0,
            dims,
        })
    }

    /// `values` (as many as `dims` holds) copied to the GPU.
    pub fn upload(&self, values: &[f32], dims: Vec<usize>) -> Result<GpuTensor> {
        check_len(values.len(), &dims)?;
        Ok(GpuTensor {
            values: Values::F32(Arc::new(Buffer::from_host(&self.gpu, values)?)),
            offset: 0,
            dims,
        })
    }

    /// f16 `values` (as many as `dims` holds) copied to the GPU.
    pub fn upload_f16(&self, values: &[f16], dims: Vec<usize>) -> Result<GpuTensor> {
        check_len(values.len(), &dims)?;
        let bits: Vec<u16> = values.iter().map(|v| v.to_bits()).collect();
        Ok(GpuTensor {
            values: Values::F16(Arc::new(Buffer::from_host(&self.gpu, &bits)?)),
            offset: 0,
            dims,
        })
    }

    /// The tensor's values on the host (waits for the GPU).
    pub fn download(&self, t: &GpuTensor) -> Result<HostValues> {
        let n = t.len();
        Ok(match &t.values {
            Values::F32(b) => {
                let mut out = vec![0.0f32; n];
                if n > 0 {
                    self.gpu.download(b.span(t.offset, n)?, &mut out)?;
                }
                HostValues::F32(out)
            }
            Values::F16(b) => {
                let mut bits = vec![0u16; n];
                if n > 0 {
                    self.gpu.download(b.span(t.offset, n)?, &mut bits)?;
                }
                HostValues::F16(bits.into_iter().map(f16::from_bits).collect())
            }
        })
    }

    /// The `rows × cols` matrix `name` of `file`, uploaded as the model's
    /// own passes upload their weights.
    pub fn matrix(
        &self,
        file: &GgufFile,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<GpuMatrix> {
        let cpu = Device::Cpu;
        let matrix = Uploader::new(file, &self.gpu, &cpu).matrix(name, rows, cols)?;
        Ok(GpuMatrix(matrix))
    }

    /// Rows `ids` of an embedding table, as f32 `[ids, cols]`.
    pub fn embedding(&self, table: &GpuMatrix, ids: &[u32]) -> Result<GpuTensor> {
        let (vocab, cols) = table.shape();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::InvalidRequest(format!(
                "token id {bad} is outside the table's {vocab} rows"
            )));
        }
        let out = self.alloc(vec![ids.len(), cols])?;
        if !ids.is_empty() {
            let ids = Buffer::from_host(&self.gpu, ids)?;
            let span = out.f32_span("embedding")?;
            row_ops::embed(&self.gpu, &table.0, ids.all(), ids.len(), span, 1.0)?;
        }
        Ok(out)
    }

    /// `x · wᵀ` for x `[..., cols]`: each row through the decode GEMV.
    pub fn linear(&self, x: &GpuTensor, w: &GpuMatrix) -> Result<GpuTensor> {
        let (rows_out, cols) = w.shape();
        let last = x.dims.last().copied().unwrap_or(0);
        if last != cols {
            return Err(Error::InvalidRequest(format!(
                "linear: x has {last} features, the weight takes {cols}"
            )));
        }
        let mut dims = x.dims.clone();
        if let Some(d) = dims.last_mut() {
            *d = rows_out;
        }
        let out = self.alloc(dims)?;
        let rows = x.len() / cols.max(1);
        let (input, output) = (x.f32_span("linear")?, out.f32_span("linear")?);
        // One `linear` of several rows is one batch, as on the CPU.
        let rows = (rows, Batching::Together);
        gemv_batched(&self.gpu, &w.0, input, output, Epilogue::Plain, rows, None)?;
        Ok(out)
    }

    /// `rmsnorm(x) · weight` over the last axis.
    pub fn rms_norm(&self, x: &GpuTensor, weight: &GpuTensor, eps: f32) -> Result<GpuTensor> {
        let cols = weight.len();
        if weight.dims.len() != 1 || x.dims.last() != Some(&cols) {
            return Err(Error::InvalidRequest(format!(
                "rms_norm: a weight of {:?} for x of {:?}",
                weight.dims, x.dims
            )));
        }
        let out = self.alloc(x.dims.clone())?;
        let rows = x.len() / cols.max(1);
        let (input, w) = (x.f32_span("rms_norm")?, weight.f32_span("rms_norm")?);
        program_ops::rms_norm(&self.gpu, input, w, eps, out.f32_span("rms_norm")?, rows)?;
        Ok(out)
    }

    /// RoPE of x `[seq, heads, head_dim]` (or `[seq, head_dim]`): row i by
    /// `table`'s angles for position `start + i`.
    pub fn rope(&self, x: &GpuTensor, table: &RopeTable, start: usize) -> Result<GpuTensor> {
        let (seq, head_dim) = match x.dims[..] {
            [seq, _, head_dim] | [seq, head_dim] => (seq, head_dim),
            _ => {
                return Err(Error::InvalidRequest(format!(
                    "rope takes [seq, heads, head_dim] or [seq, head_dim], not {:?}",
                    x.dims
                )))
            }
        };
        let heads = x.len() / (seq * head_dim).max(1);
        let angles = table.cos_sin_rows(start, seq)?;
        let cos_sin = Buffer::from_host(&self.gpu, &angles)?;
        let out = self.copy(x)?;
        let halves = table.style() == RopeStyle::Halves;
        let values = out.f32_span("rope")?;
        program_ops::rope(
            &self.gpu,
            values,
            cos_sin.all(),
            seq,
            heads,
            head_dim,
            halves,
        )?;
        Ok(out)
    }

    /// `a op b` for tensors of the same shape.
    pub fn elementwise(&self, op: Elementwise, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor> {
        if a.dims != b.dims {
            return Err(Error::InvalidRequest(format!(
                "elementwise operands of {:?} and {:?}",
                a.dims, b.dims
            )));
        }
        let out = self.alloc(a.dims.clone())?;
        let (x, y) = (a.f32_span("+ and *")?, b.f32_span("+ and *")?);
        let n = a.len();
        program_ops::elementwise(&self.gpu, op, x, y, out.f32_span("+ and *")?, n)?;
        Ok(out)
    }

    /// The batched product of f32 `a [batches, m, k]` and `b [batches, k,
    /// n]`: `[batches, m, n]`, summed in f32 by cuBLAS (not in the CPU's
    /// order: results agree to rounding, not to the bit).
    pub fn matmul(&self, a: &GpuTensor, b: &GpuTensor) -> Result<GpuTensor> {
        let (batches, m, k) = three_dims(a, "matmul: a", "[batches, m, k]")?;
        let (b_batches, b_k, n) = three_dims(b, "matmul: b", "[batches, k, n]")?;
        if (b_batches, b_k) != (batches, k) {
            return Err(Error::InvalidRequest(format!(
                "matmul of {:?} and {:?}",
                a.dims, b.dims
            )));
        }
        let out = self.alloc(vec![batches, m, n])?;
        if k == 0 {
            return Ok(out); // a sum over nothing: the zeros allocated
        }
        let size = BatchedProduct { batches, m, k, n };
        let (x, y) = (a.f32_span("matmul")?, b.f32_span("matmul")?);
        gemm_f32_batched(&self.gpu, x, y, out.f32_span("matmul")?, size)?;
        Ok(out)
    }

    /// `silu(x)` elementwise, with the CPU's arithmetic over the flattened values.
    pub fn silu(&self, x: &GpuTensor) -> Result<GpuTensor> {
        let out = self.alloc(x.dims.clone())?;
        let (input, output) = (x.f32_span("silu")?, out.f32_span("silu")?);
        program_ops::silu(&self.gpu, input, output, x.len())?;
        Ok(out)
    }

    /// x with axes `d0` and `d1` swapped (a copy).
    pub fn transpose(&self, x: &GpuTensor, d0: usize, d1: usize) -> Result<GpuTensor> {
        let rank = x.dims.len();
        if d0 >= rank || d1 >= rank {
            return Err(Error::InvalidRequest(format!(
                "no axes {d0} and {d1} in a tensor of rank {rank}"
            )));
        }
        let (a, b) = (d0.min(d1), d0.max(d1));
        let product = |range: std::ops::Range<usize>| x.dims[range].iter().product::<usize>();
        let shape = SwapAxes {
            outer: product(0..a),
            a: x.dims[a],
            mid: product(a + 1..b),
            b: x.dims[b],
            inner: product(b + 1..rank),
        };
        let mut dims = x.dims.clone();
        dims.swap(a, b);
        match &x.values {
            Values::F32(_) => {
                let out = self.alloc(dims)?;
                let (input, output) = (x.f32_span("transpose")?, out.f32_span("transpose")?);
                program_ops::swap_axes(&self.gpu, input, output, shape)?;
                Ok(out)
            }
            Values::F16(_) => {
                let out = self.alloc_f16(dims)?;
                let (input, output) = (x.f16_span("transpose")?, out.f16_span("transpose")?);
                program_ops::swap_axes(&self.gpu, input, output, shape)?;
                Ok(out)
            }
        }
    }

    /// Causal attention of f32 queries `[heads, seq, head_dim]` over f16 keys
    /// and values `[kv_heads, len, head_dim]`: query row i sees keys
    /// `0..=start + i`. Fewer than 64 rows use the decode kernel's arithmetic
    /// (the CPU's small-batch rule), more the model's prompt kernels.
    pub fn attention(
        &self,
        q: &GpuTensor,
        k: &GpuTensor,
        v: &GpuTensor,
        start: usize,
    ) -> Result<GpuTensor> {
        let layout = "[heads, length, head_dim]";
        let (heads, seq, head_dim) = three_dims(q, "attention: q", layout)?;
        let (kv_heads, len, k_dim) = three_dims(k, "attention: k", layout)?;
        if k_dim != head_dim || v.dims != k.dims || start + seq > len {
            return Err(Error::InvalidRequest(format!(
                "attention of q {:?} at {start} over k {:?} and v {:?}",
                q.dims, k.dims, v.dims
            )));
        }
        let geometry = Heads {
            heads,
            kv_heads,
            head_dim,
        };
        geometry.check()?;
        let out = self.alloc(vec![seq, heads, head_dim])?;
        // The kernels take rows of every head's query: [seq][heads][head_dim].
        let rows = self.transpose(q, 0, 1)?;
        let start_at = Buffer::from_host(&self.gpu, &[position(start)?])?;
        let batch = AttentionBatch {
            heads: geometry,
            scale: geometry.score_scale(),
            window: None,
            queries: rows.f32_span("attention")?,
            query_stride: heads * head_dim,
            rows: seq,
            cache: LayerCache {
                keys: k.f16_span("attention")?,
                values: v.f16_span("attention")?,
                capacity: len,
                tables: None,
            },
            start: start_at.all(),
            out: out.f32_span("attention")?,
        };
        if seq < attention_ops::TILED_MIN_ROWS {
            // A lone row is split into chunks past KV_CHUNK positions; its
            // chunks meet in buffers made for this call.
            let slots = if seq == 1 {
                attention_ops::chunk_slots(start, None)
            } else {
                1
            };
            let split = (slots > 1)
                .then(|| attention_ops::SplitBuffers::new(&self.gpu, geometry, 1, slots))
                .transpose()?;
            let view = split.as_ref().map(|s| s.view(slots)).transpose()?.flatten();
            attention_ops::attention_f16_accumulator(&self.gpu, &batch, view)?;
        } else {
            attention_ops::attention_prefill(&self.gpu, &batch)?;
        }
        self.transpose(&out, 0, 1)
    }

    /// Writes keys and values `[seq, kv_heads, head_dim]` into layer `layer`
    /// of `cache`, at positions `start..start + seq`.
    pub(crate) fn store_kv_rows(
        &self,
        cache: &mut CudaCache,
        layer: usize,
        start: usize,
        keys: &GpuTensor,
        values: &GpuTensor,
    ) -> Result<()> {
        let layout = cache.rows_layout();
        let layer_cache = cache.layer(layer)?;
        let seq = keys.dims.first().copied().unwrap_or(0);
        let expected = [seq, layout.kv_heads, layout.head_dim];
        if keys.dims != expected || values.dims != expected {
            return Err(Error::InvalidRequest(format!(
                "keys {:?} and values {:?} for a cache of rows {:?}",
                keys.dims,
                values.dims,
                &expected[1..]
            )));
        }
        for (rows, half) in [(keys, layer_cache.keys), (values, layer_cache.values)] {
            let input = rows.f32_span("cache.store")?;
            program_ops::store_kv(&self.gpu, input, half, layout, start, seq)?;
        }
        Ok(())
    }

    /// Layer `layer`'s keys (else values) of positions `0..end`, as f16
    /// `[kv_heads, end, head_dim]` (a copy).
    pub(crate) fn read_kv_rows(
        &self,
        cache: &CudaCache,
        layer: usize,
        keys: bool,
        end: usize,
    ) -> Result<GpuTensor> {
        let layout = cache.rows_layout();
        if end > layout.capacity {
            return Err(Error::InvalidRequest(format!(
                "positions 0..{end} of a cache of {}",
                layout.capacity
            )));
        }
        let layer_cache = cache.layer(layer)?;
        let source = if keys {
            layer_cache.keys
        } else {
            layer_cache.values
        };
        let out = self.alloc_f16(vec![layout.kv_heads, end, layout.head_dim])?;
        let (d, cap) = (layout.head_dim, layout.capacity);
        let dest = out.f16_span("cache read")?;
        program_ops::narrow(&self.gpu, source, dest, layout.kv_heads, cap * d, end * d)?;
        Ok(out)
    }

    /// A copy of x (f32).
    fn copy(&self, x: &GpuTensor) -> Result<GpuTensor> {
        let shape = SwapAxes {
            outer: x.len(),
            a: 1,
            mid: 1,
            b: 1,
            inner: 1,
        };
        let out = self.alloc(x.dims.clone())?;
        let (input, output) = (x.f32_span("copy")?, out.f32_span("copy")?);
        program_ops::swap_axes(&self.gpu, input, output, shape)?;
        Ok(out)
    }
}

impl CudaCache {
    /// Where positions go in each layer's caches.
    fn rows_layout(&self) -> CacheRows {
        CacheRows {
            kv_heads: self.kv_heads(),
            head_dim: self.head_dim(),
            capacity: self.capacity(),
        }
    }
}

fn three_dims(t: &GpuTensor, what: &str, layout: &str) -> Result<(usize, usize, usize)> {
    match t.dims[..] {
        [a, b, c] => Ok((a, b, c)),
        _ => Err(Error::InvalidRequest(format!(
            "{what} must be {layout}, not {:?}",
            t.dims
        ))),
    }
}

fn position(start: usize) -> Result<i32> {
    i32::try_from(start)
        .map_err(|_| Error::InvalidRequest(format!("position {start} is too large")))
}

fn check_len(len: usize, dims: &[usize]) -> Result<()> {
    let expected: usize = dims.iter().product();
    if len != expected {
        return Err(Error::InvalidRequest(format!(
            "{len} values for a tensor of {dims:?}"
        )));
    }
    Ok(())
}
