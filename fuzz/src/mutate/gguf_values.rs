//! Metadata values for GGUF mutations: random values of every type (arrays
//! nested to the depth the reader allows and one level past it), edits that
//! keep a value's type (a count off by one, an edge integer, a longer string,
//! an array cut short or grown), and edits that know what a tokenizer's arrays
//! hold (a merge of two real tokens, a token that duplicates another).

use tl_gguf::{Array, StringArray, Value};

use crate::rng::Rng;

/// Runs `edit` on `items` as a `Vec<String>` (what the edits want to index
/// and grow) and stores the result back in the reader's compact form.
pub fn with_strings<R>(items: &mut StringArray, edit: impl FnOnce(&mut Vec<String>) -> R) -> R {
    let mut strings: Vec<String> = items.iter().map(str::to_owned).collect();
    let result = edit(&mut strings);
    *items = strings.iter().collect();
    result
}

/// Integers at the edges, cast (wrapping) to whatever width is needed.
const EDGE_INTEGERS: &[i128] = &[
    0,
    1,
    -1,
    2,
    3,
    4,
    8,
    31,
    32,
    33,
    64,
    127,
    128,
    255,
    256,
    1023,
    1024,
    4096,
    32767,
    32768,
    65535,
    65536,
    1 << 20,
    i32::MAX as i128,
    i32::MIN as i128,
    u32::MAX as i128,
    1 << 32,
    1 << 40,
    i64::MAX as i128,
    i64::MIN as i128,
    u64::MAX as i128,
];

const EDGE_FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    1e-6,
    1e-30,
    10000.0,
    1e30,
    1e300,
    f64::MIN_POSITIVE,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// Arrays nested one level deeper than the reader accepts (4), to test that
/// limit.
const MAX_NESTING: usize = 5;

pub fn edge_integer(rng: &mut Rng) -> i128 {
    if rng.one_in(4) {
        return rng.skewed(1 << 16) as i128 - 8;
    }
    EDGE_INTEGERS[rng.below(EDGE_INTEGERS.len())]
}

fn edge_float(rng: &mut Rng) -> f64 {
    EDGE_FLOATS[rng.below(EDGE_FLOATS.len())]
}

/// A string from `strings`, sometimes repeated (up to some 100 KB) or cut.
pub fn random_string(strings: &[&str], rng: &mut Rng) -> String {
    if rng.one_in(8) {
        let base = rng.pick(strings).copied().unwrap_or("");
        return base.repeat(rng.between(2, 2000));
    }
    short_string(strings, rng)
}

/// A string from `strings`, or a piece of one, or nothing: what array
/// elements get, so that an array of them stays small.
fn short_string(strings: &[&str], rng: &mut Rng) -> String {
    let base = rng.pick(strings).copied().unwrap_or("");
    match rng.below(6) {
        0 => String::new(),
        1 => base.chars().take(rng.below(base.len() + 1)).collect(),
        _ => base.to_string(),
    }
}

/// A value of a random type; arrays nest at most `depth` more levels.
pub fn random_value(strings: &[&str], rng: &mut Rng, depth: usize) -> Value {
    let n = edge_integer(rng);
    match rng.below(13) {
        0 => Value::U8(n as u8),
        1 => Value::I8(n as i8),
        2 => Value::U16(n as u16),
        3 => Value::I16(n as i16),
        4 => Value::U32(n as u32),
        5 => Value::I32(n as i32),
        6 => Value::F32(edge_float(rng) as f32),
        7 => Value::Bool(rng.one_in(2)),
        8 | 9 => Value::String(random_string(strings, rng)),
        10 => Value::U64(n as u64),
        11 => Value::I64(n as i64),
        _ if depth > 0 => Value::Array(random_array(strings, rng, depth - 1)),
        _ => Value::F64(edge_float(rng)),
    }
}

/// An array of a random element type and (mostly small) length. Nested
/// arrays have at most two children a level, so even the deepest stays
/// small: sizes multiply down the levels.
pub fn random_array(strings: &[&str], rng: &mut Rng, depth: usize) -> Array {
    let len = rng.skewed(64);
    let kind = rng.below(11);
    let ints: Vec<i128> = (0..len).map(|_| edge_integer(rng)).collect();
    match kind {
        0 => Array::U8(ints.into_iter().map(|n| n as u8).collect()),
        1 => Array::I32(ints.into_iter().map(|n| n as i32).collect()),
        2 => Array::U32(ints.into_iter().map(|n| n as u32).collect()),
        3 => Array::I64(ints.into_iter().map(|n| n as i64).collect()),
        4 => Array::U64(ints.into_iter().map(|n| n as u64).collect()),
        5 => Array::F32((0..len).map(|_| edge_float(rng) as f32).collect()),
        6 => Array::F64((0..len).map(|_| edge_float(rng)).collect()),
        7 => Array::Bool((0..len).map(|_| rng.one_in(2)).collect()),
        8 if depth > 0 && depth <= MAX_NESTING => Array::Array(
            (0..len.min(2))
                .map(|_| random_array(strings, rng, depth - 1))
                .collect(),
        ),
        _ => Array::String((0..len).map(|_| short_string(strings, rng)).collect()),
    }
}

/// Changes a value, mostly keeping its type.
pub fn tweak_value(value: &mut Value, strings: &[&str], rng: &mut Rng) {
    if rng.one_in(5) {
        *value = random_value(strings, rng, MAX_NESTING);
        return;
    }
    let n = edge_integer(rng);
    match value {
        Value::U8(v) => *v = n as u8,
        Value::I8(v) => *v = n as i8,
        Value::U16(v) => *v = n as u16,
        Value::I16(v) => *v = n as i16,
        Value::U32(v) => *v = n as u32,
        Value::I32(v) => *v = n as i32,
        Value::U64(v) => *v = n as u64,
        Value::I64(v) => *v = n as i64,
        Value::F32(v) => *v = edge_float(rng) as f32,
        Value::F64(v) => *v = edge_float(rng),
        Value::Bool(v) => *v = !*v,
        Value::String(s) => *s = random_string(strings, rng),
        Value::Array(array) => tweak_array(array, strings, rng),
    }
}

/// Cuts, grows, empties or edits one element of an array.
pub fn tweak_array(array: &mut Array, strings: &[&str], rng: &mut Rng) {
    match rng.below(5) {
        0 => {
            let keep = rng.below(array.len() + 1);
            truncate(array, keep);
        }
        1 => grow(array, rng),
        2 => truncate(array, 0),
        _ => tweak_element(array, strings, rng),
    }
}

fn truncate(array: &mut Array, len: usize) {
    match array {
        Array::U8(v) => v.truncate(len),
        Array::I8(v) => v.truncate(len),
        Array::U16(v) => v.truncate(len),
        Array::I16(v) => v.truncate(len),
        Array::U32(v) => v.truncate(len),
        Array::I32(v) => v.truncate(len),
        Array::F32(v) => v.truncate(len),
        Array::Bool(v) => v.truncate(len),
        Array::String(v) => with_strings(v, |v| v.truncate(len)),
        Array::Array(v) => v.truncate(len),
        Array::U64(v) => v.truncate(len),
        Array::I64(v) => v.truncate(len),
        Array::F64(v) => v.truncate(len),
    }
}

/// Appends copies of an element (or a default one to an empty array).
fn grow(array: &mut Array, rng: &mut Rng) {
    // A few copies of a string that may be 100 KB long: megabytes at most.
    let times = 1 + rng.skewed(64);
    fn extend<T: Clone + Default>(v: &mut Vec<T>, at: usize, times: usize) {
        let item = v.get(at).cloned().unwrap_or_default();
        v.extend(std::iter::repeat_n(item, times));
    }
    let at = rng.below(array.len());
    match array {
        Array::U8(v) => extend(v, at, times),
        Array::I8(v) => extend(v, at, times),
        Array::U16(v) => extend(v, at, times),
        Array::I16(v) => extend(v, at, times),
        Array::U32(v) => extend(v, at, times),
        Array::I32(v) => extend(v, at, times),
        Array::F32(v) => extend(v, at, times),
        Array::Bool(v) => extend(v, at, times),
        Array::String(v) => with_strings(v, |v| extend(v, at, times)),
        Array::U64(v) => extend(v, at, times),
        Array::I64(v) => extend(v, at, times),
        Array::F64(v) => extend(v, at, times),
        Array::Array(v) => {
            if let Some(item) = v.get(at).cloned() {
                v.extend(std::iter::repeat_n(item, times.min(2)));
            }
        }
    }
}

fn tweak_element(array: &mut Array, strings: &[&str], rng: &mut Rng) {
    if array.is_empty() {
        return;
    }
    let at = rng.below(array.len());
    let n = edge_integer(rng);
    match array {
        Array::U8(v) => v[at] = n as u8,
        Array::I8(v) => v[at] = n as i8,
        Array::U16(v) => v[at] = n as u16,
        Array::I16(v) => v[at] = n as i16,
        Array::U32(v) => v[at] = n as u32,
        Array::I32(v) => v[at] = n as i32,
        Array::U64(v) => v[at] = n as u64,
        Array::I64(v) => v[at] = n as i64,
        Array::F32(v) => v[at] = edge_float(rng) as f32,
        Array::F64(v) => v[at] = edge_float(rng),
        Array::Bool(v) => v[at] = !v[at],
        Array::String(v) => with_strings(v, |v| v[at] = random_string(strings, rng)),
        Array::Array(v) => tweak_array(&mut v[at], strings, rng),
    }
}

/// Edits that know what a tokenizer's keys hold; `false` when `key` is not
/// one of them, so the caller falls back to a generic edit.
pub fn tweak_tokenizer_value(
    key: &str,
    value: &mut Value,
    tokens: &[String],
    strings: &[&str],
    rng: &mut Rng,
) -> bool {
    match (key, value) {
        ("tokenizer.ggml.tokens", Value::Array(Array::String(items))) if !items.is_empty() => {
            with_strings(items, |items| {
                let at = rng.below(items.len());
                items[at] = match rng.below(3) {
                    // A duplicate: the loader must refuse it, not mix the two up.
                    0 => items[rng.below(items.len())].clone(),
                    _ => random_string(strings, rng),
                };
            });
            true
        }
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(items))) if !items.is_empty() => {
            let at = rng.below(items.len());
            items[at] = if rng.one_in(4) {
                edge_integer(rng) as i32
            } else {
                rng.below(8) as i32
            };
            true
        }
        ("tokenizer.ggml.merges", Value::Array(Array::String(items))) => {
            with_strings(items, |items| tweak_merges(items, tokens, strings, rng));
            true
        }
        (key, value) if key.starts_with("tokenizer.ggml.") && key.ends_with("_token_id") => {
            let id = match rng.below(4) {
                0 => tokens.len() as i128,
                1 => -1,
                2 => edge_integer(rng),
                _ => rng.below(tokens.len().max(1)) as i128,
            };
            *value = match rng.below(3) {
                0 => Value::I32(id as i32),
                1 => Value::U64(id as u64),
                _ => Value::U32(id as u32),
            };
            true
        }
        _ => false,
    }
}

/// Adds a merge of two real tokens (the pair may or may not make a token),
/// a malformed line, or drops or reorders merges.
fn tweak_merges(merges: &mut Vec<String>, tokens: &[String], strings: &[&str], rng: &mut Rng) {
    let kind = rng.below(5);
    let picked: Vec<String> = (0..3)
        .map(|_| rng.pick(tokens).cloned().unwrap_or_default())
        .collect();
    let line = match kind {
        0 | 1 => format!("{} {}", picked[0], picked[1]),
        2 => picked[0].clone(),
        3 => picked.join(" "),
        _ => random_string(strings, rng),
    };
    if rng.one_in(4) && !merges.is_empty() {
        let (a, b) = (rng.below(merges.len()), rng.below(merges.len()));
        merges.swap(a, b);
    } else if rng.one_in(4) && !merges.is_empty() {
        merges.remove(rng.below(merges.len()));
    } else {
        let at = rng.below(merges.len() + 1);
        merges.insert(at, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tweaks_do_not_panic() {
        let mut rng = Rng::new(11);
        let strings = ["a", "<s>", "▁"];
        let tokens: Vec<String> = ["a", "b", "ab"].iter().map(|s| s.to_string()).collect();
        for _ in 0..3000 {
            let mut value = random_value(&strings, &mut rng, 3);
            tweak_value(&mut value, &strings, &mut rng);
            let mut merges = Value::Array(Array::String(["a b"].into_iter().collect()));
            tweak_tokenizer_value(
                "tokenizer.ggml.merges",
                &mut merges,
                &tokens,
                &strings,
                &mut rng,
            );
            let mut empty: Vec<String> = Vec::new();
            tweak_merges(&mut empty, &[], &strings, &mut rng);
        }
    }
}
