//! The whole sampler on the device, for any number of sequences in three
//! launches: `top_k_partial` and `top_k_select` pick each sequence's
//! candidates from its row of logits, then `sample_candidates` applies the penalties, top-k, temperature,
//! top-p, min-p and the draw (the host passes the uniform draw it would have
//! used), so one token id per sequence is all that crosses to the host.

use crate::buffer::{Buffer, Span};
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu};
use crate::ops::int;

/// The largest top-k the device samples with (`SAMPLE_MAX_K` in sample.cu).
pub const MAX_TOP_K: usize = 256;

/// Pairs a selection holds: ties at the k-th value beyond this make the host
/// decide (`TOP_K_CAPACITY` in sample.cu).
pub const TOP_K_CAPACITY: usize = 1024;

/// Window tokens a job can have (`TOP_K_WINDOW` in sample.cu).
pub const TOP_K_WINDOW: usize = 1024;

/// Values one job's selection holds: two counts, the pairs, the window's
/// values (`SELECTION_LEN` in sample.cu).
pub const SELECTION_LEN: usize = 2 + 2 * TOP_K_CAPACITY + TOP_K_WINDOW;

/// Slices of a row the selection's first step works on in parallel
/// (`TOP_K_PARTS` in sample.cu), each keeping up to [`TOP_K_CAPACITY`] pairs
/// (`PART_LEN` values).
const TOP_K_PARTS: usize = 32;
const PART_LEN: usize = 2 + 2 * TOP_K_CAPACITY;

/// What the kernel writes when it cannot decide (ties overflowed the
/// selection, or no candidate is usable): the host samples from the row then.
pub const FALLBACK: u32 = u32::MAX;

/// Candidates the kernel holds (`SAMPLE_MAX_CANDIDATES` in sample.cu).
const MAX_CANDIDATES: usize = 2048;
const _: () = assert!(TOP_K_CAPACITY + TOP_K_WINDOW <= MAX_CANDIDATES);

/// `u32` words of one job (`struct SampleJob` in sample.cu: 12 four-byte
/// fields, then the f64 draw).
const JOB_WORDS: usize = 14;

/// One job's settings, as `struct SampleJob` in sample.cu takes them (the
/// engine's sampler fills them from its own settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleSettings {
    /// Candidates kept after the penalties, 1 to [`MAX_TOP_K`].
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

/// One sequence to sample: its row of logits (and slot in the tokens), its
/// settings, and the tokens its penalties look at (repeats counted).
#[derive(Debug, Clone, Copy)]
pub struct SampleJob<'a> {
    pub row: usize,
    pub params: SampleSettings,
    pub window: &'a [u32],
}

/// Whether a step with this top-k and penalty window can be sampled on the
/// device.
pub fn fits(top_k: usize, window_len: usize) -> bool {
    (1..=MAX_TOP_K).contains(&top_k)
        && window_len <= TOP_K_WINDOW
        && top_k + window_len <= TOP_K_CAPACITY
}

/// Device memory for up to `max_jobs` jobs a call.
pub struct SampleBuffers {
    max_jobs: usize,
    jobs: Buffer<u32>,
    windows: Buffer<u32>,
    partials: Buffer<u32>,
    selections: Buffer<u32>,
}

impl SampleBuffers {
    pub fn new(gpu: &Gpu, max_jobs: usize) -> Result<Self> {
        Ok(SampleBuffers {
            max_jobs,
            jobs: Buffer::zeros(gpu, max_jobs * JOB_WORDS)?,
            windows: Buffer::zeros(gpu, max_jobs * TOP_K_WINDOW)?,
            partials: Buffer::zeros(gpu, max_jobs * TOP_K_PARTS * PART_LEN)?,
            selections: Buffer::zeros(gpu, max_jobs * SELECTION_LEN)?,
        })
    }

    /// Job j's selection ([`SELECTION_LEN`] values), as `top_k_select` left
    /// it.
    pub fn selection(&self, job: usize) -> Result<Span<'_, u32>> {
        self.selections.span(job * SELECTION_LEN, SELECTION_LEN)
    }
}

/// Jobs checked and uploaded by [`prepare`], ready for [`select_candidates`]
/// and [`sample`].
#[derive(Debug, Clone, Copy)]
pub struct Prepared {
    jobs: usize,
    rows: usize,
}

/// Checks `jobs` and uploads them with their windows. Call it before the
/// launches that compute the logits: an upload from pageable memory queued
/// behind running work can wait for it.
pub fn prepare(gpu: &Gpu, jobs: &[SampleJob<'_>], buffers: &SampleBuffers) -> Result<Prepared> {
    if jobs.len() > buffers.max_jobs {
        return Err(CudaError::Unsupported(format!(
            "{} sampling jobs for buffers of {}",
            jobs.len(),
            buffers.max_jobs
        )));
    }
    let mut words = Vec::with_capacity(jobs.len() * JOB_WORDS);
    let mut windows = Vec::new();
    for job in jobs {
        if !fits(job.params.top_k, job.window.len()) {
            return Err(CudaError::Unsupported(format!(
                "sampling on the GPU takes top-k 1 to {MAX_TOP_K} and up to {TOP_K_WINDOW} penalised tokens, not {} and {}",
                job.params.top_k,
                job.window.len()
            )));
        }
        words.extend(job_words(job, windows.len())?);
        windows.extend_from_slice(job.window);
    }
    if !words.is_empty() {
        gpu.upload(&words, buffers.jobs.span(0, words.len())?)?;
    }
    if !windows.is_empty() {
        gpu.upload(&windows, buffers.windows.span(0, windows.len())?)?;
    }
    let rows = jobs.iter().map(|job| job.row + 1).max().unwrap_or(0);
    Ok(Prepared {
        jobs: jobs.len(),
        rows,
    })
}

/// Samples one token for each prepared job from `logits` (rows of `n`
/// values): `tokens[row * token_stride]` gets the token, or [`FALLBACK`] when
/// the host must decide. Two launches; no wait.
pub fn sample(
    gpu: &Gpu,
    logits: Span<'_, f32>,
    n: usize,
    prepared: Prepared,
    buffers: &SampleBuffers,
    tokens: Span<'_, u32>,
    token_stride: usize,
) -> Result<()> {
    select_candidates(gpu, logits, n, prepared, buffers)?;
    if prepared.jobs == 0 {
        return Ok(());
    }
    tokens.require((prepared.rows - 1) * token_stride + 1, "sampled tokens")?;
    let grid = (1, prepared.jobs as u32);
    let args = [
        buffers.jobs.all().into(),
        buffers.windows.all().into(),
        buffers.selections.all().into(),
        tokens.into(),
        Arg::I32(int(token_stride, "token stride")?),
    ];
    // SAFETY: matches sample_candidates(const SampleJob*, const u32*, const
    // u32*, u32*, int); `prepare` checked and uploaded the jobs (top-k <=
    // MAX_TOP_K, windows inside the buffer) and `select_candidates` wrote one
    // selection per job; each job writes tokens[row · token_stride], inside
    // `tokens` (checked above). At most TOP_K_CAPACITY + TOP_K_WINDOW
    // candidates per job, the kernel's shared array (asserted above).
    unsafe { gpu.launch("sample_candidates", grid, 256, 0, &args) }
}

/// The first two launches of [`sample`] alone: each job's selection, readable
/// through [`SampleBuffers::selection`].
pub fn select_candidates(
    gpu: &Gpu,
    logits: Span<'_, f32>,
    n: usize,
    prepared: Prepared,
    buffers: &SampleBuffers,
) -> Result<()> {
    if prepared.jobs == 0 {
        return Ok(());
    }
    logits.require(prepared.rows * n, "logits of the sampling jobs")?;
    let jobs = prepared.jobs as u32;
    let vocabulary = Arg::I32(int(n, "vocabulary")?);
    let args = [
        logits.into(),
        vocabulary,
        buffers.jobs.all().into(),
        buffers.partials.all().into(),
    ];
    // SAFETY: matches top_k_partial(const float*, int, const SampleJob*,
    // u32*); every job's row lies inside `logits` (checked above), and block
    // (p, j) writes PART_LEN values from (j · TOP_K_PARTS + p) · PART_LEN,
    // inside the partials buffer (jobs <= max_jobs, checked by `prepare`).
    unsafe { gpu.launch("top_k_partial", (TOP_K_PARTS as u32, jobs), 256, 0, &args)? };
    let args = [
        logits.into(),
        vocabulary,
        buffers.jobs.all().into(),
        buffers.windows.all().into(),
        buffers.partials.all().into(),
        buffers.selections.all().into(),
    ];
    // SAFETY: matches top_k_select(const float*, int, const SampleJob*, const
    // u32*, const u32*, u32*); reads the parts top_k_partial wrote for each
    // job and its window inside the windows `prepare` uploaded (window tokens
    // are checked against n in the kernel); job j writes SELECTION_LEN values
    // from j · SELECTION_LEN, inside the selections buffer.
    unsafe { gpu.launch("top_k_select", (1, jobs), 1024, 0, &args) }
}

/// A job as the kernel's `struct SampleJob` reads it.
fn job_words(job: &SampleJob<'_>, window_start: usize) -> Result<[u32; JOB_WORDS]> {
    let p = &job.params;
    let word = |value: usize, what: &str| int(value, what).map(|v| v as u32);
    let draw = p.draw.to_bits();
    Ok([
        word(job.row, "row")?,
        word(p.top_k, "top-k")?,
        word(job.window.len(), "window")?,
        word(window_start, "window start")?,
        u32::from(p.greedy),
        p.temperature.to_bits(),
        p.top_p.to_bits(),
        p.min_p.to_bits(),
        p.repeat_penalty.to_bits(),
        p.presence_penalty.to_bits(),
        p.frequency_penalty.to_bits(),
        0,
        draw as u32,
        (draw >> 32) as u32,
    ])
}
