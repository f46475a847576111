//! Re-encoding a GGUF model's weights in another type (`tl model quantize`),
//! byte for byte what llama.cpp's `llama-quantize` (0c1e570) writes for the
//! same input without an importance matrix: the same metadata (the input's,
//! with `general.quantization_version` and `general.file_type` moved last),
//! the same tensor order (by layer, then name), the same type per tensor
//! ([`recipe`]) and ggml's reference quantizers ([`reference`]).
//!
//! A tensor already quantized is dequantized first (ggml's arithmetic) when
//! the options allow requantizing; without that, llama.cpp refuses, and so
//! do we, before writing anything. A [`QuantizePlan`] checks everything up
//! front; its writer streams one tensor at a time in parallel row chunks
//! whose bytes do not depend on the thread count.

mod file_type;
pub mod recipe;
pub mod reference;

use std::io;
use std::sync::Arc;

use rayon::prelude::*;
use tl_gguf::{GgmlType, GgufFile, GgufWriter, TensorData, TensorInfo, Value};

use crate::cpu::{dequantize, WeightType};
use crate::error::{Error, Result};
use crate::synth::Progress;

pub use file_type::FileType;
pub use recipe::ModelFacts;

/// ggml's `GGML_QNT_VERSION`, written as `general.quantization_version`.
const QUANTIZATION_VERSION: u32 = 2;
/// Values re-encoded per parallel task (whole rows).
const CHUNK_VALUES: u64 = 1 << 18;
/// Tasks run in parallel before their bytes are written.
const BATCH_CHUNKS: usize = 32;

/// What `tl model quantize` was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantizeOptions {
    pub file_type: FileType,
    /// Re-encode tensors that are already quantized (dequantizing them first).
    pub allow_requantize: bool,
}

/// One tensor of the output file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorStep {
    pub name: String,
    /// GGML order, trailing dimensions of 1 dropped as ggml writes them.
    pub dims: Vec<u64>,
    pub from: GgmlType,
    pub to: GgmlType,
    /// Bytes read from the input and written to the output.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// A checked quantization, ready to write.
pub struct QuantizePlan {
    input: Arc<GgufFile>,
    options: QuantizeOptions,
    steps: Vec<TensorStep>,
}

impl QuantizePlan {
    /// Plans `input` re-encoded as `options` asks. Fails, naming the tensor,
    /// where llama.cpp would (a quantized tensor without `allow_requantize`)
    /// and for a type we cannot read or write.
    pub fn new(input: GgufFile, options: QuantizeOptions) -> Result<Self> {
        refuse_split_files(&input)?;
        let facts = model_facts(&input)?;
        let infos = input.tensors();
        let names: Vec<&str> = infos.iter().map(|t| t.name.as_str()).collect();
        let order = recipe::llama_order(&names);
        let dims: Vec<Vec<u64>> = order.iter().map(|&i| ggml_dims(&infos[i])).collect();
        let shapes: Vec<recipe::TensorShape<'_>> = order
            .iter()
            .zip(&dims)
            .map(|(&i, dims)| recipe::TensorShape {
                name: &infos[i].name,
                dims,
                ggml_type: infos[i].ggml_type,
            })
            .collect();
        let targets = recipe::target_types(options.file_type, &facts, &shapes)?;
        let steps = order
            .iter()
            .zip(dims.iter().zip(targets))
            .map(|(&i, (dims, to))| step(&infos[i], dims.clone(), to, options))
            .collect::<Result<Vec<_>>>()?;
        Ok(QuantizePlan {
            input: Arc::new(input),
            options,
            steps,
        })
    }

    /// The output's tensors, in file order.
    pub fn steps(&self) -> &[TensorStep] {
        &self.steps
    }

    /// Bytes the progress callback of [`into_writer`](Self::into_writer)
    /// adds up to: the input bytes of every tensor.
    pub fn input_tensor_bytes(&self) -> u64 {
        self.steps.iter().map(|s| s.bytes_in).sum()
    }

    /// Bytes of tensor data in the output.
    pub fn output_tensor_bytes(&self) -> u64 {
        self.steps.iter().map(|s| s.bytes_out).sum()
    }

    /// The output's size, or a little more: the padded tensor data and the
    /// input's header, which the output's barely outgrows.
    pub fn approximate_file_bytes(&self) -> u64 {
        let padded: u64 = self
            .steps
            .iter()
            .map(|s| s.bytes_out.next_multiple_of(self.input.alignment()))
            .sum();
        padded + self.input.data_offset() + 4096
    }

    /// A writer holding the metadata and a generator per tensor; `progress`
    /// is called with the input bytes of each piece as it is written.
    pub fn into_writer(self, progress: Progress) -> Result<GgufWriter> {
        let mut writer = GgufWriter::new(3);
        for (key, value) in output_metadata(&self.input, self.options.file_type) {
            writer.set_metadata(key, value);
        }
        for step in self.steps {
            let data = tensor_data(self.input.clone(), &step, progress.clone())?;
            writer.add_tensor(step.name, step.dims, step.to, data)?;
        }
        Ok(writer)
    }
}

/// The input's metadata with the keys `llama-quantize` sets moved last, in
/// its order, and split keys dropped.
fn output_metadata(input: &GgufFile, file_type: FileType) -> Vec<(String, Value)> {
    const SET_LAST: [&str; 2] = ["general.quantization_version", "general.file_type"];
    const DROPPED: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
    let mut entries: Vec<(String, Value)> = input
        .metadata()
        .iter()
        .filter(|(key, _)| !SET_LAST.contains(&key.as_str()) && !DROPPED.contains(&key.as_str()))
        .cloned()
        .collect();
    entries.push((SET_LAST[0].into(), Value::U32(QUANTIZATION_VERSION)));
    entries.push((SET_LAST[1].into(), Value::U32(file_type.file_type())));
    entries
}

/// We read one file; a model split over several is refused by name.
fn refuse_split_files(input: &GgufFile) -> Result<()> {
    match input.get_u64("split.count")? {
        Some(count) if count > 1 => Err(Error::InvalidModel(format!(
            "this file is part of a model split into {count} files; merge them first (llama-gguf-split --merge)"
        ))),
        _ => Ok(()),
    }
}

fn model_facts(input: &GgufFile) -> Result<ModelFacts> {
    let architecture = input
        .get_str("general.architecture")?
        .ok_or_else(|| Error::InvalidModel("general.architecture is missing".into()))?
        .to_string();
    let number = |key: &str| -> Result<u32> {
        let value = input
            .get_u64(&format!("{architecture}.{key}"))
            .unwrap_or(None);
        Ok(value.unwrap_or(0).min(u64::from(u32::MAX)) as u32)
    };
    let layers = number("block_count")?;
    if layers == 0 {
        return Err(Error::InvalidModel(format!(
            "{architecture}.block_count is missing or 0"
        )));
    }
    let heads = number("attention.head_count")?;
    let kv_heads = match number("attention.head_count_kv")? {
        0 => heads,
        n => n,
    };
    Ok(ModelFacts {
        layers,
        experts: number("expert_count")?,
        heads,
        kv_heads,
        architecture,
    })
}

/// ggml's dims of a tensor: trailing 1s dropped (`ggml_n_dims`), at least one.
fn ggml_dims(info: &TensorInfo) -> Vec<u64> {
    let used = info.dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    info.dims[..used].to_vec()
}

fn step(
    info: &TensorInfo,
    dims: Vec<u64>,
    to: GgmlType,
    options: QuantizeOptions,
) -> Result<TensorStep> {
    let from = info.ggml_type;
    let refuse = |why: String| {
        Err(Error::InvalidRequest(format!(
            "tensor '{}': {why}",
            info.name
        )))
    };
    if from != to {
        if from.is_quantized() && !options.allow_requantize {
            return refuse(format!(
                "it is already quantized ({from}); requantizing loses accuracy, pass --allow-requantize to do it anyway"
            ));
        }
        if !can_decode(from) {
            return refuse(format!(
                "cannot read {from} values to re-encode them as {to}"
            ));
        }
        if !reference::can_encode(to) {
            return refuse(format!("cannot write {to}"));
        }
    }
    let elements = info.element_count();
    let bytes_out = to.bytes_for(elements).ok_or_else(|| {
        Error::InvalidModel(format!(
            "tensor '{}': rows are not whole {to} blocks",
            info.name
        ))
    })?;
    Ok(TensorStep {
        name: info.name.clone(),
        dims,
        from,
        to,
        bytes_in: info.size_bytes,
        bytes_out,
    })
}

fn can_decode(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
        || WeightType::from_gguf(ty).is_some()
}

/// Appends the f32 values of `bytes`, whole blocks of `ty` (one [`can_decode`] accepts).
fn decode(ty: GgmlType, bytes: &[u8], out: &mut Vec<f32>) {
    let (words, _) = bytes.as_chunks::<2>();
    match ty {
        GgmlType::F32 => {
            let (words, _) = bytes.as_chunks::<4>();
            out.extend(words.iter().map(|w| f32::from_le_bytes(*w)));
        }
        GgmlType::F16 => out.extend(words.iter().map(|w| half::f16::from_le_bytes(*w).to_f32())),
        GgmlType::BF16 => out.extend(words.iter().map(|w| half::bf16::from_le_bytes(*w).to_f32())),
        _ => {
            if let Some(weight_type) = WeightType::from_gguf(ty) {
                dequantize(weight_type, bytes, out);
            }
        }
    }
}

/// The generator of one output tensor: its input bytes copied, or decoded
/// and re-encoded in parallel chunks of whole rows.
fn tensor_data(input: Arc<GgufFile>, step: &TensorStep, progress: Progress) -> Result<TensorData> {
    let info = input
        .tensor_info(&step.name)
        .ok_or_else(|| Error::InvalidModel(format!("tensor '{}' vanished", step.name)))?
        .clone();
    let (from, to) = (step.from, step.to);
    if from == to {
        return Ok(TensorData::generated(move |out| {
            out.write_all(input.data_of(&info))?;
            progress(info.size_bytes);
            Ok(())
        }));
    }
    let row_length = info.dims.first().copied().unwrap_or(1).max(1);
    let rows = info.element_count() / row_length;
    let rows_per_chunk = (CHUNK_VALUES / row_length).max(1);
    let row_bytes = from.bytes_for(row_length).unwrap_or(0) as usize;
    Ok(TensorData::generated(move |out| {
        let data = input.data_of(&info);
        let chunks: Vec<std::ops::Range<u64>> = (0..rows)
            .step_by(rows_per_chunk as usize)
            .map(|first| first..(first + rows_per_chunk).min(rows))
            .collect();
        for batch in chunks.chunks(BATCH_CHUNKS) {
            let encoded: Vec<Vec<u8>> = batch
                .par_iter()
                .map(|range| {
                    let bytes =
                        &data[range.start as usize * row_bytes..range.end as usize * row_bytes];
                    let mut values =
                        Vec::with_capacity(((range.end - range.start) * row_length) as usize);
                    decode(from, bytes, &mut values);
                    let mut encoded = Vec::new();
                    reference::encode(to, &values, &mut encoded);
                    encoded
                })
                .collect();
            for (range, bytes) in batch.iter().zip(&encoded) {
                out.write_all(bytes)?;
                progress((range.end - range.start) * row_bytes as u64);
            }
        }
        Ok::<(), io::Error>(())
    }))
}
