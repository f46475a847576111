//! A weight matrix `[out_features, in_features]` applied as `y = x · Wᵀ` to rows
//! of f32 activations. Quantized weights stay in their GGUF block layout: Q4_0,
//! Q4_1, Q5_0, Q5_1 and Q8_0 run on our own kernels (`crate::cpu`), which
//! follow llama.cpp's arithmetic; every other type runs through candle's
//! `QMatMul`.

use candle_core::quantized::QMatMul;
use candle_core::{Device, Module, Tensor};

use crate::cpu::QuantizedMatrix;
use crate::error::Result;
use crate::model::weights::WeightLoader;

/// A weight matrix ready to multiply.
pub struct Linear {
    kernel: Kernel,
    out_features: usize,
    in_features: usize,
}

enum Kernel {
    Native(QuantizedMatrix),
    Candle(QMatMul),
}

impl Linear {
    /// A matrix run by our own kernels.
    pub fn native(matrix: QuantizedMatrix) -> Self {
        Linear {
            out_features: matrix.rows(),
            in_features: matrix.cols(),
            kernel: Kernel::Native(matrix),
        }
    }

    /// A matrix run by candle.
    pub fn candle(weights: QMatMul, out_features: usize, in_features: usize) -> Self {
        Linear {
            kernel: Kernel::Candle(weights),
            out_features,
            in_features,
        }
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.out_features
    }

    /// `forward_in` of several matrices over the same `x`. When our kernels
    /// run them all, `x` is quantized once and their rows share the threads in
    /// one go (see [`QuantizedMatrix::matmul_shared_input`]); the results are
    /// those of separate calls.
    pub fn forward_shared_input(
        products: &mut [(&Linear, &mut [f32])],
        x: &[f32],
        micro_batch: usize,
    ) -> Result<()> {
        let mut native = Vec::with_capacity(products.len());
        for (linear, out) in products.iter_mut() {
            match &linear.kernel {
                Kernel::Native(matrix) => native.push((matrix, &mut **out)),
                Kernel::Candle(_) => linear.forward(x, out)?,
            }
        }
        let Some((first, _)) = native.first() else {
            return Ok(());
        };
        let rows = x.len() / first.cols();
        let threads = rayon::current_num_threads();
        QuantizedMatrix::matmul_micro_batches(&mut native, x, rows, micro_batch, threads)
    }

    /// `out[rows × out_features] = x[rows × in_features] · Wᵀ`, the rows
    /// rounded as one `ggml_mul_mat`.
    pub fn forward(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        let rows = x.len() / self.in_features;
        self.forward_in(x, out, rows.max(1))
    }

    /// [`Self::forward`] with the rows rounded as llama.cpp rounds them in
    /// micro-batches of up to `micro_batch` rows
    /// ([`QuantizedMatrix::matmul_micro_batches`]).
    pub fn forward_in(&self, x: &[f32], out: &mut [f32], micro_batch: usize) -> Result<()> {
        let rows = x.len() / self.in_features;
        match &self.kernel {
            Kernel::Native(matrix) => {
                let threads = rayon::current_num_threads();
                QuantizedMatrix::matmul_micro_batches(
                    &mut [(matrix, out)],
                    x,
                    rows,
                    micro_batch,
                    threads,
                )
            }
            Kernel::Candle(weights) => {
                let input = Tensor::from_slice(x, (rows, self.in_features), &Device::Cpu)?;
                let result = weights.forward(&input)?.flatten_all()?.to_vec1::<f32>()?;
                out.copy_from_slice(&result);
                Ok(())
            }
        }
    }
}

/// The CPU backend's way to load a matrix.
impl WeightLoader<'_> {
    /// A matrix `[out, in]` ready for `x · Wᵀ`: on our own kernels when its type
    /// has one, else on candle's.
    pub fn linear(
        &mut self,
        name: &str,
        out_features: usize,
        in_features: usize,
    ) -> Result<Linear> {
        let info = self.info(name, &[out_features, in_features])?;
        if crate::cpu::supports(info.ggml_type) {
            let bytes = self.file.data_of(info).to_vec();
            self.loaded_bytes += bytes.len();
            let ty = info.ggml_type;
            let matrix = QuantizedMatrix::from_gguf(ty, out_features, in_features, bytes)?;
            return Ok(Linear::native(matrix));
        }
        let weights = QMatMul::from_qtensor(self.qtensor(name, &[out_features, in_features])?)?;
        Ok(Linear::candle(weights, out_features, in_features))
    }
}
