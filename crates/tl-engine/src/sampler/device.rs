//! The engine's settings for one sampling step taken on a device, and their
//! conversion into the GPU kernel's parameters (`tl_cuda::ops::sample`). The
//! engine owns this type, so its sessions and backends do not speak the
//! kernel crate's terms.

use tl_cuda::ops::sample::SampleSettings;

pub use tl_cuda::ops::sample::MAX_TOP_K as MAX_DEVICE_TOP_K;

/// One sampling step's settings, in the host sampler's terms: what
/// [`Sampler::device_sampling`](super::Sampler::device_sampling) hands out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Candidates kept after the penalties, 1 to [`MAX_DEVICE_TOP_K`].
    pub top_k: usize,
    /// Take the best candidate after the penalties instead of drawing.
    pub greedy: bool,
    pub temperature: f32,
    /// 1.0 = off.
    pub top_p: f32,
    /// 0.0 = off.
    pub min_p: f32,
    /// 1.0 = off.
    pub repeat_penalty: f32,
    /// 0.0 = off.
    pub presence_penalty: f32,
    /// 0.0 = off.
    pub frequency_penalty: f32,
    /// The uniform draw in [0, 1) that picks among the survivors.
    pub draw: f64,
}

impl From<SamplingParams> for SampleSettings {
    fn from(params: SamplingParams) -> Self {
        let SamplingParams {
            top_k,
            greedy,
            temperature,
            top_p,
            min_p,
            repeat_penalty,
            presence_penalty,
            frequency_penalty,
            draw,
        } = params;
        SampleSettings {
            top_k,
            greedy,
            temperature,
            top_p,
            min_p,
            repeat_penalty,
            presence_penalty,
            frequency_penalty,
            draw,
        }
    }
}
