//! CUDA graphs: a sequence of launches recorded once and replayed with one call,
//! which removes the per-launch CPU cost that dominates a small model's decode
//! step. Kernels in a graph read anything that changes per step (the token, the
//! position) from device memory, so one recording serves every step.

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::CudaGraph;

use crate::error::{CudaError, Result};
use crate::gpu::Gpu;

/// A recorded sequence of launches on the GPU's stream.
pub struct Graph {
    graph: CudaGraph,
}

impl Graph {
    /// Records the launches `record` makes (they are not run while recording).
    /// The buffers they use must outlive the graph.
    pub fn capture<E: From<CudaError>>(
        gpu: &Gpu,
        record: impl FnOnce() -> std::result::Result<(), E>,
    ) -> std::result::Result<Graph, E> {
        let stream = gpu.stream();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| CudaError::driver("starting a graph capture", e))?;
        let recorded = record();
        let ended = stream.end_capture(CUgraphInstantiate_flags(0));
        recorded?;
        let graph = ended
            .map_err(|e| CudaError::driver("ending a graph capture", e))?
            .ok_or_else(|| CudaError::Unsupported("the graph capture recorded nothing".into()))?;
        graph
            .upload()
            .map_err(|e| CudaError::driver("uploading a graph", e))?;
        Ok(Graph { graph })
    }

    /// Queues one replay on the GPU's stream.
    pub fn replay(&self) -> Result<()> {
        self.graph
            .launch()
            .map_err(|e| CudaError::driver("replaying a graph", e))
    }
}
