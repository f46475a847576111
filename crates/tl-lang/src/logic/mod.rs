//! Logic programming as tensor operations: domains, relations (0/1 tensors
//! over their domains, stored sparsely), facts, rules evaluated to a fixpoint
//! (`fixpoint`), and queries.
//!
//! `program` resolves and checks the items, `tuples` stores relations,
//! `fixpoint` runs the rules, and [`Logic`] is what a running program holds:
//! every relation closed under the rules, its tensor made on first use.

pub mod fixpoint;
pub mod program;
pub mod tuples;

#[cfg(test)]
mod tests;

use std::cell::OnceCell;

use tl_syntax::ast::{Atom, Item};

use crate::error::{LangError, Result};
use crate::value::Value;
use program::{LogicProgram, Term, Variables};
use tuples::TupleSet;

/// The relations of a running program, closed under its rules.
pub struct Logic {
    pub program: LogicProgram,
    sets: Vec<TupleSet>,
    tensors: Vec<OnceCell<Value>>,
}

impl Logic {
    /// Resolves the logic items and runs the rules; the first static error
    /// (the checker reports them all) stops it.
    pub fn new(items: &[Item]) -> Result<Self> {
        let (program, errors) = LogicProgram::build(items);
        if let Some(first) = errors.into_iter().next() {
            return Err(LangError::from_diagnostic(first));
        }
        let sets = fixpoint::fixpoint(&program)?;
        Ok(Logic {
            tensors: sets.iter().map(|_| OnceCell::new()).collect(),
            program,
            sets,
        })
    }

    /// The tuples of the relation `name`.
    pub fn tuples(&self, name: &str) -> Option<&TupleSet> {
        self.program.relation(name).map(|r| &self.sets[r])
    }

    /// The relation `name` as a bool tensor over its domains.
    pub fn tensor(&self, name: &str) -> Option<Result<Value>> {
        let relation = self.program.relation(name)?;
        let cell = &self.tensors[relation];
        if let Some(value) = cell.get() {
            return Some(Ok(value.clone()));
        }
        Some(self.sets[relation].to_tensor().map(|t| {
            let value = Value::tensor(t);
            cell.get_or_init(|| value).clone()
        }))
    }

    /// `R(args)?`: a bool without variables; with one, the names that satisfy
    /// it in domain order; with several, rows of names in lexicographic
    /// domain order.
    pub fn query(&self, atom: &Atom) -> Result<Value> {
        let mut vars = Variables::default();
        let mut errors = Vec::new();
        let resolved = self.program.resolve_atom(atom, &mut vars, &mut errors);
        // The checker reports these too; a program run unchecked meets them here.
        if let Some(first) = errors.into_iter().next() {
            return Err(LangError::from_diagnostic(first));
        }
        let Some(resolved) = resolved else {
            return Err(LangError::internal(
                "a query resolved to nothing without an error",
            ));
        };
        let mut answers: Vec<Vec<u32>> = Vec::new();
        let mut binding = vec![0u32; vars.vars.len()];
        'tuples: for tuple in self.sets[resolved.relation].rows() {
            let mut seen = vec![false; binding.len()];
            for (&value, term) in tuple.iter().zip(&resolved.terms) {
                match *term {
                    Term::Const(p) if p != value => continue 'tuples,
                    Term::Const(_) => {}
                    Term::Var(v) if seen[v] && binding[v] != value => continue 'tuples,
                    Term::Var(v) => {
                        seen[v] = true;
                        binding[v] = value;
                    }
                }
            }
            answers.push(binding.clone());
        }
        answers.sort_unstable();
        answers.dedup();
        let name = |var: usize, position: u32| {
            let domain = &self.program.domains[vars.vars[var].1];
            Value::str(&domain.elements[position as usize])
        };
        Ok(match vars.vars.len() {
            0 => Value::Bool(!answers.is_empty()),
            1 => Value::list(answers.iter().map(|row| name(0, row[0])).collect()),
            _ => Value::list(
                (answers.iter())
                    .map(|row| {
                        Value::list(row.iter().enumerate().map(|(v, &p)| name(v, p)).collect())
                    })
                    .collect(),
            ),
        })
    }
}
