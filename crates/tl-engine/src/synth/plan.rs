//! Which tensors a synthetic model has: llama.cpp's names, GGML dims (row length
//! first), the type each is stored in and what fills it.

use tl_gguf::GgmlType;

use crate::model::tensor_names::{self as names, BlockTensor};
use crate::quantize::recipe::{self, ModelFacts, TensorShape};
use crate::quantize::FileType;
use crate::synth::shape::Shape;

/// Standard deviation of the random weights (the usual initialisation scale).
pub const WEIGHT_STD: f32 = 0.02;

/// What a tensor holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fill {
    /// Every value 1.0 (norm weights: the identity scale).
    Ones,
    /// Draws from normal(0, std).
    Normal { std: f32 },
}

/// How a tensor's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Plain f32 (norm vectors, as llama.cpp keeps them).
    F32,
    /// A quantized or half type (matrices and the token embedding).
    Weights(GgmlType),
}

impl Encoding {
    /// The GGUF tensor type.
    pub fn ggml_type(self) -> GgmlType {
        match self {
            Encoding::F32 => GgmlType::F32,
            Encoding::Weights(ty) => ty,
        }
    }
}

/// One tensor of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTensor {
    pub name: String,
    /// GGML order: `dims[0]` is the row length.
    pub dims: Vec<u64>,
    pub encoding: Encoding,
    pub fill: Fill,
}

impl PlannedTensor {
    /// Number of values.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Length of one row (`dims[0]`).
    pub fn row_length(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Bytes of data, or `None` for rows of partial blocks (no planned shape has them).
    pub fn size_bytes(&self) -> Option<u64> {
        self.encoding.ggml_type().bytes_for(self.elements())
    }
}

/// Every tensor of `shape`, in the order llama.cpp's converter writes them.
/// Matrices take `quant`'s type; in the K-quant mixes, the type
/// `tl model quantize` would give each.
pub fn tensor_plan(shape: &Shape, quant: FileType) -> Vec<PlannedTensor> {
    let mut plan = uniform_plan(shape, quant.default_type());
    if quant.is_mix() {
        apply_recipe(shape, quant, &mut plan);
    }
    plan
}

/// Sets each matrix's type as the recipe of `quant` has it.
fn apply_recipe(shape: &Shape, quant: FileType, plan: &mut [PlannedTensor]) {
    let facts = ModelFacts {
        architecture: shape.architecture.name().to_string(),
        layers: shape.block_count as u32,
        experts: 0,
        heads: shape.head_count as u32,
        kv_heads: shape.head_count_kv as u32,
    };
    let names: Vec<&str> = plan.iter().map(|t| t.name.as_str()).collect();
    let order = recipe::llama_order(&names);
    let shapes: Vec<TensorShape<'_>> = order
        .iter()
        .map(|&i| TensorShape {
            name: &plan[i].name,
            dims: &plan[i].dims,
            ggml_type: GgmlType::F32,
        })
        .collect();
    // The recipe fails only for models with experts, which no shape has.
    let Ok(types) = recipe::target_types(quant, &facts, &shapes) else {
        return;
    };
    for (&i, ty) in order.iter().zip(types) {
        if let Encoding::Weights(_) = plan[i].encoding {
            plan[i].encoding = Encoding::Weights(ty);
        }
    }
}

fn uniform_plan(shape: &Shape, quant: GgmlType) -> Vec<PlannedTensor> {
    let hidden = shape.embedding_length as u64;
    let vocab = shape.vocab_size as u64;
    let mut plan = vec![matrix(names::TOKEN_EMBEDDING, hidden, vocab, quant)];
    for block in 0..shape.block_count {
        plan.extend(block_plan(shape, quant, block));
    }
    plan.push(norm(names::OUTPUT_NORM.to_string(), hidden));
    if !shape.tied_embeddings {
        plan.push(matrix(names::OUTPUT, hidden, vocab, quant));
    }
    plan
}

fn block_plan(shape: &Shape, quant: GgmlType, block: usize) -> Vec<PlannedTensor> {
    let hidden = shape.embedding_length as u64;
    let q_width = shape.query_width() as u64;
    let kv_width = shape.key_value_width() as u64;
    let ffn = shape.feed_forward_length as u64;
    let name = |tensor: BlockTensor| tensor.name(block);
    let mut tensors = vec![
        norm(name(BlockTensor::AttentionNorm), hidden),
        matrix(&name(BlockTensor::Query), hidden, q_width, quant),
        matrix(&name(BlockTensor::Key), hidden, kv_width, quant),
        matrix(&name(BlockTensor::Value), hidden, kv_width, quant),
        matrix(&name(BlockTensor::AttentionOutput), q_width, hidden, quant),
    ];
    if shape.architecture.has_qkv_bias() {
        tensors.push(bias(name(BlockTensor::QueryBias), q_width));
        tensors.push(bias(name(BlockTensor::KeyBias), kv_width));
        tensors.push(bias(name(BlockTensor::ValueBias), kv_width));
    }
    if shape.architecture.has_qk_norm() {
        let head_dim = shape.head_dim as u64;
        tensors.push(norm(name(BlockTensor::QueryNorm), head_dim));
        tensors.push(norm(name(BlockTensor::KeyNorm), head_dim));
    }
    if shape.architecture.has_post_norms() {
        tensors.push(norm(name(BlockTensor::AttentionPostNorm), hidden));
    }
    tensors.extend([
        norm(name(BlockTensor::FeedForwardNorm), hidden),
        matrix(&name(BlockTensor::Gate), hidden, ffn, quant),
        matrix(&name(BlockTensor::Up), hidden, ffn, quant),
        matrix(&name(BlockTensor::Down), ffn, hidden, quant),
    ]);
    if shape.architecture.has_post_norms() {
        tensors.push(norm(name(BlockTensor::FeedForwardPostNorm), hidden));
    }
    tensors
}

/// A matrix of `rows` rows of `row_length` inputs (GGML dims `[row_length, rows]`).
fn matrix(name: &str, row_length: u64, rows: u64, quant: GgmlType) -> PlannedTensor {
    PlannedTensor {
        name: name.to_string(),
        dims: vec![row_length, rows],
        encoding: Encoding::Weights(quant),
        fill: Fill::Normal { std: WEIGHT_STD },
    }
}

/// Standard deviation of the random biases: large enough that they move
/// the logits visibly.
pub const BIAS_STD: f32 = 0.5;

fn bias(name: String, len: u64) -> PlannedTensor {
    PlannedTensor {
        name,
        dims: vec![len],
        encoding: Encoding::F32,
        fill: Fill::Normal { std: BIAS_STD },
    }
}

fn norm(name: String, len: u64) -> PlannedTensor {
    PlannedTensor {
        name,
        dims: vec![len],
        encoding: Encoding::F32,
        fill: Fill::Ones,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::shape::ShapeName;

    fn find<'a>(plan: &'a [PlannedTensor], name: &str) -> &'a PlannedTensor {
        plan.iter().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn tinyllama_has_its_published_parameter_count() {
        let plan = tensor_plan(&ShapeName::TinyLlama.shape(), FileType::Q4_0);
        assert_eq!(plan.len(), 1 + 22 * 9 + 2);
        let parameters: u64 = plan.iter().map(PlannedTensor::elements).sum();
        assert_eq!(parameters, 1_100_048_384);
        assert_eq!(find(&plan, "blk.3.attn_k.weight").dims, [2048, 256]);
        assert_eq!(find(&plan, "blk.3.ffn_down.weight").dims, [5632, 2048]);
        assert_eq!(find(&plan, "output.weight").dims, [2048, 32_000]);
    }

    #[test]
    fn qwen3_has_qk_norms_and_wide_queries_and_no_output() {
        let plan = tensor_plan(&ShapeName::Qwen3_0_6B.shape(), FileType::F16);
        assert_eq!(find(&plan, "blk.0.attn_q.weight").dims, [1024, 2048]);
        assert_eq!(find(&plan, "blk.0.attn_output.weight").dims, [2048, 1024]);
        let q_norm = find(&plan, "blk.27.attn_q_norm.weight");
        assert_eq!(
            (q_norm.dims.as_slice(), q_norm.encoding),
            ([128].as_slice(), Encoding::F32)
        );
        assert!(plan.iter().all(|t| t.name != "output.weight"));
        assert!(plan.iter().all(|t| t.size_bytes().is_some()));
    }

    #[test]
    fn norms_are_f32_ones_and_matrices_take_the_weight_type() {
        let plan = tensor_plan(&ShapeName::Tiny.shape(), FileType::Q4_1);
        for tensor in &plan {
            match tensor.dims.len() {
                1 => assert_eq!((tensor.encoding, tensor.fill), (Encoding::F32, Fill::Ones)),
                _ => assert_eq!(tensor.encoding, Encoding::Weights(GgmlType::Q4_1)),
            }
        }
    }
}
