//! The supervisor's side of a worker process: start it, send it an input, wait
//! for the reply no longer than the time limit, and when it dies or hangs,
//! say how (from its exit status and the tail of its stderr). A worker that
//! failed is gone; the next input starts a fresh one.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::protocol::{self, Reply};
use crate::targets::TargetKind;
use crate::worker::INPUT_MARK;

/// How much of a dead worker's stderr is kept for the report.
const STDERR_TAIL_BYTES: usize = 16 * 1024;
/// Setting a target up (loading vocabularies, starting the server's engine)
/// takes far longer than one input; this is generous for a slow, busy machine.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How to start workers.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub target: TargetKind,
    pub repo: PathBuf,
    pub memory_mb: u64,
    pub timeout: Duration,
}

/// What one input did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Finished { signature: String },
    Failed(Failure),
}

/// A failure: `key` says which bug it is (two inputs with one key are one
/// finding), `details` what the report shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub key: String,
    pub details: String,
}

/// Runs inputs in a worker, starting a new one whenever the last has died.
pub struct Workers {
    config: WorkerConfig,
    current: Option<Worker>,
    /// Worker processes started (one more after each that died).
    pub started: u64,
    /// Inputs run.
    pub runs: u64,
}

impl Workers {
    pub fn new(config: WorkerConfig) -> Self {
        Self {
            config,
            current: None,
            started: 0,
            runs: 0,
        }
    }

    pub fn run(&mut self, input: &[u8]) -> anyhow::Result<Verdict> {
        self.runs += 1;
        let worker = match &mut self.current {
            Some(worker) => worker,
            slot @ None => {
                self.started += 1;
                slot.insert(Worker::start(&self.config)?)
            }
        };
        let verdict = worker.run(input, self.config.timeout);
        if worker.is_dead() {
            self.current = None;
        }
        Ok(verdict)
    }
}

/// One live worker process.
struct Worker {
    process: Child,
    stdin: Option<ChildStdin>,
    replies: Receiver<std::io::Result<Reply>>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    stderr_reader: Option<JoinHandle<()>>,
    dead: bool,
}

impl Worker {
    fn start(config: &WorkerConfig) -> anyhow::Result<Worker> {
        let exe = std::env::current_exe().context("finding tl-fuzz's own executable")?;
        let mut process = Command::new(exe)
            .arg(config.target.name())
            .arg("--worker")
            .arg("--repo")
            .arg(&config.repo)
            .arg("--memory-mb")
            .arg(config.memory_mb.to_string())
            // Each thread's malloc arena reserves address space; a few arenas
            // keep the capped worker from running out of it for no reason.
            .env("MALLOC_ARENA_MAX", "2")
            // No backtraces inside error values (candle captures one per
            // error when RUST_BACKTRACE is set: slow, and noise in the
            // signatures); panics and failed allocations still print theirs.
            .env("RUST_LIB_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting a worker process")?;
        let stdout = process.stdout.take().context("worker stdout")?;
        let stderr = process.stderr.take().context("worker stderr")?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut worker = Worker {
            stdin: process.stdin.take(),
            process,
            replies: spawn_reply_reader(stdout),
            stderr_reader: Some(spawn_stderr_reader(stderr, stderr_tail.clone())),
            stderr_tail,
            dead: false,
        };
        match worker.replies.recv_timeout(SETUP_TIMEOUT) {
            Ok(Ok(Reply::Ready)) => Ok(worker),
            other => {
                worker.kill();
                bail!(
                    "the worker for {} did not start ({other:?}); its stderr:\n{}",
                    config.target.name(),
                    worker.stderr_text()
                )
            }
        }
    }

    fn is_dead(&self) -> bool {
        self.dead
    }

    fn run(&mut self, input: &[u8], timeout: Duration) -> Verdict {
        let sent = match &mut self.stdin {
            Some(stdin) => protocol::write_input(stdin, input).is_ok(),
            None => false,
        };
        if !sent {
            return self.died();
        }
        match self.replies.recv_timeout(timeout) {
            Ok(Ok(Reply::Finished { signature })) => Verdict::Finished { signature },
            Ok(Ok(Reply::Panicked { location, report })) => Verdict::Failed(Failure {
                key: format!("panic at {location}"),
                details: report,
            }),
            Ok(Ok(Reply::Ready)) => self.protocol_error("a second Ready"),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => self.died(),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Verdict::Failed(Failure {
                    key: "timeout".into(),
                    details: format!("no answer within {} ms", timeout.as_millis()),
                })
            }
        }
    }

    fn protocol_error(&mut self, what: &str) -> Verdict {
        self.kill();
        Verdict::Failed(Failure {
            key: "worker protocol error".into(),
            details: format!("the worker sent {what}"),
        })
    }

    /// The worker closed its pipe: collect the exit status and say why.
    fn died(&mut self) -> Verdict {
        self.dead = true;
        self.stdin = None;
        let status = self.process.wait();
        if let Some(reader) = self.stderr_reader.take() {
            let _ = reader.join();
        }
        let all = self.stderr_text();
        let stderr = all
            .rsplit_once(INPUT_MARK)
            .map_or(all.as_str(), |(_, last)| last.trim_start());
        let key = match status {
            Ok(status) => classify_death(status, stderr),
            Err(e) => format!("worker lost ({e})"),
        };
        Verdict::Failed(Failure {
            key,
            details: format!("worker stderr (last {STDERR_TAIL_BYTES} bytes):\n{stderr}"),
        })
    }

    fn kill(&mut self) {
        self.dead = true;
        self.stdin = None;
        let _ = self.process.kill();
        let _ = self.process.wait();
    }

    fn stderr_text(&self) -> String {
        let tail = match self.stderr_tail.lock() {
            Ok(tail) => tail.iter().copied().collect::<Vec<u8>>(),
            Err(poisoned) => poisoned.into_inner().iter().copied().collect(),
        };
        String::from_utf8_lossy(&tail).into_owned()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.dead {
            // Closing stdin ends a healthy worker; kill covers a stuck one.
            self.stdin = None;
            let _ = self.process.kill();
            let _ = self.process.wait();
        }
    }
}

/// Names what ended a worker; the names are the failure keys, so one bug
/// gives one finding however often it is hit.
fn classify_death(status: ExitStatus, stderr: &str) -> String {
    if stderr.contains("has overflowed its stack") {
        return "stack overflow".into();
    }
    // "memory allocation of N bytes failed": N varies with the input, so it
    // stays out of the key.
    if stderr.contains("memory allocation of") {
        return "out of memory (allocation failed)".into();
    }
    // A panic where unwinding is impossible (a failed precondition of an
    // unsafe function, a panic in a destructor during unwinding): the hook
    // printed where, then the process aborted.
    if let Some(location) = last_panic_location(stderr) {
        return format!("abort after panic at {location}");
    }
    match (status.signal(), status.code()) {
        (Some(libc::SIGKILL), _) => "killed (SIGKILL: out of memory?)".into(),
        (Some(signal), _) => format!("crash (signal {signal})"),
        (None, Some(code)) => format!("worker exited with code {code}"),
        (None, None) => "worker ended".into(),
    }
}

/// `LOCATION` from the last "thread 'NAME' panicked at LOCATION:" line.
fn last_panic_location(stderr: &str) -> Option<&str> {
    stderr.lines().rev().find_map(|line| {
        let (_, rest) = line.split_once("' panicked at ")?;
        Some(rest.strip_suffix(':').unwrap_or(rest))
    })
}

fn spawn_reply_reader(stdout: impl Read + Send + 'static) -> Receiver<std::io::Result<Reply>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        loop {
            let reply = protocol::read_reply(&mut stdout);
            let failed = reply.is_err();
            if sender.send(reply).is_err() || failed {
                return;
            }
        }
    });
    receiver
}

/// Keeps the last bytes of the worker's stderr (Rust's abort messages land
/// there) without ever letting the pipe fill up.
fn spawn_stderr_reader(
    mut stderr: impl Read + Send + 'static,
    tail: Arc<Mutex<VecDeque<u8>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 {
                return;
            }
            let Ok(mut tail) = tail.lock() else { return };
            tail.extend(&buffer[..n]);
            let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
            tail.drain(..excess);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::last_panic_location;

    #[test]
    fn panic_locations_are_read_from_stderr() {
        let stderr = "noise\nthread 'fuzz-gguf' panicked at /x/ggml_file.rs:128:25:\nunsafe precondition(s) violated\n";
        assert_eq!(last_panic_location(stderr), Some("/x/ggml_file.rs:128:25"));
        assert_eq!(last_panic_location("fatal runtime error"), None);
    }
}
