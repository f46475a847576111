//! A program's logic items, resolved: domains and their elements, relations
//! and their column domains, facts as element positions, and rules with their
//! variables numbered. Every static mistake of the logic part is found here,
//! once, for both the checker (which reports them all) and the interpreter
//! (which refuses to start on the first).

use std::collections::HashMap;

use tl_syntax::ast::{Atom, DomainDecl, Ident, Item, RelationDecl, Rule};
use tl_syntax::{Diagnostic, Span};

/// A finite set of named elements; an element is its position.
#[derive(Debug)]
pub struct Domain {
    pub name: String,
    pub elements: Vec<String>,
    positions: HashMap<String, u32>,
}

impl Domain {
    /// The position of the element `name`, if it is one.
    pub fn position(&self, name: &str) -> Option<u32> {
        self.positions.get(name).copied()
    }

    pub fn size(&self) -> usize {
        self.elements.len()
    }
}

/// A declared relation: the domain of each column.
#[derive(Debug)]
pub struct RelationInfo {
    pub name: String,
    pub domains: Vec<usize>,
    pub span: Span,
}

/// An argument of an atom in a rule: a variable (numbered within its rule)
/// or an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term {
    Var(usize),
    Const(u32),
}

/// An atom with its relation and arguments resolved.
#[derive(Debug, Clone)]
pub struct ResolvedAtom {
    pub relation: usize,
    pub terms: Vec<Term>,
}

/// A rule: the head holds for every binding of its variables that satisfies
/// every positive atom and no negated one.
#[derive(Debug)]
pub struct ResolvedRule {
    pub head: ResolvedAtom,
    pub positive: Vec<ResolvedAtom>,
    pub negated: Vec<ResolvedAtom>,
    pub var_count: usize,
}

/// The variables of one rule or query, in order of first appearance.
#[derive(Debug, Default)]
pub struct Variables {
    /// Name, domain, and where it first appeared.
    pub vars: Vec<(String, usize, Span)>,
}

impl Variables {
    fn find(&self, name: &str) -> Option<usize> {
        self.vars.iter().position(|(n, _, _)| n == name)
    }
}

/// Everything logical a program declares.
#[derive(Debug, Default)]
pub struct LogicProgram {
    pub domains: Vec<Domain>,
    pub relations: Vec<RelationInfo>,
    domain_names: HashMap<String, usize>,
    relation_names: HashMap<String, usize>,
    /// `(relation, element positions)`.
    pub facts: Vec<(usize, Vec<u32>)>,
    pub rules: Vec<ResolvedRule>,
}

impl LogicProgram {
    /// Resolves the logic items of `items`; the errors come back in source order.
    pub fn build(items: &[Item]) -> (LogicProgram, Vec<Diagnostic>) {
        let mut program = LogicProgram::default();
        let mut out = Vec::new();
        for item in items {
            if let Item::Domain(d) = item {
                program.add_domain(d, &mut out);
            }
        }
        for item in items {
            if let Item::Relation(r) = item {
                program.add_relation(r, &mut out);
            }
        }
        for item in items {
            match item {
                Item::Fact(atom) => program.add_fact(atom, &mut out),
                Item::Rule(rule) => program.add_rule(rule, &mut out),
                _ => {}
            }
        }
        program.check_negations(items, &mut out);
        (program, out)
    }

    /// The relation called `name`.
    pub fn relation(&self, name: &str) -> Option<usize> {
        self.relation_names.get(name).copied()
    }

    /// The domains of a relation's columns.
    pub fn column_domains(&self, relation: usize) -> impl Iterator<Item = &Domain> {
        (self.relations[relation].domains.iter()).map(|&d| &self.domains[d])
    }

    /// The position an index written as `name` fixes when it names an
    /// element: of the column's domain for a relation's tensor (at `axis`),
    /// else of the first domain that lists it.
    pub fn element_index(&self, relation: Option<usize>, axis: usize, name: &str) -> Option<u32> {
        match relation {
            Some(r) => self.domains[*self.relations[r].domains.get(axis)?].position(name),
            None => self.domains.iter().find_map(|d| d.position(name)),
        }
    }

    fn add_domain(&mut self, decl: &DomainDecl, out: &mut Vec<Diagnostic>) {
        if self.domain_names.contains_key(&decl.name.name) {
            out.push(twice("domain", &decl.name));
            return;
        }
        let mut positions = HashMap::new();
        for (i, element) in decl.elements.iter().enumerate() {
            if positions.insert(element.name.clone(), i as u32).is_some() {
                out.push(Diagnostic::error(
                    format!(
                        "`{}` is listed twice in domain `{}`",
                        element.name, decl.name.name
                    ),
                    element.span,
                ));
            }
        }
        self.domain_names
            .insert(decl.name.name.clone(), self.domains.len());
        self.domains.push(Domain {
            name: decl.name.name.clone(),
            elements: decl.elements.iter().map(|e| e.name.clone()).collect(),
            positions,
        });
    }

    fn add_relation(&mut self, decl: &RelationDecl, out: &mut Vec<Diagnostic>) {
        if self.relation_names.contains_key(&decl.name.name) {
            out.push(twice("relation", &decl.name));
            return;
        }
        let mut domains = Vec::new();
        for (_, domain) in &decl.columns {
            match self.domain_names.get(&domain.name) {
                Some(&d) => domains.push(d),
                None => {
                    let names = self.domain_names.keys().map(String::as_str);
                    out.push(unknown("domain", domain, names));
                    return;
                }
            }
        }
        self.relation_names
            .insert(decl.name.name.clone(), self.relations.len());
        self.relations.push(RelationInfo {
            name: decl.name.name.clone(),
            domains,
            span: decl.span,
        });
    }

    fn add_fact(&mut self, atom: &Atom, out: &mut Vec<Diagnostic>) {
        let Some(relation) = self.known_relation(atom, out) else {
            return;
        };
        let mut positions = Vec::new();
        for (arg, domain) in atom.args.iter().zip(self.column_domains(relation)) {
            match domain.position(&arg.name) {
                Some(p) => positions.push(p),
                None => {
                    out.push(
                        not_an_element(arg, domain).with_hint(
                            "a fact lists elements; variables belong in rules and queries",
                        ),
                    );
                    return;
                }
            }
        }
        self.facts.push((relation, positions));
    }

    fn add_rule(&mut self, rule: &Rule, out: &mut Vec<Diagnostic>) {
        let errors = out.len();
        let mut vars = Variables::default();
        let mut positive = Vec::new();
        let mut negated = Vec::new();
        for literal in &rule.body {
            if let Some(atom) = self.resolve_atom(&literal.atom, &mut vars, out) {
                match literal.negated {
                    true => negated.push((atom, &literal.atom)),
                    false => positive.push(atom),
                }
            }
        }
        let bound = vars.vars.len();
        let binds = |v: usize| (positive.iter()).any(|a| a.terms.contains(&Term::Var(v)));
        for (atom, written) in &negated {
            for (term, arg) in atom.terms.iter().zip(&written.args) {
                if matches!(term, Term::Var(v) if !binds(*v)) {
                    out.push(
                        Diagnostic::error(
                            format!("variable `{}` appears only in a negated atom", arg.name),
                            arg.span,
                        )
                        .with_hint(
                            "every variable of a negated atom must also appear in a positive one",
                        ),
                    );
                }
            }
        }
        let head = self.resolve_atom(&rule.head, &mut vars, out);
        // A variable written in a positive atom whose relation is unknown
        // is not "only in the head": that atom has its own error.
        let written_in_body = |name: &str| {
            (rule.body.iter())
                .filter(|l| !l.negated)
                .any(|l| l.atom.args.iter().any(|a| a.name == name))
        };
        for (name, _, span) in &vars.vars[bound..] {
            if written_in_body(name) {
                continue;
            }
            out.push(
                Diagnostic::error(
                    format!("variable `{name}` appears only in the rule's head"),
                    *span,
                )
                .with_hint("every variable of the head must appear in a positive atom of the body"),
            );
        }
        let (Some(head), true) = (head, out.len() == errors) else {
            return;
        };
        self.rules.push(ResolvedRule {
            head,
            positive,
            negated: negated.into_iter().map(|(a, _)| a).collect(),
            var_count: vars.vars.len(),
        });
    }

    /// Resolves an atom: its relation, and each argument as an element of its
    /// column's domain or a variable (new ones are added to `vars`). A variable
    /// must keep one domain.
    pub fn resolve_atom(
        &self,
        atom: &Atom,
        vars: &mut Variables,
        out: &mut Vec<Diagnostic>,
    ) -> Option<ResolvedAtom> {
        let relation = self.known_relation(atom, out)?;
        let mut terms = Vec::new();
        for (arg, &domain) in atom.args.iter().zip(&self.relations[relation].domains) {
            if let Some(p) = self.domains[domain].position(&arg.name) {
                terms.push(Term::Const(p));
                continue;
            }
            let var = match vars.find(&arg.name) {
                Some(v) => v,
                None => {
                    vars.vars.push((arg.name.clone(), domain, arg.span));
                    vars.vars.len() - 1
                }
            };
            let known = vars.vars[var].1;
            if known != domain {
                out.push(Diagnostic::error(
                    format!(
                        "`{}` is a {} here but a {} where it first appears",
                        arg.name, self.domains[domain].name, self.domains[known].name
                    ),
                    arg.span,
                ));
                return None;
            }
            terms.push(Term::Var(var));
        }
        Some(ResolvedAtom { relation, terms })
    }

    /// The atom's relation, which must exist and take as many arguments.
    fn known_relation(&self, atom: &Atom, out: &mut Vec<Diagnostic>) -> Option<usize> {
        let Some(relation) = self.relation(&atom.relation.name) else {
            let names = self.relation_names.keys().map(String::as_str);
            out.push(unknown("relation", &atom.relation, names));
            return None;
        };
        let columns = self.relations[relation].domains.len();
        if atom.args.len() != columns {
            out.push(Diagnostic::error(
                format!(
                    "`{}` has {columns} {}, but this gives {} {}",
                    atom.relation.name,
                    plural(columns, "column"),
                    atom.args.len(),
                    plural(atom.args.len(), "argument")
                ),
                atom.span,
            ));
            return None;
        }
        Some(relation)
    }

    /// Rules see negated relations as fixed, so only base relations (with
    /// facts alone, no rules) may be negated.
    fn check_negations(&self, items: &[Item], out: &mut Vec<Diagnostic>) {
        let derived: Vec<&str> = (items.iter())
            .filter_map(|item| match item {
                Item::Rule(rule) => Some(rule.head.relation.name.as_str()),
                _ => None,
            })
            .collect();
        for item in items {
            let Item::Rule(rule) = item else { continue };
            for literal in rule.body.iter().filter(|l| l.negated) {
                if derived.contains(&literal.atom.relation.name.as_str()) {
                    out.push(
                        Diagnostic::error(
                            format!(
                                "`{}` has rules, so it cannot be negated",
                                literal.atom.relation.name
                            ),
                            literal.atom.span,
                        )
                        .with_hint("only base relations, given by facts alone, can be negated"),
                    );
                }
            }
        }
    }
}

/// `word`, with an `s` unless there is one.
fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

fn twice(what: &str, name: &Ident) -> Diagnostic {
    Diagnostic::error(
        format!("{what} `{}` is declared twice", name.name),
        name.span,
    )
    .with_hint(format!("rename one of the two {what}s"))
}

fn unknown<'a>(what: &str, name: &Ident, known: impl Iterator<Item = &'a str>) -> Diagnostic {
    let error = Diagnostic::error(format!("unknown {what} `{}`", name.name), name.span);
    match crate::suggest::closest(&name.name, known) {
        Some(close) => error.with_hint(format!("did you mean `{close}`?")),
        None => error.with_hint(format!("declare it with `{what} {} ...;`", name.name)),
    }
}

fn not_an_element(arg: &Ident, domain: &Domain) -> Diagnostic {
    Diagnostic::error(
        format!(
            "`{}` is not an element of domain `{}`",
            arg.name, domain.name
        ),
        arg.span,
    )
}
