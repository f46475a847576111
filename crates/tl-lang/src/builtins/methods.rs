//! Methods of built-in types: models (`tensor`, `forward`, `is_eog`), KV caches
//! (`store`, `keys`, `values`, `len`, `truncate`), samplers (`sample`), stream
//! decoders (`push`, `finish`), optimizers (`step`), lists and strings; and their fields
//! (`model.config`, `x.shape`). A method not found here falls back to the
//! builtin of the same name with the receiver as first argument.

use std::rc::Rc;

use candle_core::{Device, Tensor as CandleTensor};
use tl_engine::{KvHalf, Wanted};
use tl_syntax::Span;

use super::collection_methods;
use super::engine_ops::token_ids;
use super::model::logits_arg;
use super::{Args, Context};
use crate::convert::to_f32_vec;
use crate::error::{LangError, Result};
use crate::gpu::f32_on;
use crate::handles::{CacheHandle, Handle, ModelHandle};
use crate::tensor::{GpuValue, QuantizedWeight, Tensor};
use crate::value::Value;

/// One method call on a built-in value.
pub struct MethodCall<'a> {
    pub method: &'a str,
    pub args: &'a [Value],
    pub spans: &'a [Span],
    pub span: Span,
}

/// Runs the method if the target's type has it; `None` if it does not.
pub fn call(_ctx: &mut Context, target: &Value, call: &MethodCall) -> Option<Result<Value>> {
    let args = Args {
        name: call.method,
        values: call.args,
        spans: call.spans,
        call: call.span,
    };
    match target {
        Value::Handle(Handle::Model(model)) => model_method(model, &args),
        Value::Handle(Handle::Cache(cache)) => cache_method(&mut cache.borrow_mut(), &args),
        Value::Handle(Handle::Decoder(d)) => {
            let mut d = d.borrow_mut();
            let d = &mut *d;
            match call.method {
                "push" => Some(token_ids(&args, 0).map(|ids| {
                    let text: String = ids
                        .iter()
                        .map(|&id| d.decoder.push(&d.tokenizer, id))
                        .collect();
                    Value::str(text)
                })),
                "finish" => Some(Ok(Value::str(std::mem::take(&mut d.decoder).finish()))),
                _ => None,
            }
        }
        Value::Handle(Handle::Optimizer(o)) => super::learning::optimizer_method(o, &args),
        Value::Handle(Handle::Sampler(s)) => match call.method {
            "sample" => Some(sampler_sample(&mut s.borrow_mut(), &args)),
            _ => None,
        },
        Value::List(items) => collection_methods::list_method(items, &args),
        Value::Str(text) => collection_methods::str_method(text, &args),
        _ => None,
    }
}

pub(super) fn expect_args(args: &Args, min: usize, max: usize) -> Result<()> {
    if args.len() < min || args.len() > max {
        let expected = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(LangError::at(
            format!(
                "method `{}` takes {expected} arguments, but {} were given",
                args.name,
                args.len()
            ),
            args.call,
        ));
    }
    Ok(())
}

fn model_method(model: &Rc<ModelHandle>, args: &Args) -> Option<Result<Value>> {
    let result = match args.name {
        "tensor" => expect_args(args, 1, 1).and_then(|_| model_tensor(model, args)),
        "has_tensor" => expect_args(args, 1, 1)
            .and_then(|_| Ok(Value::Bool(model.file.tensor_info(args.str(0)?).is_some()))),
        "tensor_names" => expect_args(args, 0, 0).map(|_| {
            Value::list(
                model
                    .file
                    .tensors()
                    .iter()
                    .map(|t| Value::str(&t.name))
                    .collect(),
            )
        }),
        "forward" => expect_args(args, 3, 4).and_then(|_| model_forward(model, args)),
        "is_eog" => expect_args(args, 1, 1).and_then(|_| {
            let id = u32::try_from(args.int(0)?).map_err(|_| args.error(0, "not a token id"))?;
            Ok(Value::Bool(model.tokenizer.is_end_of_generation(id)))
        }),
        _ => return None,
    };
    Some(result)
}

/// `model.tensor(name)`: matrices stay quantized (multiplied by the engine's
/// kernels), vectors are read as float32, as the engine reads its norms.
fn model_tensor(model: &Rc<ModelHandle>, args: &Args) -> Result<Value> {
    let name = args.str(0)?;
    if let Some(t) = model.tensors.borrow().get(name) {
        return Ok(Value::Tensor(t.clone()));
    }
    let info = model.file.tensor_info(name).ok_or_else(|| {
        let error = args.error(0, format!("the model has no tensor \"{name}\""));
        let names = model.file.tensors().iter().map(|t| t.name.as_str());
        match crate::suggest::closest(name, names) {
            Some(close) => error.with_hint(format!("did you mean \"{close}\"?")),
            None => error.with_hint("`tl model inspect --all-tensors FILE` lists them"),
        }
    })?;
    let shape: Vec<usize> = info.shape().to_vec();
    let weight = Rc::new(QuantizedWeight::new(
        model.file.clone(),
        name,
        shape.clone(),
        model.loaded.backend.gpu_ops(),
    ));
    let tensor = if shape.len() >= 2 {
        Tensor::Quantized(weight)
    } else {
        Tensor::Dense(
            Tensor::Quantized(weight)
                .to_dense()?
                .to_dtype(candle_core::DType::F32)?,
        )
    };
    model
        .tensors
        .borrow_mut()
        .insert(name.to_string(), tensor.clone());
    Ok(Value::Tensor(tensor))
}

fn model_forward(model: &Rc<ModelHandle>, args: &Args) -> Result<Value> {
    let tokens = token_ids(args, 0)?;
    let position = args.usize(1)?;
    let Value::Handle(Handle::Cache(cache)) = args.value(2)? else {
        return Err(args.error(
            2,
            "the third argument of forward must be a Cache (from new_cache)",
        ));
    };
    let all = if args.has(3) { args.bool(3)? } else { false };
    let want = if all {
        Wanted::EveryRow
    } else {
        Wanted::Logits
    };
    let mut cache = cache.borrow_mut();
    if !Rc::ptr_eq(&cache.model, model) {
        return Err(args.error(
            2,
            "this cache was made for another model (new_cache(model) makes one for this one)",
        ));
    }
    let (held, capacity) = (cache.cache.len(), cache.cache.capacity());
    if position > held {
        return Err(args.error(
            1,
            format!("position {position} leaves a gap after the {held} cached positions"),
        ));
    }
    let vocab = model.loaded.backend.config().vocab_size;
    if let Some(bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(args.error(
            0,
            format!("token id {bad} is outside the vocabulary of {vocab}"),
        ));
    }
    if tokens.is_empty() {
        return Err(args.error(0, "forward needs at least one token"));
    }
    if position + tokens.len() > capacity {
        return Err(args.error(
            0,
            format!(
                "{} tokens at position {position} do not fit a cache of {capacity}",
                tokens.len()
            ),
        ));
    }
    // Checked first, so a call that fails leaves the cache as it was; running
    // from an earlier position replaces what followed it.
    cache.cache.truncate(position);
    let logits = model
        .loaded
        .backend
        .step_one(&tokens, &mut cache.cache, want)
        .and_then(tl_engine::Picked::into_row)
        .map_err(|e| LangError::at(e.to_string(), args.call))?;
    let dims = if all {
        vec![tokens.len(), vocab]
    } else {
        vec![vocab]
    };
    Ok(Value::tensor(CandleTensor::from_vec(
        logits,
        dims,
        &Device::Cpu,
    )?))
}

fn cache_method(cache: &mut CacheHandle, args: &Args) -> Option<Result<Value>> {
    let result = match args.name {
        "store" => expect_args(args, 4, 4).and_then(|_| cache_store(cache, args)),
        "keys" | "values" => expect_args(args, 2, 2).and_then(|_| cache_read(cache, args)),
        "len" => expect_args(args, 0, 0).map(|_| Value::Int(cache.cache.len() as i64)),
        "capacity" => expect_args(args, 0, 0).map(|_| Value::Int(cache.cache.capacity() as i64)),
        "truncate" => expect_args(args, 1, 1).and_then(|_| {
            cache.truncate(args.usize(0)?);
            Ok(Value::None)
        }),
        "clear" => expect_args(args, 0, 0).map(|_| {
            cache.truncate(0);
            Value::None
        }),
        _ => return None,
    };
    Some(result)
}

fn check_layer(cache: &CacheHandle, args: &Args) -> Result<usize> {
    let layer = args.usize(0)?;
    if layer >= cache.layers {
        return Err(args.error(
            0,
            format!(
                "layer {layer} is out of range: the cache has {} layers",
                cache.layers
            ),
        ));
    }
    Ok(layer)
}

/// `cache.store(layer, pos, k, v)`: k and v are [seq, kv_heads, head_dim]; row i
/// is written at position pos + i (rounded to float16, as the engine stores it).
fn cache_store(cache: &mut CacheHandle, args: &Args) -> Result<Value> {
    let layer = check_layer(cache, args)?;
    let position = args.usize(1)?;
    let width = cache.kv_heads * cache.head_dim;
    let mut rows = Vec::with_capacity(2);
    for i in [2, 3] {
        let t = args.tensor(i)?;
        let dims = t.dims();
        if dims[..]
            != [
                dims.first().copied().unwrap_or(0),
                cache.kv_heads,
                cache.head_dim,
            ]
        {
            return Err(args.error(
                i,
                format!(
                    "expected [seq, {}, {}], found {}",
                    cache.kv_heads,
                    cache.head_dim,
                    t.type_string()
                ),
            ));
        }
        rows.push((dims[0], t));
    }
    let (seq, v_seq) = (rows[0].0, rows[1].0);
    if seq != v_seq {
        return Err(args.error(3, format!("k has {seq} rows but v has {v_seq}")));
    }
    if position > cache.cache.len() || position + seq > cache.cache.capacity() {
        return Err(args.error(
            1,
            format!(
                "cannot store {seq} positions at {position}: the cache holds {} of {}",
                cache.cache.len(),
                cache.cache.capacity()
            ),
        ));
    }
    let backend = &cache.model.loaded.backend;
    let (keys, values) = (&rows[0].1, &rows[1].1);
    let fail = |e: tl_engine::Error| LangError::at(e.to_string(), args.call);
    if let Some(ops) = backend.gpu_ops() {
        let (k, v) = (f32_on(&ops, keys)?, f32_on(&ops, values)?);
        ops.store_kv(&mut cache.cache, layer, position, &k, &v)
            .map_err(fail)?;
    } else {
        let (keys, values) = (
            to_f32_vec(&keys.to_dense()?)?,
            to_f32_vec(&values.to_dense()?)?,
        );
        for (row, (k, v)) in keys
            .chunks_exact(width)
            .zip(values.chunks_exact(width))
            .enumerate()
        {
            backend
                .store_kv(&mut cache.cache, layer, position + row, k, v)
                .map_err(fail)?;
        }
    }
    // Storing at `position` starts the sequence over from there: what lay
    // beyond the new rows belongs to the old one.
    if let Some(stored) = cache.stored.get_mut(layer) {
        *stored = position + seq;
    }
    if layer + 1 == cache.layers {
        cache.cache.commit(position + seq);
    }
    Ok(Value::None)
}

/// `cache.keys(layer, end)` / `cache.values(layer, end)`: positions 0..end as
/// float16[kv_heads, end, head_dim] (on the GPU when the cache is). Positions
/// the current sequence has not filled (never stored, or cut by `truncate`)
/// are refused rather than read stale.
fn cache_read(cache: &CacheHandle, args: &Args) -> Result<Value> {
    let layer = check_layer(cache, args)?;
    let end = args.usize(1)?;
    let readable = cache.readable(layer);
    if end > readable {
        return Err(args.error(
            1,
            format!(
                "end {end} is past what layer {layer} of the cache holds: positions 0..{readable} (of capacity {})",
                cache.cache.capacity()
            ),
        )
        .with_hint("store positions before reading them; `truncate` forgets those after its length"));
    }
    let half = if args.name == "keys" {
        KvHalf::Keys
    } else {
        KvHalf::Values
    };
    let backend = &cache.model.loaded.backend;
    if let Some(ops) = backend.gpu_ops() {
        let data = ops
            .read_kv(&cache.cache, layer, half, end)
            .map_err(|e| LangError::at(e.to_string(), args.call))?;
        return Ok(Value::Tensor(GpuValue::tensor(&ops, data)));
    }
    let data = backend
        .read_kv(&cache.cache, layer, half, end)
        .map_err(|e| LangError::at(e.to_string(), args.call))?;
    Ok(Value::tensor(CandleTensor::from_vec(
        data,
        (cache.kv_heads, end, cache.head_dim),
        &Device::Cpu,
    )?))
}

fn sampler_sample(sampler: &mut tl_engine::sampler::Sampler, args: &Args) -> Result<Value> {
    expect_args(args, 1, 2)?;
    let logits = logits_arg(args, 0)?;
    let history = if args.has(1) {
        token_ids(args, 1)?
    } else {
        Vec::new()
    };
    Ok(Value::Int(sampler.sample(&logits, &history)? as i64))
}

/// Fields of built-in values: `model.config`, `model.path`, `x.shape`,
/// `x.dtype`, `x.rank`.
pub fn field(base: &Value, name: &str) -> Option<Value> {
    match (base, name) {
        (Value::Handle(Handle::Model(m)), "config") => Some(m.config.clone()),
        (Value::Handle(Handle::Model(m)), "path") => Some(Value::str(m.path.display().to_string())),
        (Value::Handle(Handle::Model(m)), "tokenizer") => {
            Some(Value::Handle(Handle::Tokenizer(m.tokenizer.clone())))
        }
        (Value::Tensor(t), "shape") => Some(Value::list(
            t.dims().iter().map(|&d| Value::Int(d as i64)).collect(),
        )),
        (Value::Tensor(t), "dtype") => Some(Value::str(t.dtype().keyword())),
        (Value::Tensor(t), "rank") => Some(Value::Int(t.dims().len() as i64)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(target: &Value, name: &str, values: &[Value]) -> Result<Value> {
        let spans = vec![Span::default(); values.len()];
        let call = MethodCall {
            method: name,
            args: values,
            spans: &spans,
            span: Span::default(),
        };
        let mut ctx = Context::captured(".".into(), Box::new(std::io::sink()));
        super::call(&mut ctx, target, &call).expect("a known method")
    }

    #[test]
    fn replacing_and_joining_stop_at_the_string_limit() {
        let text = Value::str("ab".repeat(1 << 15));
        let long = Value::str("x".repeat(1 << 15));
        let error = method(&text, "replace", &[Value::str(""), long.clone()]).err();
        assert!(error.is_some_and(|e| e.message.contains("too long")));
        let swapped = method(
            &Value::str("abab"),
            "replace",
            &[Value::str("b"), Value::str("cd")],
        );
        assert_eq!(swapped.ok().map(|v| v.to_string()), Some("acdacd".into()));
        let many = Value::list(vec![long; 1 << 15]);
        let error = method(&many, "join", &[Value::str(",")]).err();
        assert!(error.is_some_and(|e| e.message.contains("too long")));
        let few = Value::list(vec![Value::Int(1), Value::str("a")]);
        let joined = method(&few, "join", &[Value::str("-")]);
        assert_eq!(joined.ok().map(|v| v.to_string()), Some("1-a".into()));
    }
}
