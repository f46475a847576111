//! Per-kernel timing for `tl bench --profile`: while a profile is open, every
//! launch is bracketed by two timing events on the stream and the host waits for
//! the second, so each kernel's device time is measured on its own. The waits
//! make the run slower than a normal one (and rule out graph replay), so a
//! profile explains where time goes; the benchmark's own timings come from runs
//! without it.

use std::collections::HashMap;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaStream;

use crate::error::{CudaError, Result};

/// Device time of one kernel (or cuBLAS call) summed over a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTime {
    /// Kernel name and launch shape, e.g. `gemv_norm_q4_0 <<<320, 256>>>`.
    pub kernel: String,
    pub launches: u64,
    pub total_ms: f64,
}

/// Kernel times collected so far.
#[derive(Debug, Default)]
pub(crate) struct Profile {
    times: HashMap<String, (u64, f64)>,
}

impl Profile {
    /// Runs `queue` (which queues one kernel on `stream`) between two timing
    /// events and adds the device time between them under `kernel`.
    pub(crate) fn time(
        &mut self,
        stream: &CudaStream,
        kernel: String,
        queue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let event = |what| {
            stream
                .record_event(flags)
                .map_err(|e| CudaError::driver(what, e))
        };
        let start = event("recording a profile event")?;
        queue()?;
        let end = event("recording a profile event")?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| CudaError::driver("reading a profile event", e))?;
        let entry = self.times.entry(kernel).or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 += f64::from(ms);
        Ok(())
    }

    /// The times, longest total first.
    pub(crate) fn into_times(self) -> Vec<KernelTime> {
        let mut times: Vec<KernelTime> = self
            .times
            .into_iter()
            .map(|(kernel, (launches, total_ms))| KernelTime {
                kernel,
                launches,
                total_ms,
            })
            .collect();
        times.sort_by(|a, b| {
            b.total_ms
                .total_cmp(&a.total_ms)
                .then(a.kernel.cmp(&b.kernel))
        });
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_sorted_longest_first() {
        let mut profile = Profile::default();
        profile.times.insert("a".into(), (2, 1.0));
        profile.times.insert("b".into(), (1, 3.0));
        let times = profile.into_times();
        assert_eq!(times[0].kernel, "b");
        assert_eq!(times[1].launches, 2);
    }
}
