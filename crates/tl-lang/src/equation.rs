//! Index equations (`Y[i, k] = W[i, j] X[j, k];`): what makes an assignment an
//! equation, and which names in it are indices. The checker and the
//! interpreter both decide through this module, so they always agree.
//!
//! An identifier written as an index (`W[i, j]`, or an argument of a relation
//! `R(x, y)` in an equation) is an *index variable* when it is neither a
//! variable in scope nor an element of a domain (see
//! `LogicProgram::element_index`). In a
//! body, an assignment `Y[i] = ...` or `T = ...` is an equation exactly when it
//! names an index variable: such a statement was an "unknown name" error
//! before, so no program that ran before changes meaning.

use tl_syntax::ast::{Equation, Expr, ExprKind, IndexArg};
use tl_syntax::{Diagnostic, Span};

/// The functions an equation applies elementwise to an indexed expression
/// (each takes the expression first; `sigmoid` may take a temperature).
pub const ELEMENTWISE: &[&str] = &[
    "step", "relu", "sigmoid", "exp", "log", "sqrt", "abs", "tanh", "sin", "cos", "gelu", "silu",
];

/// An equation, from a file-level item or a body's assignment.
#[derive(Debug, Clone, Copy)]
pub struct EquationRef<'a> {
    pub name: &'a str,
    pub name_span: Span,
    pub target: Target<'a>,
    pub value: &'a Expr,
    pub span: Span,
    /// A body's equation whose name is a variable already: it sets that
    /// variable, and its right side reads the variable's value, as
    /// `acc = acc + x` would (it is never recursive).
    pub updates: bool,
}

/// The left side's indices, as the item or the assignment wrote them.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Item(&'a Equation),
    Indexed(&'a [IndexArg]),
    Bare,
}

impl<'a> EquationRef<'a> {
    /// A file-level equation.
    pub fn item(eq: &'a Equation) -> Self {
        EquationRef {
            name: &eq.name.name,
            name_span: eq.name.span,
            target: Target::Item(eq),
            value: &eq.value,
            span: eq.span,
            updates: false,
        }
    }

    /// The left side's index names with their spans.
    pub fn indices(&self) -> Vec<(&'a str, Span)> {
        match self.target {
            Target::Item(eq) => (eq.indices.iter())
                .map(|i| (i.name.as_str(), i.span))
                .collect(),
            Target::Indexed(args) => args.iter().filter_map(bare_name).collect(),
            Target::Bare => Vec::new(),
        }
    }

    /// Whether the right side uses the tensor being defined (a recursive
    /// equation, solved by iterating to a fixpoint). An equation that
    /// updates a variable reads its value instead.
    pub fn is_recursive(&self) -> bool {
        !self.updates && mentions_operand(self.value, self.name)
    }

    /// A body's assignment `target = value` as an equation, if it names an
    /// index variable (see the module comment); an error when its left side
    /// mixes index variables with anything else.
    pub fn of_assignment(
        target: &'a Expr,
        value: &'a Expr,
        span: Span,
        is_bound: &dyn Fn(&str) -> bool,
    ) -> Option<Result<Self, Diagnostic>> {
        let (name, target_kind) = match &target.kind {
            ExprKind::Var(name, _) => (name, Target::Bare),
            ExprKind::Index { base, indices } => match &base.kind {
                ExprKind::Var(name, _) => (name, Target::Indexed(indices)),
                _ => return None,
            },
            _ => return None,
        };
        let free_on_left = match target_kind {
            Target::Indexed(args) => args.iter().filter_map(bare_name).any(|(n, _)| !is_bound(n)),
            _ => false,
        };
        if !free_on_left && !mentions_free_index(value, is_bound) {
            return None;
        }
        if let Target::Indexed(args) = target_kind {
            let bad = args
                .iter()
                .find(|a| bare_name(a).is_none_or(|(n, _)| is_bound(n)));
            if let Some(arg) = bad {
                return Some(Err(Diagnostic::error(
                    "the left side of an equation names index variables only",
                    index_span(arg),
                )
                .with_hint(
                    "this is a variable or an expression; an equation's indices are new names",
                )));
            }
        }
        Some(Ok(EquationRef {
            name,
            name_span: match &target.kind {
                ExprKind::Index { base, .. } => base.span,
                _ => target.span,
            },
            target: target_kind,
            value,
            span,
            updates: is_bound(name),
        }))
    }
}

/// "float32[2, 3] has 2 dimensions, but 1 index is written".
pub fn rank_mismatch(ty: &str, rank: usize, written: usize) -> String {
    let dimensions = if rank == 1 { "dimension" } else { "dimensions" };
    let indices = if written == 1 {
        "index is"
    } else {
        "indices are"
    };
    format!("{ty} has {rank} {dimensions}, but {written} {indices} written")
}

/// The name of an index written as a bare identifier.
pub fn bare_name(arg: &IndexArg) -> Option<(&str, Span)> {
    match arg {
        IndexArg::Expr(Expr {
            kind: ExprKind::Var(name, _),
            span,
        }) => Some((name, *span)),
        _ => None,
    }
}

pub fn index_span(arg: &IndexArg) -> Span {
    match arg {
        IndexArg::Expr(e) => e.span,
        IndexArg::Full(span) => *span,
    }
}

/// Whether an index variable appears in `expr`: a bare identifier that is
/// not bound, written as an index. (An unknown name as a call's argument
/// stays an unknown name, with its "did you mean".)
pub fn mentions_free_index(expr: &Expr, is_bound: &dyn Fn(&str) -> bool) -> bool {
    match &expr.kind {
        ExprKind::Index { base, indices } => {
            indices
                .iter()
                .any(|a| bare_name(a).is_some_and(|(n, _)| !is_bound(n)))
                || mentions_free_index(base, is_bound)
        }
        ExprKind::Call { args, .. } => args.iter().any(|a| mentions_free_index(a, is_bound)),
        ExprKind::Binary { lhs, rhs, .. } => {
            mentions_free_index(lhs, is_bound) || mentions_free_index(rhs, is_bound)
        }
        ExprKind::Unary { operand, .. } => mentions_free_index(operand, is_bound),
        _ => false,
    }
}

/// Whether `name` is indexed (or called, as a relation) somewhere in `expr`.
fn mentions_operand(expr: &Expr, name: &str) -> bool {
    match &expr.kind {
        ExprKind::Index { base, .. } => {
            matches!(&base.kind, ExprKind::Var(n, _) if n == name) || mentions_operand(base, name)
        }
        ExprKind::Call { callee, args, .. } => {
            callee.name == name || args.iter().any(|a| mentions_operand(a, name))
        }
        ExprKind::Binary { lhs, rhs, .. } => {
            mentions_operand(lhs, name) || mentions_operand(rhs, name)
        }
        ExprKind::Unary { operand, .. } => mentions_operand(operand, name),
        _ => false,
    }
}

/// The factors of a term (a maximal product): `A[i] B[i] / c` is A, B and
/// c, the last one dividing.
pub fn factors(expr: &Expr) -> Vec<(&Expr, bool)> {
    let mut out = Vec::new();
    collect_factors(expr, false, &mut out);
    out
}

fn collect_factors<'a>(expr: &'a Expr, divides: bool, out: &mut Vec<(&'a Expr, bool)>) {
    match &expr.kind {
        ExprKind::Binary {
            op: tl_syntax::ast::BinaryOp::Mul,
            lhs,
            rhs,
        } => {
            collect_factors(lhs, divides, out);
            collect_factors(rhs, divides, out);
        }
        // Only the right side of `/` divides: `a / (b c)` divides by b and c.
        ExprKind::Binary {
            op: tl_syntax::ast::BinaryOp::Div,
            lhs,
            rhs,
        } => {
            collect_factors(lhs, divides, out);
            collect_factors(rhs, !divides, out);
        }
        _ => out.push((expr, divides)),
    }
}
