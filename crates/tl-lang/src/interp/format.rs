//! Format strings for `print` and `format`: `{}` takes the next argument, `{name}`
//! the variable `name`, `{:.3}` / `{name:.3}` print a float with 3 decimals, and
//! `{{` / `}}` are literal braces. Arguments beyond the placeholders are appended,
//! separated by spaces (so `print("loss", x)` works as in Python).

use crate::error::{LangError, Result};
use crate::value::Value;

/// The most decimals a spec may ask for (Rust's formatter panics past 65535).
const MAX_PRECISION: usize = 100;

/// One piece of a format string.
enum Piece<'a> {
    Text(&'a str),
    /// `{name:spec}`; `name` is empty for a positional placeholder.
    Placeholder {
        name: &'a str,
        spec: &'a str,
    },
}

fn pieces(template: &str) -> Result<Vec<Piece<'_>>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push(Piece::Text(&rest[..i]));
        let brace = &rest[i..i + 1];
        if rest[i + 1..].starts_with(brace) {
            out.push(Piece::Text(brace));
            rest = &rest[i + 2..];
            continue;
        }
        if brace == "}" {
            return Err(LangError::user("unmatched `}` in format string")
                .with_hint("write `}}` for a literal brace"));
        }
        let close = rest[i..].find('}').ok_or_else(|| {
            LangError::user("unclosed `{` in format string")
                .with_hint("write `{{` for a literal brace")
        })?;
        let inner = &rest[i + 1..i + close];
        let (name, spec) = inner.split_once(':').unwrap_or((inner, ""));
        out.push(Piece::Placeholder {
            name: name.trim(),
            spec,
        });
        rest = &rest[i + close + 1..];
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// `text` as a format string that prints as `text`, with no placeholders.
pub(crate) fn escape_braces(text: &str) -> String {
    text.replace('{', "{{").replace('}', "}}")
}

/// Replaces `{name}` placeholders by the named values, leaving positional ones.
pub(crate) fn fill_named(
    template: &str,
    mut lookup: impl FnMut(&str) -> Option<Value>,
) -> Result<String> {
    let mut out = String::new();
    for piece in pieces(template)? {
        match piece {
            Piece::Text(text) => out.push_str(&escape_braces(text)),
            Piece::Placeholder { name: "", spec } => {
                out.push('{');
                if !spec.is_empty() {
                    out.push(':');
                    out.push_str(spec);
                }
                out.push('}');
            }
            Piece::Placeholder { name, spec } => {
                let value = lookup(name).ok_or_else(|| {
                    LangError::user(format!("unknown name `{name}` in format string"))
                })?;
                let text = render(&value, spec)?;
                out.push_str(&escape_braces(&text));
            }
        }
    }
    Ok(out)
}

/// Fills positional placeholders with `args` and appends any left over.
pub fn format_template(template: &str, args: &[Value]) -> Result<String> {
    let mut out = String::new();
    let mut next = args.iter();
    for piece in pieces(template)? {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder { name: "", spec } => {
                let value = next.next().ok_or_else(|| {
                    LangError::user(format!(
                        "the format string has more `{{}}` placeholders than the {} arguments given",
                        args.len()
                    ))
                })?;
                out.push_str(&render(value, spec)?);
            }
            Piece::Placeholder { name, .. } => {
                return Err(LangError::user(format!(
                    "named placeholder `{{{name}}}` needs a string literal as the format"
                )))
            }
        }
    }
    for extra in next {
        out.push(' ');
        out.push_str(&extra.to_string());
    }
    Ok(out)
}

/// A value under a format spec: empty, `.N` (N decimals) or `.Ne` (scientific,
/// N decimals).
fn render(value: &Value, spec: &str) -> Result<String> {
    if spec.is_empty() {
        return Ok(value.to_string());
    }
    let unknown = || {
        LangError::user(format!("unknown format spec `:{spec}`"))
            .with_hint("the supported specs are `:.N` (N decimals) and `:.Ne` (scientific)")
    };
    let digits = spec.strip_prefix('.').ok_or_else(unknown)?;
    let (digits, scientific) = match digits.strip_suffix('e') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let precision: usize = digits.parse().map_err(|_| unknown())?;
    if precision > MAX_PRECISION {
        return Err(LangError::user(format!(
            "format spec `:{spec}` asks for {precision} decimals; at most {MAX_PRECISION} are supported"
        )));
    }
    let number = match value {
        Value::Float(x) => *x,
        Value::Int(i) => *i as f64,
        // A loss on the gradient's graph is a 0-d tensor: it prints as the number.
        Value::Tensor(t) if t.dims().iter().product::<usize>() == 1 => {
            match crate::convert::scalar_of(&t.to_dense()?)? {
                Value::Float(x) => x,
                Value::Int(i) => i as f64,
                other => return Ok(other.to_string()),
            }
        }
        other => return Ok(other.to_string()),
    };
    Ok(if scientific {
        format!("{number:.precision$e}")
    } else {
        format!("{number:.precision$}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_named_and_escaped_placeholders() {
        let filled =
            fill_named("a={a} b={} {{x}}", |n| (n == "a").then_some(Value::Int(1))).unwrap();
        assert_eq!(filled, "a=1 b={} {{x}}");
        let out = format_template(&filled, &[Value::Float(2.5)]).unwrap();
        assert_eq!(out, "a=1 b=2.5 {x}");
    }

    #[test]
    fn precision_and_extra_arguments() {
        let out = format_template("x {:.2}", &[Value::Float(1.23456), Value::Int(7)]).unwrap();
        assert_eq!(out, "x 1.23 7");
    }

    #[test]
    fn scientific_notation() {
        assert_eq!(
            format_template("{:.2e}", &[Value::Float(0.000123456)]).unwrap(),
            "1.23e-4"
        );
    }

    #[test]
    fn huge_precisions_are_errors() {
        let out = format_template("{:.100}", &[Value::Float(0.5)]).unwrap();
        assert_eq!(out.len(), 102);
        for spec in [
            "{:.101}",
            "{:.65536}",
            "{:.99999e}",
            "{:.18446744073709551615}",
        ] {
            let error = format_template(spec, &[Value::Float(1.0)]).unwrap_err();
            assert!(
                error.message.contains("at most 100"),
                "{spec}: {}",
                error.message
            );
        }
        assert!(fill_named("{x:.70000}", |_| Some(Value::Int(1))).is_err());
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(format_template("{} {}", &[Value::Int(1)])
            .unwrap_err()
            .message
            .contains("placeholders"));
        assert!(format_template("oops }", &[])
            .unwrap_err()
            .message
            .contains("unmatched"));
        assert!(fill_named("{nope}", |_| None)
            .unwrap_err()
            .message
            .contains("nope"));
    }
}
