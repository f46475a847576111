//! Address-space caps (`setrlimit(RLIMIT_AS)`): a runaway allocation fails
//! in the process that makes it (Rust aborts with "memory allocation of N
//! bytes failed") instead of making the shared machine swap or the kernel
//! kill something else.

use std::io;

use anyhow::Context;

/// The supervisor's own cap: its corpus and mutants stay far below it, so
/// reaching it means a bug in the fuzzer, which must not take the machine
/// down with it.
pub const SUPERVISOR_MEMORY_MB: u64 = 4096;

/// Caps this process's address space at `megabytes` (a worker also inherits
/// its supervisor's cap, and may only lower it).
pub fn cap_address_space(megabytes: u64) -> anyhow::Result<()> {
    let bytes = megabytes.saturating_mul(1 << 20) as libc::rlim_t;
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: `setrlimit` reads the struct we pass by pointer and nothing else;
    // the struct lives across the call.
    let status = unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
    if status != 0 {
        return Err(io::Error::last_os_error()).context("setrlimit(RLIMIT_AS)");
    }
    Ok(())
}
