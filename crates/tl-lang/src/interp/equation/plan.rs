//! An index equation compiled to a [`Plan`], once: which names are index
//! variables (numbered as [`Label`]s), which are variables or domain
//! elements fixing a position, how the right side splits into terms, and
//! each term's einsum spec. Running the plan evaluates the operands and
//! contracts them; the pairwise order of a term's contraction depends on the
//! operands' sizes, so it is planned on the term's first run and kept while
//! the sizes stay the same. A body's equation keeps its plan between runs
//! (an equation in a loop plans once) until a global, function or relation
//! is defined (see `Interpreter::definitions`), which can change what a name
//! is.
//!
//! `build.rs` makes plans from syntax.

use std::cell::RefCell;
use std::rc::Rc;

use tl_syntax::ast::{BinaryOp, Expr, ExprKind, UnaryOp};
use tl_syntax::Span;

use crate::builtins::Builtin;
use crate::error::Result;
use crate::ops::einsum::{Contraction, Spec};

/// An index variable of an equation, numbered in order of first appearance.
pub(crate) type Label = usize;

/// An equation, planned.
pub(crate) struct Plan {
    pub name: String,
    pub name_span: Span,
    pub span: Span,
    /// The left side's indices, in order, with where each is written.
    pub left: Vec<(Label, Span)>,
    /// Each label's name.
    pub names: Vec<String>,
    pub root: Node,
    /// Whether the right side uses the tensor being defined.
    pub recursive: bool,
    /// `Interpreter::definitions` when the plan was made.
    pub made_at: u64,
}

/// A part of the right side.
pub(crate) enum Node {
    /// No index variable: a number or a 0-d tensor, evaluated each time.
    Constant(Expr),
    /// `a + b` or `a - b`, lined up by label into `labels`.
    Sum {
        op: BinaryOp,
        lhs: Box<Node>,
        rhs: Box<Node>,
        labels: Vec<Label>,
        span: Span,
    },
    Unary {
        op: UnaryOp,
        operand: Box<Node>,
        span: Span,
    },
    /// `f(first, rest...)` for an elementwise builtin `f`.
    Elementwise {
        builtin: &'static Builtin,
        first: Box<Node>,
        rest: Vec<Expr>,
        span: Span,
    },
    Term(Term),
}

/// A maximal product, summed over its labels that are not kept.
pub(crate) struct Term {
    pub factors: Vec<Factor>,
    /// The einsum spec of the factors that are tensors, in order.
    pub spec: Spec,
    /// The labels of the result, in order.
    pub output: Vec<Label>,
    pub span: Span,
    /// The contraction planned for the sizes last seen.
    planned: RefCell<Option<Rc<Contraction>>>,
}

pub(crate) struct Factor {
    pub part: Part,
    /// Whether it divides the product (`/ x`).
    pub divides: bool,
    pub span: Span,
}

pub(crate) enum Part {
    Operand(Operand),
    /// A parenthesised part or a function of one; a number when it is a
    /// constant.
    Node(Node),
}

/// An indexed operand: `X[i, j]`, `(A + B)[i]`, or a relation's atom.
pub(crate) struct Operand {
    pub base: Base,
    pub positions: Vec<Position>,
    /// The labels of the positions that are not fixed, in order.
    pub labels: Vec<Label>,
    pub span: Span,
}

pub(crate) enum Base {
    /// An expression giving the tensor.
    Value(Expr),
    /// A relation written as an atom, `R(x, y)`.
    Relation(String),
}

/// One position of an operand.
pub(crate) enum Position {
    Label(Label, Span),
    /// Fixed by an int expression (a variable's value).
    At(Expr),
    /// Fixed by an element of a domain.
    Element(u32),
}

impl Node {
    /// The labels of the node's value, in its dimensions' order.
    pub fn labels(&self) -> &[Label] {
        match self {
            Node::Constant(_) => &[],
            Node::Sum { labels, .. } => labels,
            Node::Unary { operand, .. } => operand.labels(),
            Node::Elementwise { first, .. } => first.labels(),
            Node::Term(term) => &term.output,
        }
    }

    /// Every operand of the node, in order.
    pub fn operands<'n>(&'n self, out: &mut Vec<&'n Operand>) {
        match self {
            Node::Constant(_) => {}
            Node::Sum { lhs, rhs, .. } => {
                lhs.operands(out);
                rhs.operands(out);
            }
            Node::Unary { operand, .. } => operand.operands(out),
            Node::Elementwise { first, .. } => first.operands(out),
            Node::Term(term) => {
                for factor in &term.factors {
                    match &factor.part {
                        Part::Operand(op) => out.push(op),
                        Part::Node(node) => node.operands(out),
                    }
                }
            }
        }
    }
}

impl Operand {
    /// Whether the operand is the tensor `name` (a recursive equation's).
    pub fn is_named(&self, name: &str) -> bool {
        matches!(&self.base, Base::Value(Expr { kind: ExprKind::Var(n, _), .. }) if n == name)
    }
}

impl Term {
    pub fn new(factors: Vec<Factor>, spec: Spec, output: Vec<Label>, span: Span) -> Self {
        Term {
            factors,
            spec,
            output,
            span,
            planned: RefCell::new(None),
        }
    }

    /// The contraction for operands of `shapes`: the one planned last
    /// time when they are the same.
    pub fn contraction(&self, shapes: &[Vec<usize>]) -> Result<Rc<Contraction>> {
        if let Some(planned) = self.planned.borrow().as_ref() {
            if planned.fits(shapes) {
                return Ok(planned.clone());
            }
        }
        let planned = Rc::new(Contraction::plan(&self.spec, shapes, "of an equation")?);
        *self.planned.borrow_mut() = Some(planned.clone());
        Ok(planned)
    }
}
