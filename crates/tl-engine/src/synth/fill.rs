//! Streaming a planned tensor's bytes: rows are cut into fixed chunks, a batch of
//! chunks is drawn and encoded in parallel (rayon), then written in order. A
//! chunk's values depend only on its seed (see [`normal`](super::normal)), so
//! the output is the same on any number of threads.

use std::io;
use std::sync::Arc;

use rayon::prelude::*;
use tl_gguf::TensorData;

use crate::quantize::reference;
use crate::synth::normal::{chunk_seed, fill_normal};
use crate::synth::plan::{Encoding, Fill, PlannedTensor};

/// Called with the number of tensor bytes just written; shared by every
/// tensor's generator (a progress bar).
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// Values per chunk (rounded to whole rows): small enough that a batch of
/// chunks stays a few MB, large enough to amortise the parallel dispatch.
const CHUNK_VALUES: u64 = 1 << 18;
/// Chunks drawn in parallel before their bytes are written.
const BATCH_CHUNKS: u64 = 32;

/// A generator for `tensor`'s bytes in a file synthesized from `seed`.
pub fn tensor_data(tensor: &PlannedTensor, seed: u64, progress: Progress) -> TensorData {
    let chunks = ChunkPlan::new(tensor);
    let name = tensor.name.clone();
    let (encoding, fill) = (tensor.encoding, tensor.fill);
    TensorData::generated(move |out| {
        let mut first = 0;
        while first < chunks.count {
            let last = (first + BATCH_CHUNKS).min(chunks.count);
            let encoded: Vec<Vec<u8>> = (first..last)
                .into_par_iter()
                .map(|chunk| {
                    let values = chunks.values_in(chunk);
                    encode_chunk(encoding, fill, chunk_seed(seed, &name, chunk), values)
                })
                .collect();
            for bytes in &encoded {
                out.write_all(bytes)?;
                progress(bytes.len() as u64);
            }
            first = last;
        }
        Ok::<(), io::Error>(())
    })
}

/// How a tensor is cut into chunks of whole rows.
#[derive(Debug, Clone, Copy)]
struct ChunkPlan {
    values: u64,
    values_per_chunk: u64,
    count: u64,
}

impl ChunkPlan {
    fn new(tensor: &PlannedTensor) -> Self {
        let row = tensor.row_length().max(1);
        let values_per_chunk = (CHUNK_VALUES / row).max(1) * row;
        let values = tensor.elements();
        Self {
            values,
            values_per_chunk,
            count: values.div_ceil(values_per_chunk),
        }
    }

    /// Values in chunk `chunk` (the last may be short).
    fn values_in(&self, chunk: u64) -> usize {
        let start = chunk * self.values_per_chunk;
        (self.values - start).min(self.values_per_chunk) as usize
    }
}

fn encode_chunk(encoding: Encoding, fill: Fill, seed: u64, len: usize) -> Vec<u8> {
    let mut values = vec![0.0f32; len];
    match fill {
        Fill::Ones => values.fill(1.0),
        Fill::Normal { std } => fill_normal(seed, std, &mut values),
    }
    let bytes = encoding
        .ggml_type()
        .bytes_for(len as u64)
        .unwrap_or_default();
    let mut out = Vec::with_capacity(bytes as usize);
    match encoding {
        Encoding::F32 => reference::encode_f32(&values, &mut out),
        Encoding::Weights(ty) => reference::encode(ty, &values, &mut out),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dims: Vec<u64>) -> PlannedTensor {
        PlannedTensor {
            name: "t".into(),
            dims,
            encoding: Encoding::F32,
            fill: Fill::Ones,
        }
    }

    #[test]
    fn chunks_are_whole_rows_and_cover_the_tensor() {
        let plan = ChunkPlan::new(&tensor(vec![5632, 100]));
        assert_eq!(plan.values_per_chunk % 5632, 0);
        let total: usize = (0..plan.count).map(|c| plan.values_in(c)).sum();
        assert_eq!(total, 5632 * 100);
        // A row longer than a chunk is a chunk of its own.
        let plan = ChunkPlan::new(&tensor(vec![1 << 19, 3]));
        assert_eq!((plan.count, plan.values_in(2)), (3, 1 << 19));
    }
}
