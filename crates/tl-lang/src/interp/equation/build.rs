//! Making an equation's [`Plan`] from its syntax: an identifier written as
//! an index is a label unless a variable of that name is in scope or it is
//! an element of a domain (the rule `crate::equation` states for the
//! checker too); a term's labels that are neither on the left nor in
//! another factor of an enclosing product are summed.

use tl_syntax::ast::{BinaryOp, Expr, ExprKind, IndexArg};
use tl_syntax::Span;

use super::super::Interpreter;
use super::plan::{Base, Factor, Label, Node, Operand, Part, Plan, Position, Term};
use crate::equation::{self, EquationRef, ELEMENTWISE};
use crate::error::{LangError, Result};
use crate::ops::einsum::Spec;

/// The base and indices of an indexed operand.
#[derive(Clone, Copy)]
enum OperandArgs<'e> {
    Index(&'e [IndexArg]),
    Atom(&'e str, &'e [Expr]),
}

/// What a written index is, before labels are numbered.
enum Written<'e> {
    Label(&'e str, Span),
    At(&'e Expr),
    Element(u32),
}

impl Interpreter {
    /// Plans an equation (see the module comment).
    pub(crate) fn plan_equation(&self, eq: &EquationRef) -> Result<Plan> {
        let mut builder = Builder {
            interp: self,
            names: Vec::new(),
        };
        let mut left = Vec::new();
        let indices = eq.indices();
        for (i, &(name, span)) in indices.iter().enumerate() {
            if indices[..i].iter().any(|(n, _)| *n == name) {
                return Err(LangError::at(
                    format!("index `{name}` appears twice on the left side"),
                    span,
                )
                .with_hint("a diagonal is read on the right side, as in `D[i] = W[i, i]`"));
            }
            left.push((builder.label(name), span));
        }
        let keep: Vec<Label> = left.iter().map(|(l, _)| *l).collect();
        let root = builder.node(eq.value, &keep, Some(&keep))?;
        if let Some((label, span)) = left.iter().find(|(l, _)| !root.labels().contains(l)) {
            return Err(only_on_left(&builder.names[*label], *span));
        }
        Ok(Plan {
            name: eq.name.to_string(),
            name_span: eq.name_span,
            span: eq.span,
            left,
            names: builder.names,
            root,
            recursive: eq.is_recursive(),
            made_at: self.definitions,
        })
    }

    /// The base and indices of an indexed operand: `X[i, j]`, `(A + B)[i]`,
    /// or a relation written as an atom, `R(x, y)`.
    fn operand_parts<'e>(&self, expr: &'e Expr) -> Option<(&'e Expr, OperandArgs<'e>)> {
        match &expr.kind {
            ExprKind::Index { base, indices } => Some((base, OperandArgs::Index(indices))),
            ExprKind::Call { callee, args, .. }
                if self
                    .logic
                    .as_ref()
                    .is_some_and(|l| l.program.relation(&callee.name).is_some())
                    && !self.functions.contains_key(&callee.name) =>
            {
                Some((expr, OperandArgs::Atom(&callee.name, args)))
            }
            _ => None,
        }
    }

    /// The relation an operand's base names, unless a variable shadows it.
    fn relation_of(&self, base: &Expr, args: OperandArgs) -> Option<usize> {
        let name = match (args, &base.kind) {
            (OperandArgs::Atom(name, _), _) => name,
            (_, ExprKind::Var(name, _)) => name.as_str(),
            _ => return None,
        };
        if self.is_variable(name) {
            return None;
        }
        self.logic.as_ref()?.program.relation(name)
    }

    /// What the index `e` at `axis` is: an int expression (a variable), an
    /// element of a domain, or an index variable.
    fn written<'e>(&self, e: &'e Expr, relation: Option<usize>, axis: usize) -> Written<'e> {
        let ExprKind::Var(name, _) = &e.kind else {
            return Written::At(e);
        };
        if self.is_variable(name) {
            return Written::At(e);
        }
        let logic = self.logic.as_ref();
        match logic.and_then(|l| l.program.element_index(relation, axis, name)) {
            Some(p) => Written::Element(p),
            None => Written::Label(name, e.span),
        }
    }

    /// The index variables in `expr`, in order of first appearance.
    fn labels_in<'e>(&self, expr: &'e Expr, out: &mut Vec<&'e str>) {
        if let Some((base, args)) = self.operand_parts(expr) {
            let relation = self.relation_of(base, args);
            for (axis, e) in written_indices(args).into_iter().enumerate() {
                if let Written::Label(name, _) = self.written(e, relation, axis) {
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
            }
            if let OperandArgs::Index(_) = args {
                self.labels_in(base, out);
            }
            return;
        }
        match &expr.kind {
            ExprKind::Binary { lhs, rhs, .. } => {
                self.labels_in(lhs, out);
                self.labels_in(rhs, out);
            }
            ExprKind::Unary { operand, .. } => self.labels_in(operand, out),
            ExprKind::Call { args, .. } => args.iter().for_each(|a| self.labels_in(a, out)),
            _ => {}
        }
    }
}

/// The indices written for an operand (a `:` is skipped here and refused
/// when the operand is planned).
fn written_indices(args: OperandArgs<'_>) -> Vec<&Expr> {
    match args {
        OperandArgs::Index(indices) => (indices.iter())
            .filter_map(|a| match a {
                IndexArg::Expr(e) => Some(e),
                IndexArg::Full(_) => None,
            })
            .collect(),
        OperandArgs::Atom(_, args) => args.iter().collect(),
    }
}

/// Plans the parts of one equation, numbering its labels.
struct Builder<'i> {
    interp: &'i Interpreter,
    names: Vec<String>,
}

impl Builder<'_> {
    fn label(&mut self, name: &str) -> Label {
        match self.names.iter().position(|n| n == name) {
            Some(label) => label,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        }
    }

    fn labels_of(&mut self, expr: &Expr) -> Vec<Label> {
        let mut names = Vec::new();
        self.interp.labels_in(expr, &mut names);
        names.into_iter().map(|n| self.label(n)).collect()
    }

    /// A part summed over the labels not in `keep`; `order`, at the root,
    /// is the order its labels must come in (the left side's).
    fn node(&mut self, expr: &Expr, keep: &[Label], order: Option<&[Label]>) -> Result<Node> {
        let interp = self.interp;
        match &expr.kind {
            ExprKind::Binary {
                op: op @ (BinaryOp::Add | BinaryOp::Sub),
                lhs,
                rhs,
            } => {
                let lhs = self.node(lhs, keep, None)?;
                let rhs = self.node(rhs, keep, None)?;
                let mut labels = lhs.labels().to_vec();
                labels.extend(rhs.labels().iter().filter(|l| !lhs.labels().contains(l)));
                Ok(Node::Sum {
                    op: *op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                    labels,
                    span: expr.span,
                })
            }
            ExprKind::Unary { op, operand } => Ok(Node::Unary {
                op: *op,
                operand: Box::new(self.node(operand, keep, None)?),
                span: expr.span,
            }),
            ExprKind::Call { callee, args, .. }
                if ELEMENTWISE.contains(&callee.name.as_str())
                    && !interp.functions.contains_key(&callee.name)
                    && args.first().is_some_and(|a| !self.labels_of(a).is_empty()) =>
            {
                let builtin = crate::builtins::find(&callee.name).ok_or_else(|| {
                    LangError::internal(format!("no builtin `{}` for an equation", callee.name))
                })?;
                Ok(Node::Elementwise {
                    builtin,
                    first: Box::new(self.node(&args[0], keep, None)?),
                    rest: args[1..].to_vec(),
                    span: expr.span,
                })
            }
            _ if self.labels_of(expr).is_empty() => Ok(Node::Constant(expr.clone())),
            ExprKind::Binary {
                op: BinaryOp::Mul | BinaryOp::Div,
                ..
            } => Ok(Node::Term(self.term(expr, keep, order)?)),
            _ if interp.operand_parts(expr).is_some() => {
                Ok(Node::Term(self.term(expr, keep, order)?))
            }
            _ => Err(not_in_equations(expr.span)),
        }
    }

    /// A term: its factors, and the spec that multiplies them and sums over
    /// the labels neither kept nor in another factor of an enclosing product.
    fn term(&mut self, expr: &Expr, keep: &[Label], order: Option<&[Label]>) -> Result<Term> {
        let written = equation::factors(expr);
        let labels: Vec<Vec<Label>> = written.iter().map(|(f, _)| self.labels_of(f)).collect();
        let mut factors = Vec::new();
        for (i, &(factor, divides)) in written.iter().enumerate() {
            let part = match self.interp.operand_parts(factor) {
                Some((base, args)) => Part::Operand(self.operand(base, args, factor.span)?),
                None => {
                    let mut inner_keep = keep.to_vec();
                    let siblings = labels.iter().enumerate().filter(|(j, _)| *j != i);
                    inner_keep.extend(siblings.flat_map(|(_, l)| l.iter().copied()));
                    Part::Node(self.node(factor, &inner_keep, None)?)
                }
            };
            factors.push(Factor {
                part,
                divides,
                span: factor.span,
            });
        }
        let (spec, output) = term_spec(&factors, keep, order)?;
        Ok(Term::new(factors, spec, output, expr.span))
    }

    fn operand(&mut self, base: &Expr, args: OperandArgs, span: Span) -> Result<Operand> {
        if let OperandArgs::Index(indices) = args {
            if let Some(IndexArg::Full(s)) = indices.iter().find(|a| matches!(a, IndexArg::Full(_)))
            {
                return Err(LangError::at("an equation names each index", *s)
                    .with_hint("write an index variable, as in `X[i, j]`"));
            }
        }
        let relation = self.interp.relation_of(base, args);
        let mut positions = Vec::new();
        for (axis, e) in written_indices(args).into_iter().enumerate() {
            positions.push(match self.interp.written(e, relation, axis) {
                Written::Label(name, span) => Position::Label(self.label(name), span),
                Written::At(e) => Position::At(e.clone()),
                Written::Element(p) => Position::Element(p),
            });
        }
        let base = match args {
            OperandArgs::Index(_) => Base::Value(base.clone()),
            OperandArgs::Atom(name, _) => Base::Relation(name.to_string()),
        };
        let labels = (positions.iter())
            .filter_map(|p| match p {
                Position::Label(label, _) => Some(*label),
                _ => None,
            })
            .collect();
        Ok(Operand {
            base,
            positions,
            labels,
            span,
        })
    }
}

/// The einsum spec of a term's tensor factors (its constants are numbers),
/// and the labels of its result: those kept, in `order` when given, else in
/// order of first appearance.
fn term_spec(
    factors: &[Factor],
    keep: &[Label],
    order: Option<&[Label]>,
) -> Result<(Spec, Vec<Label>)> {
    let mut seen: Vec<Label> = Vec::new();
    let mut inputs = Vec::new();
    for factor in factors {
        let labels: Vec<Label> = match &factor.part {
            Part::Operand(op) => op.labels.clone(),
            Part::Node(Node::Constant(_)) => continue,
            Part::Node(node) => node.labels().to_vec(),
        };
        let mut letters = Vec::new();
        for label in labels {
            let i = match seen.iter().position(|&l| l == label) {
                Some(i) => i,
                None => {
                    seen.push(label);
                    seen.len() - 1
                }
            };
            letters.push(letter(i)?);
        }
        inputs.push(letters);
    }
    let output: Vec<Label> = match order {
        Some(order) => (order.iter().copied())
            .filter(|l| seen.contains(l))
            .collect(),
        None => (seen.iter().copied())
            .filter(|l| keep.contains(l))
            .collect(),
    };
    let out_letters = (output.iter())
        .map(|l| letter(seen.iter().position(|s| s == l).unwrap_or(0)))
        .collect::<Result<_>>()?;
    Ok((
        Spec {
            inputs,
            output: out_letters,
        },
        output,
    ))
}

/// The `i`-th einsum letter.
fn letter(i: usize) -> Result<char> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    LETTERS
        .get(i)
        .map(|&b| b as char)
        .ok_or_else(|| LangError::user("an equation's term has more than 52 different indices"))
}

fn not_in_equations(span: Span) -> LangError {
    LangError::at("this cannot take indexed operands in an equation", span).with_hint(format!(
        "an equation's right side holds products, sums, `-` and the elementwise functions {}",
        ELEMENTWISE.join(", ")
    ))
}

fn only_on_left(name: &str, span: Span) -> LangError {
    LangError::at(format!("index `{name}` is only on the left side"), span)
        .with_hint("every index of the left side must appear on the right side")
}
