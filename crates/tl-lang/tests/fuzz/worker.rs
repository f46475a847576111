//! Programs run in worker processes (this test binary started again with
//! [`WORKER_VAR`] set), so that what `catch_unwind` cannot catch (an abort, a
//! stack overflow) is still pinned on the program that caused it, and a program
//! that runs too long can be stopped. A worker is capped at [`MEMORY_CAP_KIB`] of
//! address space, so a runaway allocation fails there instead of starving the
//! machine.
//!
//! Protocol: the parent writes the cases to the worker's stdin (per case: the
//! folder, the text's length in bytes, the text); the worker answers on stdout
//! with `@@fuzz start I` before case I and `@@fuzz done I ...` after it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use super::runner::{run_caught, Outcome};

/// Set in a worker's environment; the worker test does nothing without it.
pub const WORKER_VAR: &str = "TL_NO_PANIC_WORKER";
/// The name of the test function that serves as the worker.
const WORKER_TEST: &str = "worker_process";
/// Address space a worker may map: well above what the interpreter's size
/// limits allow one tensor, well below the machine.
const MEMORY_CAP_KIB: u64 = 12 << 20;
/// The stack of the thread that runs the programs: the CLI's interpreter thread.
const STACK_BYTES: usize = 512 << 20;
const MARK: &str = "@@fuzz ";

/// One program to check and run.
pub struct Case {
    pub text: String,
    /// Where its imports resolve.
    pub dir: PathBuf,
}

/// The worker's side: runs every case read from stdin, reporting on stdout.
pub fn serve() {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .expect("read the cases");
    let cases = decode_cases(&input);
    let runner = std::thread::Builder::new()
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let mut out = std::io::stdout().lock();
            for (i, case) in cases.into_iter().enumerate() {
                writeln!(out, "{MARK}start {i}")
                    .and_then(|_| out.flush())
                    .ok();
                let line = match run_caught(&case.text, case.dir) {
                    Outcome::NotParsed => "notparsed".to_string(),
                    Outcome::Ran {
                        blocks,
                        errors,
                        internal,
                    } => {
                        for message in internal {
                            writeln!(out, "{MARK}internal {i} {}", escape(&message)).ok();
                        }
                        format!("ran {blocks} {errors}")
                    }
                    Outcome::Panicked(message) => format!("panicked {}", escape(&message)),
                    Outcome::Crashed(_) | Outcome::TimedOut => unreachable!("in-process outcome"),
                };
                writeln!(out, "{MARK}done {i} {line}")
                    .and_then(|_| out.flush())
                    .ok();
            }
        })
        .expect("spawn the runner thread");
    runner
        .join()
        .expect("the runner thread reports panics itself");
}

fn encode_cases(cases: &[Case]) -> Vec<u8> {
    let mut out = Vec::new();
    for case in cases {
        out.extend(format!("{}\n{}\n", case.dir.display(), case.text.len()).bytes());
        out.extend(case.text.bytes());
    }
    out
}

fn decode_cases(mut input: &[u8]) -> Vec<Case> {
    let mut cases = Vec::new();
    let line = |input: &mut &[u8]| -> String {
        let end = input
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(input.len());
        let text = String::from_utf8_lossy(&input[..end]).into_owned();
        *input = &input[(end + 1).min(input.len())..];
        text
    };
    while !input.is_empty() {
        let dir = PathBuf::from(line(&mut input));
        let len: usize = line(&mut input).parse().expect("a length line");
        let text = String::from_utf8_lossy(&input[..len]).into_owned();
        input = &input[len..];
        cases.push(Case { text, dir });
    }
    cases
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\\\", "\\")
}

/// The parent's side: runs every case in workers, each case stopped after
/// `limit`; a worker that dies or is stopped is replaced for the cases after.
pub fn run_all(cases: &[Case], limit: Duration) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = (0..cases.len()).map(|_| None).collect();
    let mut next = 0;
    while next < cases.len() {
        next = run_worker(cases, next, limit, &mut outcomes);
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Crashed("no report".into())))
        .collect()
}

/// Runs `cases[first..]` in one worker until it finishes, dies or is stopped;
/// returns the index of the first case it did not get to.
fn run_worker(
    cases: &[Case],
    first: usize,
    limit: Duration,
    outcomes: &mut [Option<Outcome>],
) -> usize {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_CAP_KIB}; exec \"$@\""))
        .arg("sh")
        .arg(exe)
        .args(["--exact", WORKER_TEST, "--nocapture", "--test-threads", "1"])
        .env(WORKER_VAR, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a worker process");
    let input = encode_cases(&cases[first..]);
    let mut stdin = child.stdin.take().expect("piped stdin");
    std::thread::spawn(move || stdin.write_all(&input));
    let mut stderr = child.stderr.take().expect("piped stderr");
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (sender, lines) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The first report follows libtest's "test worker_process ... ".
            if let Some(at) = line.find(MARK) {
                if sender.send(line[at + MARK.len()..].to_string()).is_err() {
                    break;
                }
            }
        }
    });
    let mut running: Option<usize> = None;
    let mut internal = Vec::new();
    let resume_at = loop {
        match lines.recv_timeout(limit) {
            Ok(report) => {
                let (kind, rest) = report.split_once(' ').unwrap_or((&report, ""));
                let (index, detail) = rest.split_once(' ').unwrap_or((rest, ""));
                let index = first + index.parse::<usize>().expect("a case index");
                match kind {
                    "start" => running = Some(index),
                    "internal" => internal.push(unescape(detail)),
                    _ => {
                        outcomes[index] =
                            Some(parse_outcome(detail, std::mem::take(&mut internal)));
                        running = None;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let stuck = running.unwrap_or(first);
                outcomes[stuck] = Some(Outcome::TimedOut);
                break stuck + 1;
            }
            Err(RecvTimeoutError::Disconnected) => match running {
                Some(index) => {
                    outcomes[index] = Some(Outcome::Crashed(String::new()));
                    break index + 1;
                }
                None => break cases.len(),
            },
        }
    };
    let _ = child.wait();
    let _ = reader.join();
    let stderr = stderr_reader.join().unwrap_or_default();
    if let Some(Some(Outcome::Crashed(message))) = outcomes.get_mut(resume_at.wrapping_sub(1)) {
        *message = crash_message(&stderr);
    }
    resume_at
}

/// The line of a dead worker's stderr that says why it died.
fn crash_message(stderr: &str) -> String {
    const WHY: &[&str] = &[
        "memory allocation of",
        "overflowed its stack",
        "fatal",
        "panicked",
    ];
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .iter()
        .find(|line| WHY.iter().any(|why| line.contains(why)))
        .or(lines.last())
        .map_or_else(
            || "killed without a word (a signal?)".into(),
            |l| l.to_string(),
        )
}

fn parse_outcome(detail: &str, internal: Vec<String>) -> Outcome {
    let (kind, rest) = detail.split_once(' ').unwrap_or((detail, ""));
    match kind {
        "notparsed" => Outcome::NotParsed,
        "panicked" => Outcome::Panicked(unescape(rest)),
        _ => {
            let mut numbers = rest.split(' ').map(|n| n.parse().unwrap_or(0));
            Outcome::Ran {
                blocks: numbers.next().unwrap_or(0),
                errors: numbers.next().unwrap_or(0),
                internal,
            }
        }
    }
}
