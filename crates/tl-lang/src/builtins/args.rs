//! A builtin's arguments, with typed accessors whose errors point at the argument
//! that was wrong (`argument 2 of reshape must be a list of ints, found float`).

use tl_syntax::Span;

use crate::convert::value_to_dense;
use crate::error::{LangError, Result};
use crate::tensor::Tensor;
use crate::value::Value;

/// The evaluated arguments of one builtin call.
pub struct Args<'a> {
    /// The builtin's name, for messages.
    pub name: &'a str,
    pub values: &'a [Value],
    /// Where each argument was written.
    pub spans: &'a [Span],
    /// The whole call.
    pub call: Span,
}

impl<'a> Args<'a> {
    /// Number of arguments given.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no arguments were given.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Whether argument `i` was given (and is not `none`).
    pub fn has(&self, i: usize) -> bool {
        !matches!(self.values.get(i), None | Some(Value::None))
    }

    /// Argument `i` as given.
    pub fn value(&self, i: usize) -> Result<&'a Value> {
        self.values.get(i).ok_or_else(|| {
            LangError::at(
                format!("{} needs at least {} arguments", self.name, i + 1),
                self.call,
            )
        })
    }

    /// An error pointing at argument `i` (or the call, if it was not given).
    pub fn error(&self, i: usize, message: impl Into<String>) -> LangError {
        LangError::at(message, self.spans.get(i).copied().unwrap_or(self.call))
    }

    fn wrong_type(&self, i: usize, expected: &str) -> LangError {
        let found = self
            .values
            .get(i)
            .map_or("nothing".to_string(), |v| v.type_name());
        self.error(
            i,
            format!(
                "argument {} of {} must be {expected}, found {found}",
                i + 1,
                self.name
            ),
        )
    }

    /// Argument `i` as a tensor (scalars and lists of numbers are converted).
    pub fn tensor(&self, i: usize) -> Result<Tensor> {
        match self.value(i)? {
            Value::Tensor(t) => Ok(t.clone()),
            other => value_to_dense(other)
                .map(Tensor::Dense)
                .map_err(|_| self.wrong_type(i, "a tensor")),
        }
    }

    /// Argument `i` as a dense candle tensor (quantized weights are dequantized).
    pub fn dense(&self, i: usize) -> Result<candle_core::Tensor> {
        self.tensor(i)?
            .to_dense()
            .map_err(|e| e.or_at(self.spans.get(i).copied().unwrap_or(self.call)))
    }

    /// Argument `i` as an int.
    pub fn int(&self, i: usize) -> Result<i64> {
        match self.value(i)? {
            Value::Int(v) => Ok(*v),
            _ => Err(self.wrong_type(i, "an int")),
        }
    }

    /// Argument `i` as a non-negative int.
    pub fn usize(&self, i: usize) -> Result<usize> {
        let v = self.int(i)?;
        usize::try_from(v).map_err(|_| {
            self.error(
                i,
                format!(
                    "argument {} of {} must not be negative, found {v}",
                    i + 1,
                    self.name
                ),
            )
        })
    }

    /// Argument `i` as a float (ints are converted).
    pub fn float(&self, i: usize) -> Result<f64> {
        match self.value(i)? {
            Value::Float(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            // A one-element float tensor (`sum(x, 0)[0]`) is a number too.
            Value::Tensor(t) if t.dtype().is_float() => {
                match crate::convert::scalar_of(&t.to_dense()?) {
                    Ok(Value::Float(v)) => Ok(v),
                    _ => Err(self.wrong_type(i, "a number")),
                }
            }
            _ => Err(self.wrong_type(i, "a number")),
        }
    }

    /// Argument `i` as a bool.
    pub fn bool(&self, i: usize) -> Result<bool> {
        self.value(i)?
            .truthy()
            .ok_or_else(|| self.wrong_type(i, "a bool"))
    }

    /// Argument `i` as a string.
    pub fn str(&self, i: usize) -> Result<&'a str> {
        match self.value(i)? {
            Value::Str(s) => Ok(s),
            _ => Err(self.wrong_type(i, "a string")),
        }
    }

    /// Argument `i` as a list (a copy of its items).
    pub fn list(&self, i: usize) -> Result<Vec<Value>> {
        match self.value(i)? {
            Value::List(items) => Ok(items.borrow().clone()),
            _ => Err(self.wrong_type(i, "a list")),
        }
    }

    /// Argument `i` as a shape: a list of non-negative ints, or one int.
    pub fn shape(&self, i: usize) -> Result<Vec<usize>> {
        let items = match self.value(i)? {
            Value::Int(_) => return Ok(vec![self.usize(i)?]),
            Value::List(items) => items.borrow().clone(),
            _ => return Err(self.wrong_type(i, "a shape (a list of ints)")),
        };
        items
            .iter()
            .map(|v| match v {
                Value::Int(d) if *d >= 0 => Ok(*d as usize),
                _ => Err(self.wrong_type(i, "a shape (a list of non-negative ints)")),
            })
            .collect()
    }

    /// Argument `i` as a list of ints (may be negative: dimensions counted from the end).
    pub fn ints(&self, i: usize) -> Result<Vec<i64>> {
        let items = match self.value(i)? {
            Value::Int(v) => return Ok(vec![*v]),
            Value::List(items) => items.borrow().clone(),
            _ => return Err(self.wrong_type(i, "a list of ints")),
        };
        items
            .iter()
            .map(|v| match v {
                Value::Int(d) => Ok(*d),
                _ => Err(self.wrong_type(i, "a list of ints")),
            })
            .collect()
    }

    /// Argument `i` as a dimension of a tensor of `rank` dimensions; negative
    /// values count from the end (`-1` is the last).
    pub fn dim(&self, i: usize, rank: usize) -> Result<usize> {
        let d = self.int(i)?;
        resolve_dim(d, rank).ok_or_else(|| {
            self.error(
                i,
                format!("dimension {d} is out of range for a tensor of rank {rank}"),
            )
        })
    }

    /// Optional int argument `i`.
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        if self.has(i) {
            self.int(i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Optional float argument `i`.
    pub fn opt_float(&self, i: usize) -> Result<Option<f64>> {
        if self.has(i) {
            self.float(i).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Optional string argument `i`.
    pub fn opt_str(&self, i: usize) -> Result<Option<&'a str>> {
        if self.has(i) {
            self.str(i).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// A possibly negative dimension index, resolved against `rank`.
pub fn resolve_dim(d: i64, rank: usize) -> Option<usize> {
    let resolved = if d < 0 { d + rank as i64 } else { d };
    (0..rank as i64)
        .contains(&resolved)
        .then_some(resolved as usize)
}
