//! The language's tensor value: a dense candle tensor, a model weight kept in
//! its GGUF quantized layout, or a tensor on the GPU of the model a program
//! loaded. Quantized weights are multiplied by the engine's own kernels (so a
//! script's `linear` gives the engine's numbers exactly); every other
//! operation sees them dequantized to f32. GPU tensors come from ops on a GPU
//! model's weights and cache and stay on the device through the ops the GPU
//! runs (see `gpu.rs`); any other operation reads them back first.

use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{DType as CandleDType, Device};
use tl_engine::ops::{GpuMatrix, GpuOps, GpuTensor, HostValues, Linear, WeightLoader};
use tl_gguf::GgufFile;
use tl_syntax::DType;

use crate::error::{LangError, Result};

/// A tensor value.
#[derive(Clone, Debug)]
pub enum Tensor {
    Dense(candle_core::Tensor),
    /// A dense tensor an element store made, whose storage no other tensor
    /// shares until it is lent out (copy-on-write: see [`OwnedDense`]).
    Owned(Rc<OwnedDense>),
    Quantized(Rc<QuantizedWeight>),
    /// Behind a pointer: every value's size is its largest variant's, and
    /// a value is copied on each step of the interpreter.
    Gpu(Rc<GpuValue>),
}

/// A contiguous dense tensor with storage of its own. While no candle tensor
/// shares that storage (it was never lent out by [`Tensor::to_dense`]) and one
/// value holds it, a store of one element writes in place instead of copying
/// the whole tensor.
#[derive(Debug)]
pub struct OwnedDense {
    tensor: candle_core::Tensor,
    lent: std::cell::Cell<bool>,
}

impl OwnedDense {
    /// `tensor`, whose storage the caller guarantees nothing else shares.
    pub fn new(tensor: candle_core::Tensor) -> Self {
        OwnedDense {
            tensor,
            lent: std::cell::Cell::new(false),
        }
    }

    /// The tensor, if nothing else shares its storage: writable in place.
    /// Not a tensor on the gradient's graph: a store in place would change
    /// a value the backward pass reads.
    pub fn exclusive(&self) -> Option<&candle_core::Tensor> {
        let writable = !self.lent.get() && self.tensor.is_contiguous() && !self.tensor.track_op();
        writable.then_some(&self.tensor)
    }
}

/// A tensor on a GPU, and that GPU's ops.
#[derive(Clone)]
pub struct GpuValue {
    pub ops: GpuOps,
    pub tensor: GpuTensor,
}

impl std::fmt::Debug for GpuValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuTensor({:?})", self.tensor.dims())
    }
}

impl GpuValue {
    /// A result of `ops`.
    pub fn tensor(ops: &GpuOps, tensor: GpuTensor) -> Tensor {
        Tensor::Gpu(Rc::new(GpuValue {
            ops: ops.clone(),
            tensor,
        }))
    }
}

/// A weight tensor straight from a GGUF file, read on first use.
pub struct QuantizedWeight {
    /// The GGUF tensor name.
    pub name: String,
    /// Row-major shape (GGUF's dimensions reversed).
    pub shape: Vec<usize>,
    file: Arc<GgufFile>,
    qtensor: OnceCell<Arc<QTensor>>,
    linear: OnceCell<Linear>,
    /// The GPU of the model it came from, if it was loaded on one.
    gpu: Option<GpuOps>,
    gpu_matrix: OnceCell<GpuMatrix>,
}

impl std::fmt::Debug for QuantizedWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QuantizedWeight({}, {:?})", self.name, self.shape)
    }
}

impl QuantizedWeight {
    /// The weight `name` of `file` (which must have it), of a model on the
    /// GPU of `gpu` when given.
    pub fn new(file: Arc<GgufFile>, name: &str, shape: Vec<usize>, gpu: Option<GpuOps>) -> Self {
        QuantizedWeight {
            name: name.to_string(),
            shape,
            file,
            qtensor: OnceCell::new(),
            linear: OnceCell::new(),
            gpu,
            gpu_matrix: OnceCell::new(),
        }
    }

    /// The weight on its model's GPU (uploaded on first use), or none when
    /// the model is on the CPU.
    pub fn on_gpu(&self) -> Result<Option<(&GpuOps, &GpuMatrix)>> {
        let Some(ops) = &self.gpu else {
            return Ok(None);
        };
        if let Some(m) = self.gpu_matrix.get() {
            return Ok(Some((ops, m)));
        }
        let [rows, cols] = self.shape[..] else {
            return Ok(None);
        };
        let matrix = ops.matrix(&self.file, &self.name, rows, cols)?;
        Ok(Some((ops, self.gpu_matrix.get_or_init(|| matrix))))
    }

    /// The weight in candle's quantized form (embedding lookups, dequantizing).
    pub fn qtensor(&self) -> Result<&Arc<QTensor>> {
        if let Some(q) = self.qtensor.get() {
            return Ok(q);
        }
        let q = WeightLoader::new(&self.file, &Device::Cpu).qtensor(&self.name, &self.shape)?;
        Ok(self.qtensor.get_or_init(|| Arc::new(q)))
    }

    /// The weight as a matrix on the engine's kernels, exactly as the engine's
    /// own forward pass builds it.
    pub fn linear(&self) -> Result<&Linear> {
        if let Some(l) = self.linear.get() {
            return Ok(l);
        }
        let [out_features, in_features] = self.shape[..] else {
            return Err(LangError::user(format!(
                "weight '{}' of shape {:?} is not a matrix",
                self.name, self.shape
            )));
        };
        let linear = WeightLoader::new(&self.file, &Device::Cpu).linear(
            &self.name,
            out_features,
            in_features,
        )?;
        Ok(self.linear.get_or_init(|| linear))
    }
}

impl Tensor {
    /// Wraps a candle tensor.
    pub fn dense(tensor: candle_core::Tensor) -> Self {
        Tensor::Dense(tensor)
    }

    /// The shape, row-major.
    pub fn dims(&self) -> Vec<usize> {
        match self {
            Tensor::Dense(t) => t.dims().to_vec(),
            Tensor::Owned(o) => o.tensor.dims().to_vec(),
            Tensor::Quantized(q) => q.shape.clone(),
            Tensor::Gpu(g) => g.tensor.dims().to_vec(),
        }
    }

    /// The element type as the language names it (quantized weights read as float32).
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::Dense(t) => lang_dtype(t.dtype()),
            Tensor::Owned(o) => lang_dtype(o.tensor.dtype()),
            Tensor::Quantized(_) => DType::F32,
            Tensor::Gpu(g) if g.tensor.is_f16() => DType::F16,
            Tensor::Gpu(_) => DType::F32,
        }
    }

    /// The tensor as a dense candle tensor, dequantizing a quantized weight
    /// and reading a GPU tensor back.
    pub fn to_dense(&self) -> Result<candle_core::Tensor> {
        match self {
            Tensor::Dense(t) => Ok(t.clone()),
            // The clone shares the storage, which can no longer be written in place.
            Tensor::Owned(o) => {
                o.lent.set(true);
                Ok(o.tensor.clone())
            }
            Tensor::Quantized(q) => Ok(q.qtensor()?.dequantize(&Device::Cpu)?),
            Tensor::Gpu(g) => {
                let dims = g.tensor.dims();
                Ok(match g.ops.download(&g.tensor)? {
                    HostValues::F32(v) => candle_core::Tensor::from_vec(v, dims, &Device::Cpu)?,
                    HostValues::F16(v) => candle_core::Tensor::from_vec(v, dims, &Device::Cpu)?,
                })
            }
        }
    }

    /// Whether it is learnable: a parameter `grad` differentiates by.
    pub fn is_learnable(&self) -> bool {
        matches!(self, Tensor::Dense(t) if t.is_variable())
    }

    /// Whether operations on it record the graph `grad` walks (see `learning.rs`).
    pub fn tracks_gradient(&self) -> bool {
        match self {
            Tensor::Dense(t) => crate::learning::tracks(t),
            Tensor::Owned(o) => crate::learning::tracks(&o.tensor),
            Tensor::Quantized(_) | Tensor::Gpu(_) => false,
        }
    }

    /// The GPU tensor, if this is one.
    pub fn as_gpu(&self) -> Option<&GpuValue> {
        match self {
            Tensor::Gpu(g) => Some(g),
            _ => None,
        }
    }

    /// The type as written in the language: `float32[2, 3]`.
    pub fn type_string(&self) -> String {
        let dims: Vec<String> = self.dims().iter().map(|d| d.to_string()).collect();
        format!("{}[{}]", self.dtype().keyword(), dims.join(", "))
    }
}

/// The candle element type that stores a language element type.
pub fn candle_dtype(dtype: DType) -> CandleDType {
    match dtype {
        DType::F16 => CandleDType::F16,
        DType::F32 => CandleDType::F32,
        DType::BF16 => CandleDType::BF16,
        DType::I32 => CandleDType::I32,
        DType::I64 => CandleDType::I64,
        DType::Bool => CandleDType::U8,
    }
}

/// The language element type of a candle element type (others read as float32,
/// which never happens for tensors the language made).
pub fn lang_dtype(dtype: CandleDType) -> DType {
    match dtype {
        CandleDType::F16 => DType::F16,
        CandleDType::BF16 => DType::BF16,
        CandleDType::I32 | CandleDType::I16 | CandleDType::U32 => DType::I32,
        CandleDType::I64 => DType::I64,
        CandleDType::U8 => DType::Bool,
        _ => DType::F32,
    }
}

/// Parses a dtype name given as a string argument (`"float16"`).
pub fn parse_dtype(name: &str) -> Result<DType> {
    if name == "bool" {
        return Ok(DType::Bool);
    }
    DType::from_keyword(name).ok_or_else(|| {
        LangError::user(format!("unknown element type \"{name}\"")).with_hint(
            "use one of \"float16\", \"float32\", \"bfloat16\", \"int32\", \"int64\", \"bool\"",
        )
    })
}
