//! How values print. Tensors: their type, then their values nested like the
//! shape, with long dimensions elided (`...`) as NumPy does. Lists and structs:
//! as written, with any that contains itself, nests too deep, or would make a
//! text too long to hold cut short, so that printing cannot crash.

use std::fmt;
use std::rc::Rc;

use crate::tensor::Tensor;
use crate::value::{StructValue, Value};

/// Dimensions longer than this print their first and last few elements only.
const EDGE_ITEMS: usize = 3;
const SUMMARIZE_OVER: usize = 8;

/// Writes `float32[2, 2] [[1.0, 2.0], [3.0, 4.0]]`.
pub fn write_tensor(f: &mut fmt::Formatter<'_>, tensor: &Tensor) -> fmt::Result {
    let dims = tensor.dims();
    let values = tensor
        .to_dense()
        .and_then(|t| shown_part(&t))
        .and_then(|t| crate::convert::to_f32_vec(&t));
    let integer = !tensor.dtype().is_float();
    write!(f, "{} ", tensor.type_string())?;
    match values {
        Ok(values) => write_nested(f, &values, &dims, integer),
        Err(_) => f.write_str("<unreadable>"),
    }
}

/// The elements that print: each long dimension cut to its first and last
/// [`EDGE_ITEMS`], so that a huge tensor is never converted whole.
fn shown_part(t: &candle_core::Tensor) -> crate::error::Result<candle_core::Tensor> {
    let mut shown = t.clone();
    for (axis, &len) in t.dims().iter().enumerate() {
        if len > SUMMARIZE_OVER {
            let edges: Vec<u32> = (0..EDGE_ITEMS)
                .chain(len - EDGE_ITEMS..len)
                .map(|i| i as u32)
                .collect();
            let edges = candle_core::Tensor::new(edges.as_slice(), t.device())?;
            shown = shown.index_select(&edges, axis)?;
        }
    }
    Ok(shown)
}

/// `values` are the shown part of a tensor of shape `dims` (see [`shown_part`]).
fn write_nested(
    f: &mut fmt::Formatter<'_>,
    values: &[f32],
    dims: &[usize],
    integer: bool,
) -> fmt::Result {
    let Some((&len, rest)) = dims.split_first() else {
        return write_element(f, values.first().copied().unwrap_or(0.0), integer);
    };
    let stride: usize = rest
        .iter()
        .map(|&n| {
            if n > SUMMARIZE_OVER {
                2 * EDGE_ITEMS
            } else {
                n
            }
        })
        .product();
    let summarized = len > SUMMARIZE_OVER;
    let shown = if summarized { 2 * EDGE_ITEMS } else { len };
    f.write_str("[")?;
    for i in 0..shown {
        if i > 0 {
            f.write_str(", ")?;
        }
        if summarized && i == EDGE_ITEMS {
            f.write_str("..., ")?;
        }
        write_nested(f, &values[i * stride..(i + 1) * stride], rest, integer)?;
    }
    f.write_str("]")
}

fn write_element(f: &mut fmt::Formatter<'_>, x: f32, integer: bool) -> fmt::Result {
    if integer {
        write!(f, "{}", x as i64)
    } else if x.is_finite() && x == x.trunc() && x.abs() < 1e7 {
        write!(f, "{x:.1}")
    } else {
        write!(f, "{x:.4}")
    }
}

/// Lists and structs nested deeper than this print as `[...]` and `Name { ... }`,
/// so that printing a deep value cannot run out of stack.
const MAX_DISPLAY_DEPTH: usize = 100;

/// Writes a list or a struct, cut after `budget` bytes.
pub(crate) fn write_within(
    f: &mut fmt::Formatter<'_>,
    value: &Value,
    budget: usize,
) -> fmt::Result {
    let mut out = Budget {
        f,
        left: budget,
        spent: false,
    };
    match write_value(&mut out, value, &mut Vec::new()) {
        Err(_) if out.spent => Ok(()),
        result => result,
    }
}

/// Where a list or a struct is written: its text is cut, ending in `...`, past
/// the longest string there may be. A list can hold one long string many
/// times over, and its whole text would not fit in memory.
struct Budget<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    left: usize,
    /// Whether the budget ran out (the error that stops the writing is ours).
    spent: bool,
}

impl fmt::Write for Budget<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        if text.len() <= self.left {
            self.left -= text.len();
            return self.f.write_str(text);
        }
        let mut end = self.left;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.f.write_str(&text[..end])?;
        self.f.write_str("...")?;
        self.spent = true;
        Err(fmt::Error)
    }
}

/// Writes a list or a struct. `open` holds the lists and structs being written
/// around it: one that contains itself prints as `[...]` (or `Name { ... }`)
/// where it recurs, as Python prints it.
fn write_value(out: &mut dyn fmt::Write, value: &Value, open: &mut Vec<*const ()>) -> fmt::Result {
    let id = match value {
        Value::List(items) => Rc::as_ptr(items) as *const (),
        Value::Struct(s) => Rc::as_ptr(s) as *const (),
        // Anything else is written as on its own.
        other => return write!(out, "{other}"),
    };
    let cut = open.contains(&id) || open.len() >= MAX_DISPLAY_DEPTH;
    open.push(id);
    let result = match value {
        Value::List(_) if cut => out.write_str("[...]"),
        Value::Struct(s) if cut => write!(out, "{} {{ ... }}", s.borrow().name),
        Value::List(items) => write_list(out, &items.borrow(), open),
        Value::Struct(s) => write_struct(out, &s.borrow(), open),
        _ => Ok(()),
    };
    open.pop();
    result
}

fn write_list(out: &mut dyn fmt::Write, items: &[Value], open: &mut Vec<*const ()>) -> fmt::Result {
    out.write_str("[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        match item {
            Value::Str(s) => write!(out, "{s:?}")?,
            other => write_value(out, other, open)?,
        }
    }
    out.write_str("]")
}

fn write_struct(
    out: &mut dyn fmt::Write,
    s: &StructValue,
    open: &mut Vec<*const ()>,
) -> fmt::Result {
    write!(out, "{} {{ ", s.name)?;
    for (i, (name, value)) in s.fields.iter().enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write!(out, "{name}: ")?;
        write_value(out, value, open)?;
    }
    out.write_str(" }")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_written() {
        let list = Value::list(vec![Value::Int(1), Value::str("a"), Value::Float(2.0)]);
        assert_eq!(list.to_string(), "[1, \"a\", 2.0]");
        let record = Value::record("P", vec![("s".into(), Value::str("x")), ("l".into(), list)]);
        assert_eq!(record.to_string(), "P { s: x, l: [1, \"a\", 2.0] }");
    }

    #[test]
    fn a_list_that_contains_itself_prints_once() {
        let list = Value::list(vec![Value::Int(1)]);
        if let Value::List(items) = &list {
            items.borrow_mut().push(list.clone());
        }
        assert_eq!(list.to_string(), "[1, [...]]");
        let record = Value::record("Node", vec![("next".into(), Value::None)]);
        if let Value::Struct(s) = &record {
            s.borrow_mut()
                .set("next", Value::list(vec![record.clone()]));
        }
        assert_eq!(record.to_string(), "Node { next: [Node { ... }] }");
    }

    #[test]
    fn long_dimensions_print_their_edges() {
        let values: Vec<i64> = (0..9 * 2 * 10).collect();
        let t = candle_core::Tensor::from_vec(values, (9, 2, 10), &candle_core::Device::Cpu)
            .expect("tensor");
        let text = Value::tensor(t).to_string();
        assert_eq!(
            text,
            "int64[9, 2, 10] [[[0, 1, 2, ..., 7, 8, 9], [10, 11, 12, ..., 17, 18, 19]], \
             [[20, 21, 22, ..., 27, 28, 29], [30, 31, 32, ..., 37, 38, 39]], \
             [[40, 41, 42, ..., 47, 48, 49], [50, 51, 52, ..., 57, 58, 59]], ..., \
             [[120, 121, 122, ..., 127, 128, 129], [130, 131, 132, ..., 137, 138, 139]], \
             [[140, 141, 142, ..., 147, 148, 149], [150, 151, 152, ..., 157, 158, 159]], \
             [[160, 161, 162, ..., 167, 168, 169], [170, 171, 172, ..., 177, 178, 179]]]"
        );
    }

    /// A value written within a small budget.
    struct Within(Value, usize);

    impl fmt::Display for Within {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_within(f, &self.0, self.1)
        }
    }

    #[test]
    fn text_of_one_long_string_many_times_over_is_cut() {
        let mut value = Value::list(vec![Value::str("é".repeat(1000))]);
        for _ in 0..40 {
            value = Value::list(vec![value.clone(), value]);
        }
        let text = Within(value, 10_001).to_string();
        assert_eq!(text.len(), 10_003);
        assert!(text.ends_with("éé..."));
    }

    #[test]
    fn very_deep_values_print_their_top() {
        let mut value = Value::Int(0);
        for _ in 0..1000 {
            value = Value::list(vec![value]);
        }
        let text = value.to_string();
        let expected = format!(
            "{}[...]{}",
            "[".repeat(MAX_DISPLAY_DEPTH),
            "]".repeat(MAX_DISPLAY_DEPTH)
        );
        assert_eq!(text, expected);
    }
}
