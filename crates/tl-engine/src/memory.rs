//! Host memory: what a model and its caches will take, compared with what the
//! machine has before anything is allocated, and the large buffers allocated
//! fallibly, so that a context or a model too large for the machine is an error
//! instead of an abort (`memory allocation failed`) or the OOM killer.
//!
//! Linux overcommits: a huge allocation usually succeeds and the process dies
//! later, when the pages are touched. So a failed `try_reserve` alone is not
//! enough, and sizes above [`CHECKED_ALLOCATION_BYTES`] are first compared with
//! the memory available (`MemAvailable` of `/proc/meminfo`, which counts the
//! page cache the kernel can give back). Where that is unknown (another OS),
//! only the fallible allocation stands.

use crate::error::{Error, Result};

/// Allocations at least this large are compared with the available memory
/// first; smaller ones cost a read of `/proc/meminfo` more than they risk.
pub const CHECKED_ALLOCATION_BYTES: u64 = 64 << 20;

/// Bytes of memory the machine can give now without swapping, if known.
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_available(&meminfo)
}

/// `MemAvailable` (in kB in the file) from the text of `/proc/meminfo`.
fn parse_available(meminfo: &str) -> Option<u64> {
    parse_kilobytes(meminfo, "MemAvailable:")
}

/// Errors unless `parts` (what needs the memory, and how many bytes) fit in
/// the memory available. `purpose` starts the message ("loading the model").
pub fn check_available(purpose: &str, parts: &[(&str, u64)]) -> Result<()> {
    let total = parts
        .iter()
        .try_fold(0u64, |sum, &(_, bytes)| sum.checked_add(bytes));
    let listing = || {
        parts
            .iter()
            .map(|&(what, bytes)| format!("{} for {what}", format_bytes(bytes)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(total) = total else {
        return Err(Error::Memory(format!(
            "{purpose} needs more bytes than a 64-bit size holds ({})",
            listing()
        )));
    };
    match available_bytes() {
        Some(available) if total > available => Err(Error::Memory(format!(
            "{purpose} needs {} ({}), but only {} is available",
            format_bytes(total),
            listing(),
            format_bytes(available)
        ))),
        _ => Ok(()),
    }
}

/// Errors unless `bytes` for `what` can be allocated now. Large sizes are
/// compared with the available memory and then reserved and released: the
/// reservation is what fails under an address-space limit (`ulimit -v`), where
/// the machine's available memory still looks ample and the allocation that
/// follows would abort the process.
pub fn check_allocation(what: &str, bytes: u64) -> Result<()> {
    if bytes < CHECKED_ALLOCATION_BYTES {
        return Ok(());
    }
    check_available(&format!("allocating {what}"), &[(what, bytes)])?;
    let cannot = || {
        Error::Memory(format!(
            "cannot allocate {} for {what}",
            format_bytes(bytes)
        ))
    };
    let len = usize::try_from(bytes).map_err(|_| cannot())?;
    Vec::<u8>::new()
        .try_reserve_exact(len)
        .map_err(|_| cannot())
}

/// Bytes of memory this process holds resident (`VmRSS` of
/// `/proc/self/status`), if known.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kilobytes(&status, "VmRSS:")
}

/// A `Name:   123 kB` line of a /proc file, in bytes.
fn parse_kilobytes(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kilobytes.checked_mul(1024)
}

/// A vector of `len` copies of `value`, or an error naming `what` when the
/// memory is not there (checked first for large sizes, see the module doc).
pub fn filled_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut values = reserved_vec(len, what)?;
    values.resize(len, value);
    Ok(values)
}

/// An empty vector with room for `len` values, or an error naming `what` when
/// the memory is not there (checked first for large sizes).
pub fn reserved_vec<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = (len as u64)
        .checked_mul(size_of::<T>() as u64)
        .ok_or_else(|| Error::Memory(format!("a {what} of {len} values is too large")))?;
    if bytes >= CHECKED_ALLOCATION_BYTES {
        check_available(&format!("allocating the {what}"), &[(what, bytes)])?;
    }
    let mut values = Vec::new();
    values.try_reserve_exact(len).map_err(|_| {
        Error::Memory(format!(
            "cannot allocate {} for the {what}",
            format_bytes(bytes)
        ))
    })?;
    Ok(values)
}

/// `bytes` for people: `1.5 GB`, `12.0 MB`, `512 bytes`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (unit, size) in UNITS {
        if bytes as f64 >= size {
            return format!("{:.1} {unit}", bytes as f64 / size);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mem_available_in_kilobytes() {
        let meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000 kB\n";
        assert_eq!(parse_available(meminfo), Some(2_048_000));
        assert_eq!(parse_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        let error = filled_vec(usize::MAX / 2, 0u32, "test buffer").err();
        assert!(matches!(error, Some(Error::Memory(_))), "{error:?}");
        let error = check_available("loading", &[("a", u64::MAX), ("b", 1)]).err();
        assert!(matches!(error, Some(Error::Memory(_))), "{error:?}");
    }

    #[test]
    fn impossible_allocations_are_refused_before_they_abort() {
        assert!(check_allocation("a test buffer", 1 << 20).is_ok());
        let error = check_allocation("a test buffer", u64::MAX / 2).err();
        assert!(matches!(error, Some(Error::Memory(_))), "{error:?}");
        assert!(resident_bytes().is_none_or(|b| b > 0));
    }

    #[test]
    fn small_buffers_are_filled() -> Result<()> {
        assert_eq!(filled_vec(3, 1.5f32, "test buffer")?, vec![1.5; 3]);
        Ok(())
    }

    #[test]
    fn sizes_read_in_units() {
        assert_eq!(format_bytes(512), "512 bytes");
        assert_eq!(format_bytes(2_300_000_000_000), "2.3 TB");
    }
}
