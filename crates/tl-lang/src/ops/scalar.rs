//! Binary operators on values that are not tensors: ints with overflow checks,
//! floats, strings and lists. Equality is in `equality.rs`.

use std::cmp::Ordering;

use tl_syntax::ast::BinaryOp;

use super::phrase;
use super::shapes::{checked_list_len, checked_string_len};
use crate::error::{LangError, Result};
use crate::value::Value;

/// `lhs op rhs` for two values that are not tensors (`==`/`!=` excepted).
pub fn apply(op: BinaryOp, lhs: &Value, rhs: &Value) -> Result<Value> {
    match (lhs, rhs) {
        (Value::Int(a), Value::Int(b)) => int_op(op, *a, *b),
        (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
            float_op(op, as_f64(lhs), as_f64(rhs))
        }
        (Value::Bool(a), Value::Bool(b)) if matches!(op, BinaryOp::And | BinaryOp::Or) => {
            Ok(Value::Bool(if op == BinaryOp::And {
                *a && *b
            } else {
                *a || *b
            }))
        }
        (Value::Str(a), Value::Str(b)) => {
            string_op(op, a, b)?.ok_or_else(|| mismatch(op, lhs, rhs))
        }
        (Value::List(a), Value::List(b)) if op == BinaryOp::Add => {
            let (a, b) = (a.borrow(), b.borrow());
            let len = checked_list_len(a.len() as u128 + b.len() as u128)?;
            let mut items = Vec::with_capacity(len);
            items.extend(a.iter().cloned());
            items.extend(b.iter().cloned());
            Ok(Value::list(items))
        }
        (Value::List(_) | Value::Str(_), Value::Int(n)) if op == BinaryOp::Mul => repeat(lhs, *n),
        (Value::Int(n), Value::List(_) | Value::Str(_)) if op == BinaryOp::Mul => repeat(rhs, *n),
        _ => Err(mismatch(op, lhs, rhs)),
    }
}

fn as_f64(value: &Value) -> f64 {
    match value {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        _ => f64::NAN,
    }
}

fn int_op(op: BinaryOp, a: i64, b: i64) -> Result<Value> {
    let what = || phrase(op, &a.to_string(), &b.to_string());
    let checked = match op {
        BinaryOp::Add => a.checked_add(b),
        BinaryOp::Sub => a.checked_sub(b),
        BinaryOp::Mul => a.checked_mul(b),
        BinaryOp::Div | BinaryOp::Rem if b == 0 => {
            return Err(LangError::user(format!(
                "cannot {}: division by zero",
                what()
            )))
        }
        BinaryOp::Div => a.checked_div(b),
        BinaryOp::Rem => a.checked_rem(b),
        _ => {
            return compare(op, a.cmp(&b))
                .ok_or_else(|| mismatch(op, &Value::Int(a), &Value::Int(b)))
        }
    };
    checked.map(Value::Int).ok_or_else(|| {
        LangError::user(format!(
            "cannot {}: the result overflows int (64 bits)",
            what()
        ))
    })
}

fn float_op(op: BinaryOp, a: f64, b: f64) -> Result<Value> {
    let value = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        // Scalars follow Python, where dividing by zero is a mistake to report;
        // tensors follow IEEE and give inf, as every tensor library does.
        BinaryOp::Div | BinaryOp::Rem if b == 0.0 => {
            let what = phrase(
                op,
                &Value::Float(a).to_string(),
                &Value::Float(b).to_string(),
            );
            return Err(LangError::user(format!("cannot {what}: division by zero")));
        }
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::Lt => return Ok(Value::Bool(a < b)),
        BinaryOp::Le => return Ok(Value::Bool(a <= b)),
        BinaryOp::Gt => return Ok(Value::Bool(a > b)),
        BinaryOp::Ge => return Ok(Value::Bool(a >= b)),
        _ => return Err(mismatch(op, &Value::Float(a), &Value::Float(b))),
    };
    Ok(Value::Float(value))
}

/// `a op b` on strings; `None` if `op` does not apply to them.
fn string_op(op: BinaryOp, a: &str, b: &str) -> Result<Option<Value>> {
    if op == BinaryOp::Add {
        checked_string_len(a.len() as u128 + b.len() as u128)?;
        return Ok(Some(Value::str(format!("{a}{b}"))));
    }
    Ok(compare(op, a.cmp(b)))
}

/// An ordering comparison's result, or `None` if `op` is not one.
fn compare(op: BinaryOp, ordering: Ordering) -> Option<Value> {
    let result = match op {
        BinaryOp::Lt => ordering.is_lt(),
        BinaryOp::Le => ordering.is_le(),
        BinaryOp::Gt => ordering.is_gt(),
        BinaryOp::Ge => ordering.is_ge(),
        _ => return None,
    };
    Some(Value::Bool(result))
}

/// `xs * n` and `s * n`.
fn repeat(value: &Value, n: i64) -> Result<Value> {
    let count = usize::try_from(n)
        .map_err(|_| LangError::user(format!("cannot repeat a {} {n} times", value.type_name())))?;
    match value {
        Value::List(items) => {
            let items = items.borrow();
            let len = checked_list_len(items.len() as u128 * count as u128)?;
            Ok(Value::list(
                items.iter().cloned().cycle().take(len).collect(),
            ))
        }
        Value::Str(s) => {
            checked_string_len(s.len() as u128 * count as u128)?;
            Ok(Value::str(s.repeat(count)))
        }
        other => Err(LangError::internal(format!(
            "repeat of {}",
            other.type_name()
        ))),
    }
}

/// "cannot add string and int".
fn mismatch(op: BinaryOp, lhs: &Value, rhs: &Value) -> LangError {
    let what = phrase(op, &lhs.type_name(), &rhs.type_name());
    let error = LangError::user(format!("cannot {what}"));
    match op {
        BinaryOp::MatMul => error.with_hint("`@` multiplies tensors; use `*` for numbers"),
        BinaryOp::And | BinaryOp::Or => error.with_hint("`&&` and `||` need bools"),
        _ => error,
    }
}
