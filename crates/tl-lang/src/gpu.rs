//! Where a tensor op runs. A program's tensors start on the host; ops on the
//! weights or the cache of a model loaded on a GPU (`linear`, `embedding`,
//! `cache.keys`) give tensors on that GPU, and the engine's GPU ops keep them
//! there: `linear`, `rms_norm`, `rope`, `attention`, `silu`, `+` and `*` of
//! equal shapes, `reshape`, `transpose` and taking one row. Any other
//! operation reads its GPU operands back and runs on the host, so a program
//! means the same wherever its tensors are; only the speed differs. Index
//! equations contract float32 tensors there too, and on a GPU of their own
//! under `--device cuda` (`interp/equation/contract.rs`).

use tl_engine::ops::{GpuOps, GpuTensor};
use tl_syntax::DType;

use crate::convert::to_f32_vec;
use crate::error::Result;
use crate::tensor::{GpuValue, Tensor};

/// The GPU of the first of `tensors` that lives on one.
pub fn gpu_among(tensors: &[&Tensor]) -> Option<GpuOps> {
    tensors
        .iter()
        .find_map(|t| t.as_gpu().map(|g| g.ops.clone()))
}

/// `t` as float32 values on the GPU of `ops`: itself when it is there,
/// else its values converted to float32 and copied up (from the host, or
/// through it from another queue, which orders the two).
pub fn f32_on(ops: &GpuOps, t: &Tensor) -> Result<GpuTensor> {
    match t {
        Tensor::Gpu(g) if !g.tensor.is_f16() && g.ops.same_queue(ops) => Ok(g.tensor.clone()),
        _ => {
            let values = to_f32_vec(&t.to_dense()?)?;
            Ok(ops.upload(&values, t.dims())?)
        }
    }
}

/// `t` as float16 values on the GPU of `ops`, when it is float16.
pub fn f16_on(ops: &GpuOps, t: &Tensor) -> Result<Option<GpuTensor>> {
    match t {
        Tensor::Gpu(g) if g.tensor.is_f16() && g.ops.same_queue(ops) => Ok(Some(g.tensor.clone())),
        _ if t.dtype() == DType::F16 => {
            let values = t.to_dense()?.flatten_all()?.to_vec1::<half::f16>()?;
            Ok(Some(ops.upload_f16(&values, t.dims())?))
        }
        _ => Ok(None),
    }
}

/// A GPU tensor of float32 values, when `t` is one.
pub fn f32_gpu(t: &Tensor) -> Option<&GpuValue> {
    t.as_gpu().filter(|g| !g.tensor.is_f16())
}
