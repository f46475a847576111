//! `tl bench`: llama-bench's measurements on our engine. Prompt processing (ppN)
//! runs N random tokens through a fresh cache in one pass; generation (tgN)
//! decodes N tokens greedily one at a time after `--depth` tokens of context.
//! Each test runs once untimed (kernels load, graphs are recorded), then
//! `--reps` times; the table gives the median and range.

use std::time::Instant;

use anyhow::{bail, Result};
use serde::Serialize;
use tl_engine::generate::{finish_pick, step_batch_sampled};
use tl_engine::sampler::rng::Xoshiro256StarStar;
use tl_engine::sampler::{Sampler, SamplerConfig};
use tl_engine::{Backend, KernelTime, Picked, SequenceCache, Session, Wanted};

use crate::cli::BenchArgs;
use crate::loaded_model;

/// One test's results.
#[derive(Debug, Serialize)]
struct TestResult {
    test: String,
    tokens: usize,
    depth: usize,
    /// Sequences decoded together (`tokens` counts all of theirs).
    batch: usize,
    reps: usize,
    tokens_per_second_median: f64,
    tokens_per_second_min: f64,
    tokens_per_second_max: f64,
    milliseconds_median: f64,
    syncs_per_token: f64,
    /// Device time per kernel in one extra, profiled run (`--profile`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    profile: Vec<KernelRow>,
}

/// One kernel's share of a profiled run.
#[derive(Debug, Serialize)]
struct KernelRow {
    kernel: String,
    launches_per_token: f64,
    microseconds_per_launch: f64,
    microseconds_per_token: f64,
}

impl KernelRow {
    fn new(time: &KernelTime, tokens: usize) -> Self {
        let tokens = tokens.max(1) as f64;
        let launches = time.launches.max(1) as f64;
        KernelRow {
            kernel: time.kernel.clone(),
            launches_per_token: time.launches as f64 / tokens,
            microseconds_per_launch: time.total_ms * 1000.0 / launches,
            microseconds_per_token: time.total_ms * 1000.0 / tokens,
        }
    }
}

/// Runs `once` with every kernel timed on its own (when `wanted`), returning the
/// per-token rows.
fn profiled(
    backend: &Backend,
    wanted: bool,
    tokens: usize,
    once: impl FnOnce() -> Result<()>,
) -> Result<Vec<KernelRow>> {
    if !wanted {
        return Ok(Vec::new());
    }
    backend.start_profile();
    let ran = once();
    let times = backend.finish_profile();
    ran?;
    Ok(times.iter().map(|t| KernelRow::new(t, tokens)).collect())
}

#[derive(Debug, Serialize)]
struct Report {
    model: String,
    device: String,
    weight_bytes: usize,
    device_memory_used_bytes: Option<usize>,
    results: Vec<TestResult>,
}

pub fn run(args: &BenchArgs, verbose: bool) -> Result<()> {
    let longest_prompt = args.prompt.iter().copied().max().unwrap_or(0);
    let needed = longest_prompt.max(args.depth + args.generate).max(1);
    let mut model_args = args.model.clone();
    if model_args.ctx.is_none() {
        model_args.ctx = Some(needed);
    }
    let loaded = loaded_model::load(&model_args, verbose)?;
    let context = loaded.context;
    if needed > context {
        bail!("the tests need a context of {needed} tokens; --ctx is {context}");
    }
    let backend = &loaded.backend;
    if args.profile && backend.is_cpu() {
        eprintln!(
            "note: --profile times GPU kernels; this model runs on the CPU, so no profile follows"
        );
    }
    let mut results = Vec::new();
    for &tokens in args.prompt.iter().filter(|&&n| n > 0) {
        eprintln!("bench: pp{tokens} ({} reps)", args.reps);
        results.push(prompt_test(backend, tokens, context, args)?);
    }
    if args.generate > 0 && args.batch > 1 {
        eprintln!(
            "bench: tg{} for {} sequences at depth {} ({} reps)",
            args.generate, args.batch, args.depth, args.reps
        );
        results.push(batched_generation_test(backend, context, args)?);
    } else if args.generate > 0 {
        eprintln!(
            "bench: tg{} at depth {} ({} reps)",
            args.generate, args.depth, args.reps
        );
        results.push(generation_test(backend, context, args)?);
    }
    let report = Report {
        model: loaded.file.path.display().to_string(),
        device: backend.device_name(),
        weight_bytes: backend.weight_bytes(),
        device_memory_used_bytes: backend.device_memory_used(),
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn random_tokens(count: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut rng = Xoshiro256StarStar::from_seed(seed);
    (0..count)
        .map(|_| (rng.next_u64() % vocab as u64) as u32)
        .collect()
}

/// Times one pass over `tokens` random tokens from an empty cache.
fn prompt_test(
    backend: &Backend,
    tokens: usize,
    context: usize,
    args: &BenchArgs,
) -> Result<TestResult> {
    let prompt = random_tokens(tokens, backend.config().vocab_size, args.seed);
    let mut cache = backend.new_cache(context)?;
    let mut times = Vec::new();
    let mut syncs = 0;
    for rep in 0..=args.reps {
        cache.truncate(0);
        let before = backend.syncs();
        let started = Instant::now();
        backend.step_one(&prompt, &mut cache, Wanted::Logits)?;
        let elapsed = started.elapsed().as_secs_f64();
        if rep > 0 {
            times.push(elapsed);
            syncs += backend.syncs() - before;
        }
    }
    let mut result = summarise(format!("pp{tokens}"), tokens, 0, &times, syncs);
    result.profile = profiled(backend, args.profile, tokens, || {
        cache.truncate(0);
        backend.step_one(&prompt, &mut cache, Wanted::Logits)?;
        Ok(())
    })?;
    Ok(result)
}

/// Times greedy decoding of `--generate` tokens after `--depth` tokens.
fn generation_test(backend: &Backend, context: usize, args: &BenchArgs) -> Result<TestResult> {
    let vocab = backend.config().vocab_size;
    let history = random_tokens(args.depth.max(1), vocab, args.seed);
    let mut cache = backend.new_cache(context)?;
    let mut times = Vec::new();
    let mut syncs = 0;
    // Fills the cache to the depth; returns the first token and its position.
    let fill = |cache: &mut SequenceCache| -> Result<(u32, usize)> {
        cache.truncate(0);
        if args.depth > 0 {
            backend.step_one(&history, cache, Wanted::Logits)?;
            Ok((history[args.depth - 1], args.depth))
        } else {
            Ok((history[0], 0))
        }
    };
    // Greedy steps take the device argmax; with a temperature the default
    // sampler settings apply (top-k 40), and the GPU runs the whole sampler.
    // Either way 4 bytes come back per token.
    let generate = |cache: &mut SequenceCache, (mut token, position): (u32, usize)| {
        let mut sampler = Sampler::new(SamplerConfig {
            temperature: args.temperature,
            seed: args.seed,
            ..SamplerConfig::default()
        });
        let mut context: Vec<u32> = history[..position.min(history.len())].to_vec();
        for _ in 0..args.generate {
            token = if args.temperature > 0.0 {
                // As `tl generate` samples: the whole sampler on the GPU when
                // top-k bounds the choice, else the whole row.
                context.push(token);
                let window = sampler.penalized_tokens(&context).to_vec();
                let want = match sampler.device_sampling() {
                    Some(params) => Wanted::Sample {
                        params,
                        window: &window,
                    },
                    None => Wanted::Logits,
                };
                let picked = backend.step_one(&[token], cache, want)?;
                finish_pick(&mut sampler, picked, &context)?
            } else {
                match backend.step_one(&[token], cache, Wanted::Argmax)? {
                    Picked::Token(token) => token,
                    Picked::Row(_) => anyhow::bail!("the logits are all NaN or -inf"),
                }
            };
        }
        anyhow::Ok(())
    };
    for rep in 0..=args.reps {
        let start = fill(&mut cache)?;
        let before = backend.syncs();
        let started = Instant::now();
        generate(&mut cache, start)?;
        let elapsed = started.elapsed().as_secs_f64();
        if rep > 0 {
            times.push(elapsed);
            syncs += backend.syncs() - before;
        }
    }
    let sampled = if args.temperature > 0.0 {
        " sampled"
    } else {
        ""
    };
    let mut result = summarise(
        format!("tg{}{sampled}", args.generate),
        args.generate,
        args.depth,
        &times,
        syncs,
    );
    if args.depth > 0 {
        result.test = format!("tg{}{sampled} @ d{}", args.generate, args.depth);
    }
    let start = fill(&mut cache)?;
    result.profile = profiled(backend, args.profile, args.generate, || {
        generate(&mut cache, start)
    })?;
    Ok(result)
}

/// Decodes `--generate` tokens for each of `--batch` sequences in batched
/// steps, as a server's running batch does: each sequence starts after its own
/// `--depth` random tokens and has its own sampler (seed `--seed + i`).
fn batched_generation_test(
    backend: &Backend,
    context: usize,
    args: &BenchArgs,
) -> Result<TestResult> {
    let batch = args.batch as usize;
    let vocab = backend.config().vocab_size;
    let histories: Vec<Vec<u32>> = (0..batch as u64)
        .map(|i| random_tokens(args.depth.max(1), vocab, args.seed + i))
        .collect();
    let mut sessions = histories
        .iter()
        .map(|_| Session::new(backend, context))
        .collect::<tl_engine::Result<Vec<_>>>()?;
    // Fills every cache to the depth; returns the tokens of the first step.
    let fill = |sessions: &mut [Session]| -> Result<Vec<u32>> {
        let mut first = Vec::with_capacity(batch);
        for (session, history) in sessions.iter_mut().zip(&histories) {
            session.reset();
            if args.depth > 0 {
                session.prefill(backend, history, 0, &mut || true)?;
            }
            first.extend(history.last());
        }
        Ok(first)
    };
    let generate = |sessions: &mut [Session], mut next: Vec<u32>| -> Result<()> {
        let mut samplers: Vec<Sampler> = (0..batch as u64)
            .map(|i| {
                Sampler::new(SamplerConfig {
                    temperature: args.temperature,
                    seed: args.seed + i,
                    ..SamplerConfig::default()
                })
            })
            .collect();
        for _ in 0..args.generate {
            let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
            let mut sampler_refs: Vec<&mut Sampler> = samplers.iter_mut().collect();
            let picked = step_batch_sampled(&mut refs, backend, &mut sampler_refs, &next)?;
            next = picked
                .into_iter()
                .collect::<tl_engine::Result<Vec<u32>>>()?;
        }
        Ok(())
    };
    let mut times = Vec::new();
    let mut syncs = 0;
    for rep in 0..=args.reps {
        let first = fill(&mut sessions)?;
        let before = backend.syncs();
        let started = Instant::now();
        generate(&mut sessions, first)?;
        let elapsed = started.elapsed().as_secs_f64();
        if rep > 0 {
            times.push(elapsed);
            syncs += backend.syncs() - before;
        }
    }
    let sampled = if args.temperature > 0.0 {
        " sampled"
    } else {
        ""
    };
    let mut test = format!("tg{}{sampled} x{batch}", args.generate);
    if args.depth > 0 {
        test = format!("{test} @ d{}", args.depth);
    }
    let tokens = args.generate * batch;
    let mut result = summarise(test, tokens, args.depth, &times, syncs);
    result.batch = batch;
    let first = fill(&mut sessions)?;
    result.profile = profiled(backend, args.profile, tokens, || {
        generate(&mut sessions, first)
    })?;
    Ok(result)
}

fn summarise(test: String, tokens: usize, depth: usize, times: &[f64], syncs: u64) -> TestResult {
    let mut rates: Vec<f64> = times.iter().map(|t| tokens as f64 / t).collect();
    rates.sort_by(f64::total_cmp);
    let mut sorted_times = times.to_vec();
    sorted_times.sort_by(f64::total_cmp);
    TestResult {
        test,
        tokens,
        depth,
        batch: 1,
        reps: times.len(),
        tokens_per_second_median: median(&rates),
        tokens_per_second_min: rates.first().copied().unwrap_or(0.0),
        tokens_per_second_max: rates.last().copied().unwrap_or(0.0),
        milliseconds_median: median(&sorted_times) * 1000.0,
        syncs_per_token: syncs as f64 / (tokens * times.len()).max(1) as f64,
        profile: Vec::new(),
    }
}

/// The median of sorted values.
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn print_table(report: &Report) {
    println!("model:  {}", report.model);
    println!("device: {}", report.device);
    let memory = report.device_memory_used_bytes.map_or(String::new(), |b| {
        format!(", device memory in use {:.0} MiB", b as f64 / 1048576.0)
    });
    println!(
        "weights: {:.1} MB{memory}",
        report.weight_bytes as f64 / 1e6
    );
    println!();
    println!("| test | tokens/s (median) | min | max | ms (median) | syncs/token |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &report.results {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.3} |",
            r.test,
            r.tokens_per_second_median,
            r.tokens_per_second_min,
            r.tokens_per_second_max,
            r.milliseconds_median,
            r.syncs_per_token
        );
    }
    for r in report.results.iter().filter(|r| !r.profile.is_empty()) {
        print_profile(r);
    }
}

/// The profiled run of one test: kernels by device time per token.
fn print_profile(r: &TestResult) {
    let total: f64 = r.profile.iter().map(|k| k.microseconds_per_token).sum();
    println!();
    println!(
        "profile of {} (one run, each kernel timed alone): {total:.1} µs of device time per token",
        r.test
    );
    println!();
    println!("| kernel | launches/token | µs/launch | µs/token | share |");
    println!("|---|---:|---:|---:|---:|");
    for k in &r.profile {
        println!(
            "| {} | {:.2} | {:.2} | {:.1} | {:.1}% |",
            k.kernel,
            k.launches_per_token,
            k.microseconds_per_launch,
            k.microseconds_per_token,
            100.0 * k.microseconds_per_token / total.max(f64::MIN_POSITIVE)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
        assert_eq!(median(&[]), 0.0);
    }
}
