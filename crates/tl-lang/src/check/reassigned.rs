//! Places a pass assumes keep their declared type but that assignment may
//! change: a global tensor (`w = ...` does not convert), and a struct field
//! (`p.x = ...` is not checked against the field's type either). A pass
//! records what the program assigns to them; a place assigned something its
//! assumed type does not describe is taken as unknown in the next pass.

use std::collections::{HashMap, HashSet};

use super::body::Pass;
use super::ty::Ty;

/// Globals and `(struct, field)` pairs taken as holding values of any type.
#[derive(Debug, Default, Clone)]
pub struct Reassigned {
    pub globals: HashSet<String>,
    pub fields: HashSet<(String, String)>,
}

impl Reassigned {
    fn is_subset(&self, other: &Reassigned) -> bool {
        self.globals.is_subset(&other.globals) && self.fields.is_subset(&other.fields)
    }

    /// Adds `more`; false when it holds nothing new.
    pub fn extend(&mut self, more: Reassigned) -> bool {
        let grew = !more.is_subset(self);
        self.globals.extend(more.globals);
        self.fields.extend(more.fields);
        grew
    }
}

/// What one pass saw assigned, joined per place.
#[derive(Debug, Default)]
pub struct Assignments {
    pub globals: HashMap<String, Ty>,
    pub fields: HashMap<(String, String), Ty>,
}

impl Assignments {
    pub fn global(&mut self, name: &str, ty: &Ty) {
        join_into(
            self.globals
                .entry(name.to_string())
                .or_insert_with(|| ty.clone()),
            ty,
        );
    }

    pub fn field(&mut self, struct_name: &str, field: &str, ty: &Ty) {
        let key = (struct_name.to_string(), field.to_string());
        join_into(self.fields.entry(key).or_insert_with(|| ty.clone()), ty);
    }
}

fn join_into(slot: &mut Ty, ty: &Ty) {
    *slot = slot.join(ty);
}

/// The places whose assigned values the pass's assumptions do not describe.
pub fn reassigned(pass: &Pass) -> Reassigned {
    let globals = pass
        .globals
        .iter()
        .filter(|(name, ty)| {
            pass.assigned
                .globals
                .get(name)
                .is_some_and(|assigned| ty.join(assigned) != *ty)
        })
        .map(|(name, _)| name.clone())
        .collect();
    let fields = pass
        .assigned
        .fields
        .iter()
        .filter(|((struct_name, field), assigned)| {
            let declared = pass
                .decls
                .structs
                .get(struct_name.as_str())
                .and_then(|s| s.fields.iter().find(|f| f.name.name == *field))
                .map_or(Ty::Unknown, |f| pass.decls.ty_of_unbound(&f.ty));
            declared.join(assigned) != declared
        })
        .map(|(key, _)| key.clone())
        .collect();
    Reassigned { globals, fields }
}
