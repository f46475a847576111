//! Runtime values. Scalars and tensors are values (a tensor is immutable: an update
//! makes a new one and rebinds the variable); lists and structs are shared
//! references, as in Python, so `xs.push(v)` is seen by every holder of `xs`.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use crate::handles::Handle;
use crate::ops::shapes::MAX_STRING_BYTES;
use crate::tensor::Tensor;

/// A value of the language.
///
/// `repr(C, u8)` puts every variant's data at the same offset, after the
/// tag: a value is then copied as a tag and its data, never as the bytes
/// between them (where a `bool` would otherwise sit), which the processor
/// cannot forward from the stores that made a value just returned. The tag
/// keeps its niche, so an `Option<Value>` is still the size of a value.
#[derive(Clone, Debug)]
#[repr(C, u8)]
pub enum Value {
    /// `none`: what a block without a tail evaluates to, and `input()` at end of input.
    None,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Rc<str>),
    List(Rc<ListItems>),
    Tensor(Tensor),
    Struct(Rc<RefCell<StructValue>>),
    /// A model, cache, sampler or stream decoder.
    Handle(Handle),
}

/// A list's items, borrowed as a `RefCell<Vec<Value>>`.
#[derive(Debug)]
pub struct ListItems(RefCell<Vec<Value>>);

impl std::ops::Deref for ListItems {
    type Target = RefCell<Vec<Value>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// An instance of a declared struct (or a record the runtime made, like a model's config).
#[derive(Clone, Debug)]
pub struct StructValue {
    pub name: String,
    pub fields: Vec<(String, Value)>,
}

// Lists and structs are dropped without recursion: a list nested millions deep,
// or a long chain of structs, both easily built in a loop, would otherwise
// overflow the stack when it goes away.
impl Drop for ListItems {
    fn drop(&mut self) {
        drop_iteratively(std::mem::take(self.0.get_mut()));
    }
}

impl Drop for StructValue {
    fn drop(&mut self) {
        let fields = std::mem::take(&mut self.fields);
        drop_iteratively(fields.into_iter().map(|(_, value)| value).collect());
    }
}

/// Drops `pending` with a work list instead of the stack: the items of a list
/// or struct that nothing else holds are moved out onto the list first, so
/// what is dropped has nothing left inside.
fn drop_iteratively(mut pending: Vec<Value>) {
    while let Some(value) = pending.pop() {
        match value {
            Value::List(items) => {
                if let Ok(mut items) = Rc::try_unwrap(items) {
                    pending.append(items.0.get_mut());
                }
            }
            Value::Struct(s) => {
                if let Ok(s) = Rc::try_unwrap(s) {
                    let mut s = s.into_inner();
                    pending.extend(std::mem::take(&mut s.fields).into_iter().map(|(_, v)| v));
                }
            }
            _ => {}
        }
    }
}

impl StructValue {
    /// The value of a field.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == field).map(|(_, v)| v)
    }

    /// Sets an existing field; false if there is no such field.
    pub fn set(&mut self, field: &str, value: Value) -> bool {
        match self.fields.iter_mut().find(|(n, _)| n == field) {
            Some(slot) => {
                slot.1 = value;
                true
            }
            None => false,
        }
    }
}

impl Value {
    /// A string value.
    pub fn str(text: impl AsRef<str>) -> Self {
        Value::Str(Rc::from(text.as_ref()))
    }

    /// A list value.
    pub fn list(items: Vec<Value>) -> Self {
        Value::List(Rc::new(ListItems(RefCell::new(items))))
    }

    /// A struct value.
    pub fn record(name: &str, fields: Vec<(String, Value)>) -> Self {
        Value::Struct(Rc::new(RefCell::new(StructValue {
            name: name.to_string(),
            fields,
        })))
    }

    /// A tensor value from a candle tensor.
    pub fn tensor(tensor: candle_core::Tensor) -> Self {
        Value::Tensor(Tensor::Dense(tensor))
    }

    /// The value's type as a user reads it in messages.
    pub fn type_name(&self) -> String {
        match self {
            Value::None => "none".into(),
            Value::Int(_) => "int".into(),
            Value::Float(_) => "float".into(),
            Value::Bool(_) => "bool".into(),
            Value::Str(_) => "string".into(),
            Value::List(_) => "list".into(),
            Value::Tensor(t) => t.type_string(),
            Value::Struct(s) => s.borrow().name.clone(),
            Value::Handle(h) => h.type_name().into(),
        }
    }

    /// Whether the value counts as true in a condition: a bool, or a bool
    /// tensor of one element (`x[0] > 0`).
    pub fn truthy(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Tensor(t) if t.dtype() == tl_syntax::DType::Bool => {
                match crate::convert::scalar_of(&t.to_dense().ok()?).ok()? {
                    Value::Bool(b) => Some(b),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::List(_) | Value::Struct(_) => {
                crate::display::write_within(f, self, MAX_STRING_BYTES)
            }
            Value::None => f.write_str("none"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write_float(f, *x),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => f.write_str(s),
            Value::Tensor(t) => crate::display::write_tensor(f, t),
            Value::Handle(h) => write!(f, "<{}>", h.type_name()),
        }
    }
}

/// Floats print like Python's `repr`: always with a decimal point or exponent.
fn write_float(f: &mut fmt::Formatter<'_>, x: f64) -> fmt::Result {
    if let Some(precision) = f.precision() {
        return write!(f, "{x:.precision$}");
    }
    if x.is_finite() && x == x.trunc() && x.abs() < 1e16 {
        write!(f, "{x:.1}")
    } else if x != 0.0 && (x.abs() < 1e-4 || x.abs() >= 1e16) {
        write!(f, "{x:e}")
    } else {
        write!(f, "{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn very_deep_lists_and_long_struct_chains_drop_without_recursion() {
        // Far deeper than a test thread's stack could take recursively.
        let mut list = Value::list(Vec::new());
        let mut chain = Value::record("Node", vec![("next".into(), Value::None)]);
        for _ in 0..1_000_000 {
            list = Value::list(vec![list, Value::Int(1)]);
            chain = Value::record("Node", vec![("next".into(), chain)]);
        }
        drop((list, chain));
    }

    #[test]
    fn a_value_is_three_words() {
        // The interpreter moves values on every step: a bigger variant
        // belongs behind a pointer.
        assert!(std::mem::size_of::<Value>() <= 24);
    }

    #[test]
    fn shared_items_outlive_the_dropped_list() {
        let shared = Value::list(vec![Value::Int(7)]);
        drop(Value::list(vec![shared.clone(), shared.clone()]));
        assert_eq!(shared.to_string(), "[7]");
    }
}
