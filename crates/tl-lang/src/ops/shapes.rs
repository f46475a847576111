//! Shape arithmetic shared by the operators and the builtins: NumPy broadcasting,
//! element counts that cannot overflow, and shapes written as users read them.

use crate::error::{LangError, Result};

/// The most elements one tensor may hold. A shape typed by mistake (`[100000,
/// 100000]`) should be an error, not an allocation that aborts the process.
pub const MAX_ELEMENTS: usize = 1 << 32;

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

/// The number of elements of `shape`, refusing shapes too large to allocate.
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| {
            LangError::user(format!(
                "shape {} is too large: a tensor holds at most {MAX_ELEMENTS} elements",
                format_shape(shape)
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
    }
}
