//! Variables: the running frame's slots, read and written by the slot the
//! resolver gave (the fast path), or found by name (format strings,
//! equations, the REPL's listing, and names the resolver left unresolved),
//! then the globals.

use tl_syntax::ast::{Locals, Resolved};
use tl_syntax::Span;

use super::{types, Flow, Interpreter};
use crate::error::LangError;
use crate::value::Value;

impl Interpreter {
    /// The live value in a slot of the running frame.
    #[inline]
    pub(crate) fn slot(&self, slot: u32) -> Option<&Value> {
        self.stack.get(self.frame.base + slot as usize)?.as_ref()
    }

    /// The live value in a slot of the running frame, to update in place.
    #[inline]
    pub(crate) fn slot_mut(&mut self, slot: u32) -> Option<&mut Value> {
        self.stack
            .get_mut(self.frame.base + slot as usize)?
            .as_mut()
    }

    /// The value of a variable: its slot when resolved and live, else by name.
    #[inline]
    pub(crate) fn variable(&self, name: &str, slot: Resolved, span: Span) -> Flow<Value> {
        if let Resolved::At(slot) = slot {
            if let Some(value) = self.slot(slot) {
                return Ok(value.clone());
            }
        }
        self.lookup(name, span)
    }

    /// The live slot of the innermost variable called `name` in the running
    /// frame (slots are never reused within a frame, so the highest live
    /// one is the innermost).
    fn find_live(&self, name: &str) -> Option<u32> {
        let layout = &self.frame.layout;
        (0..layout.len())
            .rev()
            .find(|&k| layout.names[k] == name && self.slot(k as u32).is_some())
            .map(|k| k as u32)
    }

    /// The running frame's live variables, with their names.
    pub(crate) fn live_locals(&self) -> impl Iterator<Item = (&str, &Value)> {
        let names = &self.frame.layout.names;
        (names.iter().enumerate())
            .filter_map(|(k, name)| Some((name.as_str(), self.slot(k as u32)?)))
    }

    /// The value of a variable by name: the running frame, then the globals.
    pub(crate) fn lookup(&self, name: &str, span: Span) -> Flow<Value> {
        if let Some(value) = self.find_live(name).and_then(|k| self.slot(k)) {
            return Ok(value.clone());
        }
        if let Some(value) = self.globals.get(name) {
            return Ok(value.clone());
        }
        // A relation's name is its 0/1 tensor.
        if let Some(tensor) = self.logic.as_ref().and_then(|l| l.tensor(name)) {
            return Ok(tensor.map_err(|e| e.or_at(span))?);
        }
        Err(self.unknown_name(name, span).into())
    }

    /// Whether `name` is a variable of the running frame or a global.
    pub(crate) fn is_variable(&self, name: &str) -> bool {
        self.find_live(name).is_some() || self.globals.contains_key(name)
    }

    /// A new variable's value, in the slot the resolver gave it.
    #[inline]
    pub(crate) fn declare(&mut self, slot: Resolved, value: Value) -> Flow<()> {
        let Resolved::At(slot) = slot else {
            return Err(LangError::internal("a declaration without a slot").into());
        };
        match self.stack.get_mut(self.frame.base + slot as usize) {
            Some(place) => *place = Some(value),
            None => return Err(LangError::internal("a slot outside its frame").into()),
        }
        Ok(())
    }

    /// Empties the slots of a block's locals when it ends.
    #[inline]
    pub(crate) fn end_locals(&mut self, locals: Locals) {
        if locals.start == locals.end {
            return;
        }
        let base = self.frame.base;
        let range = base + locals.start as usize..base + locals.end as usize;
        if let Some(slots) = self.stack.get_mut(range) {
            slots.iter_mut().for_each(|slot| *slot = None);
        }
    }

    /// Stores a value in a slot of the running frame.
    #[inline]
    pub(crate) fn put_slot(&mut self, slot: u32, value: Value) {
        match (self.stack.get_mut(self.frame.base + slot as usize), value) {
            // A number over a number: nothing to drop.
            (Some(Some(Value::Int(held))), Value::Int(new)) => *held = new,
            (Some(Some(Value::Float(held))), Value::Float(new)) => *held = new,
            (Some(place), value) => *place = Some(value),
            (None, _) => {}
        }
    }

    /// Sets an existing variable (by its slot when resolved and live, else
    /// by name, then the globals) or reports it undeclared.
    pub(crate) fn set_variable(
        &mut self,
        name: &str,
        slot: Resolved,
        value: Value,
        span: Span,
    ) -> Flow<()> {
        let live = match slot {
            Resolved::At(k) if self.slot(k).is_some() => Some(k),
            _ => self.find_live(name),
        };
        if let Some(k) = live {
            return self.set_slot(k, name, value, span);
        }
        if let Some(place) = self.globals.get_mut(name) {
            let ty = self.global_types.get(name);
            *place = types::replacement(place, value, ty)
                .map_err(|e| assignment_error(e, name, span))?;
            return Ok(());
        }
        Err(
            LangError::at(format!("assignment to undeclared variable `{name}`"), span)
                .with_hint(format!("declare it first with `let {name} = ...;`"))
                .into(),
        )
    }

    /// Whether the slot's variable has a written type.
    pub(crate) fn is_typed(&self, slot: u32) -> bool {
        matches!(self.frame.layout.types.get(slot as usize), Some(Some(_)))
    }

    /// Stores a new value in the live slot of the variable `name`, checked
    /// against its written type, and learnable if the old one was.
    pub(crate) fn set_slot(&mut self, slot: u32, name: &str, value: Value, span: Span) -> Flow<()> {
        let ty = (self.frame.layout.types.get(slot as usize)).and_then(Option::as_ref);
        let Some(old) = self.slot(slot) else {
            return Err(LangError::internal("a variable left its frame").into());
        };
        let new =
            types::replacement(old, value, ty).map_err(|e| assignment_error(e, name, span))?;
        self.put_slot(slot, new);
        Ok(())
    }

    /// The value a variable holds, for an element store in place.
    pub(crate) fn held(&self, name: &str, slot: Resolved) -> Option<&Value> {
        let live = match slot {
            Resolved::At(k) if self.slot(k).is_some() => Some(k),
            _ => self.find_live(name),
        };
        match live {
            Some(k) => self.slot(k),
            None => self.globals.get(name),
        }
    }
}

fn assignment_error(e: LangError, name: &str, span: Span) -> LangError {
    LangError {
        message: format!("cannot assign to `{name}`: {}", e.message),
        span: Some(span),
        ..e
    }
}
