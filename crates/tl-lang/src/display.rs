//! How tensors print: their type, then their values nested like the shape, with
//! long dimensions elided (`...`) as NumPy does.

use std::fmt;

use crate::tensor::Tensor;

/// Dimensions longer than this print their first and last few elements only.
const EDGE_ITEMS: usize = 3;
const SUMMARIZE_OVER: usize = 8;

/// Writes `float32[2, 2] [[1.0, 2.0], [3.0, 4.0]]`.
pub fn write_tensor(f: &mut fmt::Formatter<'_>, tensor: &Tensor) -> fmt::Result {
    let dims = tensor.dims();
    let values = tensor
        .to_dense()
        .and_then(|t| crate::convert::to_f32_vec(&t));
    let integer = !tensor.dtype().is_float();
    write!(f, "{} ", tensor.type_string())?;
    match values {
        Ok(values) => write_nested(f, &values, &dims, integer),
        Err(_) => f.write_str("<unreadable>"),
    }
}

fn write_nested(
    f: &mut fmt::Formatter<'_>,
    values: &[f32],
    dims: &[usize],
    integer: bool,
) -> fmt::Result {
    let Some((&len, rest)) = dims.split_first() else {
        return write_element(f, values.first().copied().unwrap_or(0.0), integer);
    };
    let stride: usize = rest.iter().product();
    f.write_str("[")?;
    let shown: Vec<usize> = if len > SUMMARIZE_OVER {
        (0..EDGE_ITEMS).chain(len - EDGE_ITEMS..len).collect()
    } else {
        (0..len).collect()
    };
    for (n, &i) in shown.iter().enumerate() {
        if n > 0 {
            f.write_str(", ")?;
        }
        if len > SUMMARIZE_OVER && n == EDGE_ITEMS {
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
