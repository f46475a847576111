//! The CPU backend's worker threads: a persistent pool that runs one job on
//! every thread at once, for the ~200 back-to-back products of a decode step.
//!
//! How a thread waits decides both speeds that matter. Alone on the machine,
//! a job follows the last within microseconds, so a waiting thread spins
//! briefly and catches it without a wake-up (waking a sleeping thread costs
//! 10-20 µs, more than many products take). Beside another busy process, a
//! spinning thread burns the time slice that the thread it waits for needs,
//! and every step waits for the slowest thread: so after the brief spin a
//! waiting thread yields its core at each check (alone, a yield returns at
//! once), and after about a millisecond without work it sleeps.
//!
//! Beside a process whose own threads busy-wait (llama.cpp's, for one), our
//! waiting threads hand their cores to it for whole time slices, and a job
//! that needs two threads waits for whichever was descheduled: a decode step
//! then ran at 7% of its solo speed where the fair share is half. So when
//! the caller has finished its part before every worker even started it,
//! and then waits longer than [`SLOW_WAIT`] for them, [`STRIKES`] times within
//! [`STRIKE_WINDOW`] calls (one such wait alone can be a passing kernel
//! thread), the pool marks itself contended for the next [`SOLO_CALLS`]
//! calls, which [`Pool::solo_turn`] tells callers to run on the calling
//! thread alone.
//!
//! A job is a borrowed closure; `execute` returns only after every worker has
//! finished it (and re-raises a worker's panic), so the borrow outlives every
//! use. Callers are serialised; a job that calls `execute` itself runs inline.

use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::hint::spin_loop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Checks of a plain spin before a waiting thread starts yielding.
const SPINS: u32 = 64;
/// Checks with a yield before it sleeps (about a millisecond alone).
const YIELDS: u32 = 1_000;
/// The longest a sleeping thread waits before it checks again (a bound on
/// the cost of any missed wake-up, which the protocol below should prevent).
const NAP: Duration = Duration::from_millis(5);

/// A wait beyond this for workers that had not started the job when the
/// caller finished its part means one was descheduled: alone, a worker
/// starts within microseconds (spinning) or a wake-up (sleeping).
const SLOW_WAIT: Duration = Duration::from_millis(2);
/// Slow waits within [`STRIKE_WINDOW`] calls that mark the pool contended.
const STRIKES: usize = 4;
/// Calls after which the slow waits counted so far are forgotten (about a
/// decode step of a small model).
const STRIKE_WINDOW: usize = 256;
/// Calls run on the calling thread alone once contended (a few tokens of
/// decode), before the workers are tried again.
const SOLO_CALLS: usize = 2_000;

/// A job: the address of a closure on the caller's stack.
type Job = *const (dyn Fn(usize) + Sync);

/// The pool every CPU product shares, sized by the global thread count (the
/// calling thread works too, so it holds one worker fewer).
pub(crate) fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(rayon::current_num_threads().saturating_sub(1)))
}

thread_local! {
    /// Whether this thread is running a job of the pool (its own nested calls run inline).
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

pub(crate) struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Serialises callers: one job at a time.
    calls: Mutex<()>,
    /// Calls left to run on the calling thread alone (see the module doc).
    solo_calls: AtomicUsize,
    /// Slow waits counted, and calls since the count was last cleared.
    strikes: AtomicUsize,
    calls_counted: AtomicUsize,
}

struct Shared {
    /// Bumped once a new job is in `job`.
    generation: AtomicUsize,
    job: JobSlot,
    /// Workers still running the current job.
    running: AtomicUsize,
    /// Workers that have started the current job.
    started: AtomicUsize,
    /// The first panic of the current job, re-raised on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    stop: AtomicBool,
    /// Workers asleep waiting for a job, and where they sleep.
    sleepers: AtomicUsize,
    idle: Mutex<()>,
    wake: Condvar,
    /// Whether the caller sleeps waiting for the workers, and where.
    caller_sleeps: AtomicBool,
    finished_lock: Mutex<()>,
    finished: Condvar,
}

struct JobSlot(UnsafeCell<Option<Job>>);

// SAFETY: the slot is written only by the caller holding `calls`, before it
// bumps `generation`, and read by workers only after they observe that
// generation and before they decrement `running`; the caller clears it only
// after `running` reaches 0. So no read races a write. The closure it points
// to is `Sync`, so running it on any thread is sound, and the pointer itself
// may move between threads (Send).
unsafe impl Sync for JobSlot {}
// SAFETY: as above.
unsafe impl Send for JobSlot {}

impl Pool {
    fn new(workers: usize) -> Pool {
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: JobSlot(UnsafeCell::new(None)),
            running: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            panic: Mutex::new(None),
            stop: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            idle: Mutex::new(()),
            wake: Condvar::new(),
            caller_sleeps: AtomicBool::new(false),
            finished_lock: Mutex::new(()),
            finished: Condvar::new(),
        });
        // A worker that cannot be started leaves a smaller pool, not a failure.
        let threads = (0..workers)
            .map_while(|id| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("tl-cpu-{id}"))
                    .spawn(move || work(&shared, id))
                    .ok()
            })
            .collect();
        Pool {
            shared,
            threads,
            calls: Mutex::new(()),
            solo_calls: AtomicUsize::new(0),
            strikes: AtomicUsize::new(0),
            calls_counted: AtomicUsize::new(0),
        }
    }

    /// Worker threads (the caller is one more).
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Counts a call, `slow` when a worker that had not started was waited
    /// for too long (callers are serialised, so relaxed counters do).
    fn count_call(&self, slow: bool) {
        if self.calls_counted.fetch_add(1, Ordering::Relaxed) >= STRIKE_WINDOW {
            self.calls_counted.store(0, Ordering::Relaxed);
            self.strikes.store(0, Ordering::Relaxed);
        }
        if slow && self.strikes.fetch_add(1, Ordering::Relaxed) + 1 >= STRIKES {
            self.strikes.store(0, Ordering::Relaxed);
            self.solo_calls.store(SOLO_CALLS, Ordering::Relaxed);
        }
    }

    /// Whether the next call should run on the calling thread alone, because
    /// another process keeps the workers' cores (counts the call down).
    pub fn solo_turn(&self) -> bool {
        self.solo_calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }

    /// Runs `job(i)` once for every i in `0..=workers()` at the same time
    /// (`workers()` on the calling thread) and returns when all are done.
    pub fn execute(&self, job: &(dyn Fn(usize) + Sync)) {
        let workers = self.workers();
        if workers == 0 || IN_JOB.get() {
            job(workers);
            return;
        }
        let _call = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        s.running.store(workers, Ordering::Relaxed);
        s.started.store(0, Ordering::Relaxed);
        // SAFETY: only the caller holding `calls` writes the slot, and no
        // worker reads it until the generation below changes (see JobSlot);
        // `execute` does not return before every worker is done with the job.
        unsafe { *s.job.0.get() = Some(erase(job)) };
        s.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _idle = s.idle.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| run_job(job, workers)));
        let absent = s.started.load(Ordering::SeqCst) < workers;
        let waiting = Instant::now();
        wait_for(
            || s.running.load(Ordering::SeqCst) == 0,
            &s.caller_sleeps,
            &s.finished_lock,
            &s.finished,
        );
        self.count_call(absent && waiting.elapsed() > SLOW_WAIT);
        // SAFETY: every worker is done with the job (running is 0).
        unsafe { *s.job.0.get() = None };
        let theirs = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Err(payload) = mine {
            resume_unwind(payload);
        }
        if let Some(payload) = theirs {
            resume_unwind(payload);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        {
            let _idle = self.shared.idle.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `job` with its lifetime erased, for the slot.
fn erase<'a>(job: &'a (dyn Fn(usize) + Sync + 'a)) -> Job {
    let short: *const (dyn Fn(usize) + Sync + 'a) = job;
    // SAFETY: only the pointer's lifetime bound changes (same layout); the
    // pool dereferences it only while `execute`, which holds the borrow, has
    // not returned.
    unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + 'a), Job>(short) }
}

fn run_job(job: &(dyn Fn(usize) + Sync), id: usize) {
    IN_JOB.set(true);
    job(id);
    IN_JOB.set(false);
}

/// A worker: waits for each new generation and runs its job.
fn work(s: &Shared, id: usize) {
    let mut seen = 0;
    loop {
        let sleepers = &s.sleepers;
        wait_counted(
            || s.generation.load(Ordering::SeqCst) != seen,
            sleepers,
            &s.idle,
            &s.wake,
        );
        seen = s.generation.load(Ordering::Acquire);
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: the caller wrote the slot before bumping the generation we
        // saw (Acquire) and keeps the closure alive until `running` reaches 0,
        // which needs this worker's decrement below.
        let job = unsafe { *s.job.0.get() };
        s.started.fetch_add(1, Ordering::SeqCst);
        if let Some(job) = job {
            // SAFETY: as above, the closure outlives this call.
            let job = unsafe { &*job };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| run_job(job, id))) {
                let mut first = s.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(payload);
            }
        }
        if s.running.fetch_sub(1, Ordering::SeqCst) == 1 && s.caller_sleeps.load(Ordering::SeqCst) {
            let _lock = s.finished_lock.lock().unwrap_or_else(|e| e.into_inner());
            s.finished.notify_all();
        }
    }
}

/// Spins, then yields, then sleeps on `condvar` until `ready()`.
/// `sleeping` is raised while asleep so the waker knows to notify (it checks
/// after making `ready()` true, and the sleeper checks `ready()` under the
/// lock after raising it: one of the two sees the other).
fn wait_for(ready: impl Fn() -> bool, sleeping: &AtomicBool, lock: &Mutex<()>, condvar: &Condvar) {
    if spin_then_yield(&ready) {
        return;
    }
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    sleeping.store(true, Ordering::SeqCst);
    while !ready() {
        guard = match condvar.wait_timeout(guard, NAP) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
    }
    sleeping.store(false, Ordering::SeqCst);
}

/// [`wait_for`] for many waiters: `sleepers` counts those asleep.
fn wait_counted(
    ready: impl Fn() -> bool,
    sleepers: &AtomicUsize,
    lock: &Mutex<()>,
    condvar: &Condvar,
) {
    if spin_then_yield(&ready) {
        return;
    }
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    sleepers.fetch_add(1, Ordering::SeqCst);
    while !ready() {
        guard = match condvar.wait_timeout(guard, NAP) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
    }
    sleepers.fetch_sub(1, Ordering::SeqCst);
}

/// Whether `ready()` became true while spinning briefly and then yielding.
fn spin_then_yield(ready: &impl Fn() -> bool) -> bool {
    for _ in 0..SPINS {
        if ready() {
            return true;
        }
        spin_loop();
    }
    for _ in 0..YIELDS {
        if ready() {
            return true;
        }
        std::thread::yield_now();
    }
    ready()
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_thread_runs_each_job_once() {
        let pool = Pool::new(3);
        for round in 0..1000 {
            let count = AtomicUsize::new(0);
            let ids = AtomicUsize::new(0);
            pool.execute(&|id| {
                count.fetch_add(1, Ordering::Relaxed);
                ids.fetch_or(1 << id, Ordering::Relaxed);
            });
            assert_eq!(count.load(Ordering::Relaxed), 4, "round {round}");
            assert_eq!(ids.load(Ordering::Relaxed), 0b1111, "round {round}");
            if round % 100 == 0 {
                // Long enough for the workers to fall asleep.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    #[test]
    fn a_workers_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = Pool::new(2);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.execute(&|id| assert_ne!(id, 0, "worker 0 fails"));
        }));
        assert!(result.is_err());
        let count = AtomicUsize::new(0);
        pool.execute(&|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn nested_calls_run_inline() {
        let pool = Pool::new(2);
        let count = AtomicUsize::new(0);
        pool.execute(&|_| {
            pool.execute(&|_| {
                count.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(count.load(Ordering::Relaxed), 3);
    }
}
