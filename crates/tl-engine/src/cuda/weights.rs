//! Uploading a GGUF model's weights to the GPU in their quantized layout: Q, K
//! and V stacked into one matrix (when they share a type), gate over up into
//! another, norms as f32.

use candle_core::Device;
use tl_cuda::{Buffer, DeviceMatrix, Gpu};
use tl_gguf::{GgmlType, GgufFile};

use crate::error::{Error, Result};
use crate::model::config::ModelConfig;
use crate::model::rope::LayerRopes;
use crate::model::tensor_names::{self as names, BlockTensor};
use crate::model::weights::WeightLoader;

/// A block's query, key and value projections, `[q; k; v]` rows over the
/// hidden size, neighbours of one type stacked: one matrix when the three
/// share a type, else one per run of a type (a Q4_K_M file keeps the values
/// in Q6_K or Q8_0 beside Q4_K queries and keys: two). Each fills its rows of
/// the QKV output, with RoPE and the cache write in its epilogue.
pub struct Qkv {
    parts: Vec<DeviceMatrix>,
}

impl Qkv {
    /// The matrices in row order (one when fused).
    pub fn parts(&self) -> &[DeviceMatrix] {
        &self.parts
    }

    /// Rows of the QKV output.
    pub fn rows(&self) -> usize {
        self.parts.iter().map(DeviceMatrix::rows).sum()
    }

    /// The first matrix a product by these weights reads (for L2 hints).
    pub fn first(&self) -> &DeviceMatrix {
        &self.parts[0]
    }
}

/// One transformer block's weights on the GPU.
pub struct BlockWeights {
    pub attention_norm: Buffer<f32>,
    pub qkv: Qkv,
    pub attention_output: DeviceMatrix,
    /// Per-head norm weights of queries and keys, when the architecture has
    /// them.
    pub qk_norm: Option<[Buffer<f32>; 2]>,
    /// The query, key and value biases end to end (one row of QKV outputs),
    /// when the architecture has them.
    pub qkv_bias: Option<Buffer<f32>>,
    pub feed_forward_norm: Buffer<f32>,
    /// `[gate; up]` rows over the hidden size.
    pub gate_up: DeviceMatrix,
    pub down: DeviceMatrix,
    /// The norm weights of the attention's and the MLP's outputs, when the
    /// architecture has them.
    pub post_norms: Option<[Buffer<f32>; 2]>,
}

/// Reads tensors from one file and uploads them.
pub struct Uploader<'a> {
    file: &'a GgufFile,
    gpu: &'a Gpu,
    cpu: WeightLoader<'a>,
    bytes: usize,
}

impl<'a> Uploader<'a> {
    pub fn new(file: &'a GgufFile, gpu: &'a Gpu, cpu_device: &'a Device) -> Self {
        Uploader {
            file,
            gpu,
            cpu: WeightLoader::new(file, cpu_device),
            bytes: 0,
        }
    }

    /// Bytes uploaded so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn has(&self, name: &str) -> bool {
        self.file.tensor_info(name).is_some()
    }

    /// A vector (norm weights) as f32.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Buffer<f32>> {
        let values = self.cpu.vector(name, len)?;
        self.bytes += values.len() * 4;
        Ok(Buffer::from_host(self.gpu, &values)?)
    }

    /// The type of tensor `name`, after checking that it is `rows × cols` and
    /// that the kernels read it.
    fn checked_type(&self, name: &str, rows: usize, cols: usize) -> Result<GgmlType> {
        let info = self
            .file
            .tensor_info(name)
            .ok_or_else(|| Error::InvalidModel(format!("tensor '{name}' is missing")))?;
        if info.shape() != [rows, cols] {
            return Err(Error::InvalidModel(format!(
                "tensor '{name}' has shape {:?}, expected {:?}",
                info.shape(),
                [rows, cols]
            )));
        }
        weight_type_of(name, info.ggml_type)
    }

    /// Matrices of the same type and width stacked by rows; each part is
    /// (tensor name, rows).
    pub fn stacked(&mut self, parts: &[(&str, usize)], cols: usize) -> Result<DeviceMatrix> {
        let mut weight_type = None;
        let mut data = Vec::with_capacity(parts.len());
        for &(name, rows) in parts {
            let this_type = self.checked_type(name, rows, cols)?;
            if weight_type.is_some_and(|t| t != this_type) {
                return Err(Error::Unsupported(format!(
                    "the CUDA backend fuses {} but they have different types",
                    parts.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
                )));
            }
            weight_type = Some(this_type);
            let info = self
                .file
                .tensor_info(name)
                .ok_or_else(|| Error::InvalidModel(format!("tensor '{name}' is missing")))?;
            data.push((rows, self.file.data_of(info)));
        }
        let weight_type =
            weight_type.ok_or_else(|| Error::InvalidModel("no tensors to stack".into()))?;
        let matrix = DeviceMatrix::upload_stacked(self.gpu, weight_type, cols, &data)?;
        self.bytes += matrix.bytes();
        Ok(matrix)
    }

    /// One matrix.
    pub fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<DeviceMatrix> {
        self.stacked(&[(name, rows)], cols)
    }

    /// Q, K and V (each (tensor name, rows)): neighbours of one type stacked
    /// (all three when they share it), so a mixed QKV (Q and K in Q5_0, V in
    /// Q8_0) takes two products, not three.
    fn qkv(&mut self, parts: &[(&str, usize); 3], cols: usize) -> Result<Qkv> {
        let types = parts
            .iter()
            .map(|&(name, rows)| self.checked_type(name, rows, cols))
            .collect::<Result<Vec<_>>>()?;
        let mut runs: Vec<Vec<(&str, usize)>> = Vec::new();
        for (i, &part) in parts.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if types[i - 1] == types[i] => run.push(part),
                _ => runs.push(vec![part]),
            }
        }
        let parts = runs
            .iter()
            .map(|run| self.stacked(run, cols))
            .collect::<Result<Vec<_>>>()?;
        Ok(Qkv { parts })
    }

    /// Block `i`'s weights.
    pub fn block(&mut self, c: &ModelConfig, i: usize) -> Result<BlockWeights> {
        let hidden = c.embedding_length;
        let (q_width, kv_width) = (c.query_width(), c.key_value_width());
        let ffn = c.feed_forward_length;
        let name = |t: BlockTensor| t.name(i);
        let qk_norm = if c.qk_norm {
            Some([
                self.vector(&name(BlockTensor::QueryNorm), c.head_dim)?,
                self.vector(&name(BlockTensor::KeyNorm), c.head_dim)?,
            ])
        } else {
            None
        };
        let post_norms = if c.post_norms {
            Some([
                self.vector(&name(BlockTensor::AttentionPostNorm), hidden)?,
                self.vector(&name(BlockTensor::FeedForwardPostNorm), hidden)?,
            ])
        } else {
            None
        };
        let qkv_bias = if c.qkv_bias {
            let mut bias = self.cpu.vector(&name(BlockTensor::QueryBias), q_width)?;
            bias.extend(self.cpu.vector(&name(BlockTensor::KeyBias), kv_width)?);
            bias.extend(self.cpu.vector(&name(BlockTensor::ValueBias), kv_width)?);
            self.bytes += bias.len() * 4;
            Some(Buffer::from_host(self.gpu, &bias)?)
        } else {
            None
        };
        Ok(BlockWeights {
            qk_norm,
            qkv_bias,
            post_norms,
            attention_norm: self.vector(&name(BlockTensor::AttentionNorm), hidden)?,
            qkv: self.qkv(
                &[
                    (&name(BlockTensor::Query), q_width),
                    (&name(BlockTensor::Key), kv_width),
                    (&name(BlockTensor::Value), kv_width),
                ],
                hidden,
            )?,
            attention_output: self.matrix(&name(BlockTensor::AttentionOutput), hidden, q_width)?,
            feed_forward_norm: self.vector(&name(BlockTensor::FeedForwardNorm), hidden)?,
            gate_up: self.stacked(
                &[
                    (&name(BlockTensor::Gate), ffn),
                    (&name(BlockTensor::Up), ffn),
                ],
                hidden,
            )?,
            down: self.matrix(&name(BlockTensor::Down), hidden, ffn)?,
        })
    }

    /// The layers' RoPE tables (computed on the host, as the CPU backend's).
    pub fn rope_tables(&mut self, c: &ModelConfig, max_positions: usize) -> Result<LayerRopes> {
        LayerRopes::for_model(&mut self.cpu, c, max_positions)
    }

    /// The output head: its own matrix, or None when tied to the embedding.
    pub fn output(&mut self, c: &ModelConfig) -> Result<Option<DeviceMatrix>> {
        if self.has(names::OUTPUT) {
            Ok(Some(self.matrix(
                names::OUTPUT,
                c.vocab_size,
                c.embedding_length,
            )?))
        } else {
            Ok(None)
        }
    }
}

/// The tensor's type when the CUDA kernels read it, or an error naming the
/// tensor.
fn weight_type_of(name: &str, ggml_type: GgmlType) -> Result<GgmlType> {
    if tl_cuda::supports(ggml_type) {
        return Ok(ggml_type);
    }
    Err(Error::Unsupported(format!(
        "tensor '{name}' has type {ggml_type}, which the CUDA backend cannot read yet (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K)"
    )))
}

impl BlockWeights {
    /// The block's matrices, for work done to each.
    pub fn matrices_mut(&mut self) -> impl Iterator<Item = &mut DeviceMatrix> {
        self.qkv.parts.iter_mut().chain([
            &mut self.attention_output,
            &mut self.gate_up,
            &mut self.down,
        ])
    }

    /// The block's matrices.
    pub fn matrices(&self) -> impl Iterator<Item = &DeviceMatrix> {
        self.qkv
            .parts
            .iter()
            .chain([&self.attention_output, &self.gate_up, &self.down])
    }
}

/// Device memory to leave free after keeping f16 copies: room for caches and
/// prompt buffers.
fn reserve_bytes(total: usize) -> usize {
    (2usize << 30).max(total / 10)
}

/// Keeps an f16 copy of every block matrix for prompt GEMMs when the device has
/// room for them and the GPU options' `f16_weights` is on, so a prompt does not
/// dequantize each matrix in every pass. Returns the bytes the copies take (0
/// when none were made).
pub fn keep_f16_copies(gpu: &Gpu, blocks: &mut [BlockWeights]) -> Result<usize> {
    if !gpu.options().f16_weights {
        return Ok(0);
    }
    let needed: usize = blocks
        .iter_mut()
        .flat_map(|b| b.matrices_mut())
        .map(|m| m.f16_copy_bytes())
        .sum();
    let free = gpu.memory_free()?;
    if needed == 0 || free < needed + reserve_bytes(gpu.info().total_memory) {
        return Ok(0);
    }
    for matrix in blocks.iter_mut().flat_map(|b| b.matrices_mut()) {
        matrix.keep_f16_copy(gpu)?;
    }
    Ok(needed)
}
