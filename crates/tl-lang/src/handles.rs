//! Handles: values that stand for engine objects — a loaded model (weights,
//! tokenizer, chat template), a KV cache, a sampler, a streaming detokenizer —
//! and for optimizers, which hold a program's parameters.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

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
    Tokenizer(Arc<tl_tokenizer::Tokenizer>),
    /// `sgd(...)` or `adam(...)`.
    Optimizer(Rc<RefCell<crate::learning::Optimizer>>),
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
            Handle::Optimizer(_) => "Optimizer",
        }
    }

    /// Whether both are the same object.
    pub fn same(&self, other: &Handle) -> bool {
        match (self, other) {
            (Handle::Model(a), Handle::Model(b)) => Rc::ptr_eq(a, b),
            (Handle::Cache(a), Handle::Cache(b)) => Rc::ptr_eq(a, b),
            (Handle::Sampler(a), Handle::Sampler(b)) => Rc::ptr_eq(a, b),
            (Handle::Decoder(a), Handle::Decoder(b)) => Rc::ptr_eq(a, b),
            (Handle::Tokenizer(a), Handle::Tokenizer(b)) => Arc::ptr_eq(a, b),
            (Handle::Optimizer(a), Handle::Optimizer(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A loaded model: the engine's bundle (weights on the CPU or a GPU for
/// `model.forward`, tokenizer, chat template), and the file for
/// `model.tensor(name)`.
pub struct ModelHandle {
    pub path: std::path::PathBuf,
    pub loaded: tl_engine::LoadedModel,
    /// The bundle's file and tokenizer, shared with lazily read tensors and
    /// tokenizer handles.
    pub file: Arc<tl_gguf::GgufFile>,
    pub tokenizer: Arc<tl_tokenizer::Tokenizer>,
    /// `model.config`: the hyperparameters as a record.
    pub config: Value,
    /// Tensors handed out so far, so asking twice does not read twice.
    pub tensors: RefCell<HashMap<String, Tensor>>,
}

/// A KV cache (float16, preallocated) on its model's device, filled by
/// `model.forward` or by a script's own `cache.store`.
pub struct CacheHandle {
    pub cache: tl_engine::SequenceCache,
    /// The model whose backend made the cache and reads and writes it.
    pub model: Rc<ModelHandle>,
    pub layers: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Per layer, how many positions `cache.store` has filled since the last
    /// `truncate` (a forward pass stores layer by layer before the cache's
    /// length moves on).
    pub stored: Vec<usize>,
}

impl CacheHandle {
    /// How many positions of `layer` hold keys and values of the current
    /// sequence: what the cache's length says, or more while a script's
    /// forward pass is storing its layers. What `truncate` cut off is stale.
    pub fn readable(&self, layer: usize) -> usize {
        let stored = self.stored.get(layer).copied().unwrap_or(0);
        stored.max(self.cache.len())
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.cache.truncate(len);
        for stored in &mut self.stored {
            *stored = (*stored).min(len);
        }
    }
}

/// A streaming detokenizer bound to a tokenizer.
pub struct DecoderHandle {
    pub tokenizer: Arc<tl_tokenizer::Tokenizer>,
    pub decoder: tl_tokenizer::StreamDecoder,
}
