//! `tl run`: check a program, then run its `main`, its `test` blocks (with a
//! cargo-style summary; with a folder, those of every file in it) or its `bench`
//! blocks (with timings).

use std::time::{Duration, Instant};

use std::path::PathBuf;

use anyhow::{Context, Result};
use tl_lang::interp::Interpreter;
use tl_lang::loader::LoadedProgram;
use tl_syntax::ast::NamedBlock;

use super::program::{
    interpreter, load_checked, on_interpreter_thread, report_error, ReportedFailure,
};
use crate::cli::RunArgs;

pub fn run(args: &RunArgs) -> Result<()> {
    if args.file.is_dir() {
        return run_test_folder(args);
    }
    let file = args.file.clone();
    let program_args = args.args.clone();
    let (test, bench, filter) = (args.test, args.bench, args.filter.clone());
    let models = args.models.clone();
    on_interpreter_thread(move || -> Result<()> {
        let program = load_checked(&file)?;
        let mut interp = interpreter(&program, program_args, &models)?;
        if test {
            run_tests(&program, &mut interp, filter.as_deref())
        } else if bench {
            run_benches(&program, &mut interp, filter.as_deref())
        } else {
            match interp.run_main() {
                Ok(_) => Ok(()),
                Err(error) => {
                    report_error(&program.sources, &error);
                    Err(ReportedFailure.into())
                }
            }
        }
    })?
}

/// `tl run --test DIR`: every `*.tl` file directly in the folder, in name order,
/// each as its own program; fails when any file fails to check or any test fails.
fn run_test_folder(args: &RunArgs) -> Result<()> {
    if !args.test {
        anyhow::bail!(
            "{} is a folder; `tl run --test {}` runs the tests of every .tl file in it",
            args.file.display(),
            args.file.display()
        );
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args.file)
        .with_context(|| format!("cannot list {}", args.file.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot list {}", args.file.display()))?;
    files.retain(|path| path.extension().is_some_and(|e| e == "tl") && path.is_file());
    files.sort();
    if files.is_empty() {
        anyhow::bail!("{} has no .tl files", args.file.display());
    }
    let mut failed = Vec::new();
    for file in files {
        println!("\n{}:", file.display());
        let file_args = RunArgs {
            file: file.clone(),
            ..args.clone()
        };
        match run(&file_args) {
            Ok(()) => {}
            Err(error) if error.is::<ReportedFailure>() => failed.push(file),
            Err(error) => return Err(error),
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    println!("\nfiles with failures:");
    for file in &failed {
        println!("    {}", file.display());
    }
    Err(ReportedFailure.into())
}

fn selected(blocks: &[NamedBlock], filter: Option<&str>) -> Vec<NamedBlock> {
    blocks
        .iter()
        .filter(|b| filter.is_none_or(|f| b.name.name.contains(f)))
        .cloned()
        .collect()
}

fn run_tests(
    program: &LoadedProgram,
    interp: &mut Interpreter,
    filter: Option<&str>,
) -> Result<()> {
    let tests = selected(interp.tests(), filter);
    let started = Instant::now();
    println!("\nrunning {} test{}", tests.len(), plural(tests.len()));
    let mut failures = Vec::new();
    for test in &tests {
        match interp.run_block(&test.body) {
            Ok(_) => println!("test {} ... ok", test.name.name),
            Err(error) => {
                println!("test {} ... FAILED", test.name.name);
                failures.push((test.name.name.clone(), error));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:");
        for (name, error) in &failures {
            println!("\n---- {name} ----");
            // On stdout, in order with the rest of the report, as cargo does.
            print!("{}", error.to_diagnostic().render(&program.sources));
        }
    }
    let passed = tests.len() - failures.len();
    let verdict = if failures.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {} failed; finished in {:.2}s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(ReportedFailure.into())
    }
}

/// Each bench runs once to warm up, then repeatedly for about a second (at least
/// 3 and at most 1000 times).
const BENCH_TIME: Duration = Duration::from_secs(1);
const BENCH_MIN_RUNS: usize = 3;
const BENCH_MAX_RUNS: usize = 1000;

fn run_benches(
    program: &LoadedProgram,
    interp: &mut Interpreter,
    filter: Option<&str>,
) -> Result<()> {
    let benches = selected(interp.benches(), filter);
    println!(
        "\nrunning {} bench{}",
        benches.len(),
        if benches.len() == 1 { "" } else { "es" }
    );
    for bench in &benches {
        let mut times = Vec::new();
        let started = Instant::now();
        for run in 0..=BENCH_MAX_RUNS {
            let t = Instant::now();
            if let Err(error) = interp.run_block(&bench.body) {
                println!("bench {} ... FAILED", bench.name.name);
                report_error(&program.sources, &error);
                return Err(ReportedFailure.into());
            }
            if run > 0 {
                times.push(t.elapsed());
            }
            if times.len() >= BENCH_MIN_RUNS && started.elapsed() >= BENCH_TIME {
                break;
            }
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "bench {:<30} median {:>12} (min {}, max {}, {} runs)",
            bench.name.name,
            human(median),
            human(times[0]),
            human(times[times.len() - 1]),
            times.len()
        );
    }
    Ok(())
}

fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} µs", s * 1e6)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
