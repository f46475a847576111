//! Resolving names before code runs. Each function body (and each `main`,
//! `test` or `bench` block, and the REPL's input) is walked once, in the
//! interpreter's scoping order, and every local variable gets a slot in its
//! frame: reading `x` is then an index into the frame instead of a search
//! through scopes by name, and calls to user functions are indices into the
//! function table. The walk also decides which assignments are index
//! equations, through the rule the checker uses (`crate::equation`).
//!
//! A name the walk cannot tie to a local stays `Unresolved` and is looked up
//! by name when it runs: globals, relations, functions defined later in the
//! REPL. Slots are never reused within a frame, so that a lookup by name (a
//! format string's `{x}`, an equation's operands) finds the innermost live
//! variable as the highest live slot with that name.

use std::collections::HashMap;
use std::rc::Rc;

use tl_syntax::ast::{
    Block, Dim, Expr, ExprKind, FnDecl, IndexArg, Locals, Resolved, Stmt, StmtKind, TypeExpr,
    TypeKind,
};

use super::compile::{Code, Compiler};
use crate::equation::EquationRef;

/// What a frame holds: each slot's variable name and written type.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    pub names: Vec<String>,
    /// The type written for the slot's variable (a `let x: T`, a typed
    /// parameter): every assignment to it is checked against it.
    pub types: Vec<Option<TypeExpr>>,
}

impl Layout {
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// A resolved user function or method: parameters in slots `0..params.len()`
/// (`self` first), then the named dimensions of their types.
pub(crate) struct Function {
    pub decl: FnDecl,
    pub layout: Rc<Layout>,
    /// The body, compiled.
    pub body: Code,
    /// The named dimensions of the parameter types (`n` in `x: float32[n]`),
    /// ints in the body, with their slots.
    pub dims: Vec<(String, u32)>,
}

/// What the resolver knows of the program around the code it walks.
pub(crate) struct Known<'a> {
    /// User functions by name, with their index in the function table.
    pub functions: &'a HashMap<String, u32>,
    /// Whether a name is a global (an equation's name or index is then no
    /// new variable).
    pub is_global: &'a dyn Fn(&str) -> bool,
}

/// A walk over code, giving slots to the locals it declares.
pub(crate) struct Resolver<'a> {
    known: Known<'a>,
    pub layout: Layout,
    /// The names visible at this point, innermost scope last.
    scopes: Vec<Vec<(String, u32)>>,
}

impl<'a> Resolver<'a> {
    /// A resolver for a fresh frame.
    pub fn new(known: Known<'a>) -> Self {
        Self::continuing(known, Layout::default(), Vec::new())
    }

    /// A resolver that goes on from a frame's layout and the names visible at
    /// its top (the REPL's scope, which grows with each input).
    pub fn continuing(known: Known<'a>, layout: Layout, visible: Vec<(String, u32)>) -> Self {
        Resolver {
            known,
            layout,
            scopes: vec![visible],
        }
    }

    /// The layout and the names visible at the frame's top level.
    pub fn finish(mut self) -> (Layout, Vec<(String, u32)>) {
        let visible = self.scopes.swap_remove(0);
        (self.layout, visible)
    }

    /// Resolves a function: its parameters, the named dimensions of their
    /// types, and its body.
    pub fn function(known: Known<'a>, mut decl: FnDecl) -> Function {
        let mut resolver = Resolver::new(known);
        for param in &decl.params {
            resolver.declare(&param.name.name, param.ty.clone());
        }
        let mut names = Vec::new();
        for ty in decl.params.iter().filter_map(|p| p.ty.as_ref()) {
            named_dims(ty, &mut names);
        }
        // A parameter of the same name as a dimension wins.
        let mut dims = Vec::new();
        for name in names {
            if resolver.find(&name).is_none() {
                let slot = resolver.declare(&name, None);
                dims.push((name, slot));
            }
        }
        resolver.block(&mut decl.body);
        let body = Compiler::new(&resolver.layout).block(&decl.body);
        Function {
            decl,
            layout: Rc::new(resolver.layout),
            body,
            dims,
        }
    }

    /// A new slot for `name`, visible from here to the end of the scope.
    fn declare(&mut self, name: &str, ty: Option<TypeExpr>) -> u32 {
        let slot = self.layout.len() as u32;
        self.layout.names.push(name.to_string());
        self.layout.types.push(ty);
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((name.to_string(), slot));
        }
        slot
    }

    /// The slot of the innermost visible variable called `name`.
    fn find(&self, name: &str) -> Option<u32> {
        (self.scopes.iter().rev())
            .flat_map(|scope| scope.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, slot)| *slot)
    }

    fn resolved(&self, name: &str) -> Resolved {
        self.find(name).map_or(Resolved::Unresolved, Resolved::At)
    }

    pub fn block(&mut self, block: &mut Block) {
        let start = self.layout.len() as u32;
        self.scopes.push(Vec::new());
        self.stmts(&mut block.stmts);
        if let Some(tail) = &mut block.tail {
            self.expr(tail);
        }
        self.scopes.pop();
        block.locals = Locals {
            start,
            end: self.layout.len() as u32,
        };
    }

    pub fn stmts(&mut self, stmts: &mut [Stmt]) {
        stmts.iter_mut().for_each(|stmt| self.stmt(stmt));
    }

    fn stmt(&mut self, stmt: &mut Stmt) {
        let span = stmt.span;
        match &mut stmt.kind {
            StmtKind::Let {
                name,
                ty,
                value,
                slot,
            } => {
                // The value is evaluated before the name exists: `let x = x + 1`
                // reads an outer `x`.
                self.expr(value);
                *slot = Resolved::At(self.declare(&name.name, ty.clone()));
            }
            StmtKind::Assign {
                target,
                value,
                equation,
                op,
            } => {
                let defines = match op {
                    None => self.equation_name(target, value, span),
                    Some(_) => None,
                };
                self.expr(value);
                self.expr(target);
                *equation = defines.map(|name| match self.find(&name) {
                    Some(_) => Resolved::Unresolved,
                    None => Resolved::At(self.declare(&name, None)),
                });
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.block(body);
            }
            StmtKind::For {
                var,
                iterable,
                body,
                slot,
            } => {
                self.expr(iterable);
                self.scopes.push(Vec::new());
                *slot = Resolved::At(self.declare(&var.name, None));
                self.block(body);
                self.scopes.pop();
            }
            StmtKind::Loop(body) => self.block(body),
            StmtKind::Return(Some(value)) | StmtKind::Expr(value) => self.expr(value),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }

    /// The name an assignment defines when it is an index equation (a
    /// malformed one counts as one: running it reports the error).
    fn equation_name(&self, target: &Expr, value: &Expr, span: tl_syntax::Span) -> Option<String> {
        let is_bound = |n: &str| self.find(n).is_some() || (self.known.is_global)(n);
        let found = EquationRef::of_assignment(target, value, span, &is_bound)?;
        Some(match found {
            Ok(eq) => eq.name.to_string(),
            Err(_) => match &target.kind {
                ExprKind::Index { base, .. } => match &base.kind {
                    ExprKind::Var(name, _) => name.clone(),
                    _ => return None,
                },
                ExprKind::Var(name, _) => name.clone(),
                _ => return None,
            },
        })
    }

    pub fn expr(&mut self, expr: &mut Expr) {
        match &mut expr.kind {
            ExprKind::Var(name, slot) => *slot = self.resolved(name),
            ExprKind::Call {
                callee,
                args,
                function,
            } => {
                *function = (self.known.functions.get(&callee.name))
                    .map_or(Resolved::Unresolved, |i| Resolved::At(*i));
                self.exprs(args);
            }
            ExprKind::List(items) => self.exprs(items),
            ExprKind::MethodCall { receiver, args, .. } => {
                self.expr(receiver);
                self.exprs(args);
            }
            ExprKind::Unary { operand, .. } => self.expr(operand),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Range { start, end } => {
                start.iter_mut().chain(end).for_each(|e| self.expr(e));
            }
            ExprKind::Field { base, .. } => self.expr(base),
            ExprKind::Index { base, indices } => {
                self.expr(base);
                for index in indices {
                    if let IndexArg::Expr(e) = index {
                        self.expr(e);
                    }
                }
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.expr(cond);
                self.block(then_branch);
                if let Some(e) = else_branch {
                    self.expr(e);
                }
            }
            ExprKind::Block(block) => self.block(block),
            ExprKind::StructLit { fields, .. } => {
                fields.iter_mut().for_each(|(_, e)| self.expr(e));
            }
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::None
            | ExprKind::Query(_) => {}
        }
    }

    fn exprs(&mut self, exprs: &mut [Expr]) {
        exprs.iter_mut().for_each(|e| self.expr(e));
    }
}

/// The named dimensions written in a type, in order, each once.
fn named_dims(ty: &TypeExpr, out: &mut Vec<String>) {
    match &ty.kind {
        TypeKind::Tensor {
            dims: Some(dims), ..
        } => {
            for dim in dims {
                if let Dim::Named(name) = dim {
                    if !out.contains(name) {
                        out.push(name.clone());
                    }
                }
            }
        }
        TypeKind::List(Some(element)) => named_dims(element, out),
        _ => {}
    }
}
