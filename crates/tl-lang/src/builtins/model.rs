//! Model builtins: loading a GGUF model, its KV cache, tokenizing and
//! detokenizing (also incrementally, for streaming), chat templates and sampling.
//! Methods on the handles (`model.forward`, `cache.store`, ...) are in
//! `handle_methods.rs`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use tl_engine::chat_template::ChatMessage;
use tl_engine::sampler::{Sampler, SamplerConfig};
use tl_engine::{BeyondTraining, ModelConfig, ModelFile};
use tl_gguf::GgufFile;
use tl_tokenizer::{StreamDecoder, Tokenizer};

use super::engine_ops::token_ids;
use super::{Args, Builtin, Context, Gradient};
use crate::error::{LangError, Result};
use crate::handles::{CacheHandle, DecoderHandle, Handle, ModelHandle};
use crate::value::Value;

/// Context (positions) a model is loaded for: its training context, at most this.
const MAX_CONTEXT: usize = 4096;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "load_model",
        signature: "load_model(path) -> Model",
        min_args: 1,
        max_args: 1,
        summary: "Loads a GGUF model (weights, tokenizer, chat template); each file is loaded once per run. The weights go on a GPU when one is usable, else the CPU (`tl run --device`); `model.forward` runs there, and so does a program's own forward pass: `linear` and `embedding` of the model's weights and `cache.keys`/`cache.values` give tensors on the GPU, which `linear`, `rms_norm`, `rope`, `attention`, `silu`, `+` and `*` of one shape, `reshape`, `transpose` and `x[i]` keep there, with the CPU's bits; any other operation reads them back. Fields: `config`, `path`.",
        call: load_model,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "load_tokenizer",
        signature: "load_tokenizer(path) -> Tokenizer",
        min_args: 1,
        max_args: 1,
        summary: "Only the tokenizer of a GGUF file (a model, or a vocabulary-only file): for `tokenize`, `detokenize` and `detokenize_stream`. A model's own is `model.tokenizer`.",
        call: load_tokenizer,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "default_model",
        signature: "default_model() -> string",
        min_args: 0,
        max_args: 0,
        summary: "The path of the default model (SmolLM2-135M-Instruct), fetched on first use as `tl model pull` does.",
        call: default_model,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "new_cache",
        signature: "new_cache(model, capacity = model.config.context) -> Cache",
        min_args: 1,
        max_args: 2,
        summary: "An empty float16 KV cache for up to `capacity` positions, for `model.forward` or a script's own `cache.store`.",
        call: new_cache,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "tokenize",
        signature: "tokenize(model_or_tokenizer, text, add_special = true) -> list[int]",
        min_args: 2,
        max_args: 3,
        summary: "Token ids of the text; with add_special the model's BOS is added if it asks for one. Special-token text (`<|im_start|>`) becomes the special token.",
        call: tokenize,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "detokenize",
        signature: "detokenize(model_or_tokenizer, ids, skip_special = false) -> string",
        min_args: 2,
        max_args: 3,
        summary: "The text of token ids.",
        call: detokenize,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "detokenize_stream",
        signature: "detokenize_stream(model_or_tokenizer, skip_special = true) -> Decoder",
        min_args: 1,
        max_args: 2,
        summary: "An incremental detokenizer: `d.push(id)` returns the text that token completes (whole UTF-8 characters only), `d.finish()` the rest.",
        call: detokenize_stream,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "chat_template",
        signature: "chat_template(model, messages, add_generation_prompt = true) -> string",
        min_args: 2,
        max_args: 3,
        summary: "Renders messages (a list of [role, content] pairs) with the model's chat template, as Hugging Face does.",
        call: chat_template,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "sample",
        signature: "sample(logits, temperature = 0.0, top_p = 1.0, top_k = 0, seed = 0) -> int",
        min_args: 1,
        max_args: 5,
        summary: "One token id drawn from logits[vocab]: the argmax at temperature 0, else softmax(logits / temperature) cut to top_k and top_p, drawn with the seeded generator.",
        call: sample,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "sampler",
        signature: "sampler(temperature = 0.8, top_p = 0.95, top_k = 40, seed = 42, min_p = 0.05, repeat_penalty = 1.0) -> Sampler",
        min_args: 0,
        max_args: 6,
        summary: "A sampler with its own random stream (the `tl chat` defaults): `s.sample(logits, history = [])` draws the next token.",
        call: sampler,
        gradient: Gradient::NotApplicable,
    },
];

fn load_model(ctx: &mut Context, args: &Args) -> Result<Value> {
    let path = ctx.resolve(args.str(0)?);
    let key = path.canonicalize().unwrap_or_else(|_| path.clone());
    if let Some(loaded) = ctx.models.get(&key) {
        return Ok(Value::Handle(Handle::Model(loaded.clone())));
    }
    let fail =
        |e: &dyn std::fmt::Display| args.error(0, format!("cannot load {}: {e}", path.display()));
    let file = ModelFile::open(&path).map_err(|e| fail(&e))?;
    let (context, _) = file.context_for(None, MAX_CONTEXT, BeyondTraining::Cut);
    let context = context.max(1);
    let loaded = file
        .load(context, ctx.device, &ctx.gpu_options)
        .map_err(|e| fail(&e))?;
    if let Some(fallback) = loaded.fallback.as_ref().filter(|f| !f.no_gpu) {
        tracing::warn!("{} runs on the CPU: {}", path.display(), fallback.reason);
    }
    let config = config_record(&loaded.file.config, &loaded.file.tokenizer, context);
    let handle = Rc::new(ModelHandle {
        path,
        file: loaded.file.gguf.clone(),
        tokenizer: loaded.file.tokenizer.clone(),
        loaded,
        config,
        tensors: RefCell::new(HashMap::new()),
    });
    ctx.models.insert(key, handle.clone());
    Ok(Value::Handle(Handle::Model(handle)))
}

/// `model.config`.
fn config_record(c: &ModelConfig, tokenizer: &Tokenizer, context: usize) -> Value {
    let int = |n: usize| Value::Int(n as i64);
    let id = |id: Option<u32>| id.map_or(Value::None, |id| Value::Int(id as i64));
    Value::record(
        "ModelConfig",
        vec![
            ("architecture".into(), Value::str(&c.architecture)),
            ("layers".into(), int(c.block_count)),
            ("hidden".into(), int(c.embedding_length)),
            ("ffn".into(), int(c.feed_forward_length)),
            ("heads".into(), int(c.head_count)),
            ("kv_heads".into(), int(c.head_count_kv)),
            ("head_dim".into(), int(c.head_dim)),
            ("vocab_size".into(), int(c.vocab_size)),
            ("rope_theta".into(), Value::Float(c.rope_freq_base as f64)),
            ("rms_eps".into(), Value::Float(c.rms_norm_eps as f64)),
            ("trained_context".into(), int(c.context_length)),
            ("context".into(), int(context)),
            ("bos_id".into(), id(tokenizer.bos_id())),
            ("eos_id".into(), id(tokenizer.eos_id())),
        ],
    )
}

fn default_model(ctx: &mut Context, _: &Args) -> Result<Value> {
    let resolve = ctx.default_model.as_ref().ok_or_else(|| {
        LangError::user("this program was run without a way to fetch the default model")
    })?;
    let path = resolve().map_err(LangError::user)?;
    Ok(Value::str(path.display().to_string()))
}

/// Argument `i` as a model handle.
pub fn model_arg(args: &Args, i: usize) -> Result<Rc<ModelHandle>> {
    match args.value(i)? {
        Value::Handle(Handle::Model(m)) => Ok(m.clone()),
        other => Err(args.error(
            i,
            format!(
                "argument {} of {} must be a Model (from load_model), found {}",
                i + 1,
                args.name,
                other.type_name()
            ),
        )),
    }
}

fn new_cache(_: &mut Context, args: &Args) -> Result<Value> {
    let model = model_arg(args, 0)?;
    let backend = &model.loaded.backend;
    let capacity = match args.opt_int(1)? {
        Some(_) => args.usize(1)?,
        None => backend.max_positions(),
    };
    let cache = backend
        .new_cache(capacity)
        .map_err(|e| args.error(1, e.to_string()))?;
    let c = backend.config();
    Ok(Value::Handle(Handle::Cache(Rc::new(RefCell::new(
        CacheHandle {
            cache,
            model: model.clone(),
            layers: c.block_count,
            kv_heads: c.head_count_kv,
            head_dim: c.head_dim,
            stored: vec![0; c.block_count],
        },
    )))))
}

fn load_tokenizer(ctx: &mut Context, args: &Args) -> Result<Value> {
    let path = ctx.resolve(args.str(0)?);
    let fail = |e: &dyn std::fmt::Display| {
        args.error(
            0,
            format!("cannot load the tokenizer of {}: {e}", path.display()),
        )
    };
    let file = GgufFile::open(&path).map_err(|e| fail(&e))?;
    let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| fail(&e))?;
    Ok(Value::Handle(Handle::Tokenizer(Arc::new(tokenizer))))
}

/// Argument `i` as a tokenizer: a model's, or one from `load_tokenizer`.
fn tokenizer_arg(args: &Args, i: usize) -> Result<Arc<Tokenizer>> {
    match args.value(i)? {
        Value::Handle(Handle::Model(m)) => Ok(m.tokenizer.clone()),
        Value::Handle(Handle::Tokenizer(t)) => Ok(t.clone()),
        other => Err(args.error(
            i,
            format!(
                "argument {} of {} must be a Model or a Tokenizer, found {}",
                i + 1,
                args.name,
                other.type_name()
            ),
        )),
    }
}

fn tokenize(_: &mut Context, args: &Args) -> Result<Value> {
    let tokenizer = tokenizer_arg(args, 0)?;
    let add_special = if args.has(2) { args.bool(2)? } else { true };
    let ids = tokenizer.encode(args.str(1)?, add_special, true)?;
    Ok(Value::list(
        ids.into_iter().map(|id| Value::Int(id as i64)).collect(),
    ))
}

fn detokenize(_: &mut Context, args: &Args) -> Result<Value> {
    let tokenizer = tokenizer_arg(args, 0)?;
    let skip_special = if args.has(2) { args.bool(2)? } else { false };
    let ids = token_ids(args, 1)?;
    Ok(Value::str(tokenizer.decode(&ids, skip_special)?))
}

fn detokenize_stream(_: &mut Context, args: &Args) -> Result<Value> {
    let tokenizer = tokenizer_arg(args, 0)?;
    let skip_special = if args.has(1) { args.bool(1)? } else { true };
    Ok(Value::Handle(Handle::Decoder(Rc::new(RefCell::new(
        DecoderHandle {
            tokenizer,
            decoder: StreamDecoder::new(skip_special),
        },
    )))))
}

fn chat_template(_: &mut Context, args: &Args) -> Result<Value> {
    let model = model_arg(args, 0)?;
    let messages = args
        .list(1)?
        .iter()
        .map(|m| chat_message(args, m))
        .collect::<Result<Vec<_>>>()?;
    let add_generation_prompt = if args.has(2) { args.bool(2)? } else { true };
    Ok(Value::str(
        model
            .loaded
            .file
            .template
            .render(&messages, add_generation_prompt)?,
    ))
}

/// A message given as `[role, content]` or as a struct with `role` and `content`.
fn chat_message(args: &Args, value: &Value) -> Result<ChatMessage> {
    let text = |v: Option<Value>| match v {
        Some(Value::Str(s)) => Some(s.to_string()),
        _ => None,
    };
    let (role, content) = match value {
        Value::List(pair) => {
            let pair = pair.borrow();
            (
                text(pair.first().cloned()),
                text(pair.get(1).cloned()).filter(|_| pair.len() == 2),
            )
        }
        Value::Struct(s) => {
            let s = s.borrow();
            (
                text(s.get("role").cloned()),
                text(s.get("content").cloned()),
            )
        }
        _ => (None, None),
    };
    match (role, content) {
        (Some(role), Some(content)) => Ok(ChatMessage::new(role, content)),
        _ => Err(args.error(
            1,
            format!("each message must be [role, content] (two strings), found {value}"),
        )),
    }
}

/// Argument `i` as logits: a float tensor of one dimension (or [1, vocab]).
pub fn logits_arg(args: &Args, i: usize) -> Result<Vec<f32>> {
    let t = args.tensor(i)?;
    let dims = t.dims();
    if dims.iter().filter(|&&d| d != 1).count() > 1 || !t.dtype().is_float() {
        return Err(args.error(
            i,
            format!(
                "logits must be a float vector [vocab], found {}",
                t.type_string()
            ),
        ));
    }
    crate::convert::to_f32_vec(&t.to_dense()?)
}

fn sample(_: &mut Context, args: &Args) -> Result<Value> {
    let logits = logits_arg(args, 0)?;
    let config = SamplerConfig {
        temperature: args.opt_float(1)?.unwrap_or(0.0) as f32,
        top_p: args.opt_float(2)?.unwrap_or(1.0) as f32,
        top_k: optional_count(args, 3)?.unwrap_or(0),
        seed: optional_count(args, 4)?.unwrap_or(0) as u64,
        min_p: 0.0,
        ..SamplerConfig::default()
    };
    let token = Sampler::new(config).sample(&logits, &[])?;
    Ok(Value::Int(token as i64))
}

fn optional_count(args: &Args, i: usize) -> Result<Option<usize>> {
    if args.has(i) {
        args.usize(i).map(Some)
    } else {
        Ok(None)
    }
}

fn sampler(_: &mut Context, args: &Args) -> Result<Value> {
    let defaults = SamplerConfig::default();
    let config = SamplerConfig {
        temperature: args
            .opt_float(0)?
            .map_or(defaults.temperature, |t| t as f32),
        top_p: args.opt_float(1)?.map_or(defaults.top_p, |p| p as f32),
        top_k: optional_count(args, 2)?.unwrap_or(defaults.top_k),
        seed: optional_count(args, 3)?.map_or(defaults.seed, |s| s as u64),
        min_p: args.opt_float(4)?.map_or(defaults.min_p, |p| p as f32),
        repeat_penalty: args
            .opt_float(5)?
            .map_or(defaults.repeat_penalty, |p| p as f32),
        ..defaults
    };
    config
        .validate()
        .map_err(|e| LangError::at(e.to_string(), args.call))?;
    Ok(Value::Handle(Handle::Sampler(Rc::new(RefCell::new(
        Sampler::new(config),
    )))))
}
