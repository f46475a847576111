//! Turning GGUF tensors into candle tensors: quantized matrices stay in their GGUF
//! block layout, vectors become f32. Every tensor's shape is checked against the
//! configuration before use. The CPU backend adds `linear` (cpu/linear.rs).

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{DType, Device};
use tl_gguf::{GgmlType, GgufFile, TensorInfo};

use crate::error::{Error, Result};

/// Reads tensors from one GGUF file onto one device.
pub struct WeightLoader<'a> {
    pub(crate) file: &'a GgufFile,
    device: &'a Device,
    pub(crate) loaded_bytes: usize,
}

impl<'a> WeightLoader<'a> {
    pub fn new(file: &'a GgufFile, device: &'a Device) -> Self {
        WeightLoader {
            file,
            device,
            loaded_bytes: 0,
        }
    }

    /// Bytes of weights loaded so far.
    pub fn loaded_bytes(&self) -> usize {
        self.loaded_bytes
    }

    /// Whether the file has a tensor of that name.
    pub fn has(&self, name: &str) -> bool {
        self.file.tensor_info(name).is_some()
    }

    /// A quantized (or plain) tensor of the given row-major shape.
    pub fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<QTensor> {
        let info = self.info(name, shape)?;
        let dtype = candle_dtype(info)?;
        let data = self.file.data_of(info);
        // candle reads the bytes in place as blocks of f16/f32 fields, which
        // needs them aligned; a file with `general.alignment` below 8 can
        // place them anywhere (found by fuzzing: undefined behaviour).
        if !(data.as_ptr() as usize).is_multiple_of(TENSOR_DATA_ALIGNMENT) {
            return Err(Error::InvalidModel(format!(
                "tensor '{name}' starts at a byte offset that is not a multiple of {TENSOR_DATA_ALIGNMENT} (general.alignment too small)"
            )));
        }
        self.loaded_bytes += data.len();
        Ok(qtensor_from_ggml(dtype, data, info.shape(), self.device)?)
    }

    /// A vector (norm weights), as f32.
    pub fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        let q = self.qtensor(name, &[len])?;
        Ok(q.dequantize(self.device)?
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()?)
    }

    pub(crate) fn info(&self, name: &str, shape: &[usize]) -> Result<&'a TensorInfo> {
        let info = self
            .file
            .tensor_info(name)
            .ok_or_else(|| Error::InvalidModel(format!("tensor '{name}' is missing")))?;
        if info.shape() != shape {
            return Err(Error::InvalidModel(format!(
                "tensor '{name}' has shape {:?}, expected {shape:?}",
                info.shape()
            )));
        }
        Ok(info)
    }
}

/// The alignment tensor data must have to be read in place (the largest of
/// the block types' fields, rounded up; GGUF's default alignment is 32).
const TENSOR_DATA_ALIGNMENT: usize = 8;

/// The candle type for a GGUF tensor, or an error naming the tensor and type.
fn candle_dtype(info: &TensorInfo) -> Result<GgmlDType> {
    Ok(match info.ggml_type {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        other => {
            return Err(Error::Unsupported(format!(
                "tensor '{}' has type {other}, which the CPU backend cannot use as a weight",
                info.name
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::WeightLoader;
    use candle_core::Device;
    use tl_gguf::{GgmlType, GgufFile, GgufWriter, TensorData, Value};

    /// A file with `general.alignment` 1, where tensor `x` (F32) follows a
    /// `pad`-element F16 tensor with no padding between them.
    fn packed(pad: usize) -> GgufFile {
        let mut w = GgufWriter::new(3);
        w.set_metadata("general.alignment", Value::U32(1));
        let f16 = TensorData::Bytes(vec![0; 2 * pad]);
        w.add_tensor("pad", vec![pad as u64], GgmlType::F16, f16)
            .unwrap();
        let f32 = TensorData::Bytes(vec![0; 8]);
        w.add_tensor("x", vec![2], GgmlType::F32, f32).unwrap();
        GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()
    }

    /// Found by fuzzing: tensor bytes that candle would read in place as
    /// misaligned f32s are refused instead.
    #[test]
    fn misaligned_tensor_data_is_refused_not_read() {
        let mut refused = 0;
        for pad in 1..=3 {
            let file = packed(pad);
            let device = Device::Cpu;
            match WeightLoader::new(&file, &device).qtensor("x", &[2]) {
                Ok(_) => {}
                Err(e) => {
                    assert!(e.to_string().contains("not a multiple of 8"), "{e}");
                    refused += 1;
                }
            }
        }
        // Offsets 2, 4 and 6 past one start: at most one is a multiple of 8.
        assert!(
            refused >= 2,
            "only {refused} of 3 misaligned files were refused"
        );
    }
}
