//! Limits on the work one render of a chat template may do, and the budget
//! that enforces them while it runs.
//!
//! A chat template comes from the model file, that is from whoever made the
//! file, and Jinja lets it loop, recurse and build strings and lists.
//! minijinja itself bounds the instructions a render executes (fuel) and how
//! deep it recurses; everything else a template could blow up (the size of
//! what it builds, writes, compares or sorts) is charged to a
//! [`RenderBudget`] by the operator guards (`guard.rs`) and the bounded
//! builtins (`bounded.rs`) *before* the work is done, so a hostile template
//! stops with an error naming the limit instead of exhausting memory or
//! spinning.
//!
//! Work is counted in units: one per byte of string built, copied, scanned or
//! compared, and [`ELEMENT_UNITS`] per list or map element built or visited.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// Work units charged per element a guard or builtin builds or visits: about
/// the bytes a list slot takes.
pub(crate) const ELEMENT_UNITS: u64 = 16;

/// Limits on one render of a chat template.
///
/// Limits that grow with the conversation are a floor plus an allowance per
/// byte of input (the messages' roles and contents and the extras' JSON), so a
/// long conversation is never refused by a template that treats it in
/// proportion, while a hostile template is stopped after work proportional to
/// what it was given. The defaults render every template of the test data with
/// long conversations and tools many times over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateLimits {
    /// Template instructions (minijinja fuel) for an empty conversation.
    pub fuel: u64,
    /// More instructions per input byte.
    pub fuel_per_input_byte: u64,
    /// Bytes of text the template may write for an empty conversation,
    /// including text captured by macros and `{% set %}` blocks.
    pub output_bytes: usize,
    /// More output bytes per input byte.
    pub output_bytes_per_input_byte: usize,
    /// Work units the template may spend (see the module documentation), as a
    /// multiple of its output limit. This bounds the memory and time that
    /// operators such as `~` could otherwise double with every step.
    pub work_per_output_byte: usize,
    /// Elements one value may hold, nested ones included, for an empty
    /// conversation; the input's byte count is added to it.
    pub elements: usize,
    /// How deeply values may nest and the template may recurse (minijinja's
    /// recursion limit, where a macro call counts about five). Both use the
    /// native stack.
    pub depth: usize,
}

impl Default for TemplateLimits {
    fn default() -> Self {
        Self {
            fuel: 500_000,
            fuel_per_input_byte: 8,
            output_bytes: 1 << 20,
            output_bytes_per_input_byte: 4,
            work_per_output_byte: 64,
            elements: 200_000,
            depth: 256,
        }
    }
}

/// The limits of one render, scaled to its input, and what it has spent.
///
/// Shared by the guard closures of one render's environment; once a limit is
/// exceeded every later charge fails too, so nothing keeps running after it.
pub(crate) struct RenderBudget {
    fuel: u64,
    output_limit: u64,
    work_limit: u64,
    element_limit: usize,
    depth_limit: usize,
    written: AtomicU64,
    work: AtomicU64,
    exceeded: AtomicBool,
    /// `type_name` of minijinja's namespace object, the only mutable value a
    /// template can make (see [`Shape::holds_namespace`]).
    namespace_type: Option<&'static str>,
}

impl fmt::Debug for RenderBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenderBudget")
            .field("fuel", &self.fuel)
            .field("output_limit", &self.output_limit)
            .field("work_limit", &self.work_limit)
            .field("written", &self.written.load(Ordering::Relaxed))
            .field("work", &self.work.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What [`RenderBudget::measure`] found in a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The value and everything nested in it (shared parts counted each time
    /// they are reached, as a comparison or a copy would reach them).
    pub elements: usize,
    /// Nesting levels, 1 for a value that holds nothing.
    pub depth: usize,
    /// Bytes of all strings in it.
    pub string_bytes: u64,
    /// Whether a namespace is in it (the value itself included).
    pub holds_namespace: bool,
}

impl Shape {
    /// Work a walk over this value costs.
    pub(crate) fn units(&self) -> u64 {
        (self.elements as u64)
            .saturating_mul(ELEMENT_UNITS)
            .saturating_add(self.string_bytes)
    }
}

impl RenderBudget {
    /// The budget of a render whose messages and extras take `input_bytes`.
    pub(crate) fn new(limits: &TemplateLimits, input_bytes: usize) -> Self {
        let input = input_bytes as u64;
        let output_limit = (limits.output_bytes as u64)
            .saturating_add((limits.output_bytes_per_input_byte as u64).saturating_mul(input));
        Self {
            fuel: limits
                .fuel
                .saturating_add(limits.fuel_per_input_byte.saturating_mul(input)),
            output_limit,
            work_limit: output_limit.saturating_mul(limits.work_per_output_byte as u64),
            element_limit: limits.elements.saturating_add(input_bytes),
            depth_limit: limits.depth,
            written: AtomicU64::new(0),
            work: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
            namespace_type: namespace_type_name(),
        }
    }

    /// Instructions the render may execute.
    pub(crate) fn fuel(&self) -> u64 {
        self.fuel
    }

    /// Bytes the render may write.
    #[cfg(test)]
    pub(crate) fn output_limit(&self) -> u64 {
        self.output_limit
    }

    /// Work units the render may spend.
    #[cfg(test)]
    pub(crate) fn work_limit(&self) -> u64 {
        self.work_limit
    }

    pub(crate) fn depth_limit(&self) -> usize {
        self.depth_limit
    }

    /// Work units not spent yet.
    pub(crate) fn remaining_work(&self) -> u64 {
        self.work_limit
            .saturating_sub(self.work.load(Ordering::Relaxed))
    }

    /// Work and output spent so far.
    pub(crate) fn spent(&self) -> (u64, u64) {
        (
            self.work.load(Ordering::Relaxed),
            self.written.load(Ordering::Relaxed),
        )
    }

    /// Fails once any limit has been exceeded, so that a template cannot go on
    /// after an error some filter swallowed.
    pub(crate) fn check_open(&self) -> Result<(), Error> {
        if self.exceeded.load(Ordering::Relaxed) {
            return Err(limit_error(
                "the template already exceeded a limit earlier in this render",
            ));
        }
        Ok(())
    }

    /// Charges `units` of work, failing (for good) past the work limit.
    pub(crate) fn charge_work(&self, units: u64) -> Result<(), Error> {
        self.check_open()?;
        let spent = self
            .work
            .fetch_add(units, Ordering::Relaxed)
            .saturating_add(units);
        if spent > self.work_limit {
            return Err(self.work_exceeded("strings and lists it built, copied or compared"));
        }
        Ok(())
    }

    fn work_exceeded(&self, what: &str) -> Error {
        self.exceed(format!(
            "the template exceeded its work limit of {} units ({what})",
            self.work_limit
        ))
    }

    /// Charges `bytes` of written text, failing (for good) past the output limit.
    pub(crate) fn charge_output(&self, bytes: u64) -> Result<(), Error> {
        self.check_open()?;
        let written = self
            .written
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if written > self.output_limit {
            return Err(self.exceed(format!(
                "the template exceeded its output limit of {} bytes",
                self.output_limit
            )));
        }
        Ok(())
    }

    /// Fails (for good) when a value would hold more than the element limit.
    pub(crate) fn check_elements(&self, elements: usize) -> Result<(), Error> {
        if elements > self.element_limit {
            return Err(self.exceed(format!(
                "the template exceeded its element limit: a value would hold more than {} elements",
                self.element_limit
            )));
        }
        Ok(())
    }

    /// Fails (for good) when a value would nest deeper than the depth limit.
    pub(crate) fn check_depth(&self, depth: usize) -> Result<(), Error> {
        if depth > self.depth_limit {
            return Err(self.exceed(format!(
                "the template exceeded its depth limit: a value would nest more than {} levels",
                self.depth_limit
            )));
        }
        Ok(())
    }

    fn exceed(&self, message: String) -> Error {
        self.exceeded.store(true, Ordering::Relaxed);
        limit_error(message)
    }

    /// Walks `value` without recursion, stopping at the element, depth or work
    /// limit, and charges the walk.
    pub(crate) fn measure(&self, value: &Value) -> Result<Shape, Error> {
        self.check_open()?;
        let step_limit = usize::try_from(self.remaining_work() / ELEMENT_UNITS)
            .unwrap_or(usize::MAX)
            .min(self.element_limit);
        let mut shape = Shape::default();
        let mut pending = vec![(value.clone(), 1usize)];
        while let Some((item, depth)) = pending.pop() {
            shape.elements += 1;
            shape.depth = shape.depth.max(depth);
            if shape.elements > step_limit {
                // Either the value is too big, or walking it would cost more
                // work than is left.
                self.check_elements(shape.elements)?;
                return Err(self.work_exceeded("a value is too big to walk"));
            }
            self.check_depth(shape.depth)?;
            if let Some(text) = item.as_str() {
                shape.string_bytes += text.len() as u64;
                continue;
            }
            shape.holds_namespace |= self.is_namespace(&item);
            push_children(&item, depth + 1, &mut pending);
        }
        self.charge_work(shape.units())?;
        Ok(shape)
    }

    /// Elements directly in `value` (1 for a value that is not a container),
    /// counting an iterable's items when it has no known length; charged.
    pub(crate) fn top_level_len(&self, value: &Value) -> Result<usize, Error> {
        let len = match value.kind() {
            ValueKind::Seq | ValueKind::Map => value.len().unwrap_or(0),
            ValueKind::Iterable => match value.len() {
                Some(len) => len,
                None => self.count_items(value)?,
            },
            _ => 1,
        };
        self.check_elements(len)?;
        self.charge_work((len as u64).saturating_mul(ELEMENT_UNITS))?;
        Ok(len)
    }

    fn count_items(&self, value: &Value) -> Result<usize, Error> {
        let mut count = 0usize;
        if let Ok(items) = value.try_iter() {
            for _ in items {
                count += 1;
                self.check_elements(count)?;
            }
        }
        Ok(count)
    }

    /// Bytes `value` prints as, charged as work; counting stops (with an
    /// error) where the work budget would run out.
    pub(crate) fn display_len(&self, value: &Value) -> Result<u64, Error> {
        if let Some(text) = value.as_str() {
            let len = text.len() as u64;
            self.charge_work(len)?;
            return Ok(len);
        }
        if is_scalar(value) {
            // Numbers, booleans, none: a few bytes, not worth a formatter pass.
            self.charge_work(ELEMENT_UNITS)?;
            return Ok(ELEMENT_UNITS);
        }
        // A container prints its elements: walk it first so that a deep or
        // self-referencing value is refused before the recursive printer runs.
        self.measure(value)?;
        let mut counter = ByteCounter::new(self.remaining_work());
        if fmt::write(&mut counter, format_args!("{value}")).is_err() {
            return Err(self.work_exceeded("a value prints too long"));
        }
        self.charge_work(counter.bytes)?;
        Ok(counter.bytes)
    }

    fn is_namespace(&self, value: &Value) -> bool {
        match (value.as_object(), self.namespace_type) {
            (Some(object), Some(name)) => object.type_name() == name,
            // Without the probe we cannot tell namespaces from other objects:
            // treat every opaque object as one (assignments refuse them).
            (Some(_), None) => matches!(value.kind(), ValueKind::Map | ValueKind::Plain),
            _ => false,
        }
    }
}

/// Pushes the children of a container (a map's keys and values).
fn push_children(value: &Value, depth: usize, pending: &mut Vec<(Value, usize)>) {
    match value.kind() {
        ValueKind::Map => {
            if let Some(pairs) = value.as_object().and_then(|object| object.try_iter_pairs()) {
                for (key, item) in pairs {
                    pending.push((key, depth));
                    pending.push((item, depth));
                }
            }
        }
        ValueKind::Seq | ValueKind::Iterable => {
            if let Ok(items) = value.try_iter() {
                pending.extend(items.map(|item| (item, depth)));
            }
        }
        _ => {}
    }
}

/// Whether `value` holds no other values and prints in a few bytes.
pub(crate) fn is_scalar(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::Undefined | ValueKind::None | ValueKind::Bool | ValueKind::Number
    )
}

/// The `type_name` of minijinja's namespace object, found by making one (the
/// type itself is private to minijinja).
fn namespace_type_name() -> Option<&'static str> {
    minijinja::functions::namespace(None)
        .ok()
        .and_then(|namespace| namespace.as_object().map(|object| object.type_name()))
}

/// A limit error: an invalid operation as far as minijinja is concerned, so
/// that it carries the template line like any other.
pub(crate) fn limit_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// A `fmt::Write` that only counts, and fails past a cap.
struct ByteCounter {
    bytes: u64,
    cap: u64,
}

impl ByteCounter {
    fn new(cap: u64) -> Self {
        Self { bytes: 0, cap }
    }
}

impl fmt::Write for ByteCounter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes = self.bytes.saturating_add(s.len() as u64);
        if self.bytes > self.cap {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

/// A `fmt::Write` into a string that fails past a cap, for builtins that
/// print values (`string`, `pprint`).
pub(crate) struct BoundedString {
    pub(crate) text: String,
    cap: usize,
}

impl BoundedString {
    pub(crate) fn new(cap: u64) -> Self {
        Self {
            text: String::new(),
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
        }
    }
}

impl fmt::Write for BoundedString {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.text.len().saturating_add(s.len()) > self.cap {
            return Err(fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}
