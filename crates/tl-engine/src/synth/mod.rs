//! Random-weight GGUF models of real shapes (`tl model synth`), for benchmarks
//! and GPU tests where the real weights cannot be downloaded.
//!
//! A [`SynthPlan`] fixes everything before a byte is written: the shape's
//! hyperparameters, the vocabulary (copied from another GGUF file or made up),
//! the tensor list and the seed. [`SynthPlan::into_writer`] turns it into a
//! [`GgufWriter`] whose tensors are generated while the file is written, so a
//! 16 GB model never sits in memory. Matrices are normal(0, 0.02) in the requested
//! type (ggml's reference quantizers), norms are f32 ones; the same seed gives
//! the same bytes on any number of threads (on one platform: the normal draws
//! go through its libm's `logf`/`sinf`/`cosf`).

pub mod fill;
pub mod metadata;
pub mod normal;
pub mod plan;
pub mod shape;
pub mod vocab;

#[cfg(test)]
mod tests;

use tl_gguf::{GgufFile, GgufWriter};

use crate::error::{Error, Result};
use crate::quantize::FileType;

pub use fill::Progress;
pub use plan::PlannedTensor;
pub use shape::{Architecture, Shape, ShapeName};
pub use vocab::Vocabulary;

/// GGUF data sections align tensors to this many bytes (the default).
const ALIGNMENT: u64 = 32;
/// More than the fixed header, the model's own metadata keys and the padding
/// after the header take.
const HEADER_ALLOWANCE: u64 = 4096;

/// What to synthesize.
#[derive(Debug, Clone)]
pub struct SynthRequest {
    pub shape: ShapeName,
    /// Must match the shape's architecture when given.
    pub architecture: Option<Architecture>,
    pub quant: FileType,
    pub seed: u64,
}

/// A synthetic model, planned and ready to write.
#[derive(Debug, Clone)]
pub struct SynthPlan {
    shape: Shape,
    quant: FileType,
    seed: u64,
    vocabulary: Vocabulary,
    tensors: Vec<PlannedTensor>,
    warnings: Vec<String>,
}

impl SynthPlan {
    /// Plans `request`, with the vocabulary of `vocab_file` when given (its size
    /// replaces the shape's, with a warning for the real shapes).
    pub fn new(request: &SynthRequest, vocab_file: Option<&GgufFile>) -> Result<Self> {
        let mut shape = request.shape.shape();
        check_architecture(&shape, request.architecture)?;
        let mut warnings = Vec::new();
        let vocabulary = match vocab_file {
            Some(file) => {
                let vocabulary = Vocabulary::from_gguf(file)?;
                let size = vocabulary.token_count();
                if size != shape.vocab_size && !shape.name.is_tiny() {
                    warnings.push(format!(
                        "the vocabulary has {size} tokens, {} has {}: using {size}",
                        shape.name, shape.vocab_size
                    ));
                }
                shape.vocab_size = size;
                vocabulary
            }
            None => Vocabulary::synthetic(shape.vocab_size)?,
        };
        let tensors = plan::tensor_plan(&shape, request.quant);
        Ok(Self {
            shape,
            quant: request.quant,
            seed: request.seed,
            vocabulary,
            tensors,
            warnings,
        })
    }

    /// The hyperparameters (the vocabulary size as planned).
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The weight type of the matrices.
    pub fn quant(&self) -> FileType {
        self.quant
    }

    /// The tensors, in file order.
    pub fn tensors(&self) -> &[PlannedTensor] {
        &self.tensors
    }

    /// Things the caller should tell the user (a vocabulary size changed).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// `general.name`: `synthetic tinyllama q4_0`.
    pub fn model_name(&self) -> String {
        metadata::model_name(&self.shape, self.quant)
    }

    /// Number of weights.
    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().map(PlannedTensor::elements).sum()
    }

    /// Bytes of tensor data: what the progress callback of
    /// [`into_writer`](Self::into_writer) adds up to.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.size_bytes().unwrap_or(0))
            .sum()
    }

    /// The file's size, or a little more: tensor data with its padding, the
    /// tensor descriptors and the vocabulary exactly, and a bound for the rest of
    /// the header (the model's few keys and the alignment padding).
    pub fn approximate_file_bytes(&self) -> u64 {
        let padded: u64 = self
            .tensors
            .iter()
            .map(|t| t.size_bytes().unwrap_or(0).next_multiple_of(ALIGNMENT))
            .sum();
        // Name (length + bytes), dimension count, dims, type, offset.
        let descriptors: u64 = self
            .tensors
            .iter()
            .map(|t| 8 + t.name.len() as u64 + 4 + 8 * t.dims.len() as u64 + 4 + 8)
            .sum();
        padded + descriptors + self.vocabulary.encoded_bytes() + HEADER_ALLOWANCE
    }

    /// A writer holding the metadata and a generator per tensor; `progress` is
    /// called with each piece of tensor data as it is written.
    pub fn into_writer(self, progress: Progress) -> Result<GgufWriter> {
        let mut writer = GgufWriter::new(3);
        let entries = metadata::model_metadata(&self.shape, self.quant)
            .into_iter()
            .chain(self.vocabulary.into_entries());
        for (key, value) in entries {
            writer.set_metadata(key, value);
        }
        for tensor in &self.tensors {
            let data = fill::tensor_data(tensor, self.seed, progress.clone());
            let ggml_type = tensor.encoding.ggml_type();
            writer.add_tensor(tensor.name.clone(), tensor.dims.clone(), ggml_type, data)?;
        }
        Ok(writer)
    }
}

fn check_architecture(shape: &Shape, requested: Option<Architecture>) -> Result<()> {
    match requested {
        Some(arch) if arch != shape.architecture => Err(Error::InvalidRequest(format!(
            "shape {} is a {} model, not {arch}",
            shape.name, shape.architecture
        ))),
        _ => Ok(()),
    }
}
