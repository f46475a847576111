//! Methods of lists (`push`, `pop`, `insert`, `extend`, `contains`, `join`) and
//! strings (`split`, `lines`, `trim`, `lower`, `upper`, `contains`,
//! `starts_with`, `ends_with`, `replace`).

use super::methods::expect_args;
use super::Args;
use crate::error::{LangError, Result};
use crate::ops::shapes::checked_string_len;
use crate::value::Value;

/// `items.push(value)`: amortised O(1), the list shared, never copied.
pub(crate) fn push(items: &std::cell::RefCell<Vec<Value>>, value: Value) -> Value {
    items.borrow_mut().push(value);
    Value::None
}

pub(super) fn list_method(
    items: &std::cell::RefCell<Vec<Value>>,
    args: &Args,
) -> Option<Result<Value>> {
    let result =
        match args.name {
            "push" => expect_args(args, 1, 1).map(|_| push(items, args.values[0].clone())),
            "pop" => expect_args(args, 0, 0).and_then(|_| {
                items
                    .borrow_mut()
                    .pop()
                    .ok_or_else(|| LangError::at("pop from an empty list", args.call))
            }),
            "insert" => expect_args(args, 2, 2).and_then(|_| {
                let at = args.usize(0)?;
                let mut items = items.borrow_mut();
                if at > items.len() {
                    return Err(args.error(
                        0,
                        format!("index {at} is beyond the list's length {}", items.len()),
                    ));
                }
                items.insert(at, args.values[1].clone());
                Ok(Value::None)
            }),
            "extend" => expect_args(args, 1, 1).and_then(|_| {
                let more = args.list(0)?;
                items.borrow_mut().extend(more);
                Ok(Value::None)
            }),
            "contains" => expect_args(args, 1, 1).map(|_| {
                let needle = args.values[0].to_string();
                Value::Bool(items.borrow().iter().any(|v| {
                    v.type_name() == args.values[0].type_name() && v.to_string() == needle
                }))
            }),
            "join" => expect_args(args, 1, 1).and_then(|_| {
                let sep = args.str(0)?;
                let items = items.borrow();
                // Measured first: the items can be one long string many times.
                let seps = sep.len() as u128 * items.len().saturating_sub(1) as u128;
                let texts: u128 = items.iter().map(|v| text_len(v) as u128).sum();
                checked_string_len(seps + texts).map_err(|e| e.or_at(args.call))?;
                let parts: Vec<String> = items.iter().map(|v| v.to_string()).collect();
                Ok(Value::str(parts.join(sep)))
            }),
            _ => return None,
        };
    Some(result)
}

/// The length in bytes of a value's text, without making the text.
fn text_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            self.0 += text.len();
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting cannot fail.
    let _ = std::fmt::write(&mut count, format_args!("{value}"));
    count.0
}

pub(super) fn str_method(text: &str, args: &Args) -> Option<Result<Value>> {
    let strings = |parts: Vec<&str>| Value::list(parts.into_iter().map(Value::str).collect());
    let result = match args.name {
        "split" => expect_args(args, 0, 1).and_then(|_| {
            Ok(match args.opt_str(0)? {
                Some("") => return Err(args.error(0, "cannot split on an empty separator")),
                Some(sep) => strings(text.split(sep).collect()),
                None => strings(text.split_whitespace().collect()),
            })
        }),
        "lines" => expect_args(args, 0, 0).map(|_| strings(text.lines().collect())),
        "trim" => expect_args(args, 0, 0).map(|_| Value::str(text.trim())),
        "lower" => expect_args(args, 0, 0).map(|_| Value::str(text.to_lowercase())),
        "upper" => expect_args(args, 0, 0).map(|_| Value::str(text.to_uppercase())),
        "contains" => {
            expect_args(args, 1, 1).and_then(|_| Ok(Value::Bool(text.contains(args.str(0)?))))
        }
        "starts_with" => {
            expect_args(args, 1, 1).and_then(|_| Ok(Value::Bool(text.starts_with(args.str(0)?))))
        }
        "ends_with" => {
            expect_args(args, 1, 1).and_then(|_| Ok(Value::Bool(text.ends_with(args.str(0)?))))
        }
        "replace" => expect_args(args, 2, 2).and_then(|_| {
            let (from, to) = (args.str(0)?, args.str(1)?);
            // An empty pattern matches between every two characters.
            let matches = match from {
                "" => text.chars().count() + 1,
                _ => text.matches(from).count(),
            };
            let grown = matches as u128 * to.len() as u128;
            checked_string_len(text.len() as u128 + grown).map_err(|e| e.or_at(args.call))?;
            Ok(Value::str(text.replace(from, to)))
        }),
        _ => return None,
    };
    Some(result)
}
