//! Rules evaluated to a fixpoint by semi-naive forward chaining.
//!
//! A rule's body is a join: a sum over the variables not in the head of the
//! product of its atoms' 0/1 tensors, followed by a step. Over sparse tuple
//! lists that contraction is a nested loop: the first atom's tuples are
//! scanned, and every later atom is looked up in a [`KeyIndex`] by the
//! columns already bound, so the work is proportional to the matches, never
//! to the product of the domains. The step is the membership test: a head
//! tuple already known is dropped.
//!
//! Semi-naive: the first round runs every rule on everything known; each
//! later round runs a rule once per derived atom of its body, with that atom
//! reading only the tuples the previous round added (the delta) and the others
//! reading everything. Any new tuple uses at least one new tuple, so nothing
//! is missed, and old combinations are not joined again.

use std::collections::HashMap;
use std::ops::Range;

use rayon::prelude::*;

use super::program::{LogicProgram, ResolvedAtom, ResolvedRule, Term};
use super::tuples::{KeyIndex, TupleSet};
use crate::error::{LangError, Result};

/// Every relation's tuples once no rule adds any.
pub fn fixpoint(program: &LogicProgram) -> Result<Vec<TupleSet>> {
    let empty = || -> Result<Vec<TupleSet>> {
        (program.relations.iter())
            .map(|r| {
                TupleSet::new(
                    r.domains
                        .iter()
                        .map(|&d| program.domains[d].size())
                        .collect(),
                )
            })
            .collect()
    };
    let mut sets = empty()?;
    for (relation, tuple) in &program.facts {
        sets[*relation].insert(tuple)?;
    }
    let derived: Vec<bool> = (0..sets.len())
        .map(|r| program.rules.iter().any(|rule| rule.head.relation == r))
        .collect();
    let mut indexes = IndexCache::default();
    let mut delta = empty()?;
    for rule in &program.rules {
        let found = run_rule(rule, None, &sets, &mut indexes)?;
        add_new(
            &mut sets[rule.head.relation],
            &found,
            &mut delta[rule.head.relation],
        )?;
    }
    while delta.iter().any(|d| !d.is_empty()) {
        let previous = std::mem::replace(&mut delta, empty()?);
        for rule in &program.rules {
            for (position, atom) in rule.positive.iter().enumerate() {
                let rows = &previous[atom.relation];
                if !derived[atom.relation] || rows.is_empty() {
                    continue;
                }
                let found = run_rule(rule, Some((position, rows)), &sets, &mut indexes)?;
                add_new(
                    &mut sets[rule.head.relation],
                    &found,
                    &mut delta[rule.head.relation],
                )?;
            }
        }
    }
    Ok(sets)
}

/// Adds the tuples of `found` to `set`, recording the new ones in `delta`.
fn add_new(set: &mut TupleSet, found: &[TupleSet], delta: &mut TupleSet) -> Result<()> {
    for tuple in found.iter().flat_map(|part| part.rows()) {
        if set.insert(tuple)? {
            delta.insert(tuple)?;
        }
    }
    Ok(())
}

/// Indexes of the relations by column sets, rebuilt when a relation grew.
#[derive(Default)]
struct IndexCache {
    /// Keyed by relation and columns; holds the relation's size when built.
    built: HashMap<(usize, Vec<usize>), (usize, KeyIndex)>,
}

impl IndexCache {
    /// Builds (or rebuilds, if the relation grew) the index.
    fn refresh(&mut self, sets: &[TupleSet], relation: usize, columns: &[usize]) {
        let len = sets[relation].len();
        let fresh = || (len, KeyIndex::build(&sets[relation], columns));
        let entry = self.built.entry((relation, columns.to_vec()));
        let entry = entry.or_insert_with(fresh);
        if entry.0 != len {
            *entry = fresh();
        }
    }

    fn get(&self, relation: usize, columns: &[usize]) -> Option<&KeyIndex> {
        self.built
            .get(&(relation, columns.to_vec()))
            .map(|(_, index)| index)
    }
}

/// How one atom of a join is matched, given the variables bound before it.
struct Step {
    relation: usize,
    /// Columns whose value is known before the step (an element, or a
    /// variable bound earlier), with where the value comes from.
    key: Vec<(usize, Term)>,
    /// Columns that bind a new variable.
    binds: Vec<(usize, usize)>,
    /// Columns that repeat a variable bound by an earlier column of this atom.
    repeats: Vec<(usize, usize)>,
}

/// The head tuples the rule derives that are not yet known (in parts, which
/// may repeat a tuple); with a delta, the body atom at that position reads
/// only those tuples.
fn run_rule(
    rule: &ResolvedRule,
    delta: Option<(usize, &TupleSet)>,
    sets: &[TupleSet],
    indexes: &mut IndexCache,
) -> Result<Vec<TupleSet>> {
    let steps = plan(rule, delta.map(|(p, _)| p));
    let key_columns = |step: &Step| step.key.iter().map(|(c, _)| *c).collect::<Vec<_>>();
    // The delta atom comes first and is scanned; a step with no known
    // column scans its relation; every other step looks its tuples up.
    let indexed = |level: usize, step: &Step| {
        let scanned_delta = level == 0 && delta.is_some();
        !step.key.is_empty() && !scanned_delta
    };
    for (level, step) in steps.iter().enumerate() {
        if indexed(level, step) {
            indexes.refresh(sets, step.relation, &key_columns(step));
        }
    }
    let keys: Vec<Option<&KeyIndex>> = (steps.iter().enumerate())
        .map(|(level, step)| match indexed(level, step) {
            true => indexes.get(step.relation, &key_columns(step)),
            false => None,
        })
        .collect();
    let head_sizes = sets[rule.head.relation].sizes();
    let delta = delta.map(|(_, rows)| rows);
    // The first step scans its tuples (it has no key, or it is the delta):
    // the scan is cut into parts joined in parallel, each finding its own
    // head tuples; the parts come back in order, so the result is the same
    // on any number of threads.
    let scanned = match (delta, steps.first()) {
        (Some(rows), _) => rows.len(),
        (None, Some(first)) if keys[0].is_none() => sets[first.relation].len(),
        _ => 1,
    };
    let parts = split(scanned, rayon::current_num_threads() * 4);
    parts
        .into_par_iter()
        .map(|first_rows| {
            let mut join = Join {
                rule,
                steps: &steps,
                keys: &keys,
                sets,
                delta,
                first_rows,
                bindings: vec![0; rule.var_count],
                found: TupleSet::new(head_sizes.to_vec())?,
                scratch: Vec::with_capacity(rule.head.terms.len()),
                error: None,
            };
            join.step(0);
            match join.error {
                Some(error) => Err(error),
                None => Ok(join.found),
            }
        })
        .collect()
}

/// `0..len` cut into at most `parts` ranges of at least a few thousand.
fn split(len: usize, parts: usize) -> Vec<Range<usize>> {
    const MIN_PART: usize = 4096;
    let parts = parts.clamp(1, len.div_ceil(MIN_PART).max(1));
    let size = len.div_ceil(parts).max(1);
    (0..parts)
        .map(|p| (p * size).min(len)..((p + 1) * size).min(len))
        .filter(|r| !r.is_empty() || len == 0)
        .collect()
}

/// The order of the positive atoms: the delta atom first, then at each step
/// the atom with the most columns already known (fewest matches to scan).
fn plan(rule: &ResolvedRule, delta: Option<usize>) -> Vec<Step> {
    let mut left: Vec<usize> = (0..rule.positive.len()).collect();
    let mut bound = vec![false; rule.var_count];
    let mut steps = Vec::new();
    while !left.is_empty() {
        let known = |atom: &ResolvedAtom| {
            (atom.terms.iter())
                .filter(|t| match t {
                    Term::Const(_) => true,
                    Term::Var(v) => bound[*v],
                })
                .count()
        };
        let pick = match delta {
            Some(p) if steps.is_empty() => p,
            _ => *left
                .iter()
                .max_by_key(|&&i| (known(&rule.positive[i]), std::cmp::Reverse(i)))
                .unwrap_or(&left[0]),
        };
        left.retain(|&i| i != pick);
        steps.push(step_for(&rule.positive[pick], &mut bound));
    }
    steps
}

fn step_for(atom: &ResolvedAtom, bound: &mut [bool]) -> Step {
    let mut step = Step {
        relation: atom.relation,
        key: Vec::new(),
        binds: Vec::new(),
        repeats: Vec::new(),
    };
    let mut first_column: HashMap<usize, usize> = HashMap::new();
    for (column, term) in atom.terms.iter().enumerate() {
        match *term {
            Term::Var(v) if !bound[v] => match first_column.get(&v) {
                Some(&earlier) => step.repeats.push((column, earlier)),
                None => {
                    first_column.insert(v, column);
                    step.binds.push((column, v));
                }
            },
            _ => step.key.push((column, *term)),
        }
    }
    for &(_, v) in &step.binds {
        bound[v] = true;
    }
    step
}

/// The depth-first join of one rule: one level per step.
struct Join<'a> {
    rule: &'a ResolvedRule,
    steps: &'a [Step],
    keys: &'a [Option<&'a KeyIndex>],
    sets: &'a [TupleSet],
    delta: Option<&'a TupleSet>,
    /// The tuples the first step scans (of the delta, or of its relation).
    first_rows: Range<usize>,
    bindings: Vec<u32>,
    /// New head tuples, each once.
    found: TupleSet,
    scratch: Vec<u32>,
    /// The first failure (too many tuples); the join stops adding after it.
    error: Option<LangError>,
}

impl Join<'_> {
    fn step(&mut self, level: usize) {
        let Some(step) = self.steps.get(level) else {
            self.emit();
            return;
        };
        let set = &self.sets[step.relation];
        match (self.keys[level], level, self.delta) {
            (_, 0, Some(delta)) => {
                for i in self.first_rows.clone() {
                    self.try_tuple(level, delta.row(i));
                }
            }
            (None, 0, None) => {
                for i in self.first_rows.clone() {
                    self.try_tuple(level, set.row(i));
                }
            }
            (Some(index), _, _) => {
                let key = index.key(step.key.iter().map(|(_, t)| self.value(*t)));
                for &i in index.lookup(key) {
                    self.try_tuple(level, set.row(i as usize));
                }
            }
            (None, _, _) => {
                for tuple in set.rows() {
                    self.try_tuple(level, tuple);
                }
            }
        }
    }

    #[inline]
    fn value(&self, term: Term) -> u32 {
        match term {
            Term::Const(p) => p,
            Term::Var(v) => self.bindings[v],
        }
    }

    /// Binds the step's variables from `tuple` if it matches, and goes on.
    #[inline]
    fn try_tuple(&mut self, level: usize, tuple: &[u32]) {
        let step = &self.steps[level];
        // A scanned delta or relation still has to match the known columns.
        if !(step.key.iter()).all(|&(c, t)| tuple[c] == self.value(t)) {
            return;
        }
        if !(step.repeats.iter()).all(|&(c, earlier)| tuple[c] == tuple[earlier]) {
            return;
        }
        for &(c, v) in &step.binds {
            self.bindings[v] = tuple[c];
        }
        self.step(level + 1);
    }

    /// A full binding: unless a negated atom holds, records the head tuple.
    fn emit(&mut self) {
        let mut tuple = std::mem::take(&mut self.scratch);
        let blocked = self.rule.negated.iter().any(|negated| {
            tuple.clear();
            tuple.extend(negated.terms.iter().map(|t| self.value(*t)));
            self.sets[negated.relation].contains(&tuple)
        });
        if !blocked {
            tuple.clear();
            tuple.extend(self.rule.head.terms.iter().map(|t| self.value(*t)));
            if !self.sets[self.rule.head.relation].contains(&tuple) && self.error.is_none() {
                if let Err(e) = self.found.insert(&tuple) {
                    self.error = Some(e);
                }
            }
        }
        self.scratch = tuple;
    }
}
