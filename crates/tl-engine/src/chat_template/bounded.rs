//! The builtins a chat template may call, each bounded by the render's budget.
//!
//! The environment starts empty (`Environment::empty`), so a template reaches
//! only what is registered here: minijinja's filters, tests and global
//! functions, Python's string and dict methods (minijinja-contrib's pycompat)
//! and our own functions. Each builtin is the original, wrapped: before it
//! runs, the work its arguments promise (a sort walks and compares the list, an
//! `indent` writes the width once per line, a `format` pads to its widths) is
//! charged to the budget, so a call that would exhaust it fails before it
//! allocates; after it returns, what it built is charged too.

use std::sync::Arc;

use minijinja::tests as builtin_tests;
use minijinja::value::{Kwargs, Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{filters, functions, Environment, Error, ErrorKind, State};

use super::functions as ours;
use super::guard::{comparison_cost, containment_cost};
use super::limits::{is_scalar, BoundedString, RenderBudget, ELEMENT_UNITS};
use super::python_json;

/// What a builtin does with its arguments, for charging it before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cost {
    /// Looks at its arguments without walking them.
    Constant,
    /// Reads its first argument as text once (case changes, trimming, escaping).
    Text,
    /// Walks the elements of its first argument.
    Elements,
    /// Walks the elements of every positional argument (`chain`, `zip`).
    AllElements,
    /// Compares the elements of its first argument with each other.
    Sort,
    /// `indent(width)`: the width once per line.
    Indent,
    /// `replace(old, new)`: the new text once per match.
    Replace,
    /// `split(sep)`: one string per piece.
    Split,
    /// `join(sep)`: every element printed, and the separator between them.
    Join,
    /// `format(args…)`: the arguments printed and padded to the widths.
    Format,
    /// `batch(n)`, `slice(n)`: `n` groups, padded with a fill value.
    Groups,
}

/// Registers every filter, test, global function and method a template may
/// use, each charging `budget`.
pub(crate) fn register_builtins(environment: &mut Environment<'_>, budget: &Arc<RenderBudget>) {
    register_filters(environment, budget);
    register_tests(environment, budget);
    register_functions(environment, budget);
    let methods_budget = Arc::clone(budget);
    environment.set_unknown_method_callback(move |state, value, method, args| {
        charge_method(&methods_budget, value, method, args)?;
        let result =
            minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)?;
        admit(&methods_budget, result)
    });
}

fn register_filters(environment: &mut Environment<'_>, budget: &Arc<RenderBudget>) {
    let table: [(&'static str, Value, Cost); 48] = [
        ("safe", Value::from_function(filters::safe), Cost::Text),
        ("escape", Value::from_function(filters::escape), Cost::Text),
        ("e", Value::from_function(filters::escape), Cost::Text),
        ("lower", Value::from_function(filters::lower), Cost::Text),
        ("upper", Value::from_function(filters::upper), Cost::Text),
        ("title", Value::from_function(filters::title), Cost::Text),
        (
            "capitalize",
            Value::from_function(filters::capitalize),
            Cost::Text,
        ),
        (
            "replace",
            Value::from_function(filters::replace),
            Cost::Replace,
        ),
        (
            "length",
            Value::from_function(filters::length),
            Cost::Constant,
        ),
        (
            "count",
            Value::from_function(filters::length),
            Cost::Constant,
        ),
        (
            "dictsort",
            Value::from_function(filters::dictsort),
            Cost::Sort,
        ),
        (
            "items",
            Value::from_function(filters::items),
            Cost::Elements,
        ),
        (
            "reverse",
            Value::from_function(filters::reverse),
            Cost::Elements,
        ),
        ("trim", Value::from_function(filters::trim), Cost::Text),
        ("join", Value::from_function(filters::join), Cost::Join),
        ("split", Value::from_function(filters::split), Cost::Split),
        ("lines", Value::from_function(filters::lines), Cost::Split),
        (
            "default",
            Value::from_function(filters::default),
            Cost::Constant,
        ),
        ("d", Value::from_function(filters::default), Cost::Constant),
        (
            "round",
            Value::from_function(filters::round),
            Cost::Constant,
        ),
        ("abs", Value::from_function(filters::abs), Cost::Constant),
        ("int", Value::from_function(filters::int), Cost::Text),
        ("float", Value::from_function(filters::float), Cost::Text),
        ("attr", Value::from_function(filters::attr), Cost::Constant),
        (
            "first",
            Value::from_function(filters::first),
            Cost::Constant,
        ),
        ("last", Value::from_function(filters::last), Cost::Elements),
        ("min", Value::from_function(filters::min), Cost::Sort),
        ("max", Value::from_function(filters::max), Cost::Sort),
        ("sort", Value::from_function(filters::sort), Cost::Sort),
        ("list", Value::from_function(filters::list), Cost::Elements),
        ("bool", Value::from_function(filters::bool), Cost::Constant),
        ("batch", Value::from_function(filters::batch), Cost::Groups),
        ("slice", Value::from_function(filters::slice), Cost::Groups),
        ("sum", Value::from_function(filters::sum), Cost::Sort),
        (
            "indent",
            Value::from_function(filters::indent),
            Cost::Indent,
        ),
        (
            "select",
            Value::from_function(filters::select),
            Cost::Elements,
        ),
        (
            "reject",
            Value::from_function(filters::reject),
            Cost::Elements,
        ),
        (
            "selectattr",
            Value::from_function(filters::selectattr),
            Cost::Elements,
        ),
        (
            "rejectattr",
            Value::from_function(filters::rejectattr),
            Cost::Elements,
        ),
        ("map", Value::from_function(filters::map), Cost::Elements),
        (
            "groupby",
            Value::from_function(filters::groupby),
            Cost::Sort,
        ),
        ("unique", Value::from_function(filters::unique), Cost::Sort),
        (
            "chain",
            Value::from_function(filters::chain),
            Cost::AllElements,
        ),
        ("zip", Value::from_function(filters::zip), Cost::AllElements),
        (
            "format",
            Value::from_function(filters::format),
            Cost::Format,
        ),
        ("string", Value::from_function(string), Cost::Constant),
        ("pprint", Value::from_function(pprint), Cost::Constant),
        (
            "tojson",
            Value::from_function(python_json::tojson),
            Cost::Constant,
        ),
    ];
    for (name, builtin, cost) in table {
        let budget = Arc::clone(budget);
        environment.add_filter(name, move |state: &mut State, args: Rest<ValueOrKwargs>| {
            call_bounded(&budget, state, &builtin, cost, &args.into_values())
        });
    }
}

fn register_tests(environment: &mut Environment<'_>, budget: &Arc<RenderBudget>) {
    let compare = [
        ("eq", Value::from_function(builtin_tests::is_eq)),
        ("equalto", Value::from_function(builtin_tests::is_eq)),
        ("==", Value::from_function(builtin_tests::is_eq)),
        ("ne", Value::from_function(builtin_tests::is_ne)),
        ("!=", Value::from_function(builtin_tests::is_ne)),
        ("lt", Value::from_function(builtin_tests::is_lt)),
        ("lessthan", Value::from_function(builtin_tests::is_lt)),
        ("<", Value::from_function(builtin_tests::is_lt)),
        ("le", Value::from_function(builtin_tests::is_le)),
        ("<=", Value::from_function(builtin_tests::is_le)),
        ("gt", Value::from_function(builtin_tests::is_gt)),
        ("greaterthan", Value::from_function(builtin_tests::is_gt)),
        (">", Value::from_function(builtin_tests::is_gt)),
        ("ge", Value::from_function(builtin_tests::is_ge)),
        (">=", Value::from_function(builtin_tests::is_ge)),
        ("in", Value::from_function(builtin_tests::is_in)),
    ];
    let text = [
        ("lower", Value::from_function(builtin_tests::is_lower)),
        ("upper", Value::from_function(builtin_tests::is_upper)),
        (
            "startingwith",
            Value::from_function(builtin_tests::is_startingwith),
        ),
        (
            "endingwith",
            Value::from_function(builtin_tests::is_endingwith),
        ),
    ];
    for (name, builtin) in compare.into_iter().chain(text) {
        let budget = Arc::clone(budget);
        environment.add_test(name, move |state: &mut State, args: Rest<ValueOrKwargs>| {
            let args = args.into_values();
            charge_test(&budget, name, &args)?;
            Ok::<_, Error>(builtin.call(state, &args)?.is_true())
        });
    }
    // Tests that only look at a value's type or a number cost nothing worth
    // charging.
    environment.add_test("undefined", builtin_tests::is_undefined);
    environment.add_test("defined", builtin_tests::is_defined);
    environment.add_test("none", builtin_tests::is_none);
    environment.add_test("safe", builtin_tests::is_safe);
    environment.add_test("escaped", builtin_tests::is_safe);
    environment.add_test("boolean", builtin_tests::is_boolean);
    environment.add_test("odd", builtin_tests::is_odd);
    environment.add_test("even", builtin_tests::is_even);
    environment.add_test("divisibleby", builtin_tests::is_divisibleby);
    environment.add_test("number", builtin_tests::is_number);
    environment.add_test("integer", builtin_tests::is_integer);
    environment.add_test("int", builtin_tests::is_integer);
    environment.add_test("float", builtin_tests::is_float);
    environment.add_test("string", builtin_tests::is_string);
    environment.add_test("sequence", builtin_tests::is_sequence);
    environment.add_test("iterable", builtin_tests::is_iterable);
    environment.add_test("mapping", builtin_tests::is_mapping);
    environment.add_test("sameas", builtin_tests::is_sameas);
    environment.add_test("true", builtin_tests::is_true);
    environment.add_test("false", builtin_tests::is_false);
    environment.add_test("filter", builtin_tests::is_filter);
    environment.add_test("test", builtin_tests::is_test);
}

/// Comparison tests cost what the comparison operators do.
fn charge_test(budget: &RenderBudget, name: &str, args: &[Value]) -> Result<(), Error> {
    let (Some(value), other) = (args.first(), args.get(1)) else {
        return Ok(());
    };
    match (name, other) {
        ("in", Some(container)) => budget.charge_work(containment_cost(budget, value, container)?),
        ("lower" | "upper" | "startingwith" | "endingwith", _) => {
            for arg in args {
                budget.display_len(arg)?;
            }
            Ok(())
        }
        (_, Some(other)) => budget.charge_work(comparison_cost(budget, value, other)?),
        (_, None) => Ok(()),
    }
}

fn register_functions(environment: &mut Environment<'_>, budget: &Arc<RenderBudget>) {
    // `range` refuses more than 100 000 numbers itself and builds nothing
    // until iterated, which costs fuel.
    environment.add_function("range", functions::range);
    let table = [
        (
            "dict",
            Value::from_function(functions::dict),
            Cost::Constant,
        ),
        (
            "namespace",
            Value::from_function(functions::namespace),
            Cost::Constant,
        ),
        (
            "raise_exception",
            Value::from_function(ours::raise_exception),
            Cost::Text,
        ),
        (
            "strftime_now",
            Value::from_function(ours::strftime_now),
            Cost::Text,
        ),
    ];
    for (name, builtin, cost) in table {
        let budget = Arc::clone(budget);
        environment.add_function(name, move |state: &mut State, args: Rest<ValueOrKwargs>| {
            call_bounded(&budget, state, &builtin, cost, &args.into_values())
        });
    }
    // minijinja's `debug()` prints the whole render state; no chat template
    // needs it, so it is left out like every unlisted builtin.
}

/// Charges what `builtin` will do with `args`, calls it, and charges what it
/// returns.
fn call_bounded(
    budget: &RenderBudget,
    state: &mut State,
    builtin: &Value,
    cost: Cost,
    args: &[Value],
) -> Result<Value, Error> {
    budget.check_open()?;
    charge_arguments(budget, cost, args)?;
    let result = builtin.call(state, args)?;
    admit(budget, result)
}

/// Charges the work `cost` promises for `args`.
fn charge_arguments(budget: &RenderBudget, cost: Cost, args: &[Value]) -> Result<(), Error> {
    let positional: Vec<&Value> = args.iter().filter(|arg| !arg.is_kwargs()).collect();
    let Some(&subject) = positional.first() else {
        return Ok(());
    };
    match cost {
        Cost::Constant => Ok(()),
        Cost::Text => budget.display_len(subject).map(|_| ()),
        Cost::Elements => charge_elements(budget, subject),
        Cost::AllElements => positional
            .iter()
            .try_for_each(|arg| charge_elements(budget, arg)),
        Cost::Sort => charge_sort(budget, subject),
        Cost::Indent => charge_indent(budget, subject, positional.get(1).copied(), args),
        Cost::Replace => charge_replace(
            budget,
            subject,
            positional.get(1).copied(),
            positional.get(2).copied(),
            None,
        ),
        Cost::Split => charge_split(budget, subject, positional.get(1).copied()),
        Cost::Join => charge_join(budget, subject, positional.get(1).copied()),
        Cost::Format => charge_format(budget, subject, &positional[1..]),
        Cost::Groups => charge_groups(budget, subject, positional.get(1).copied()),
    }
}

fn charge_elements(budget: &RenderBudget, value: &Value) -> Result<(), Error> {
    if let Some(text) = value.as_str() {
        return budget.charge_work(text.len() as u64);
    }
    budget.top_level_len(value).map(|_| ())
}

/// Sorting and friends compare elements: about `log2(n)` walks of the list.
fn charge_sort(budget: &RenderBudget, value: &Value) -> Result<(), Error> {
    if value.as_str().is_some() || is_scalar(value) {
        return charge_elements(budget, value);
    }
    let shape = budget.measure(value)?;
    let rounds = u64::from(usize::BITS - shape.elements.leading_zeros());
    budget.charge_work(shape.units().saturating_mul(rounds))
}

fn charge_indent(
    budget: &RenderBudget,
    text: &Value,
    width: Option<&Value>,
    args: &[Value],
) -> Result<(), Error> {
    let width = match width {
        Some(width) => width.as_usize(),
        None => keyword(args, "width").and_then(|width| width.as_usize()),
    }
    .unwrap_or(4);
    let bytes = budget.display_len(text)?;
    let lines = text
        .as_str()
        .map_or(bytes, |text| text.matches('\n').count() as u64 + 1);
    budget.charge_work(bytes.saturating_add(lines.saturating_mul(width as u64)))
}

fn charge_replace(
    budget: &RenderBudget,
    text: &Value,
    old: Option<&Value>,
    new: Option<&Value>,
    most: Option<usize>,
) -> Result<(), Error> {
    let bytes = budget.display_len(text)?;
    let (Some(old), Some(new)) = (old, new) else {
        return Ok(());
    };
    let new_bytes = budget.display_len(new)?;
    budget.display_len(old)?;
    let matches = match (text.as_str(), old.as_str()) {
        (Some(text), Some("")) => text.chars().count() as u64 + 1,
        (Some(text), Some(old)) => text.matches(old).count() as u64,
        // Printed values: assume every byte matches.
        _ => bytes + 1,
    };
    let matches = most.map_or(matches, |most| matches.min(most as u64));
    budget.charge_work(bytes.saturating_add(matches.saturating_mul(new_bytes)))
}

fn charge_split(
    budget: &RenderBudget,
    text: &Value,
    separator: Option<&Value>,
) -> Result<(), Error> {
    let bytes = budget.display_len(text)?;
    let pieces = match (text.as_str(), separator.and_then(Value::as_str)) {
        (Some(text), Some("")) => text.len() as u64 + 2,
        (Some(text), Some(separator)) => text.matches(separator).count() as u64 + 1,
        _ => bytes + 1,
    };
    budget.check_elements(usize::try_from(pieces).unwrap_or(usize::MAX))?;
    budget.charge_work(bytes.saturating_add(pieces.saturating_mul(ELEMENT_UNITS)))
}

/// The joined string holds every element printed and a separator between two.
fn charge_join(
    budget: &RenderBudget,
    items: &Value,
    separator: Option<&Value>,
) -> Result<(), Error> {
    let separator = match separator {
        Some(separator) => budget.display_len(separator)?,
        None => 0,
    };
    if let Some(text) = items.as_str() {
        let chars = text.chars().count() as u64;
        return budget.charge_work((text.len() as u64).saturating_add(chars * separator));
    }
    let count = budget.top_level_len(items)?;
    let mut bytes = (count as u64).saturating_mul(separator);
    if let Ok(elements) = items.try_iter() {
        for element in elements {
            bytes = bytes.saturating_add(budget.display_len(&element)?);
        }
    }
    budget.charge_work(bytes)
}

/// Formatting writes the format, every argument, and padding up to the
/// widths and precisions the format (or, with `*`, an argument) asks for.
fn charge_format(budget: &RenderBudget, format: &Value, args: &[&Value]) -> Result<(), Error> {
    let Some(text) = format.as_str() else {
        return Ok(());
    };
    let mut bytes = text.len() as u64;
    for arg in args {
        bytes = bytes.saturating_add(budget.display_len(arg)?);
    }
    let padding = format_padding(text);
    bytes = bytes.saturating_add(padding.widths);
    if padding.from_arguments {
        for arg in args.iter().filter(|arg| arg.is_number()) {
            let width = i64::try_from((*arg).clone()).map_or(u64::MAX, i64::unsigned_abs);
            bytes = bytes.saturating_add(width);
        }
    }
    budget.charge_work(bytes)
}

/// Padding a format string can ask for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Padding {
    /// Every number in a format specification (widths and precisions).
    widths: u64,
    /// Whether a width or precision comes from an argument (`%*d`, `{:{w}}`).
    from_arguments: bool,
}

/// Reads the widths and precisions of printf (`%5.2f`, `%(key)10s`) and
/// `str.format` (`{:>10}`, `{0:{width}}`) specifications. Over-counting is
/// harmless: the sum only bounds the output before it is built.
fn format_padding(format: &str) -> Padding {
    let mut padding = Padding::default();
    let mut spec = Spec::Text;
    let mut in_field = false;
    let mut number = 0u64;
    for byte in format.bytes() {
        if spec == Spec::Key {
            if byte == b')' {
                spec = Spec::Widths;
            }
            continue;
        }
        if spec == Spec::Widths && byte.is_ascii_digit() {
            number = number
                .saturating_mul(10)
                .saturating_add(u64::from(byte - b'0'));
            continue;
        }
        padding.widths = padding.widths.saturating_add(number);
        number = 0;
        match byte {
            b'%' => spec = Spec::Widths,
            b'(' if spec == Spec::Widths => spec = Spec::Key,
            b'{' if in_field => padding.from_arguments = true,
            b'{' => in_field = true,
            b'}' => {
                in_field = false;
                spec = Spec::Text;
            }
            b':' if in_field => spec = Spec::Widths,
            b'*' if spec == Spec::Widths => padding.from_arguments = true,
            _ if spec == Spec::Widths && byte.is_ascii_alphabetic() => spec = Spec::Text,
            _ => {}
        }
    }
    padding.widths = padding.widths.saturating_add(number);
    padding
}

/// Where [`format_padding`] is in a format string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    /// Literal text (or a `str.format` field name).
    Text,
    /// A printf mapping key, `%(key)`.
    Key,
    /// Flags, widths and precisions.
    Widths,
}

fn charge_groups(
    budget: &RenderBudget,
    items: &Value,
    groups: Option<&Value>,
) -> Result<(), Error> {
    let len = budget.top_level_len(items)?;
    let groups = groups.and_then(Value::as_usize).unwrap_or(1);
    budget.check_elements(groups)?;
    let elements = len.saturating_add(groups);
    budget.check_elements(elements)?;
    budget.charge_work((elements as u64).saturating_mul(ELEMENT_UNITS))
}

/// Python's string and dict methods, charged like their filter counterparts.
fn charge_method(
    budget: &RenderBudget,
    receiver: &Value,
    method: &str,
    args: &[Value],
) -> Result<(), Error> {
    budget.check_open()?;
    let arg = |index: usize| args.get(index);
    match (receiver.kind(), method) {
        (ValueKind::String, "format") => {
            let args: Vec<&Value> = args.iter().collect();
            charge_format(budget, receiver, &args)
        }
        (ValueKind::String, "replace") => {
            let most = arg(2).and_then(Value::as_usize);
            charge_replace(budget, receiver, arg(0), arg(1), most)
        }
        (ValueKind::String, "join") => match arg(0) {
            Some(items) => charge_join(budget, items, Some(receiver)),
            None => Ok(()),
        },
        (ValueKind::String, "split" | "splitlines") => charge_split(budget, receiver, arg(0)),
        (ValueKind::String, _) => {
            budget.display_len(receiver)?;
            args.iter()
                .try_for_each(|arg| budget.display_len(arg).map(|_| ()))
        }
        (ValueKind::Seq, _) => charge_sort(budget, receiver),
        _ => Ok(()),
    }
}

/// Charges what a builtin returned: a string's bytes, a container's elements.
fn admit(budget: &RenderBudget, result: Value) -> Result<Value, Error> {
    if let Some(text) = result.as_str() {
        budget.charge_work(text.len() as u64)?;
    } else if matches!(
        result.kind(),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
    ) {
        budget.top_level_len(&result)?;
    }
    Ok(result)
}

/// A keyword argument, without marking it used (the builtin reads it again).
fn keyword(args: &[Value], name: &str) -> Option<Value> {
    let kwargs = Kwargs::try_from(args.last()?.clone()).ok()?;
    kwargs.peek::<Value>(name).ok()
}

/// `value|string`: minijinja's, printing into a string that cannot outgrow
/// the budget.
/// (Undefined prints as nothing: renders use lenient undefined handling.)
fn string(state: &State, value: &Value) -> Result<Value, Error> {
    if value.kind() == ValueKind::String {
        return Ok(value.clone());
    }
    print_bounded(state, value, |out, value| {
        std::fmt::write(out, format_args!("{value}"))
    })
}

/// `value|pprint`: minijinja's pretty debug form, bounded like `string`.
fn pprint(state: &State, value: &Value) -> Result<Value, Error> {
    print_bounded(state, value, |out, value| {
        std::fmt::write(out, format_args!("{value:#?}"))
    })
}

/// Prints `value` with `print` into a string capped at the render's
/// remaining work (the filter wrapper charges the result).
fn print_bounded(
    state: &State,
    value: &Value,
    print: impl Fn(&mut BoundedString, &Value) -> std::fmt::Result,
) -> Result<Value, Error> {
    let cap = render_budget(state).map_or(0, |budget| budget.remaining_work());
    let mut out = BoundedString::new(cap);
    print(&mut out, value).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            "the template exceeded its work limit (a value prints too long)",
        )
    })?;
    Ok(Value::from(out.text))
}

/// The budget of the render `state` belongs to.
pub(crate) fn render_budget(state: &State) -> Option<Arc<RenderBudget>> {
    state
        .lookup(super::BUDGET_GLOBAL)
        .and_then(|value| value.downcast_object::<BudgetHandle>())
        .map(|handle| Arc::clone(&handle.0))
}

/// The budget as a template global, for the few builtins that need it inside
/// (printing, `tojson`); its name is not an identifier, so templates cannot
/// reach it.
#[derive(Debug)]
pub(crate) struct BudgetHandle(pub(crate) Arc<RenderBudget>);

impl minijinja::value::Object for BudgetHandle {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_padding_reads_printf_and_str_format_specs() {
        assert_eq!(format_padding("%s and %d").widths, 0);
        assert_eq!(format_padding("%10s|%-5.2f").widths, 17);
        assert_eq!(format_padding("%1000000000d").widths, 1_000_000_000);
        assert!(format_padding("%*d").from_arguments);
        assert_eq!(format_padding("{:>20}{0:.3}").widths, 23);
        assert!(format_padding("{:{w}}").from_arguments);
        assert_eq!(format_padding("%(name)1000s").widths, 1000);
        // Numbers outside specifications are literal text.
        assert_eq!(format_padding("in 2024: %s, at 10:30").widths, 0);
    }
}
