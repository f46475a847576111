//! Builtins of the language core: printing and formatting, conversions, lengths,
//! assertions (for `test` blocks), and the program's environment (arguments,
//! environment variables, files, standard input, the clock).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use super::tensor_args::at_call;
use super::{Args, Builtin, Context, Gradient};
use crate::convert::scalar_of;
use crate::error::{LangError, Result};
use crate::interp::format_template;
use crate::ops::shapes::{checked_list_len, MAX_STRING_BYTES};
use crate::value::Value;

const VARIADIC: usize = usize::MAX;

pub const TABLE: &[Builtin] = &[
    Builtin {
        name: "print",
        signature: "print(format_or_value, args...)",
        min_args: 0,
        max_args: VARIADIC,
        summary: "Prints a line: a string literal is a format string filled with the arguments (`{}`, `{name}`, `{:.3}`); otherwise the values, a computed string verbatim, separated by spaces.",
        call: print,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "write",
        signature: "write(format_or_value, args...)",
        min_args: 1,
        max_args: VARIADIC,
        summary: "Like `print`, without the newline (for streaming text); flushes at once.",
        call: write,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "format",
        signature: "format(format, args...) -> string",
        min_args: 1,
        max_args: VARIADIC,
        summary: "The text `print` would print, as a string.",
        call: format,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "len",
        signature: "len(x) -> int",
        min_args: 1,
        max_args: 1,
        summary: "Length of a list or string (in characters), or the first dimension of a tensor.",
        call: len,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "str",
        signature: "str(x) -> string",
        min_args: 1,
        max_args: 1,
        summary: "The value as text, as `print` shows it.",
        call: to_str,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "int",
        signature: "int(x) -> int",
        min_args: 1,
        max_args: 1,
        summary: "An int from a float (truncated), a bool, a numeric string, or a one-element tensor.",
        call: to_int,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "float",
        signature: "float(x) -> float",
        min_args: 1,
        max_args: 1,
        summary: "A float from an int, a numeric string, or a one-element tensor.",
        call: to_float,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "type_of",
        signature: "type_of(x) -> string",
        min_args: 1,
        max_args: 1,
        summary: "The value's type as text, e.g. `float32[2, 3]` or `list`.",
        call: type_of,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "range",
        signature: "range(start, end, step = 1) -> list[int]",
        min_args: 2,
        max_args: 3,
        summary: "The ints from `start` up to (not including) `end`.",
        call: range,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "sorted",
        signature: "sorted(xs) -> list",
        min_args: 1,
        max_args: 1,
        summary: "A new list of the numbers (or strings) of `xs`, in ascending order.",
        call: sorted,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "assert",
        signature: "assert(condition, message = none)",
        min_args: 1,
        max_args: 2,
        summary: "Fails the program (or test) with the message unless the condition is true.",
        call: assert,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "assert_eq",
        signature: "assert_eq(actual, expected)",
        min_args: 2,
        max_args: 2,
        summary: "Fails unless the two values are equal (tensors: same element type, shape and elements; a tensor and a list: same shape and elements), showing both.",
        call: assert_eq,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "assert_close",
        signature: "assert_close(actual, expected, tolerance = 1e-5)",
        min_args: 2,
        max_args: 3,
        summary: "Fails unless numbers or tensors agree within the relative tolerance: max |a - b| <= tolerance * max(1, max |b|).",
        call: assert_close,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "args",
        signature: "args() -> list[string]",
        min_args: 0,
        max_args: 0,
        summary: "The arguments after the script's name on the `tl run` command line.",
        call: program_args,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "env",
        signature: "env(name) -> string | none",
        min_args: 1,
        max_args: 1,
        summary: "An environment variable's value, or none if it is not set.",
        call: env,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "read_file",
        signature: "read_file(path) -> string",
        min_args: 1,
        max_args: 1,
        summary: "A text file's contents; relative paths are relative to the script.",
        call: read_file,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "input",
        signature: "input(prompt = \"\") -> string | none",
        min_args: 0,
        max_args: 1,
        summary: "Prints the prompt and reads one line from standard input (without its newline); none at end of input.",
        call: input,
        gradient: Gradient::NotApplicable,
    },
    Builtin {
        name: "clock",
        signature: "clock() -> float",
        min_args: 0,
        max_args: 0,
        summary: "Seconds since the Unix epoch, for timing.",
        call: clock,
        gradient: Gradient::NotApplicable,
    },
];

fn write_error(e: std::io::Error) -> LangError {
    LangError::user(format!("cannot write the output: {e}"))
}

/// The text `print` prints for these arguments.
fn formatted(args: &Args) -> Result<String> {
    match args.values.split_first() {
        None => Ok(String::new()),
        Some((Value::Str(template), rest)) => format_template(template, rest),
        Some(_) => Ok(args
            .values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(" ")),
    }
}

fn print(ctx: &mut Context, args: &Args) -> Result<Value> {
    let line = formatted(args)?;
    writeln!(ctx.out, "{line}").map_err(write_error)?;
    ctx.out.flush().map_err(write_error)?;
    Ok(Value::None)
}

fn write(ctx: &mut Context, args: &Args) -> Result<Value> {
    let text = formatted(args)?;
    write!(ctx.out, "{text}").map_err(write_error)?;
    ctx.out.flush().map_err(write_error)?;
    Ok(Value::None)
}

fn format(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::str(formatted(args)?))
}

fn len(_: &mut Context, args: &Args) -> Result<Value> {
    let n = match args.value(0)? {
        Value::List(items) => items.borrow().len(),
        Value::Str(s) => s.chars().count(),
        Value::Tensor(t) => *t
            .dims()
            .first()
            .ok_or_else(|| args.error(0, "a 0-dimensional tensor has no length"))?,
        other => return Err(args.error(0, format!("{} has no length", other.type_name()))),
    };
    Ok(Value::Int(n as i64))
}

fn to_str(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::str(args.value(0)?.to_string()))
}

fn to_int(_: &mut Context, args: &Args) -> Result<Value> {
    let value = args.value(0)?;
    let converted = match value {
        Value::Int(i) => Some(*i),
        Value::Float(x) if x.is_finite() && x.abs() < 9.2e18 => Some(x.trunc() as i64),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Str(s) => s.trim().parse().ok(),
        Value::Tensor(t) => match scalar_of(&t.to_dense()?)? {
            Value::Int(i) => Some(i),
            Value::Float(x) if x.is_finite() => Some(x.trunc() as i64),
            Value::Bool(b) => Some(i64::from(b)),
            _ => None,
        },
        _ => None,
    };
    converted.map(Value::Int).ok_or_else(|| {
        args.error(
            0,
            format!("cannot convert {} `{value}` to an int", value.type_name()),
        )
    })
}

fn to_float(_: &mut Context, args: &Args) -> Result<Value> {
    let value = args.value(0)?;
    let converted = match value {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        Value::Str(s) => s.trim().parse().ok(),
        Value::Tensor(t) => match scalar_of(&t.to_dense()?)? {
            Value::Int(i) => Some(i as f64),
            Value::Float(x) => Some(x),
            _ => None,
        },
        _ => None,
    };
    converted.map(Value::Float).ok_or_else(|| {
        args.error(
            0,
            format!("cannot convert {} `{value}` to a float", value.type_name()),
        )
    })
}

fn type_of(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(Value::str(args.value(0)?.type_name()))
}

fn range(_: &mut Context, args: &Args) -> Result<Value> {
    let (start, end) = (args.int(0)?, args.int(1)?);
    let step = args.opt_int(2)?.unwrap_or(1);
    if step == 0 {
        return Err(args.error(2, "the step of a range cannot be 0"));
    }
    // In i128: `end - start` and the last value must not overflow.
    let (start, end, step) = (start as i128, end as i128, step as i128);
    let distance = if step > 0 { end - start } else { start - end }.max(0);
    let count = (distance + step.abs() - 1) / step.abs();
    let count = checked_list_len(count as u128).map_err(at_call(args))?;
    Ok(Value::list(
        (0..count as i128)
            .map(|i| Value::Int((start + i * step) as i64))
            .collect(),
    ))
}

fn sorted(_: &mut Context, args: &Args) -> Result<Value> {
    let mut items = args.list(0)?;
    let numbers = items
        .iter()
        .all(|v| matches!(v, Value::Int(_) | Value::Float(_)));
    let strings = items.iter().all(|v| matches!(v, Value::Str(_)));
    if !numbers && !strings {
        return Err(args.error(0, "sorted needs a list of numbers or a list of strings"));
    }
    items.sort_by(|a, b| match (a, b) {
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        _ => number(a).total_cmp(&number(b)),
    });
    Ok(Value::list(items))
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        _ => f64::NAN,
    }
}

fn assert(_: &mut Context, args: &Args) -> Result<Value> {
    if args.bool(0)? {
        return Ok(Value::None);
    }
    let message = match args.values.get(1) {
        Some(Value::None) | None => "assertion failed".to_string(),
        Some(m) => format!("assertion failed: {m}"),
    };
    Err(LangError::at(message, args.call))
}

fn assert_eq(_: &mut Context, args: &Args) -> Result<Value> {
    let (actual, expected) = (args.value(0)?, args.value(1)?);
    if values_equal(actual, expected)? {
        return Ok(Value::None);
    }
    let (actual_type, expected_type) = (actual.type_name(), expected.type_name());
    let what = if matches!((actual, expected), (Value::Tensor(_), Value::Tensor(_)))
        && actual_type != expected_type
    {
        format!("types differ ({actual_type} vs {expected_type})")
    } else {
        "values differ".to_string()
    };
    Err(LangError::at(
        format!("assertion failed: {what}\n  actual:   {actual}\n  expected: {expected}"),
        args.call,
    ))
}

/// Equality as `assert_eq` means it: a tensor equals another tensor with the
/// same element type, shape and elements, or a nested list with the same shape
/// and elements; everything else as `==` compares it.
fn values_equal(a: &Value, b: &Value) -> Result<bool> {
    equal_at(a, b, 0)
}

/// Lists nested deeper than this are refused rather than risking the stack
/// (a list can contain itself), as `==` refuses them.
const MAX_EQUAL_DEPTH: usize = 256;

fn equal_at(a: &Value, b: &Value, depth: usize) -> Result<bool> {
    if depth > MAX_EQUAL_DEPTH {
        return Err(LangError::user(format!(
            "cannot compare lists nested more than {MAX_EQUAL_DEPTH} deep"
        )));
    }
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) if x.dtype() != y.dtype() => Ok(false),
        (Value::Tensor(_), _) | (_, Value::Tensor(_)) => {
            let (x, y) = (
                crate::convert::value_to_dense(a)?,
                crate::convert::value_to_dense(b)?,
            );
            Ok(x.dims() == y.dims()
                && crate::convert::to_f32_vec(&x)? == crate::convert::to_f32_vec(&y)?)
        }
        (Value::List(x), Value::List(y)) => {
            let (x, y) = (x.borrow(), y.borrow());
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y.iter()) {
                if !equal_at(p, q, depth + 1)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => crate::ops::values_equal(a, b),
    }
}

fn assert_close(_: &mut Context, args: &Args) -> Result<Value> {
    let tolerance = args.opt_float(2)?.unwrap_or(1e-5);
    let actual = crate::convert::value_to_dense(args.value(0)?)?;
    let expected = crate::convert::value_to_dense(args.value(1)?)?;
    if actual.dims() != expected.dims() {
        return Err(LangError::at(
            format!(
                "assertion failed: shapes differ: {:?} vs {:?}",
                actual.dims(),
                expected.dims()
            ),
            args.call,
        ));
    }
    let (a, b) = (
        crate::convert::to_f32_vec(&actual)?,
        crate::convert::to_f32_vec(&expected)?,
    );
    let error = relative_error(&a, &b);
    if error <= tolerance {
        return Ok(Value::None);
    }
    Err(LangError::at(
        format!("assertion failed: relative error {error:.3e} exceeds {tolerance:.1e}"),
        args.call,
    ))
}

/// max |a - b| / max(1, max |b|); NaN anywhere counts as infinitely wrong.
pub fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(1.0f64, |m, &x| m.max((x as f64).abs()));
    let worst = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = (x as f64 - y as f64).abs();
            if d.is_nan() {
                f64::INFINITY
            } else {
                d
            }
        })
        .fold(0.0f64, f64::max);
    worst / scale
}

fn program_args(ctx: &mut Context, _: &Args) -> Result<Value> {
    Ok(Value::list(
        ctx.program_args.iter().map(Value::str).collect(),
    ))
}

fn env(_: &mut Context, args: &Args) -> Result<Value> {
    Ok(std::env::var(args.str(0)?).map_or(Value::None, Value::str))
}

fn read_file(ctx: &mut Context, args: &Args) -> Result<Value> {
    let path = ctx.resolve(args.str(0)?);
    let cannot_read =
        |e: std::io::Error| args.error(0, format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(&path).map_err(cannot_read)?;
    let text = read_within(file, MAX_STRING_BYTES).map_err(cannot_read)?;
    text.map(Value::str).ok_or_else(|| {
        args.error(
            0,
            format!(
                "{} is larger than a string may be ({MAX_STRING_BYTES} bytes)",
                path.display()
            ),
        )
    })
}

/// The text `source` holds, or `None` when it is longer than `limit` bytes:
/// the limit holds while reading (a file that grows, or `/dev/zero`, stops
/// there), not after reading everything.
fn read_within(source: impl std::io::Read, limit: usize) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    // One byte past the limit tells a file of exactly `limit` bytes from a longer one.
    source.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Ok(None);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

fn input(ctx: &mut Context, args: &Args) -> Result<Value> {
    if let Some(prompt) = args.opt_str(0)? {
        write!(ctx.out, "{prompt}").map_err(write_error)?;
        ctx.out.flush().map_err(write_error)?;
    }
    let mut line = String::new();
    let read = ctx
        .input
        .read_line(&mut line)
        .map_err(|e| LangError::user(format!("cannot read standard input: {e}")))?;
    if read == 0 {
        return Ok(Value::None);
    }
    let trimmed = line.strip_suffix('\n').unwrap_or(&line);
    Ok(Value::str(trimmed.strip_suffix('\r').unwrap_or(trimmed)))
}

fn clock(_: &mut Context, _: &Args) -> Result<Value> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Ok(Value::Float(now))
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{call, error, ints};
    use crate::value::Value;

    #[test]
    fn read_file_stops_at_its_limit_while_reading() {
        let source = std::io::repeat(b'a');
        assert_eq!(super::read_within(source, 16).ok(), Some(None));
        let exact = super::read_within(&b"abcd"[..], 4).ok().flatten();
        assert_eq!(exact.as_deref(), Some("abcd"));
    }

    #[test]
    fn ranges_at_the_ends_of_int_neither_overflow_nor_allocate_without_bound() {
        let (min, max) = (Value::Int(i64::MIN), Value::Int(i64::MAX));
        assert!(error("range", vec![min.clone(), max.clone()]).contains("too long"));
        assert!(
            error("range", vec![max.clone(), min.clone(), Value::Int(-1)]).contains("too long")
        );
        let three = call(
            "range",
            vec![min.clone(), max.clone(), Value::Int(i64::MAX)],
        )
        .unwrap();
        assert_eq!(
            three.to_string(),
            format!("[{}, -1, {}]", i64::MIN, i64::MAX - 1)
        );
        let last = call("range", vec![Value::Int(i64::MAX - 1), max, Value::Int(5)]).unwrap();
        assert_eq!(last.to_string(), format!("[{}]", i64::MAX - 1));
        assert_eq!(
            call("range", vec![Value::Int(5), Value::Int(0), Value::Int(-2)])
                .unwrap()
                .to_string(),
            "[5, 3, 1]"
        );
        assert_eq!(
            call("range", vec![Value::Int(3), Value::Int(0)])
                .unwrap()
                .to_string(),
            "[]"
        );
    }

    #[test]
    fn assert_eq_refuses_lists_that_contain_themselves() {
        let cyclic = || {
            let list = ints(&[1]);
            if let Value::List(items) = &list {
                items.borrow_mut().push(list.clone());
            }
            list
        };
        assert!(error("assert_eq", vec![cyclic(), cyclic()]).contains("nested more than"));
    }

    #[test]
    fn assert_eq_compares_element_types() {
        let int_tensor = || call("tensor", vec![ints(&[1, 0])]).unwrap();
        let floats = call("tensor", vec![ints(&[1, 0]), Value::str("float32")]).unwrap();
        let bools = call("tensor", vec![ints(&[1, 0]), Value::str("bool")]).unwrap();
        assert!(call("assert_eq", vec![int_tensor(), int_tensor()]).is_ok());
        for other in [floats, bools] {
            let message = error("assert_eq", vec![int_tensor(), other]);
            assert!(message.contains("types differ (int64[2] vs"), "{message}");
        }
        // A list has no element type of its own: it matches by value.
        assert!(call("assert_eq", vec![int_tensor(), ints(&[1, 0])]).is_ok());
    }
}
