//! The worker process: caps its own address space, sets the target up once,
//! then runs each input it is sent under `catch_unwind` and answers with the
//! outcome. Panics are recorded by a hook rather than printed, including those
//! on threads the target does not own (a tokio task that panics becomes an
//! error response, which would otherwise hide the panic). What cannot be
//! caught (an abort, a stack overflow, a failed allocation) ends the process;
//! the supervisor sees that and knows which input did it.

use std::backtrace::Backtrace;
use std::io::{self, BufReader, BufWriter};
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;

use crate::limits::cap_address_space;
use crate::protocol::{self, Reply};
use crate::signature::normalize;
use crate::targets::{Runner, TargetKind};

/// Written to stderr before each input; the supervisor reads what follows
/// the last one.
pub const INPUT_MARK: &str = "@@tl-fuzz input";

/// One recorded panic.
struct PanicRecord {
    location: String,
    report: String,
}

/// Panics seen since the current input started, on any thread.
static PANICS: Mutex<Vec<PanicRecord>> = Mutex::new(Vec::new());

/// Entry point of `tl-fuzz TARGET --worker`.
pub fn serve(target: TargetKind, repo: &Path, memory_mb: u64) -> anyhow::Result<()> {
    cap_address_space(memory_mb)?;
    panic::set_hook(Box::new(record_panic));
    let repo: PathBuf = repo.to_path_buf();
    // The target runs on a thread with the stack it has in the product, so a
    // stack overflow here is one there.
    let runner = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name()))
        .stack_size(target.stack_bytes())
        .spawn(move || serve_inputs(target, &repo))
        .context("starting the runner thread")?;
    match runner.join() {
        Ok(result) => result,
        Err(_) => anyhow::bail!("the worker's runner thread panicked outside any input"),
    }
}

fn serve_inputs(target: TargetKind, repo: &Path) -> anyhow::Result<()> {
    let mut runner = target
        .runner(repo)
        .with_context(|| format!("setting up target {}", target.name()))?;
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    protocol::write_reply(&mut output, &Reply::Ready)?;
    while let Some(bytes) = protocol::read_input(&mut input)? {
        let reply = run_one(runner.as_mut(), &bytes);
        protocol::write_reply(&mut output, &reply)?;
    }
    Ok(())
}

/// Runs one input; any panic during it, caught here or elsewhere, wins over
/// the signature.
fn run_one(runner: &mut dyn Runner, input: &[u8]) -> Reply {
    take_panics();
    // What a crash leaves on stderr must not be mixed up with what earlier,
    // caught panics printed there.
    eprintln!("{INPUT_MARK}");
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| runner.run(input)));
    if let Some(first) = take_panics().into_iter().next() {
        return Reply::Panicked {
            location: first.location,
            report: first.report,
        };
    }
    match outcome {
        Ok(signature) => Reply::Finished { signature },
        // A panic whose hook did not run (a panic inside the hook itself).
        Err(_) => Reply::Panicked {
            location: "unknown".into(),
            report: "a panic the hook did not record".into(),
        },
    }
}

fn take_panics() -> Vec<PanicRecord> {
    match PANICS.lock() {
        Ok(mut panics) => std::mem::take(&mut *panics),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

fn record_panic(info: &PanicHookInfo<'_>) {
    let location = info.location().map_or_else(
        || "unknown".to_string(),
        |l| format!("{}:{}:{}", l.file(), l.line(), l.column()),
    );
    let payload = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a panic payload that is not a string)".into());
    let thread = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string();
    let report = format!(
        "thread '{thread}' panicked at {location}:\n{payload}\n\nbacktrace:\n{}",
        Backtrace::force_capture()
    );
    // The harness's own assertions (a 500 answer, an id `decode` refuses) all
    // sit on a few lines; their message says which promise broke, so it goes
    // into the key.
    let location = if location.contains("fuzz/src/") {
        let first_line = payload.lines().next().unwrap_or_default();
        format!("{location}: {}", normalize(first_line))
    } else {
        location
    };
    // Also on stderr: a panic where unwinding is impossible aborts the worker
    // right after this hook, and stderr is then all the supervisor gets.
    eprintln!("{report}");
    let record = PanicRecord { location, report };
    match PANICS.lock() {
        Ok(mut panics) => panics.push(record),
        Err(poisoned) => poisoned.into_inner().push(record),
    }
}
