//! Shrinking a failing input: chunks are cut out, halves first and then ever
//! smaller pieces down to single bytes, and a cut is kept when the input
//! still fails the same way (the same key). Greedy, so the result is small
//! rather than smallest; the time budget bounds it, since a hang costs the
//! whole time limit per try.

use std::time::Instant;

use tl_gguf::{Array, Value};

use crate::child::{Verdict, Workers};
use crate::mutate::gguf::GgufParts;
use crate::mutate::gguf_values::with_strings;

/// The smallest input found before `deadline` that fails with `key`.
pub fn minimize(
    input: &[u8],
    key: &str,
    workers: &mut Workers,
    deadline: Instant,
) -> anyhow::Result<Vec<u8>> {
    let mut best = input.to_vec();
    let mut chunk = best.len().div_ceil(2);
    while chunk >= 1 && Instant::now() < deadline {
        let mut cut_any = false;
        let mut at = 0;
        while at < best.len() && Instant::now() < deadline {
            let end = (at + chunk).min(best.len());
            let mut candidate = best[..at].to_vec();
            candidate.extend_from_slice(&best[end..]);
            if fails_the_same(&candidate, key, workers)? {
                best = candidate;
                cut_any = true;
            } else {
                at += chunk;
            }
        }
        if !cut_any {
            chunk /= 2;
        }
    }
    Ok(best)
}

fn fails_the_same(candidate: &[u8], key: &str, workers: &mut Workers) -> anyhow::Result<bool> {
    Ok(matches!(workers.run(candidate)?, Verdict::Failed(failure) if failure.key == key))
}

/// Shrinks a failing GGUF input through its structure, since cutting bytes
/// out of a GGUF file breaks its framing long before it gets small: entries
/// and tensors are removed, arrays and strings halved, while the input still
/// fails with `key`. Works from the parts the input was written from, so
/// the failing bytes are never parsed here (the reader might be what fails).
pub fn minimize_gguf(
    parts: GgufParts,
    key: &str,
    workers: &mut Workers,
    deadline: Instant,
) -> anyhow::Result<Option<Vec<u8>>> {
    let mut best = parts;
    let mut best_bytes = None;
    'shrinking: while Instant::now() < deadline {
        for candidate in reductions(&best) {
            if Instant::now() >= deadline {
                break 'shrinking;
            }
            let Some(bytes) = candidate.to_bytes() else {
                continue;
            };
            if fails_the_same(&bytes, key, workers)? {
                best = candidate;
                best_bytes = Some(bytes);
                continue 'shrinking;
            }
        }
        break;
    }
    Ok(best_bytes)
}

/// Every one-step reduction of `parts`, biggest first.
fn reductions(parts: &GgufParts) -> Vec<GgufParts> {
    let mut out = Vec::new();
    for at in 0..parts.metadata.len() {
        let mut fewer = parts.clone();
        fewer.metadata.remove(at);
        out.push(fewer);
    }
    for at in 0..parts.tensors.len() {
        let mut fewer = parts.clone();
        fewer.tensors.remove(at);
        out.push(fewer);
    }
    for at in 0..parts.metadata.len() {
        let mut halved = parts.clone();
        if halve(&mut halved.metadata[at].1) {
            out.push(halved);
        }
    }
    out
}

/// Cuts an array or string value to its first half; false when too short.
fn halve(value: &mut Value) -> bool {
    match value {
        Value::String(text) if text.chars().count() > 1 => {
            let keep = text.chars().count() / 2;
            *text = text.chars().take(keep).collect();
            true
        }
        Value::Array(Array::String(items)) if items.len() > 1 => {
            with_strings(items, |items| items.truncate(items.len() / 2));
            true
        }
        Value::Array(Array::F32(items)) if items.len() > 1 => {
            items.truncate(items.len() / 2);
            true
        }
        Value::Array(Array::I32(items)) if items.len() > 1 => {
            items.truncate(items.len() / 2);
            true
        }
        _ => false,
    }
}
