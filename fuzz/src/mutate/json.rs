//! Structure-aware mutations of a JSON document: a random node is replaced by
//! a value of another type, removed, duplicated or wrapped, or an object gains
//! a field the target knows. The result is valid JSON, so it reaches the
//! deserializer's type checks and the handlers behind them instead of stopping
//! at a syntax error.

use serde_json::{Map, Number, Value};

use crate::rng::Rng;

/// Deepest nesting a mutation wraps a value to; serde_json refuses 128.
const MAX_WRAP: usize = 200;

/// What a mutation may draw on and how far it may grow the document.
pub struct JsonDictionary<'a> {
    /// Field names worth adding.
    pub keys: &'a [&'a str],
    /// String values worth trying.
    pub strings: &'a [&'a str],
    /// Repetitions stop growing a value at about this many bytes.
    pub limit: usize,
}

/// Mutates `document` in place.
pub fn mutate(document: &mut Value, dictionary: &JsonDictionary<'_>, rng: &mut Rng) {
    let nodes = count_nodes(document);
    let target = rng.below(nodes);
    let mut index = 0;
    visit(document, target, &mut index, &mut |node| {
        apply(node, dictionary, rng)
    });
}

fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(fields) => fields.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Calls `f` on the `target`-th node in pre-order; true once it has.
fn visit(
    value: &mut Value,
    target: usize,
    index: &mut usize,
    f: &mut dyn FnMut(&mut Value),
) -> bool {
    if *index == target {
        f(value);
        return true;
    }
    *index += 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| visit(v, target, index, f)),
        Value::Object(fields) => fields.values_mut().any(|v| visit(v, target, index, f)),
        _ => false,
    }
}

fn apply(node: &mut Value, dictionary: &JsonDictionary<'_>, rng: &mut Rng) {
    let (keys, strings) = (dictionary.keys, dictionary.strings);
    match rng.below(7) {
        0 | 1 => *node = random_value(keys, strings, rng, 2),
        2 => add_field(node, keys, strings, rng),
        3 => remove_child(node, rng),
        4 => duplicate_child(node, dictionary.limit, rng),
        5 => wrap(node, rng),
        _ => tweak_scalar(node, strings, dictionary.limit, rng),
    }
}

fn random_value(keys: &[&str], strings: &[&str], rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => random_number(rng),
        3 | 4 => Value::String(random_string(strings, rng)),
        5 => Value::String(String::new()),
        6 => Value::Array(
            (0..rng.skewed(4))
                .map(|_| random_value(keys, strings, rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut object = Map::new();
            for _ in 0..rng.skewed(3) {
                let key = rng.pick(keys).copied().unwrap_or("x").to_string();
                object.insert(key, random_value(keys, strings, rng, depth - 1));
            }
            Value::Object(object)
        }
    }
}

fn random_number(rng: &mut Rng) -> Value {
    let number = match rng.below(6) {
        0 => Number::from(rng.skewed(1 << 20) as u64),
        1 => Number::from(-(rng.skewed(1 << 20) as i64)),
        2 => Number::from(u64::MAX),
        3 => Number::from(i64::MIN),
        4 => Number::from_f64([0.5, -0.0, 1e308, -1e-300, 2.0, 1e20][rng.below(6)])
            .unwrap_or_else(|| Number::from(0)),
        _ => Number::from(rng.below(5) as u64),
    };
    Value::Number(number)
}

fn random_string(strings: &[&str], rng: &mut Rng) -> String {
    let base = rng.pick(strings).copied().unwrap_or("x");
    if rng.one_in(8) {
        base.repeat(rng.between(2, 5000))
    } else {
        base.to_string()
    }
}

fn add_field(node: &mut Value, keys: &[&str], strings: &[&str], rng: &mut Rng) {
    match node {
        Value::Object(fields) => {
            let key = rng.pick(keys).copied().unwrap_or("x").to_string();
            fields.insert(key, random_value(keys, strings, rng, 2));
        }
        Value::Array(items) => {
            let at = rng.below(items.len() + 1);
            items.insert(at, random_value(keys, strings, rng, 2));
        }
        _ => *node = random_value(keys, strings, rng, 2),
    }
}

fn remove_child(node: &mut Value, rng: &mut Rng) {
    match node {
        Value::Object(fields) if !fields.is_empty() => {
            let key = fields.keys().nth(rng.below(fields.len())).cloned();
            if let Some(key) = key {
                fields.remove(&key);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            items.remove(rng.below(items.len()));
        }
        _ => *node = Value::Null,
    }
}

/// Repeats an array element, sometimes many times (long conversations).
fn duplicate_child(node: &mut Value, limit: usize, rng: &mut Rng) {
    if let Value::Array(items) = node {
        if let Some(item) = rng.pick(items).cloned() {
            let times = if rng.one_in(6) {
                rng.between(50, 2000)
            } else {
                1 + rng.skewed(4)
            };
            let item_bytes = serde_json::to_string(&item).map_or(1, |text| text.len());
            let times = times.min((limit / item_bytes.max(1)).max(1));
            items.extend(std::iter::repeat_n(item, times));
        }
    }
}

/// Wraps the node in arrays or objects, sometimes deeply.
fn wrap(node: &mut Value, rng: &mut Rng) {
    let depth = if rng.one_in(8) {
        rng.between(100, MAX_WRAP)
    } else {
        1
    };
    for _ in 0..depth {
        let inner = std::mem::take(node);
        *node = if rng.one_in(2) {
            Value::Array(vec![inner])
        } else {
            let mut object = Map::new();
            object.insert("content".into(), inner);
            Value::Object(object)
        };
    }
}

fn tweak_scalar(node: &mut Value, strings: &[&str], limit: usize, rng: &mut Rng) {
    match node {
        Value::String(text) => match rng.below(3) {
            0 => text.push_str(rng.pick(strings).copied().unwrap_or("")),
            1 => {
                let room = (limit / text.len().max(1)).max(1);
                *text = text.repeat(rng.between(2, 100).min(room));
            }
            _ => {
                let cut = text.char_indices().nth(rng.below(text.len() + 1));
                text.truncate(cut.map_or(text.len(), |(i, _)| i));
            }
        },
        Value::Number(_) => *node = random_number(rng),
        Value::Bool(flag) => *flag = !*flag,
        _ => *node = Value::String(random_string(strings, rng)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_stay_json() {
        let mut rng = Rng::new(9);
        let dictionary = JsonDictionary {
            keys: &["model", "messages"],
            strings: &["user", "<|im_start|>"],
            limit: 10_000,
        };
        for _ in 0..2000 {
            let mut doc: Value = serde_json::from_str(
                r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
            )
            .unwrap();
            for _ in 0..rng.between(1, 4) {
                mutate(&mut doc, &dictionary, &mut rng);
            }
            let text = serde_json::to_string(&doc).unwrap();
            assert!(text.len() < 10_000_000, "{} bytes", text.len());
        }
    }
}
