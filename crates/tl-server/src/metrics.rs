//! Counters, gauges and histograms for `GET /metrics`, in Prometheus' text
//! format. Everything is an atomic: the engine thread and the HTTP tasks
//! update them without locks, and a scrape reads a consistent-enough view.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A cumulative latency histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| seconds <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(value.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// How a request ended, for `tl_requests_total{outcome=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Generation ended normally (end of text, stop string, token limit, full context).
    Completed,
    /// The client went away first.
    Cancelled,
    /// The request was refused (bad input, unknown model, full queue, ...).
    Rejected,
    /// The engine failed on it.
    Failed,
}

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Completed, "completed"),
    (Outcome::Cancelled, "cancelled"),
    (Outcome::Rejected, "rejected"),
    (Outcome::Failed, "failed"),
];

/// Everything `/metrics` reports.
#[derive(Debug, Default)]
pub struct Metrics {
    outcomes: [AtomicU64; OUTCOMES.len()],
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    pub time_to_first_token: Histogram,
    pub inter_token_latency: Histogram,
    /// Requests waiting for a sequence.
    pub queued: AtomicU64,
    /// Sequences being generated.
    pub active: AtomicU64,
    /// Tokens held in the KV caches of active sequences.
    pub kv_tokens: AtomicU64,
    /// Tokens kept in idle sequences' caches for prefix reuse.
    pub kv_cached_tokens: AtomicU64,
    /// Tokens the KV caches allocated so far can hold.
    pub kv_capacity_tokens: AtomicU64,
    pub models_loaded: AtomicU64,
    pub model_bytes_loaded: AtomicU64,
}

impl Metrics {
    pub fn count(&self, outcome: Outcome) {
        if let Some(i) = OUTCOMES.iter().position(|(o, _)| *o == outcome) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP tl_requests_total Generation and embedding requests by how they ended.\n# TYPE tl_requests_total counter"
        );
        for ((_, label), count) in OUTCOMES.iter().zip(&self.outcomes) {
            let _ = writeln!(
                out,
                "tl_requests_total{{outcome=\"{label}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let counters = [
            (
                "tl_prompt_tokens_total",
                "Prompt tokens received (embedding inputs too).",
                &self.prompt_tokens,
            ),
            (
                "tl_generated_tokens_total",
                "Tokens generated.",
                &self.generated_tokens,
            ),
        ];
        render_scalars(&mut out, "counter", &counters);
        self.time_to_first_token.render(
            &mut out,
            "tl_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.",
        );
        self.inter_token_latency.render(
            &mut out,
            "tl_inter_token_latency_seconds",
            "Between consecutive generated tokens of a request.",
        );
        let gauges = [
            (
                "tl_queue_depth",
                "Requests waiting for a sequence.",
                &self.queued,
            ),
            (
                "tl_active_sequences",
                "Sequences being generated.",
                &self.active,
            ),
            (
                "tl_kv_tokens",
                "Tokens held in active sequences' KV caches.",
                &self.kv_tokens,
            ),
            (
                "tl_kv_cached_tokens",
                "Tokens kept in idle sequences' KV caches for prefix reuse.",
                &self.kv_cached_tokens,
            ),
            (
                "tl_kv_capacity_tokens",
                "Tokens the allocated KV caches can hold.",
                &self.kv_capacity_tokens,
            ),
            (
                "tl_models_loaded",
                "Models whose weights are loaded.",
                &self.models_loaded,
            ),
            (
                "tl_model_bytes_loaded",
                "Bytes of loaded weights.",
                &self.model_bytes_loaded,
            ),
        ];
        render_scalars(&mut out, "gauge", &gauges);
        out
    }
}

/// Writes single-valued metrics of one `kind` (counter or gauge).
fn render_scalars(out: &mut String, kind: &str, metrics: &[(&str, &str, &AtomicU64)]) {
    for (name, help, value) in metrics {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
            value.load(Ordering::Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(20));
        h.observe(Duration::from_secs(60));
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.001\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.025\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"30\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count 3\n"), "{out}");
    }

    #[test]
    fn outcomes_are_labelled() {
        let m = Metrics::default();
        m.count(Outcome::Cancelled);
        m.count(Outcome::Cancelled);
        let text = m.render();
        assert!(
            text.contains("tl_requests_total{outcome=\"cancelled\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("tl_requests_total{outcome=\"completed\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("tl_kv_tokens 0\n"), "{text}");
    }
}
