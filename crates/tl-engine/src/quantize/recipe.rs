//! Which type each tensor gets: llama.cpp's `llama_tensor_get_type` for the
//! file types we write, without an importance matrix or overrides. Norms,
//! vectors and a few small tables keep their type; the output matrix (and a
//! token embedding tied to it) gets Q6_K; the `_M` mixes give more bits to a
//! spread of `attn_v` and `ffn_down` layers; a row length that is not whole
//! blocks of the chosen type falls back to a 32-value type.

use tl_gguf::GgmlType;

use super::file_type::FileType;
use crate::error::{Error, Result};

/// What the recipe needs to know about the model beside its tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// `general.architecture` (`llama`, `qwen2`, `falcon`, ...).
    pub architecture: String,
    /// `{arch}.block_count`.
    pub layers: u32,
    /// `{arch}.expert_count` (0 for a dense model).
    pub experts: u32,
    /// `{arch}.attention.head_count` and `.head_count_kv`.
    pub heads: u32,
    pub kv_heads: u32,
}

impl ModelFacts {
    /// llama.cpp's `LLM_TYPE_70B`, the one model size its recipe singles out.
    fn is_70b(&self) -> bool {
        match self.architecture.as_str() {
            "llama" => self.layers == 80 && self.heads != self.kv_heads && self.experts <= 1,
            "qwen2" | "deci" | "olmo" => self.layers == 80,
            "jais2" => self.layers == 68,
            _ => false,
        }
    }

    fn is_falcon(&self) -> bool {
        self.architecture == "falcon"
    }
}

/// A tensor as the recipe sees it.
#[derive(Debug, Clone, Copy)]
pub struct TensorShape<'a> {
    pub name: &'a str,
    /// GGML order, `dims[0]` the row length.
    pub dims: &'a [u64],
    pub ggml_type: GgmlType,
}

impl TensorShape<'_> {
    /// ggml's `ggml_n_dims`: trailing dimensions of 1 do not count.
    fn dims_used(&self) -> usize {
        self.dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1)
    }
}

/// The order `llama-quantize` visits (and writes) tensors: by layer number
/// (tensors outside the blocks first), then by name.
pub fn llama_order(names: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| (layer_of(names[a]), names[a]).cmp(&(layer_of(names[b]), names[b])));
    order
}

/// The `N` of `blk.N.` (−1 for other tensors), as `sscanf("blk.%d.")` reads it.
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().unwrap_or(-1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    TokenEmbedding,
    AttentionQ,
    AttentionV,
    AttentionK,
    AttentionQkv,
    AttentionKvB,
    AttentionOutput,
    FeedForwardUp,
    FeedForwardGate,
    FeedForwardDown,
    Output,
    Other,
}

impl Category {
    fn of(name: &str) -> Self {
        let has = |part: &str| name.contains(part);
        match name {
            "output.weight" => Category::Output,
            "token_embd.weight" | "per_layer_token_embd.weight" => Category::TokenEmbedding,
            _ if has("attn_qkv.weight") => Category::AttentionQkv,
            _ if has("attn_kv_b.weight") => Category::AttentionKvB,
            _ if has("attn_v.weight") => Category::AttentionV,
            _ if has("attn_k.weight") => Category::AttentionK,
            _ if has("attn_q.weight") => Category::AttentionQ,
            _ if has("attn_output.weight") => Category::AttentionOutput,
            _ if has("ffn_up") => Category::FeedForwardUp,
            _ if has("ffn_gate") => Category::FeedForwardGate,
            _ if has("ffn_down") => Category::FeedForwardDown,
            _ => Category::Other,
        }
    }

    /// The value projections, which take more bits.
    fn is_value_like(self) -> bool {
        matches!(
            self,
            Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB
        )
    }
}

/// Name parts of tensors llama.cpp never quantizes (small, or not weights
/// that a matrix product reads).
const KEPT_AS_IS: &[&str] = &[
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// Whether llama.cpp re-encodes this tensor (`tensor_allows_quantization`).
fn allows_quantization(tensor: &TensorShape<'_>) -> bool {
    let name = tensor.name;
    tensor.dims_used() >= 2
        && name.ends_with("weight")
        && !KEPT_AS_IS.iter().any(|part| name.contains(part))
        && name != "position_embd.weight"
        && name != "token_types.weight"
}

/// The recipe's running counts, as llama.cpp keeps them across the tensors.
struct Counters {
    value_tensors: u32,
    value_seen: u32,
    down_seen: u32,
    tied_embeddings: bool,
}

/// The type of every tensor of `tensors` (given in [`llama_order`]) in a file
/// of `file_type`. Fails where llama.cpp would: a layer it cannot place.
pub fn target_types(
    file_type: FileType,
    facts: &ModelFacts,
    tensors: &[TensorShape<'_>],
) -> Result<Vec<GgmlType>> {
    let mut counters = Counters {
        value_tensors: tensors
            .iter()
            .filter(|t| Category::of(t.name).is_value_like())
            .count() as u32,
        value_seen: 0,
        down_seen: 0,
        tied_embeddings: !tensors.iter().any(|t| t.name == "output.weight"),
    };
    tensors
        .iter()
        .map(|tensor| {
            if !allows_quantization(tensor) {
                return Ok(tensor.ggml_type);
            }
            let default = file_type.default_type();
            if !default.is_quantized() {
                return Ok(default);
            }
            let mixed = mixed_type(file_type, facts, tensor, &mut counters)?;
            Ok(fallback(mixed, tensor.dims[0]))
        })
        .collect()
}

/// `use_more_bits`: the first and last eighth of the layers and every third
/// one between.
fn use_more_bits(layer: i64, layers: i64) -> bool {
    layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2
}

/// `llama_tensor_get_type_impl` for our file types.
fn mixed_type(
    file_type: FileType,
    facts: &ModelFacts,
    tensor: &TensorShape<'_>,
    counters: &mut Counters,
) -> Result<GgmlType> {
    let category = Category::of(tensor.name);
    let mut ty = file_type.default_type();
    let medium = matches!(file_type, FileType::Q4_K_M | FileType::Q5_K_M);
    let eight_experts = facts.experts == 8;
    let output_like = category == Category::Output
        || (counters.tied_embeddings && category == Category::TokenEmbedding);
    if output_like {
        if facts.is_falcon() || !tensor.dims[0].is_multiple_of(ty.block_elements()) {
            ty = GgmlType::Q8_0;
        } else if ty != GgmlType::Q8_0 {
            ty = GgmlType::Q6_K;
        }
    } else if category == Category::TokenEmbedding {
        // Kept at the file's type.
    } else if category.is_value_like() {
        let layers = i64::from(counters.value_tensors);
        if medium && use_more_bits(i64::from(counters.value_seen), layers) {
            ty = GgmlType::Q6_K;
        }
        if facts.is_70b() && matches!(ty, GgmlType::Q3_K | GgmlType::Q4_K) {
            ty = GgmlType::Q5_K;
        }
        if eight_experts {
            ty = GgmlType::Q8_0;
        }
        counters.value_seen += 1;
    } else if category == Category::AttentionK {
        if eight_experts {
            ty = GgmlType::Q8_0;
        }
    } else if category == Category::FeedForwardDown {
        let (layer, layers) = layer_info(facts, counters.down_seen, tensor.name)?;
        match file_type {
            FileType::Q4_K_M if facts.is_falcon() => {
                ty = if layer < layers / 16 {
                    GgmlType::Q6_K
                } else if use_more_bits(layer, layers) {
                    GgmlType::Q5_K
                } else {
                    GgmlType::Q4_K
                };
            }
            FileType::Q4_K_M | FileType::Q5_K_M if use_more_bits(layer, layers) => {
                ty = GgmlType::Q6_K;
            }
            _ => {}
        }
        counters.down_seen += 1;
    } else if category == Category::AttentionOutput
        && !facts.is_falcon()
        && eight_experts
        && file_type == FileType::Q4_K_M
    {
        ty = GgmlType::Q5_K;
    } else if matches!(
        category,
        Category::FeedForwardGate | Category::FeedForwardUp
    ) {
        // Counted, but no file type of ours changes them.
        layer_info(facts, 0, tensor.name)?;
    }
    Ok(ty)
}

/// The layer a feed-forward tensor belongs to and the layer count: the
/// running count for a dense model, the name's `blk.N` with experts (whose
/// tensors need not come in layer order).
fn layer_info(facts: &ModelFacts, seen: u32, name: &str) -> Result<(i64, i64)> {
    let layers = i64::from(facts.layers);
    if facts.experts <= 1 {
        return Ok((i64::from(seen), layers));
    }
    let layer = layer_of(name);
    if layer < 0 || layer >= layers {
        return Err(Error::InvalidModel(format!(
            "cannot place tensor '{name}' in one of the model's {layers} layers"
        )));
    }
    Ok((layer, layers))
}

/// `tensor_type_fallback`: a row of `row_length` values that is not whole
/// blocks of `ty` takes the nearest 32-value type, or F16 when even that
/// does not divide it.
fn fallback(ty: GgmlType, row_length: u64) -> GgmlType {
    if row_length.is_multiple_of(ty.block_elements()) {
        return ty;
    }
    let smaller = match ty {
        GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    };
    if row_length.is_multiple_of(smaller.block_elements()) {
        smaller
    } else {
        GgmlType::F16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(layers: u32) -> ModelFacts {
        ModelFacts {
            architecture: "llama".into(),
            layers,
            experts: 0,
            heads: 32,
            kv_heads: 8,
        }
    }

    #[test]
    fn order_is_by_layer_number_then_name() {
        let names = [
            "blk.10.attn_q.weight",
            "token_embd.weight",
            "blk.2.ffn_down.weight",
            "output_norm.weight",
            "blk.2.attn_k.weight",
            "output.weight",
        ];
        let order: Vec<&str> = llama_order(&names).into_iter().map(|i| names[i]).collect();
        assert_eq!(
            order,
            [
                "output.weight",
                "output_norm.weight",
                "token_embd.weight",
                "blk.2.attn_k.weight",
                "blk.2.ffn_down.weight",
                "blk.10.attn_q.weight",
            ]
        );
    }

    /// The types of `attn_v` and `ffn_down` in each of `layers` layers.
    fn layer_types(file_type: FileType, layers: u32) -> Vec<(GgmlType, GgmlType)> {
        let names: Vec<String> = (0..layers)
            .flat_map(|l| {
                [
                    format!("blk.{l}.attn_v.weight"),
                    format!("blk.{l}.ffn_down.weight"),
                ]
            })
            .collect();
        let dims = [2048u64, 256];
        let tensors: Vec<TensorShape<'_>> = names
            .iter()
            .map(|name| TensorShape {
                name,
                dims: &dims,
                ggml_type: GgmlType::F16,
            })
            .collect();
        let types = target_types(file_type, &facts(layers), &tensors).unwrap();
        types.chunks(2).map(|pair| (pair[0], pair[1])).collect()
    }

    #[test]
    fn medium_mixes_give_a_spread_of_layers_six_bits() {
        // 22 layers: the first 2, the last 3 (7·22/8 = 19) and every third from 2 + 2.
        let more: Vec<usize> = layer_types(FileType::Q4_K_M, 22)
            .iter()
            .enumerate()
            .filter(|(_, (v, d))| {
                assert_eq!(v, d);
                *v == GgmlType::Q6_K
            })
            .map(|(l, _)| l)
            .collect();
        assert_eq!(more, [0, 1, 4, 7, 10, 13, 16, 19, 20, 21]);
        assert!(layer_types(FileType::Q6_K, 22)
            .iter()
            .all(|&pair| pair == (GgmlType::Q6_K, GgmlType::Q6_K)));
    }

    #[test]
    fn output_gets_six_bits_and_odd_rows_fall_back() {
        let dims = [576u64, 49152];
        let odd = [100u64, 8];
        let tensors = [
            TensorShape {
                name: "token_embd.weight",
                dims: &dims,
                ggml_type: GgmlType::Q8_0,
            },
            TensorShape {
                name: "blk.0.attn_q.weight",
                dims: &dims,
                ggml_type: GgmlType::Q8_0,
            },
            TensorShape {
                name: "blk.0.attn_norm.weight",
                dims: &dims[..1],
                ggml_type: GgmlType::F32,
            },
            TensorShape {
                name: "blk.0.ffn_up.weight",
                dims: &odd,
                ggml_type: GgmlType::F16,
            },
        ];
        let types = target_types(FileType::Q4_K_M, &facts(1), &tensors).unwrap();
        // 576 is not whole super-blocks: the tied embedding takes Q8_0, Q4_K falls back to Q5_0.
        assert_eq!(
            types,
            [GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::F32, GgmlType::F16]
        );
        // Q4_0 gives the output Q6_K, whose fallback for 576 is Q8_0.
        let types = target_types(FileType::Q4_0, &facts(1), &tensors).unwrap();
        assert_eq!(
            types,
            [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32, GgmlType::F16]
        );
        let wide = [2048u64, 32000];
        let output = [TensorShape {
            name: "output.weight",
            dims: &wide,
            ggml_type: GgmlType::F16,
        }];
        let types = target_types(FileType::Q4_0, &facts(1), &output).unwrap();
        assert_eq!(types, [GgmlType::Q6_K]);
    }
}
