//! A term's tensors contracted by the einsum its plan holds: on a GPU, for
//! float32 operands, when one is at hand (an operand lives there, or the
//! program runs with `--device cuda`), else on the CPU, where float32
//! products run on the engine's (`tl_engine::ops::matmul_f32`); bools,
//! ints, other floats, diagonals and tensors on the gradient's tape always
//! run on the CPU, on the language's own kernels or candle's.

use tl_engine::ops::GpuOps;
use tl_engine::DeviceChoice;
use tl_syntax::DType;

use super::super::Interpreter;
use super::algebra::{common_dtype, dense_as};
use super::plan::Term;
use crate::error::{LangError, Result};
use crate::gpu;
use crate::ops::einsum::Contraction;
use crate::tensor::{GpuValue, Tensor};

impl Interpreter {
    /// The product of a term's tensors, summed as its spec says.
    pub(super) fn contract(&mut self, term: &Term, tensors: &[Tensor]) -> Result<Tensor> {
        let dtype = common_dtype(tensors.iter())?;
        let shapes: Vec<Vec<usize>> = tensors.iter().map(Tensor::dims).collect();
        let plan = term.contraction(&shapes)?;
        if let Some(ops) = self.contraction_gpu(dtype, tensors, &plan)? {
            let operands = (tensors.iter())
                .map(|t| gpu::f32_on(&ops, t))
                .collect::<Result<Vec<_>>>()?;
            let out = plan.run_on_gpu(&ops, operands)?;
            return Ok(GpuValue::tensor(&ops, out));
        }
        let operands = (tensors.iter())
            .map(|t| dense_as(t, dtype))
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::Dense(plan.run(&operands)?))
    }

    /// The GPU to contract on, if any (see the module comment).
    fn contraction_gpu(
        &mut self,
        dtype: DType,
        tensors: &[Tensor],
        plan: &Contraction,
    ) -> Result<Option<GpuOps>> {
        let suits = dtype == DType::F32
            && plan.runs_on_gpu()
            && (tensors.iter()).all(|t| !t.tracks_gradient() && !t.dims().contains(&0));
        if !suits {
            return Ok(None);
        }
        let refs: Vec<&Tensor> = tensors.iter().collect();
        if let Some(ops) = gpu::gpu_among(&refs) {
            return Ok(Some(ops));
        }
        self.program_gpu()
    }

    /// The GPU a program computes on with `--device cuda` (none otherwise):
    /// the GPU of a model it loaded there, else one opened on first use.
    fn program_gpu(&mut self) -> Result<Option<GpuOps>> {
        if self.ctx.device != DeviceChoice::Cuda {
            return Ok(None);
        }
        if let Some(ops) = &self.gpu {
            return Ok(Some(ops.clone()));
        }
        let models = self.ctx.models.values();
        let ops = match models.filter_map(|m| m.loaded.backend.gpu_ops()).next() {
            Some(ops) => ops,
            None => GpuOps::open(self.ctx.gpu_options.clone()).map_err(|e| {
                LangError::user(format!("--device cuda: cannot open the GPU: {e}"))
                    .with_hint("run on the CPU with `--device cpu`")
            })?,
        };
        self.gpu = Some(ops.clone());
        Ok(Some(ops))
    }
}
