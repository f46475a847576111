//! The variables a loop body assigns to. A loop runs its body again after the
//! body changed them, so whatever the checker knew about them before the loop
//! may be wrong at the top of the body: those variables are forgotten first.

use tl_syntax::ast::{Block, Expr, ExprKind, IndexArg, Stmt, StmtKind};

/// Calls `found` with the name of every variable rebound (`x = ...`,
/// `x += ...`) anywhere inside `block`.
pub fn each_assigned(block: &Block, found: &mut dyn FnMut(&str)) {
    for stmt in &block.stmts {
        in_stmt(stmt, found);
    }
    if let Some(tail) = &block.tail {
        in_expr(tail, found);
    }
}

fn in_stmt(stmt: &Stmt, found: &mut dyn FnMut(&str)) {
    match &stmt.kind {
        StmtKind::Let { value, .. } => in_expr(value, found),
        StmtKind::Assign { target, value, .. } => {
            // `x[i] = v` and `x.f = v` keep the type of `x`; only `x = v` changes it.
            if let ExprKind::Var(name, _) = &target.kind {
                found(name);
            }
            in_expr(target, found);
            in_expr(value, found);
        }
        StmtKind::While { cond, body } => {
            in_expr(cond, found);
            each_assigned(body, found);
        }
        StmtKind::For { iterable, body, .. } => {
            in_expr(iterable, found);
            each_assigned(body, found);
        }
        StmtKind::Loop(body) => each_assigned(body, found),
        StmtKind::Return(Some(e)) | StmtKind::Expr(e) => in_expr(e, found),
        StmtKind::Return(None) | StmtKind::Break | StmtKind::Continue => {}
    }
}

/// Blocks can sit inside any expression (`f({ x = 1; x })`), so every
/// sub-expression is visited.
fn in_expr(expr: &Expr, found: &mut dyn FnMut(&str)) {
    match &expr.kind {
        ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::None
        | ExprKind::Var(..)
        | ExprKind::Query(_) => {}
        ExprKind::List(items) => items.iter().for_each(|e| in_expr(e, found)),
        ExprKind::Unary { operand, .. } => in_expr(operand, found),
        ExprKind::Binary { lhs, rhs, .. } => {
            in_expr(lhs, found);
            in_expr(rhs, found);
        }
        ExprKind::Range { start, end } => {
            for e in [start, end].into_iter().flatten() {
                in_expr(e, found);
            }
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|e| in_expr(e, found)),
        ExprKind::MethodCall { receiver, args, .. } => {
            in_expr(receiver, found);
            args.iter().for_each(|e| in_expr(e, found));
        }
        ExprKind::Field { base, .. } => in_expr(base, found),
        ExprKind::Index { base, indices } => {
            in_expr(base, found);
            for index in indices {
                if let IndexArg::Expr(e) = index {
                    in_expr(e, found);
                }
            }
        }
        ExprKind::If {
            cond,
            then_branch,
            else_branch,
        } => {
            in_expr(cond, found);
            each_assigned(then_branch, found);
            if let Some(e) = else_branch {
                in_expr(e, found);
            }
        }
        ExprKind::Block(block) => each_assigned(block, found),
        ExprKind::StructLit { fields, .. } => fields.iter().for_each(|(_, e)| in_expr(e, found)),
    }
}
