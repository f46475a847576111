//! Robustness of checking and running: no program makes the checker or the
//! interpreter panic, abort or overflow its stack, and no builtin panics on odd
//! arguments. A program may fail, with a `LangError`; it may not crash.
//!
//! Programs are every `.tl` file of the repository (examples, language tests,
//! golden inputs), seeded mutations of them (`fuzz::mutate`), and programs
//! written to break things (`fuzz::hostile`). Each is checked and run (`main`,
//! then every `test` and `bench` block once) in a worker process
//! (`fuzz::worker`), so that an abort or a stack overflow is pinned on its
//! program and a program that runs too long can be stopped; stopped programs
//! are counted, not failed. Programs that need a model or standard input are
//! left out. Mutants with `while` or `loop`, which a mutation easily makes
//! endless, are a smaller set with a shorter time limit.
//!
//! Builtins are called directly, in this process, with every argument list of
//! up to two values from `fuzz::odd_values` and a sample of longer ones.
//!
//! `cargo test --release -p tl-lang --test no_panic_run -- --nocapture` prints
//! the counts.

mod fuzz;

use std::collections::BTreeMap;
use std::time::Duration;

use tl_lang::builtins::{self, Args, Context};
use tl_syntax::{lex, FileId, Span, TokenKind};

use fuzz::corpus;
use fuzz::mutate::mutate;
use fuzz::odd_values;
use fuzz::rng::XorShift;
use fuzz::runner::{catch, Outcome};
use fuzz::worker::{self, Case};

const MUTANTS: usize = 40_000;
const LOOP_MUTANTS: usize = 2_000;
/// Per program; generous, since a debug build is many times slower.
const TIME_LIMIT: Duration = Duration::from_secs(if cfg!(debug_assertions) { 20 } else { 5 });
const LOOP_TIME_LIMIT: Duration = Duration::from_secs(if cfg!(debug_assertions) { 5 } else { 1 });
/// Random argument lists per builtin and arity, beyond the exhaustive ones.
const SAMPLED_CALLS: usize = 1000;

/// Set, the builtin test prints each call before making it.
const TRACE_VAR: &str = "TL_NO_PANIC_TRACE";

/// Builtins that read a model, standard input or the file system, which a test
/// of odd arguments has no business touching.
const OUTSIDE_WORLD: &[&str] = &[
    "load_model",
    "default_model",
    "input",
    "read_file",
    "env",
    "args",
];

/// The worker process's entry point: does nothing unless started as a worker.
#[test]
fn worker_process() {
    if std::env::var_os(worker::WORKER_VAR).is_some() {
        worker::serve();
    }
}

/// The words of `text` that are names or keywords, or `None` if it does not lex.
fn words(text: &str) -> Option<Vec<String>> {
    let tokens = lex(FileId(0), text).ok()?;
    Some(
        tokens
            .into_iter()
            .filter_map(|t| match t.kind {
                TokenKind::Ident(name) => Some(name),
                TokenKind::While => Some("while".into()),
                TokenKind::Loop => Some("loop".into()),
                _ => None,
            })
            .collect(),
    )
}

/// Whether a program calls a builtin that needs a model or standard input.
fn needs_outside_world(words: &[String]) -> bool {
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "load_model" | "default_model" | "input" | "read_file"
        )
    })
}

fn may_loop_forever(words: &[String]) -> bool {
    words.iter().any(|w| w == "while" || w == "loop")
}

/// Counts of outcomes, and the failures grouped by their first line.
#[derive(Default)]
struct Summary {
    not_parsed: usize,
    ran: usize,
    blocks: usize,
    errors: usize,
    timed_out: Vec<String>,
    failures: BTreeMap<String, (usize, String)>,
}

impl Summary {
    fn add(&mut self, outcome: Outcome, text: &str) {
        let mut fail = |kind: &str, message: &str| {
            let key = format!("{kind}: {}", message.lines().next().unwrap_or_default());
            let entry = self
                .failures
                .entry(key)
                .or_insert_with(|| (0, text.to_string()));
            entry.0 += 1;
            // Keep the shortest program that shows it.
            if text.len() < entry.1.len() {
                entry.1 = text.to_string();
            }
        };
        match outcome {
            Outcome::NotParsed => self.not_parsed += 1,
            Outcome::Ran {
                blocks,
                errors,
                internal,
            } => {
                for message in &internal {
                    fail("internal error", message);
                }
                self.ran += 1;
                self.blocks += blocks;
                self.errors += errors;
            }
            Outcome::Panicked(message) => fail("panic", &message),
            Outcome::Crashed(message) => fail("crash", &message),
            Outcome::TimedOut => self.timed_out.push(text.to_string()),
        }
    }

    fn assert_clean(&self, what: &str, programs: usize) {
        println!(
            "{what}: {programs} programs, {} parsed and ran ({} blocks, {} ending in an error), {} did not parse, {} stopped at the time limit",
            self.ran,
            self.blocks,
            self.errors,
            self.not_parsed,
            self.timed_out.len()
        );
        for text in self.timed_out.iter().take(3) {
            println!("--- stopped at the time limit, for example:\n{text}");
        }
        if self.failures.is_empty() {
            return;
        }
        let mut report = String::new();
        for (key, (count, text)) in &self.failures {
            report.push_str(&format!(
                "\n=== {key} ({count} programs); the shortest:\n{text}\n"
            ));
        }
        panic!("{what}: {} kinds of failure{report}", self.failures.len());
    }
}

fn run_cases(what: &str, cases: Vec<Case>, limit: Duration) {
    let outcomes = worker::run_all(&cases, limit);
    let mut summary = Summary::default();
    for (case, outcome) in cases.iter().zip(outcomes) {
        summary.add(outcome, &case.text);
    }
    summary.assert_clean(what, cases.len());
}

#[test]
fn repository_programs_run_without_crashing() {
    let cases: Vec<Case> = corpus::programs()
        .into_iter()
        .filter(|p| words(&p.text).is_some_and(|w| !needs_outside_world(&w)))
        .map(|p| Case {
            dir: p.dir(),
            text: p.text,
        })
        .collect();
    assert!(cases.len() > 50, "the corpus is missing: {}", cases.len());
    run_cases("repository programs", cases, TIME_LIMIT);
}

#[test]
fn mutated_programs_run_without_crashing() {
    let cases = mutants(MUTANTS, 0x5DEE_CE66_D1CE_4E5B, |words| {
        !may_loop_forever(words)
    });
    run_cases("mutated programs", cases, TIME_LIMIT);
}

/// Mutants of the programs with `while` or `loop`, which a mutation easily
/// makes endless: fewer, and stopped sooner.
#[test]
fn mutated_loops_run_without_crashing() {
    let cases = mutants(LOOP_MUTANTS, 0x9E37_79B9_7F4A_7C15, may_loop_forever);
    run_cases("mutated loops", cases, LOOP_TIME_LIMIT);
}

/// `count` mutants of the corpus programs that parse and need neither a model
/// nor input, keeping those whose words `keep` accepts.
fn mutants(count: usize, seed: u64, keep: impl Fn(&[String]) -> bool) -> Vec<Case> {
    let programs: Vec<corpus::Program> = corpus::programs()
        .into_iter()
        .filter(|p| tl_syntax::parse(FileId(0), &p.text).is_ok())
        .filter(|p| words(&p.text).is_some_and(|w| !needs_outside_world(&w) && keep(&w)))
        .collect();
    let names: Vec<&str> = builtins::all()
        .map(|b| b.name)
        .filter(|n| !OUTSIDE_WORLD.contains(n))
        .collect();
    let mut rng = XorShift::new(seed);
    let mut cases = Vec::new();
    let mut skipped = 0;
    while cases.len() < count {
        let program = rng.pick(&programs);
        let text = mutate(&mut rng, &program.text, &names);
        match words(&text) {
            Some(w) if !needs_outside_world(&w) && keep(&w) => cases.push(Case {
                text,
                dir: program.dir(),
            }),
            _ => skipped += 1,
        }
    }
    println!(
        "{count} mutants of {} programs ({skipped} more made and left out)",
        programs.len()
    );
    cases
}

#[test]
fn hostile_programs_run_without_crashing() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cases = fuzz::hostile::programs()
        .into_iter()
        .map(|text| Case {
            text,
            dir: dir.clone(),
        })
        .collect();
    run_cases("hostile programs", cases, TIME_LIMIT);
}

/// Every builtin, at every arity from its least to four, with arguments from
/// the odd-value pool: every single argument and every pair exhaustively, and
/// sampled lists beyond.
#[test]
fn builtins_survive_odd_arguments() {
    let pool = odd_values::pool();
    // These calls run in this process: one that aborts it is found by tracing.
    let trace = std::env::var_os(TRACE_VAR).is_some();
    let mut rng = XorShift::new(0x2545_F491_4F6C_DD1D);
    let mut calls = 0usize;
    let mut failures = BTreeMap::new();
    for builtin in builtins::all().filter(|b| !OUTSIDE_WORLD.contains(&b.name)) {
        for arity in builtin.min_args..=builtin.max_args.min(4) {
            for choice in argument_choices(arity, pool.len(), &mut rng) {
                let values: Vec<_> = choice.iter().map(|&i| pool[i].1.clone()).collect();
                let spans = vec![Span::default(); arity];
                let args = Args {
                    name: builtin.name,
                    values: &values,
                    spans: &spans,
                    call: Span::default(),
                };
                let described = || {
                    let names: Vec<&str> = choice.iter().map(|&i| pool[i].0).collect();
                    format!("{}({})", builtin.name, names.join(", "))
                };
                if trace {
                    eprintln!("{}", described());
                }
                let mut ctx = Context::captured(".".into(), Box::new(std::io::sink()));
                calls += 1;
                let outcome = catch(|| {
                    if let Ok(value) = (builtin.call)(&mut ctx, &args) {
                        drop(value.to_string());
                    }
                });
                if let Err(message) = outcome {
                    failures
                        .entry(message.lines().next().unwrap_or_default().to_string())
                        .or_insert_with(described);
                }
            }
        }
    }
    println!("builtins: {calls} calls with odd arguments");
    if !failures.is_empty() {
        let report: Vec<String> = failures
            .iter()
            .map(|(message, call)| format!("{call}\n    {message}"))
            .collect();
        panic!("{} panics:\n{}", failures.len(), report.join("\n"));
    }
}

/// Index lists into the pool: all of them up to two arguments, a sample beyond.
fn argument_choices(arity: usize, pool: usize, rng: &mut XorShift) -> Vec<Vec<usize>> {
    match arity {
        0 => vec![Vec::new()],
        1 => (0..pool).map(|i| vec![i]).collect(),
        2 => (0..pool * pool).map(|k| vec![k / pool, k % pool]).collect(),
        _ => (0..SAMPLED_CALLS)
            .map(|_| (0..arity).map(|_| rng.below(pool)).collect())
            .collect(),
    }
}
