//! A campaign: run the seeds, then mutate corpus entries until the time is
//! up. An input whose outcome signature is new joins the corpus; an input
//! that fails is, the first time its failure is seen, shrunk and saved. At
//! the end `OUT/TARGET/summary.txt` holds the figures `scripts/fuzz.sh` puts
//! in its table.

use std::collections::HashSet;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::child::{Failure, Verdict, WorkerConfig, Workers};
use crate::cli::Args;
use crate::findings::Findings;
use crate::minimize::{minimize, minimize_gguf};
use crate::mutate::gguf::GgufParts;
use crate::mutate::{Mutator, Shape};
use crate::rng::Rng;

/// Corpus entries and bytes kept at most; past either a new entry replaces
/// an old one that is not a seed.
const MAX_CORPUS: usize = 4096;
const MAX_CORPUS_BYTES: usize = 512 << 20;
/// Newly added entries are picked more often: they reach paths the older
/// ones did not.
const RECENT: usize = 64;
const STATUS_EVERY: Duration = Duration::from_secs(10);

struct Campaign<'a> {
    args: &'a Args,
    workers: Workers,
    mutator: Mutator,
    corpus: Vec<Vec<u8>>,
    corpus_bytes: usize,
    seed_count: usize,
    signatures: HashSet<u64>,
    findings: Findings,
    rng: Rng,
    started: Instant,
    /// Time and runs spent shrinking failures: not fuzzing, so they extend
    /// the campaign and stay out of its rate.
    minimizing: Duration,
    minimizing_runs: u64,
    /// True while the seeds run.
    seeding: bool,
}

/// `tl-fuzz TARGET --seconds N`.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let target_dir = args.out.join(args.target.name());
    fs::create_dir_all(&target_dir)
        .with_context(|| format!("creating {}", target_dir.display()))?;
    if let Some(corpus) = &args.corpus {
        fs::create_dir_all(corpus).with_context(|| format!("creating {}", corpus.display()))?;
    }
    let mut seeds = args.target.seeds(&args.repo)?;
    seeds.extend(read_corpus_folder(args.corpus.as_deref())?);
    let mut campaign = Campaign {
        args,
        workers: Workers::new(worker_config(args)),
        mutator: args.target.mutator(
            &seeds,
            args.max_len.unwrap_or(args.target.default_max_len()),
        ),
        corpus: Vec::new(),
        corpus_bytes: 0,
        seed_count: 0,
        signatures: HashSet::new(),
        findings: Findings::new(args.target, target_dir.join("failures")),
        rng: Rng::new(args.seed),
        started: Instant::now(),
        minimizing: Duration::ZERO,
        minimizing_runs: 0,
        seeding: true,
    };
    let deadline = campaign.started + Duration::from_secs(args.seconds);
    eprintln!(
        "fuzzing {} for {} s from {} seeds",
        args.target.name(),
        args.seconds,
        seeds.len()
    );
    for seed in seeds {
        campaign.execute(seed, None)?;
    }
    campaign.seed_count = campaign.corpus.len();
    campaign.seeding = false;
    if campaign.corpus.is_empty() {
        campaign.corpus.push(Vec::new());
    }
    campaign.fuzz_until(deadline)?;
    campaign.finish(&target_dir)
}

fn worker_config(args: &Args) -> WorkerConfig {
    WorkerConfig {
        target: args.target,
        repo: args.repo.clone(),
        memory_mb: args.memory_mb,
        timeout: Duration::from_millis(args.timeout_ms),
    }
}

fn read_corpus_folder(folder: Option<&Path>) -> anyhow::Result<Vec<Vec<u8>>> {
    let Some(folder) = folder else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = fs::read_dir(folder)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    crate::seeds::read_all(&paths)
}

impl Campaign<'_> {
    fn fuzz_until(&mut self, deadline: Instant) -> anyhow::Result<()> {
        let mut next_status = Instant::now() + STATUS_EVERY;
        while Instant::now() < deadline + self.minimizing {
            let parent = self.pick_parent();
            let other = self.rng.below(self.corpus.len());
            let mutant =
                self.mutator
                    .mutate(&self.corpus[parent], &self.corpus[other], &mut self.rng);
            self.execute(mutant.bytes, mutant.parts)?;
            if Instant::now() >= next_status {
                eprintln!("{}", self.status_line());
                next_status = Instant::now() + STATUS_EVERY;
            }
        }
        Ok(())
    }

    fn pick_parent(&mut self) -> usize {
        let len = self.corpus.len();
        if len > RECENT && self.rng.one_in(3) {
            len - 1 - self.rng.below(RECENT)
        } else {
            self.rng.below(len)
        }
    }

    fn execute(&mut self, input: Vec<u8>, parts: Option<GgufParts>) -> anyhow::Result<()> {
        match self.workers.run(&input)? {
            Verdict::Finished { signature } => self.keep_if_new(input, &signature),
            Verdict::Failed(failure) => self.found(input, parts, failure),
        }
    }

    /// Keeps `input` when its signature has a feature (a line) not seen
    /// before.
    fn keep_if_new(&mut self, input: Vec<u8>, signature: &str) -> anyhow::Result<()> {
        let mut new = false;
        for feature in signature.lines() {
            let mut hasher = DefaultHasher::new();
            feature.hash(&mut hasher);
            new |= self.signatures.insert(hasher.finish());
        }
        if !new {
            return Ok(());
        }
        self.corpus_bytes += input.len();
        let full = self.corpus.len() >= MAX_CORPUS || self.corpus_bytes > MAX_CORPUS_BYTES;
        // Seeds are found again in their own folders; the corpus folder is
        // for what fuzzing added, and grows no more than the corpus does.
        if let Some(folder) = self.args.corpus.as_ref().filter(|_| !self.seeding && !full) {
            let mut hasher = DefaultHasher::new();
            input.hash(&mut hasher);
            fs::write(folder.join(format!("{:016x}", hasher.finish())), &input)?;
        }
        if full && self.corpus.len() > self.seed_count {
            let replaced = self.seed_count + self.rng.below(self.corpus.len() - self.seed_count);
            self.corpus_bytes -= self.corpus[replaced].len();
            self.corpus[replaced] = input;
        } else {
            self.corpus.push(input);
        }
        Ok(())
    }

    fn found(
        &mut self,
        input: Vec<u8>,
        parts: Option<GgufParts>,
        failure: Failure,
    ) -> anyhow::Result<()> {
        if !self.findings.is_new(&failure.key) {
            self.findings.count_again(&failure.key);
            return Ok(());
        }
        eprintln!(
            "new failure: {} ({} bytes); minimising for up to {} s",
            failure.key,
            input.len(),
            self.args.minimize_seconds
        );
        let minimized = self.shrink(&input, parts, &failure)?;
        let finding = self.findings.record(&failure, &input, &minimized)?;
        eprintln!(
            "saved {} ({} bytes minimised)",
            finding.folder.display(),
            finding.minimized_len
        );
        Ok(())
    }

    /// The smallest input found in the time allowed that fails like `input`:
    /// through the GGUF structure first when there is one, then by bytes.
    fn shrink(
        &mut self,
        input: &[u8],
        parts: Option<GgufParts>,
        failure: &Failure,
    ) -> anyhow::Result<Vec<u8>> {
        let (began, runs_before) = (Instant::now(), self.workers.runs);
        let deadline = began + Duration::from_secs(self.args.minimize_seconds);
        let structurally = match parts.or_else(|| self.parsable_failure(input, failure)) {
            Some(parts) => minimize_gguf(parts, &failure.key, &mut self.workers, deadline)?,
            None => None,
        };
        let start = structurally.as_deref().unwrap_or(input);
        let minimized = minimize(start, &failure.key, &mut self.workers, deadline)?;
        self.minimizing += began.elapsed();
        self.minimizing_runs += self.workers.runs - runs_before;
        Ok(minimized)
    }

    /// The parts of a failing GGUF input that was not written from parts,
    /// when it is safe to parse here: its failure is a panic outside the
    /// reader, which the reader ran before (deterministically), so parsing
    /// cannot crash the supervisor. Hangs, aborts and allocation failures
    /// say nothing of where they happened.
    fn parsable_failure(&self, input: &[u8], failure: &Failure) -> Option<GgufParts> {
        let outside_reader = failure.key.contains("panic at") && !failure.key.contains("tl-gguf/");
        let is_gguf = self.mutator.shape == Shape::Gguf;
        (is_gguf && outside_reader)
            .then(|| GgufParts::parse(input))
            .flatten()
    }

    /// Seconds spent fuzzing (not minimising) and inputs run in them.
    fn fuzzing(&self) -> (f64, u64) {
        let seconds = self.started.elapsed().saturating_sub(self.minimizing);
        (
            seconds.as_secs_f64(),
            self.workers.runs - self.minimizing_runs,
        )
    }

    fn status_line(&self) -> String {
        let (seconds, runs) = self.fuzzing();
        format!(
            "[{seconds:6.0} s] execs {runs} ({:.0}/s) corpus {} failures {} unique {} workers {}",
            runs as f64 / seconds.max(1e-9),
            self.corpus.len(),
            self.findings.total(),
            self.findings.unique(),
            self.workers.started
        )
    }

    /// Writes `summary.txt` and prints the result line.
    fn finish(&self, target_dir: &Path) -> anyhow::Result<()> {
        let (seconds, runs) = self.fuzzing();
        let mut summary = format!(
            "target {}\nseconds {seconds:.1}\nexecutions {runs}\nexecs_per_second {:.1}\nminimize_seconds {:.1}\ncorpus {}\nfailures {}\nunique_failures {}\nworkers_started {}\nseed {}\n",
            self.args.target.name(),
            runs as f64 / seconds.max(1e-9),
            self.minimizing.as_secs_f64(),
            self.corpus.len(),
            self.findings.total(),
            self.findings.unique(),
            self.workers.started,
            self.args.seed,
        );
        for (key, finding) in self.findings.iter() {
            summary.push_str(&format!(
                "finding {} x{} {}\n",
                finding.folder.display(),
                finding.count,
                key
            ));
        }
        fs::write(target_dir.join("summary.txt"), &summary)?;
        eprintln!("{}", self.status_line());
        print!("{summary}");
        Ok(())
    }
}

/// `tl-fuzz TARGET --replay FILE...`: true when every input ran cleanly.
pub fn replay(args: &Args) -> anyhow::Result<bool> {
    let mut workers = Workers::new(worker_config(args));
    let mut all_passed = true;
    for path in &args.replay {
        let input = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        match workers.run(&input)? {
            Verdict::Finished { signature } => println!(
                "{}: ok ({})",
                path.display(),
                signature.replace('\n', " | ")
            ),
            Verdict::Failed(failure) => {
                all_passed = false;
                println!(
                    "{}: FAILED: {}\n{}",
                    path.display(),
                    failure.key,
                    failure.details
                );
            }
        }
    }
    Ok(all_passed)
}
