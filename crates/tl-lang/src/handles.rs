//! Handles: values that stand for engine objects — a loaded model (weights,
//! tokenizer, chat template), a KV cache, a sampler, a streaming detokenizer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::tensor::Tensor;
use crate::value::Value;

/// An engine object held by a program.
#[derive(Clone)]
pub enum Handle {
    Model(Rc<ModelHandle>),
    Cache(Rc<RefCell<CacheHandle>>),
    Sampler(Rc<RefCell<tl_engine::sampler::Sampler>>),
    Decoder(Rc<RefCell<DecoderHandle>>),
    /// A tokenizer on its own (`load_tokenizer`, or `model.tokenizer`).
    Tokenizer(Rc<tl_tokenizer::Tokenizer>),
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{}>", self.type_name())
    }
}

impl Handle {
    /// The handle's type name, as in type annotations.
    pub fn type_name(&self) -> &'static str {
        match self {
            Handle::Model(_) => "Model",
            Handle::Cache(_) => "Cache",
            Handle::Sampler(_) => "Sampler",
            Handle::Decoder(_) => "Decoder",
            Handle::Tokenizer(_) => "Tokenizer",
        }
    }

    /// Whether both are the same object.
    pub fn same(&self, other: &Handle) -> bool {
        match (self, other) {
            (Handle::Model(a), Handle::Model(b)) => Rc::ptr_eq(a, b),
            (Handle::Cache(a), Handle::Cache(b)) => Rc::ptr_eq(a, b),
            (Handle::Sampler(a), Handle::Sampler(b)) => Rc::ptr_eq(a, b),
            (Handle::Decoder(a), Handle::Decoder(b)) => Rc::ptr_eq(a, b),
            (Handle::Tokenizer(a), Handle::Tokenizer(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A loaded model: the engine's model for `model.forward`, and the file for
/// `model.tensor(name)`.
pub struct ModelHandle {
    pub path: std::path::PathBuf,
    pub file: Rc<tl_gguf::GgufFile>,
    pub model: tl_engine::model::Model,
    pub tokenizer: Rc<tl_tokenizer::Tokenizer>,
    pub template: tl_engine::chat_template::ChatTemplate,
    /// `model.config`: the hyperparameters as a record.
    pub config: Value,
    /// Tensors handed out so far, so asking twice does not read twice.
    pub tensors: RefCell<HashMap<String, Tensor>>,
}

/// A KV cache (float16, preallocated), filled by `model.forward` or by a
/// script's own `cache.store`.
pub struct CacheHandle {
    pub cache: tl_engine::model::KvCache,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// A streaming detokenizer bound to a tokenizer.
pub struct DecoderHandle {
    pub tokenizer: Rc<tl_tokenizer::Tokenizer>,
    pub decoder: tl_tokenizer::StreamDecoder,
}
