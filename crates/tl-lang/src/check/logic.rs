//! Relations in expressions: a relation's name is its bool tensor over its
//! domains, and a query `R(args)?` is a bool or a list of names. The logic
//! items themselves are checked once, by `crate::logic::program`.

use tl_syntax::ast::Atom;
use tl_syntax::DType;

use super::body::Body;
use super::ty::{StaticDim, Ty};
use crate::logic::program::Variables;

impl Body<'_, '_> {
    /// The type of relation `r` used as a value.
    pub fn relation_type(&self, relation: usize) -> Ty {
        let dims = (self.decls().logic.column_domains(relation))
            .map(|d| StaticDim::Known(d.size()))
            .collect();
        Ty::tensor(Some(DType::Bool), Some(dims))
    }

    /// `R(args)?`: a bool without variables, a list of names with one, a
    /// list of rows of names with several.
    pub fn query(&mut self, atom: &Atom) -> Ty {
        let mut vars = Variables::default();
        let mut errors = Vec::new();
        self.decls()
            .logic
            .resolve_atom(atom, &mut vars, &mut errors);
        let failed = !errors.is_empty();
        errors.into_iter().for_each(|e| self.report(e));
        let names = || Ty::List(Some(Box::new(Ty::Str)));
        match vars.vars.len() {
            _ if failed => Ty::Unknown,
            0 => Ty::Bool,
            1 => names(),
            _ => Ty::List(Some(Box::new(names()))),
        }
    }
}
