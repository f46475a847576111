//! The transformer builtins that the engine also has — `linear`, `rms_norm`,
//! `rope`, `attention`, `embedding` — routed to the engine's own kernels, so a
//! transformer written in the language computes exactly the engine's numbers:
//! quantized weights are multiplied by the engine's quantized matmul, norms,
//! rotations and attention use the engine's arithmetic. Operands on the
//! gradient's graph take the same functions in candle's operations instead
//! (`on_graph.rs`), and a quantized weight is dequantized for them.

mod on_graph;

use candle_core::{DType as CandleDType, Device, Tensor as CandleTensor};
use half::f16;
use rayon::prelude::*;
use tl_engine::ops::{attend_head, rms_norm as engine_rms_norm, RopeStyle, RopeTable};

use super::tensor_args::at_call;
use super::{Args, Builtin, Context, Gradient};
use crate::convert::to_f32_vec;
use crate::error::{LangError, Result};
use crate::gpu::{f16_on, f32_gpu, f32_on};
use crate::ops::shapes::checked_numel;
use crate::tensor::{GpuValue, Tensor};
use crate::value::Value;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "linear",
        signature: "linear(x, weight, bias = none) -> tensor",
        min_args: 2,
        max_args: 3,
        summary: "x · weightᵀ (+ bias) for x[..., in] and weight[out, in]; quantized model weights run on the engine's kernels.",
        call: linear,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "rms_norm",
        signature: "rms_norm(x, weight, eps = 1e-5) -> tensor",
        min_args: 2,
        max_args: 3,
        summary: "x / sqrt(mean(x²) + eps) * weight over the last dimension.",
        call: rms_norm,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "rope",
        signature: "rope(x, start, theta = 10000.0, freq_factors = none, style = \"adjacent\") -> tensor",
        min_args: 2,
        max_args: 5,
        summary: "Rotary position embedding of x[seq, heads, head_dim] (or x[seq, head_dim]): row i is rotated for position start + i, llama.cpp's arithmetic. style \"adjacent\" pairs elements 2i and 2i+1 (llama GGUF files); \"neox\" pairs i and i + head_dim/2, the half-split layout of Qwen2/3 and Hugging Face.",
        call: rope,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "attention",
        signature: "attention(q, k, v, start = 0) -> tensor",
        min_args: 3,
        max_args: 4,
        summary: "Causal scaled dot-product attention: q[heads, seq, d] over k, v[kv_heads, kv_len, d] (grouped-query when kv_heads < heads); query row i sees keys 0..=start + i. float16 keys and values use llama.cpp's flash-attention arithmetic, and the engine's canonical split-KV order for a lone query row past 256 keys.",
        call: attention,
        gradient: Gradient::Differentiable,
    },
    Builtin {
        name: "embedding",
        signature: "embedding(table, ids) -> tensor",
        min_args: 2,
        max_args: 2,
        summary: "Rows `ids` (a list of ints or an int tensor) of table[vocab, dim], as float32[len(ids), dim].",
        call: embedding,
        gradient: Gradient::Differentiable,
    },
];

fn dense_f32(t: &Tensor) -> Result<(Vec<f32>, Vec<usize>)> {
    let dense = t.to_dense()?;
    Ok((to_f32_vec(&dense)?, dense.dims().to_vec()))
}

fn from_f32(values: Vec<f32>, dims: &[usize]) -> Result<Value> {
    Ok(Value::tensor(CandleTensor::from_vec(
        values,
        dims,
        &Device::Cpu,
    )?))
}

fn linear(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.tensor(0)?;
    let weight = args.tensor(1)?;
    let w_dims = weight.dims();
    let [out_features, in_features] = w_dims[..] else {
        return Err(args.error(
            1,
            format!(
                "the weight must be a matrix [out, in], found {}",
                weight.type_string()
            ),
        ));
    };
    let x_dims = x.dims();
    if x_dims.last() != Some(&in_features) {
        return Err(args.error(
            0,
            format!(
                "linear: x is {} but the weight {} takes {in_features} input features",
                x.type_string(),
                weight.type_string()
            ),
        ));
    }
    let mut out_dims = x_dims.clone();
    *out_dims.last_mut().unwrap_or(&mut 0) = out_features;
    checked_numel(&out_dims).map_err(at_call(args))?;
    let on_graph = x.tracks_gradient();
    if !args.has(2) && !on_graph {
        if let Some(product) = linear_on_gpu(&x, &weight)? {
            return Ok(Value::Tensor(product));
        }
    }
    let product = match &weight {
        Tensor::Quantized(q) if !on_graph => {
            let (values, _) = dense_f32(&x)?;
            let rows = values.len() / in_features.max(1);
            let mut out = vec![0.0f32; rows * out_features];
            q.linear()?.forward(&values, &mut out)?;
            CandleTensor::from_vec(out, out_dims, &Device::Cpu)?
        }
        Tensor::Dense(_) | Tensor::Owned(_) | Tensor::Gpu(_) | Tensor::Quantized(_) => {
            let w = weight.to_dense()?;
            let x = x.to_dense()?;
            if x.dtype() != w.dtype() {
                return Err(args.error(
                    0,
                    format!(
                        "linear: x is {} but the weight is {}; convert one with to_dtype",
                        args.tensor(0)?.type_string(),
                        weight.type_string()
                    ),
                ));
            }
            let rows = x.elem_count() / in_features.max(1);
            x.reshape((rows, in_features))?
                .matmul(&w.t()?)?
                .reshape(out_dims)?
        }
    };
    let product = match args.has(2) {
        true => product.broadcast_add(&args.dense(2)?.to_dtype(product.dtype())?)?,
        false => product,
    };
    Ok(Value::tensor(product))
}

/// `linear` of a weight of a model on a GPU, there.
fn linear_on_gpu(x: &Tensor, weight: &Tensor) -> Result<Option<Tensor>> {
    let Tensor::Quantized(q) = weight else {
        return Ok(None);
    };
    let Some((ops, matrix)) = q.on_gpu()? else {
        return Ok(None);
    };
    let input = f32_on(ops, x)?;
    Ok(Some(GpuValue::tensor(ops, ops.linear(&input, matrix)?)))
}

fn rms_norm(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.tensor(0)?;
    let weight_arg = args.tensor(1)?;
    let (dims, w_dims) = (x.dims(), weight_arg.dims());
    let eps = args.opt_float(2)?.unwrap_or(1e-5) as f32;
    if w_dims.len() != 1 || dims.last() != w_dims.first() {
        return Err(args.error(1, format!(
            "rms_norm: the weight must be a vector as long as x's last dimension; x is {}, weight is {:?}",
            x.type_string(),
            w_dims
        )));
    }
    if x.tracks_gradient() || weight_arg.tracks_gradient() {
        let (x, weight) = (x.to_dense()?, weight_arg.to_dense()?);
        return Ok(Value::tensor(on_graph::rms_norm(
            &x,
            &weight,
            f64::from(eps),
        )?));
    }
    if let Some(g) = f32_gpu(&x) {
        let weight = f32_on(&g.ops, &weight_arg)?;
        let out = g.ops.rms_norm(&g.tensor, &weight, eps)?;
        return Ok(Value::Tensor(GpuValue::tensor(&g.ops, out)));
    }
    let (values, _) = dense_f32(&x)?;
    let (weight, _) = dense_f32(&weight_arg)?;
    let mut out = vec![0.0f32; values.len()];
    // Rows of no values have nothing to normalise (and no row length to cut by).
    if !weight.is_empty() {
        engine_rms_norm(&values, &weight, eps, &mut out);
    }
    restore_dtype(from_f32(out, &dims)?, &x)
}

/// Gives a float32 result the element type of the input it was computed from.
fn restore_dtype(value: Value, like: &Tensor) -> Result<Value> {
    match (&value, like.dtype()) {
        (Value::Tensor(Tensor::Dense(t)), dtype)
            if dtype.is_float() && t.dtype() != crate::tensor::candle_dtype(dtype) =>
        {
            Ok(Value::tensor(
                t.to_dtype(crate::tensor::candle_dtype(dtype))?,
            ))
        }
        _ => Ok(value),
    }
}

fn rope(_: &mut Context, args: &Args) -> Result<Value> {
    let x = args.tensor(0)?;
    let dims = x.dims();
    let start = args.usize(1)?;
    let theta = args.opt_float(2)?.unwrap_or(10_000.0) as f32;
    let factors = if args.has(3) {
        Some(dense_f32(&args.tensor(3)?)?.0)
    } else {
        None
    };
    let (Some(&seq), Some(&head_dim)) = (dims.first(), dims.last()) else {
        return Err(args.error(0, "rope needs x[seq, heads, head_dim] or x[seq, head_dim]"));
    };
    if dims.len() < 2 || head_dim % 2 != 0 {
        return Err(args.error(
            0,
            format!(
                "rope needs x[seq, heads, head_dim] with an even head_dim, found {}",
                x.type_string()
            ),
        ));
    }
    let style = match args.opt_str(4)?.unwrap_or("adjacent") {
        "adjacent" => RopeStyle::Adjacent,
        "neox" => RopeStyle::Halves,
        other => {
            return Err(args.error(
                4,
                format!("unknown rope style \"{other}\": use \"adjacent\" or \"neox\""),
            ))
        }
    };
    let table = RopeTable::for_positions(head_dim, theta, factors.as_deref(), start, seq)
        .map_err(|e| args.error(3, e.to_string()))?
        .with_style(style);
    // Row i of x (every head of one position) turns for position start + i.
    let rotate_rows = |values: &mut [f32]| {
        let row_len = values.len() / seq.max(1);
        for (i, row) in values.chunks_exact_mut(row_len.max(1)).enumerate() {
            table.rotate(row, start + i);
        }
    };
    if x.tracks_gradient() {
        return Ok(Value::tensor(on_graph::rope(
            &x.to_dense()?,
            style,
            rotate_rows,
        )?));
    }
    if let Some(g) = f32_gpu(&x) {
        let out = g.ops.rope(&g.tensor, &table, start)?;
        return Ok(Value::Tensor(GpuValue::tensor(&g.ops, out)));
    }
    let (mut values, _) = dense_f32(&x)?;
    rotate_rows(&mut values);
    restore_dtype(from_f32(values, &dims)?, &x)
}

/// The three dimensions of a `[heads, len, head_dim]` attention operand.
fn heads_len_dim(args: &Args, i: usize, what: &str) -> Result<(usize, usize, usize)> {
    let t = args.tensor(i)?;
    match t.dims()[..] {
        [heads, len, dim] => Ok((heads, len, dim)),
        _ => Err(args.error(
            i,
            format!(
                "attention: {what} must be [heads, length, head_dim], found {}",
                t.type_string()
            ),
        )),
    }
}

fn attention(_: &mut Context, args: &Args) -> Result<Value> {
    let (heads, seq, dim) = heads_len_dim(args, 0, "q")?;
    let (kv_heads, kv_len, k_dim) = heads_len_dim(args, 1, "k")?;
    let v_shape = heads_len_dim(args, 2, "v")?;
    let start = args.opt_int(3)?.unwrap_or(0);
    let start = usize::try_from(start).map_err(|_| args.error(3, "start must not be negative"))?;
    if k_dim != dim || v_shape != (kv_heads, kv_len, dim) {
        return Err(LangError::at(
            format!(
                "attention: shapes disagree: q {:?}, k {:?}, v {:?}",
                args.tensor(0)?.dims(),
                args.tensor(1)?.dims(),
                args.tensor(2)?.dims()
            ),
            args.call,
        ));
    }
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(args.error(
            1,
            format!("attention: {heads} query heads cannot share {kv_heads} key/value heads"),
        ));
    }
    if start + seq > kv_len {
        return Err(args.error(
            1,
            format!(
                "attention: query rows reach position {} but k holds only {kv_len}",
                start + seq
            ),
        ));
    }
    let operands = [args.tensor(0)?, args.tensor(1)?, args.tensor(2)?];
    if operands.iter().any(Tensor::tracks_gradient) {
        let [q, k, v] = operands.map(|t| t.to_dense());
        return Ok(Value::tensor(on_graph::attention(&q?, &k?, &v?, start)?));
    }
    if let Some(out) = attention_on_gpu(args, start)? {
        return Ok(Value::Tensor(out));
    }
    let (query, _) = dense_f32(&args.tensor(0)?)?;
    let pair = KeysValues::new(&args.dense(1)?, &args.dense(2)?)?;
    let scale = 1.0 / (dim as f32).sqrt();
    let group = heads / kv_heads;
    let mut out = vec![0.0f32; heads * seq * dim];
    if out.is_empty() {
        // No rows, or rows of no values (which cannot be cut into chunks).
        return from_f32(out, &[heads, seq, dim]);
    }
    out.par_chunks_mut(dim)
        .enumerate()
        .for_each(|(i, out_row)| {
            let (head, row) = (i / seq, i % seq);
            let visible = start + row + 1;
            let kv = (head / group) * kv_len * dim..(head / group) * kv_len * dim + visible * dim;
            let q = &query[i * dim..(i + 1) * dim];
            match &pair {
                KeysValues::F16(k, v) => {
                    attend_head(q, &k[kv.clone()], &v[kv], scale, seq, out_row)
                }
                KeysValues::F32(k, v) => attend_f32(q, &k[kv.clone()], &v[kv], scale, out_row),
            }
        });
    from_f32(out, &[heads, seq, dim])
}

/// `attention` of float32 queries on a GPU over float16 keys and values, there.
fn attention_on_gpu(args: &Args, start: usize) -> Result<Option<Tensor>> {
    let q = args.tensor(0)?;
    let Some(g) = f32_gpu(&q) else {
        return Ok(None);
    };
    let (k, v) = (args.tensor(1)?, args.tensor(2)?);
    let (Some(keys), Some(values)) = (f16_on(&g.ops, &k)?, f16_on(&g.ops, &v)?) else {
        return Ok(None);
    };
    let out = g.ops.attention(&g.tensor, &keys, &values, start)?;
    Ok(Some(GpuValue::tensor(&g.ops, out)))
}

/// Keys and values: float16 stays float16 (the engine's cache type, computed
/// with its arithmetic); any other type is computed in float32.
enum KeysValues {
    F16(Vec<f16>, Vec<f16>),
    F32(Vec<f32>, Vec<f32>),
}

impl KeysValues {
    fn new(k: &CandleTensor, v: &CandleTensor) -> Result<Self> {
        if k.dtype() == CandleDType::F16 && v.dtype() == CandleDType::F16 {
            let flat =
                |t: &CandleTensor| -> Result<Vec<f16>> { Ok(t.flatten_all()?.to_vec1::<f16>()?) };
            return Ok(KeysValues::F16(flat(k)?, flat(v)?));
        }
        Ok(KeysValues::F32(to_f32_vec(k)?, to_f32_vec(v)?))
    }
}

/// Plain softmax attention of one head in f32.
fn attend_f32(query: &[f32], keys: &[f32], values: &[f32], scale: f32, out: &mut [f32]) {
    let dim = query.len();
    let scores: Vec<f32> = keys
        .chunks_exact(dim)
        .map(|k| k.iter().zip(query).map(|(a, b)| a * b).sum::<f32>() * scale)
        .collect();
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f32 = weights.iter().sum();
    out.fill(0.0);
    for (v, w) in values.chunks_exact(dim).zip(&weights) {
        for (o, x) in out.iter_mut().zip(v) {
            *o += x * w / total;
        }
    }
}

fn embedding(_: &mut Context, args: &Args) -> Result<Value> {
    let table = args.tensor(0)?;
    let ids = token_ids(args, 1)?;
    let dims = table.dims();
    let [vocab, width] = dims[..] else {
        return Err(args.error(
            0,
            format!(
                "embedding: the table must be [vocab, dim], found {}",
                table.type_string()
            ),
        ));
    };
    if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
        return Err(args.error(
            1,
            format!("token id {bad} is outside the table's {vocab} rows"),
        ));
    }
    checked_numel(&[ids.len(), width]).map_err(at_call(args))?;
    if let Tensor::Quantized(q) = &table {
        if let Some((ops, matrix)) = q.on_gpu()? {
            let rows = ops.embedding(matrix, &ids)?;
            return Ok(Value::Tensor(GpuValue::tensor(ops, rows)));
        }
    }
    let ids = CandleTensor::new(ids.as_slice(), &Device::Cpu)?;
    let rows = match &table {
        Tensor::Quantized(q) => q.qtensor()?.embedding(&ids)?,
        Tensor::Dense(_) | Tensor::Owned(_) | Tensor::Gpu(_) => {
            table.to_dense()?.index_select(&ids, 0)?
        }
    };
    Ok(Value::tensor(rows))
}

/// Argument `i` as token ids: a list of ints or an integer tensor.
pub fn token_ids(args: &Args, i: usize) -> Result<Vec<u32>> {
    let invalid = || args.error(i, "token ids must be non-negative ints below 2³²");
    match args.value(i)? {
        Value::Int(id) => Ok(vec![u32::try_from(*id).map_err(|_| invalid())?]),
        Value::List(items) => items
            .borrow()
            .iter()
            .map(|v| match v {
                Value::Int(id) => u32::try_from(*id).map_err(|_| invalid()),
                _ => Err(invalid()),
            })
            .collect(),
        Value::Tensor(t) if !t.dtype().is_float() => {
            let ids = t
                .to_dense()?
                .flatten_all()?
                .to_dtype(CandleDType::I64)?
                .to_vec1::<i64>()?;
            ids.into_iter()
                .map(|id| u32::try_from(id).map_err(|_| invalid()))
                .collect()
        }
        other => Err(args.error(
            i,
            format!(
                "token ids must be a list of ints or an int tensor, found {}",
                other.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{call, contents, error, int_tensor, ints, tensor};
    use crate::value::Value;

    #[test]
    fn rows_of_no_values_pass_through() {
        let empty = tensor(&[], &[0]);
        let normed = call("rms_norm", vec![empty.clone(), empty]).unwrap();
        assert_eq!(contents(&normed).0, vec![0]);
        let rows = tensor(&[], &[3, 0]);
        let normed = call("rms_norm", vec![rows, tensor(&[], &[0])]).unwrap();
        assert_eq!(contents(&normed).0, vec![3, 0]);
        let q = tensor(&[], &[2, 1, 0]);
        let kv = tensor(&[], &[1, 3, 0]);
        let out = call("attention", vec![q, kv.clone(), kv, Value::Int(1)]).unwrap();
        assert_eq!(contents(&out).0, vec![2, 1, 0]);
    }

    #[test]
    fn results_too_large_to_allocate_are_errors() {
        let column = tensor(&vec![1.0; 100_000], &[100_000, 1]);
        assert!(error("linear", vec![column.clone(), column]).contains("too large"));
        let table = tensor(&vec![0.0; 200_000], &[2, 100_000]);
        let ids = int_tensor(&vec![0; 100_000], &[100_000]);
        assert!(error("embedding", vec![table, ids]).contains("too large"));
        let small = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let rows = call("embedding", vec![small, ints(&[1, 0, 1])]).unwrap();
        assert_eq!(contents(&rows).1, vec![3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
    }
}
