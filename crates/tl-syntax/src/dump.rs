//! A compact S-expression rendering of the syntax tree, for golden tests and
//! for debugging the parser. Expressions print on one line; blocks put each
//! statement on its own indented line. Spans are left out.
//!
//! ```text
//! (fn add (a: float32[n], b: float32[n]) -> float32[n]
//!   (block
//!     (let c (+ a b))
//!     (tail c)))
//! ```

use std::fmt::Write;

use crate::ast::{
    Atom, Block, Dim, Expr, ExprKind, FnDecl, IndexArg, Item, Param, Program, Stmt, StmtKind,
    TypeExpr, TypeKind, UnaryOp,
};
use crate::parser::ReplInput;

/// The whole program, one item after another.
pub fn dump(program: &Program) -> String {
    let mut printer = Printer::default();
    for item in &program.items {
        printer.item(item);
        printer.out.push('\n');
    }
    printer.out
}

/// A REPL input: its items, then its statements, then its tail.
pub fn dump_repl(input: &ReplInput) -> String {
    let mut printer = Printer::default();
    for item in &input.items {
        printer.item(item);
        printer.out.push('\n');
    }
    for stmt in &input.stmts {
        printer.stmt(stmt);
        printer.out.push('\n');
    }
    if let Some(tail) = &input.tail {
        printer.out.push_str("(tail ");
        printer.expr(tail);
        printer.out.push_str(")\n");
    }
    printer.out
}

/// One expression.
pub fn dump_expr(expr: &Expr) -> String {
    let mut printer = Printer::default();
    printer.expr(expr);
    printer.out
}

/// A type as it is written in source.
pub fn type_to_string(ty: &TypeExpr) -> String {
    match &ty.kind {
        TypeKind::Tensor { dtype, dims: None } => dtype.keyword().to_string(),
        TypeKind::Tensor {
            dtype,
            dims: Some(dims),
        } => {
            let dims: Vec<String> = dims.iter().map(dim_to_string).collect();
            format!("{}[{}]", dtype.keyword(), dims.join(", "))
        }
        TypeKind::Int => "int".to_string(),
        TypeKind::Float => "float".to_string(),
        TypeKind::Bool => "bool".to_string(),
        TypeKind::Str => "string".to_string(),
        TypeKind::List(None) => "list".to_string(),
        TypeKind::List(Some(element)) => format!("list[{}]", type_to_string(element)),
        TypeKind::Named(name) => name.clone(),
    }
}

fn dim_to_string(dim: &Dim) -> String {
    match dim {
        Dim::Known(size) => size.to_string(),
        Dim::Named(name) => name.clone(),
        Dim::Unknown => "?".to_string(),
    }
}

#[derive(Default)]
struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    /// A new line at the current indentation plus `extra` levels.
    fn newline(&mut self, extra: usize) {
        self.out.push('\n');
        self.out.push_str(&"  ".repeat(self.indent + extra));
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Import { path, .. } => {
                let _ = write!(self.out, "(import {path:?})");
            }
            Item::Function(function) => self.function(function),
            Item::Struct(decl) => {
                let fields: Vec<String> = decl
                    .fields
                    .iter()
                    .map(|f| format!("{}: {}", f.name.name, type_to_string(&f.ty)))
                    .collect();
                let _ = write!(
                    self.out,
                    "(struct {} ({}))",
                    decl.name.name,
                    fields.join(", ")
                );
            }
            Item::Impl(block) => {
                let _ = write!(self.out, "(impl {}", block.target.name);
                for method in &block.methods {
                    self.newline(1);
                    self.indent += 1;
                    self.function(method);
                    self.indent -= 1;
                }
                self.out.push(')');
            }
            Item::Tensor(decl) => {
                let _ = write!(
                    self.out,
                    "(tensor {}: {}",
                    decl.name.name,
                    type_to_string(&decl.ty)
                );
                if decl.learnable.is_some() {
                    self.out.push_str(" learnable");
                }
                if let Some(init) = &decl.init {
                    self.out.push_str(" = ");
                    self.expr(init);
                }
                self.out.push(')');
            }
            Item::Main(body) => self.headed_block("(main", body),
            Item::Test(test) => {
                self.headed_block(&format!("(test {:?}", test.name.name), &test.body)
            }
            Item::Bench(bench) => {
                self.headed_block(&format!("(bench {:?}", bench.name.name), &bench.body)
            }
            Item::Equation(eq) => {
                let indices: Vec<&str> = eq.indices.iter().map(|i| i.name.as_str()).collect();
                let _ = write!(
                    self.out,
                    "(equation {}[{}] ",
                    eq.name.name,
                    indices.join(", ")
                );
                self.expr(&eq.value);
                self.out.push(')');
            }
            Item::Domain(d) => {
                let elements: Vec<&str> = d.elements.iter().map(|e| e.name.as_str()).collect();
                let _ = write!(
                    self.out,
                    "(domain {} {{{}}})",
                    d.name.name,
                    elements.join(", ")
                );
            }
            Item::Relation(r) => {
                let columns: Vec<String> = (r.columns.iter())
                    .map(|(c, d)| format!("{}: {}", c.name, d.name))
                    .collect();
                let _ = write!(
                    self.out,
                    "(relation {}({}))",
                    r.name.name,
                    columns.join(", ")
                );
            }
            Item::Fact(atom) => {
                let _ = write!(self.out, "(fact {})", atom_to_string(atom));
            }
            Item::Rule(rule) => {
                let body: Vec<String> = (rule.body.iter())
                    .map(|l| {
                        format!(
                            "{}{}",
                            if l.negated { "!" } else { "" },
                            atom_to_string(&l.atom)
                        )
                    })
                    .collect();
                let _ = write!(
                    self.out,
                    "(rule {} <- {})",
                    atom_to_string(&rule.head),
                    body.join(", ")
                );
            }
        }
    }

    fn function(&mut self, function: &FnDecl) {
        let params: Vec<String> = function.params.iter().map(param_to_string).collect();
        let mut head = format!("(fn {} ({})", function.name.name, params.join(", "));
        if let Some(ty) = &function.return_type {
            let _ = write!(head, " -> {}", type_to_string(ty));
        }
        self.headed_block(&head, &function.body);
    }

    /// `head`, then the block on the next line, then `)`.
    fn headed_block(&mut self, head: &str, block: &Block) {
        self.out.push_str(head);
        self.nested_block(block);
        self.out.push(')');
    }

    /// A block on its own line, one level deeper.
    fn nested_block(&mut self, block: &Block) {
        self.newline(1);
        self.indent += 1;
        self.block(block);
        self.indent -= 1;
    }

    fn block(&mut self, block: &Block) {
        self.out.push_str("(block");
        self.indent += 1;
        for stmt in &block.stmts {
            self.newline(0);
            self.stmt(stmt);
        }
        if let Some(tail) = &block.tail {
            self.newline(0);
            self.out.push_str("(tail ");
            self.expr(tail);
            self.out.push(')');
        }
        self.indent -= 1;
        self.out.push(')');
    }

    fn stmt(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Let {
                name, ty, value, ..
            } => {
                let _ = write!(self.out, "(let {}", name.name);
                if let Some(ty) = ty {
                    let _ = write!(self.out, ": {}", type_to_string(ty));
                }
                self.out.push(' ');
                self.expr(value);
                self.out.push(')');
            }
            StmtKind::Assign {
                target, op, value, ..
            } => {
                let op = op.map_or(String::new(), |op| format!("{}=", op.symbol()));
                let _ = write!(self.out, "(assign{op} ");
                self.expr(target);
                self.out.push(' ');
                self.expr(value);
                self.out.push(')');
            }
            StmtKind::While { cond, body } => {
                self.out.push_str("(while ");
                self.expr(cond);
                self.nested_block(body);
                self.out.push(')');
            }
            StmtKind::For {
                var,
                iterable,
                body,
                ..
            } => {
                let _ = write!(self.out, "(for {} ", var.name);
                self.expr(iterable);
                self.nested_block(body);
                self.out.push(')');
            }
            StmtKind::Loop(body) => self.headed_block("(loop", body),
            StmtKind::Break => self.out.push_str("(break)"),
            StmtKind::Continue => self.out.push_str("(continue)"),
            StmtKind::Return(None) => self.out.push_str("(return)"),
            StmtKind::Return(Some(value)) => self.call_like("return", [value]),
            StmtKind::Expr(expr) => self.call_like("expr", [expr]),
        }
    }

    /// `(head e1 e2 …)`.
    fn call_like<'e>(&mut self, head: &str, exprs: impl IntoIterator<Item = &'e Expr>) {
        self.out.push('(');
        self.out.push_str(head);
        for expr in exprs {
            self.out.push(' ');
            self.expr(expr);
        }
        self.out.push(')');
    }

    fn expr(&mut self, expr: &Expr) {
        match &expr.kind {
            ExprKind::Int(value) => {
                let _ = write!(self.out, "{value}");
            }
            ExprKind::Float(value) => {
                let _ = write!(self.out, "{value:?}");
            }
            ExprKind::Str(value) => {
                let _ = write!(self.out, "{value:?}");
            }
            ExprKind::Bool(value) => {
                let _ = write!(self.out, "{value}");
            }
            ExprKind::None => self.out.push_str("none"),
            ExprKind::Var(name, _) => self.out.push_str(name),
            ExprKind::List(elements) => self.call_like("list", elements),
            ExprKind::Unary { op, operand } => {
                let head = match op {
                    UnaryOp::Neg => "neg",
                    UnaryOp::Not => "not",
                };
                self.call_like(head, [&**operand]);
            }
            ExprKind::Binary { op, lhs, rhs } => self.call_like(op.symbol(), [&**lhs, &**rhs]),
            ExprKind::Range { start, end } => {
                self.out.push_str("(..");
                for bound in [start, end] {
                    self.out.push(' ');
                    match bound {
                        Some(bound) => self.expr(bound),
                        None => self.out.push('_'),
                    }
                }
                self.out.push(')');
            }
            ExprKind::Call { callee, args, .. } => {
                self.call_like(&format!("call {}", callee.name), args)
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => {
                self.out.push_str("(method ");
                self.expr(receiver);
                let _ = write!(self.out, " {}", method.name);
                for arg in args {
                    self.out.push(' ');
                    self.expr(arg);
                }
                self.out.push(')');
            }
            ExprKind::Field { base, field } => {
                self.out.push_str("(field ");
                self.expr(base);
                let _ = write!(self.out, " {})", field.name);
            }
            ExprKind::Index { base, indices } => {
                self.out.push_str("(index ");
                self.expr(base);
                for index in indices {
                    self.out.push(' ');
                    match index {
                        IndexArg::Full(_) => self.out.push(':'),
                        IndexArg::Expr(index) => self.expr(index),
                    }
                }
                self.out.push(')');
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.out.push_str("(if ");
                self.expr(cond);
                self.nested_block(then_branch);
                if let Some(else_branch) = else_branch {
                    self.newline(1);
                    self.out.push_str("(else ");
                    self.indent += 1;
                    self.expr(else_branch);
                    self.indent -= 1;
                    self.out.push(')');
                }
                self.out.push(')');
            }
            ExprKind::Block(block) => self.block(block),
            ExprKind::StructLit { name, fields } => {
                let _ = write!(self.out, "(new {}", name.name);
                for (field, value) in fields {
                    let _ = write!(self.out, " ({} ", field.name);
                    self.expr(value);
                    self.out.push(')');
                }
                self.out.push(')');
            }
            ExprKind::Query(atom) => {
                let _ = write!(self.out, "(query {})", atom_to_string(atom));
            }
        }
    }
}

/// `R(a, b)`.
fn atom_to_string(atom: &Atom) -> String {
    let args: Vec<&str> = atom.args.iter().map(|a| a.name.as_str()).collect();
    format!("{}({})", atom.relation.name, args.join(", "))
}

fn param_to_string(param: &Param) -> String {
    match &param.ty {
        Some(ty) => format!("{}: {}", param.name.name, type_to_string(ty)),
        None => param.name.name.clone(),
    }
}
