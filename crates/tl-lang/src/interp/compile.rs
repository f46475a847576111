//! Compiling resolved code, once, into a tree of closures over the frame's
//! slots. A function body is compiled when the function is defined, a `main`,
//! `test` or `bench` block when it runs: running it then calls closures
//! instead of matching on syntax nodes, and what can be decided before the
//! code runs is decided once (whether a variable has a written type, which
//! operand is a constant, what a block has to end).
//!
//! The kinds that loops and calls run most are compiled here, and an index
//! equation keeps its plan between runs (`equation/plan.rs`); every other
//! kind (struct literals, indexing, ...) is compiled to a closure that runs
//! its syntax node through the tree walker, the one definition of those
//! kinds. Both work on the same frame, through the same
//! helpers, so the two can nest either way.

use tl_syntax::ast::{BinaryOp, Block, Expr, ExprKind, Ident, Resolved, Stmt, StmtKind};
use tl_syntax::Span;

use super::call::CallArgs;
use super::equation::EquationSite;
use super::expr::{binary, condition, int_arith, int_binary, int_of};
use super::resolve::Layout;
use super::{Flow, Interpreter, Jump};
use crate::builtins::collection_methods;
use crate::error::LangError;
use crate::value::Value;

/// Compiled code that gives a value: an expression or a block.
type Eval = Box<dyn Fn(&mut Interpreter) -> Flow<Value>>;

/// Compiled code that gives a value. Constants, variables and arithmetic on
/// them are data, run inline where the value is used: a value returned
/// from a closure goes through memory, and reading it back is paid on each
/// step. The rest is a closure.
pub(crate) enum Code {
    Constant(Value),
    /// A variable in its slot; `general` finds it by name when the slot is
    /// not live.
    Slot {
        slot: u32,
        general: Eval,
    },
    /// `a op b` on two operands, computed inline when both are ints.
    Operands {
        op: BinaryOp,
        a: Operand,
        b: Operand,
        general: Eval,
    },
    Closure(Eval),
}

impl Code {
    // Inlined where it is used, so that each use site predicts its own kind.
    #[inline(always)]
    pub fn run(&self, interp: &mut Interpreter) -> Flow<Value> {
        match self {
            Code::Closure(f) => f(interp),
            Code::Slot { slot, general } => match interp.slot(*slot) {
                Some(value) => Ok(value.clone()),
                None => general(interp),
            },
            Code::Constant(value) => Ok(value.clone()),
            Code::Operands { op, a, b, general } => {
                if let (Some(Value::Int(x)), Some(Value::Int(y))) = (a.get(interp), b.get(interp)) {
                    if let Some(value) = int_binary(*op, *x, *y) {
                        return Ok(value);
                    }
                }
                general(interp)
            }
        }
    }
}

impl Code {
    /// The code as a condition: a comparison of two ints gives its bool
    /// without making a value.
    #[inline(always)]
    fn test(&self, interp: &mut Interpreter, span: Span) -> Flow<bool> {
        if let Code::Operands { op, a, b, .. } = self {
            if let (Some(Value::Int(x)), Some(Value::Int(y))) = (a.get(interp), b.get(interp)) {
                if let Some(Value::Bool(holds)) = int_binary(*op, *x, *y) {
                    return Ok(holds);
                }
            }
        }
        condition(self.run(interp)?, span)
    }
}

fn closure(f: impl Fn(&mut Interpreter) -> Flow<Value> + 'static) -> Code {
    Code::Closure(Box::new(f))
}

/// Compiled code run for its effect: a statement.
type Exec = Box<dyn Fn(&mut Interpreter) -> Flow<()>>;

/// Compiles the code of one frame, whose layout tells which slots have a
/// written type.
pub(crate) struct Compiler<'a> {
    layout: &'a Layout,
}

/// A call's compiled arguments.
pub(crate) struct Args {
    values: Vec<Code>,
    spans: Vec<Span>,
    /// The first argument, when it is a string literal: a format string.
    format_string: Option<Expr>,
}

impl CallArgs for Args {
    fn count(&self) -> usize {
        self.values.len()
    }

    #[inline(always)]
    fn eval(&self, interp: &mut Interpreter, i: usize) -> Flow<Value> {
        match self.values.get(i) {
            Some(arg) => arg.run(interp),
            None => Err(LangError::internal("an argument past the call's last").into()),
        }
    }

    fn span(&self, i: usize) -> Span {
        self.spans.get(i).copied().unwrap_or_default()
    }

    fn format_string(&self) -> Option<&Expr> {
        self.format_string.as_ref()
    }
}

impl<'a> Compiler<'a> {
    pub fn new(layout: &'a Layout) -> Self {
        Compiler { layout }
    }

    /// A block: its statements, then its tail; its locals end with it.
    pub fn block(&self, block: &Block) -> Code {
        let stmts: Vec<Exec> = block.stmts.iter().map(|s| self.stmt(s)).collect();
        let tail = block.tail.as_deref().map(|e| self.expr(e));
        // Only a statement declares a local of the block (see `eval_block`).
        if stmts.is_empty() {
            return tail.unwrap_or(Code::Constant(Value::None));
        }
        let locals = block.locals;
        if locals.start == locals.end {
            return closure(move |interp| run_stmts(interp, &stmts, tail.as_ref()));
        }
        closure(move |interp| {
            let result = run_stmts(interp, &stmts, tail.as_ref());
            interp.end_locals(locals);
            result
        })
    }

    pub fn expr(&self, expr: &Expr) -> Code {
        let span = expr.span;
        match &expr.kind {
            ExprKind::Int(i) => Code::Constant(Value::Int(*i)),
            ExprKind::Float(x) => Code::Constant(Value::Float(*x)),
            ExprKind::Bool(b) => Code::Constant(Value::Bool(*b)),
            ExprKind::Var(name, Resolved::At(slot)) => Code::Slot {
                slot: *slot,
                general: by_name(name, span),
            },
            ExprKind::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, span),
            ExprKind::Call {
                callee,
                args,
                function,
            } => {
                let (callee, function, args) = (callee.clone(), *function, self.args(args));
                closure(move |interp| interp.call_named(&callee, function, &args, span))
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => self.method_call(receiver, method, args, span),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => self.if_else(cond, then_branch, else_branch.as_deref()),
            ExprKind::Block(block) => self.block(block),
            _ => {
                let expr = expr.clone();
                closure(move |interp| interp.eval(&expr))
            }
        }
    }

    /// `lhs op rhs`. Two operands that read without side effects (`n - 1`,
    /// `i < n`) are computed where they are, without being copied out.
    fn binary(&self, op: BinaryOp, lhs: &Expr, rhs: &Expr, span: Span) -> Code {
        let left = self.expr(lhs);
        let right = self.expr(rhs);
        if let (Some(a), Some(b)) = (Operand::of(lhs), Operand::of(rhs)) {
            let (x, y) = (a.clone(), b.clone());
            let general = Box::new(move |interp: &mut Interpreter| {
                match (x.get(interp), y.get(interp)) {
                    (Some(x), Some(y)) => binary(op, x, y, span),
                    // A variable found by name, not in its slot.
                    _ => binary(op, &left.run(interp)?, &right.run(interp)?, span),
                }
            });
            return Code::Operands { op, a, b, general };
        }
        if !matches!(op, BinaryOp::And | BinaryOp::Or) {
            return closure(move |interp| {
                let left = left.run(interp)?;
                binary(op, &left, &right.run(interp)?, span)
            });
        }
        // `&&` and `||` on bools do not evaluate their right side when the left decides.
        closure(move |interp| {
            let left = left.run(interp)?;
            match (op, &left) {
                (BinaryOp::And, Value::Bool(false)) => Ok(Value::Bool(false)),
                (BinaryOp::Or, Value::Bool(true)) => Ok(Value::Bool(true)),
                _ => binary(op, &left, &right.run(interp)?, span),
            }
        })
    }

    fn if_else(&self, cond: &Expr, then_branch: &Block, else_branch: Option<&Expr>) -> Code {
        let (test, test_span) = (self.expr(cond), cond.span);
        let then_branch = self.block(then_branch);
        let else_branch = match else_branch {
            Some(e) => self.expr(e),
            None => Code::Constant(Value::None),
        };
        closure(move |interp| match test.test(interp, test_span)? {
            true => then_branch.run(interp),
            false => else_branch.run(interp),
        })
    }

    fn method_call(&self, receiver: &Expr, method: &Ident, args_expr: &[Expr], span: Span) -> Code {
        let target = self.expr(receiver);
        // The receiver's expression is read only for its span and as a
        // format string: a literal is kept, anything else stands as `none`.
        let written = match &receiver.kind {
            ExprKind::Str(_) => receiver.clone(),
            _ => Expr {
                kind: ExprKind::None,
                span: receiver.span,
            },
        };
        let (method, args) = (method.clone(), self.args(args_expr));
        if method.name == "push" && args.count() == 1 {
            // A list's `push`, what a loop that builds a list calls, goes
            // straight to the list; anything else takes the general path.
            let operands = match (&receiver.kind, args_expr) {
                (ExprKind::Var(_, Resolved::At(slot)), [item]) => {
                    Operand::of(item).map(|o| (*slot, o))
                }
                _ => None,
            };
            return closure(move |interp| {
                if let Some((slot, item)) = &operands {
                    if let (Some(Value::List(items)), Some(item)) =
                        (interp.slot(*slot), item.get(interp))
                    {
                        return Ok(collection_methods::push(items, item.clone()));
                    }
                }
                match target.run(interp)? {
                    Value::List(items) => {
                        Ok(collection_methods::push(&items, args.eval(interp, 0)?))
                    }
                    target => interp.call_method_on(target, &written, &method, &args, span),
                }
            });
        }
        closure(move |interp| {
            let target = target.run(interp)?;
            interp.call_method_on(target, &written, &method, &args, span)
        })
    }

    fn args(&self, args: &[Expr]) -> Args {
        Args {
            values: args.iter().map(|a| self.expr(a)).collect(),
            spans: args.iter().map(|a| a.span).collect(),
            format_string: (args.first())
                .filter(|a| matches!(a.kind, ExprKind::Str(_)))
                .cloned(),
        }
    }

    fn stmt(&self, stmt: &Stmt) -> Exec {
        let span = stmt.span;
        match &stmt.kind {
            StmtKind::Expr(e) => {
                let e = self.expr(e);
                Box::new(move |interp| e.run(interp).map(drop))
            }
            StmtKind::Let {
                ty, value, slot, ..
            } => {
                let (value, ty, slot) = (self.expr(value), ty.clone(), *slot);
                Box::new(move |interp| {
                    let value = value.run(interp)?;
                    interp.bind_let(ty.as_ref(), slot, value, span)
                })
            }
            StmtKind::Assign {
                target,
                op,
                value,
                equation: None,
            } => self.assign(target, *op, value, span),
            StmtKind::While { cond, body } => self.while_loop(cond, body),
            StmtKind::For {
                iterable,
                body,
                slot,
                ..
            } => self.for_loop(*slot, iterable, body),
            StmtKind::Loop(body) => {
                let (run, span) = (self.block(body), body.span);
                Box::new(move |interp| {
                    while !interp.loop_body(span, &|interp| run.run(interp))? {}
                    Ok(())
                })
            }
            StmtKind::Break => Box::new(move |interp| Err(interp.jump(Jump::Break(span)))),
            StmtKind::Continue => Box::new(move |interp| Err(interp.jump(Jump::Continue(span)))),
            StmtKind::Return(value) => {
                let value = value.as_ref().map(|e| self.expr(e));
                Box::new(move |interp| {
                    let value = match &value {
                        Some(value) => value.run(interp)?,
                        None => Value::None,
                    };
                    Err(interp.jump(Jump::Return(value)))
                })
            }
            StmtKind::Assign {
                target,
                value,
                equation: Some(declares),
                ..
            } => {
                let site = EquationSite::new(target, value, *declares, span);
                Box::new(move |interp| interp.run_equation_site(&site))
            }
        }
    }

    /// `target = value` or `target op= value`. An int variable without a
    /// written type is updated in its slot.
    fn assign(&self, target: &Expr, op: Option<BinaryOp>, value_expr: &Expr, span: Span) -> Exec {
        let (value, target) = (self.expr(value_expr), target.clone());
        let Some(op) = op else {
            return Box::new(move |interp| {
                let value = value.run(interp)?;
                interp.assign(&target, value)
            });
        };
        let untyped_slot = match target.kind {
            ExprKind::Var(_, Resolved::At(slot)) if !self.is_typed(slot) => Some(slot),
            _ => None,
        };
        if let (Some(slot), Some(operand)) = (untyped_slot, Operand::of(value_expr)) {
            // `s += i`: ints where they are, nothing copied out.
            return Box::new(move |interp| {
                if let Some(&Value::Int(b)) = operand.get(interp) {
                    if let Some(Value::Int(held)) = interp.slot_mut(slot) {
                        if let Some(new) = int_arith(op, *held, b) {
                            *held = new;
                            return Ok(());
                        }
                    }
                }
                let value = value.run(interp)?;
                interp.compound_assign(op, &target, value, span)
            });
        }
        Box::new(move |interp| {
            let value = value.run(interp)?;
            if let (Some(slot), Value::Int(b)) = (untyped_slot, &value) {
                if let Some(Value::Int(held)) = interp.slot_mut(slot) {
                    if let Some(new) = int_arith(op, *held, *b) {
                        *held = new;
                        return Ok(());
                    }
                }
            }
            interp.compound_assign(op, &target, value, span)
        })
    }

    fn while_loop(&self, cond: &Expr, body: &Block) -> Exec {
        let (test, test_span) = (self.expr(cond), cond.span);
        let (run, span) = (self.block(body), body.span);
        Box::new(move |interp| {
            while test.test(interp, test_span)? {
                if interp.loop_body(span, &|interp| run.run(interp))? {
                    break;
                }
            }
            Ok(())
        })
    }

    fn for_loop(&self, var: Resolved, iterable: &Expr, body: &Block) -> Exec {
        let (run, span) = (self.block(body), body.span);
        if let ExprKind::Range {
            start: Some(start),
            end: Some(end),
        } = &iterable.kind
        {
            let (first, first_span) = (self.expr(start), start.span);
            let (last, last_span) = (self.expr(end), end.span);
            return Box::new(move |interp| {
                let result = (|| {
                    let range = int_of(first.run(interp)?, first_span)?
                        ..int_of(last.run(interp)?, last_span)?;
                    interp.for_range(var, range, span, &|interp| run.run(interp))
                })();
                interp.end_loop_variable(var);
                result
            });
        }
        let (items, items_span) = (self.expr(iterable), iterable.span);
        Box::new(move |interp| {
            let result = match items.run(interp) {
                Ok(items) => {
                    interp.for_items(var, items, items_span, span, &|interp| run.run(interp))
                }
                Err(unwind) => Err(unwind),
            };
            interp.end_loop_variable(var);
            result
        })
    }

    fn is_typed(&self, slot: u32) -> bool {
        matches!(self.layout.types.get(slot as usize), Some(Some(_)))
    }
}

/// An operand that reads without side effects: a variable in its slot, or
/// a constant. `get` is `None` when the slot is not live (the variable is
/// then found by name, through the operand's compiled expression).
#[derive(Clone)]
pub(crate) enum Operand {
    Slot(u32),
    Constant(Value),
}

impl Operand {
    fn of(expr: &Expr) -> Option<Operand> {
        Some(match &expr.kind {
            ExprKind::Var(_, Resolved::At(slot)) => Operand::Slot(*slot),
            ExprKind::Int(i) => Operand::Constant(Value::Int(*i)),
            ExprKind::Float(x) => Operand::Constant(Value::Float(*x)),
            ExprKind::Bool(b) => Operand::Constant(Value::Bool(*b)),
            _ => return None,
        })
    }

    #[inline]
    fn get<'a>(&'a self, interp: &'a Interpreter) -> Option<&'a Value> {
        match self {
            Operand::Slot(slot) => interp.slot(*slot),
            Operand::Constant(value) => Some(value),
        }
    }
}

fn run_stmts(interp: &mut Interpreter, stmts: &[Exec], tail: Option<&Code>) -> Flow<Value> {
    for stmt in stmts {
        stmt(interp)?;
    }
    match tail {
        Some(tail) => tail.run(interp),
        None => Ok(Value::None),
    }
}

/// A variable found by name: its slot is not live (a variable whose block
/// ended, read from a later REPL input).
fn by_name(name: &str, span: Span) -> Eval {
    let name = name.to_string();
    Box::new(move |interp| interp.lookup(&name, span))
}
