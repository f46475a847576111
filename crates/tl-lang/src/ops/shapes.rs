//! Shape arithmetic shared by the operators and the builtins: NumPy broadcasting,
//! element counts that cannot overflow, and shapes written as users read them.

use crate::error::{LangError, Result};

/// The most elements a tensor the program asks for may hold (4 GiB of float32).
/// A shape typed by mistake (`[100000, 100000]`) should be an error, not an
/// allocation that aborts the process or exhausts the machine.
pub const MAX_ELEMENTS: usize = 1 << 30;

/// The shape two shapes broadcast to under NumPy's rules (aligned at the last
/// dimension, sizes equal or one of them 1), or `None` if they do not.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let padded = |s: &[usize], i: usize| {
        let pad = rank - s.len();
        if i < pad {
            1
        } else {
            s[i - pad]
        }
    };
    (0..rank)
        .map(|i| match (padded(a, i), padded(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Whether `from` broadcasts to exactly `to` (the target is not changed).
pub fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    broadcast_shapes(from, to).is_some_and(|s| s == to)
}

/// The most items one list may hold (16 Mi, 384 MiB of values) and the most
/// bytes one string may hold (256 MiB): repetition, concatenation and ranges
/// stop there. Bulk data belongs in tensors.
pub const MAX_LIST_ITEMS: usize = 1 << 24;
pub const MAX_STRING_BYTES: usize = 1 << 28;

/// The most dimensions a tensor may have: candle's elementwise kernels walk at
/// most this many (and panic past it).
pub const MAX_RANK: usize = candle_core::nditer::MAX_DIMS;

/// The number of elements of `shape`, refusing shapes too large to allocate
/// and shapes of more than [`MAX_RANK`] dimensions. A size 0 does not make the
/// other sizes free: the strides of `[0, 2^40, 2^40]` are products of them
/// too, and would overflow.
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    if shape.len() > MAX_RANK {
        return Err(LangError::user(format!(
            "shape {} has {} dimensions: a tensor has at most {MAX_RANK}",
            format_shape(shape),
            shape.len()
        )));
    }
    let spanned = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d.max(1)))
        .filter(|&n| n <= MAX_ELEMENTS);
    match spanned {
        Some(_) => {
            let count: usize = shape.iter().product();
            // The element type is not known here: 4 bytes (float32, the common
            // case) stands for it, so that a result too large for the process
            // is an error rather than an abort when it is allocated.
            tl_engine::memory::check_allocation("a tensor", count as u64 * 4)
                .map_err(|e| LangError::user(e.to_string()))?;
            Ok(count)
        }
        None => Err(LangError::user(format!(
            "shape {} is too large: a tensor holds at most {MAX_ELEMENTS} elements",
            format_shape(shape)
        ))),
    }
}

/// `len` if a list may hold that many items (`u128`, so that computing it
/// cannot overflow).
pub fn checked_list_len(len: u128) -> Result<usize> {
    usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_LIST_ITEMS)
        .ok_or_else(|| {
            LangError::user(format!(
                "a list of {len} items is too long: a list holds at most {MAX_LIST_ITEMS}"
            ))
        })
}

/// `len` if a string may hold that many bytes.
pub fn checked_string_len(len: u128) -> Result<usize> {
    usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_STRING_BYTES)
        .ok_or_else(|| {
            LangError::user(format!(
                "a string of {len} bytes is too long: a string holds at most {MAX_STRING_BYTES}"
            ))
        })
}

/// `[2, 3]`, as shapes are written in the language.
pub fn format_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shapes(&[2, 1], &[1, 4]), Some(vec![2, 4]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[2, 3], &[4]), None);
        assert!(broadcasts_to(&[3], &[2, 3]));
        assert!(!broadcasts_to(&[2, 3], &[3]));
    }

    #[test]
    fn element_counts_refuse_overflow() {
        assert_eq!(checked_numel(&[2, 3]).ok(), Some(6));
        assert_eq!(checked_numel(&[]).ok(), Some(1));
        assert!(checked_numel(&[usize::MAX, 2]).is_err());
        assert!(checked_numel(&[1 << 20, 1 << 20]).is_err());
        assert!(checked_numel(&[1 << 31]).is_err());
    }

    #[test]
    fn ranks_stop_where_the_kernels_do() {
        assert_eq!(checked_numel(&[1; MAX_RANK]).ok(), Some(1));
        let error = checked_numel(&[1; MAX_RANK + 1]).err().map(|e| e.message);
        assert!(error.is_some_and(|m| m.contains("at most 8")));
    }

    #[test]
    fn a_zero_size_does_not_excuse_huge_sizes() {
        assert_eq!(checked_numel(&[0, 1 << 20]).ok(), Some(0));
        assert!(checked_numel(&[usize::MAX, usize::MAX, 0]).is_err());
        assert!(checked_numel(&[0, 1 << 31]).is_err());
    }

    #[test]
    fn lists_and_strings_have_limits() {
        assert_eq!(checked_list_len(3).ok(), Some(3));
        assert!(checked_list_len(MAX_LIST_ITEMS as u128 + 1).is_err());
        assert!(checked_list_len(u128::MAX).is_err());
        assert_eq!(checked_string_len(0).ok(), Some(0));
        assert!(checked_string_len(1 << 40).is_err());
    }
}
