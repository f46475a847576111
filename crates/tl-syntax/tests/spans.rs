//! Span invariants over every `parse_ok` golden file: each node's span covers
//! exactly its own text (no surrounding whitespace), lies inside its parent's,
//! and a binary operation spans from its left operand to its right one.

mod common;

use tl_syntax::ast::{
    Block, Expr, ExprKind, FnDecl, Ident, IndexArg, Item, Stmt, StmtKind, TypeExpr,
};
use tl_syntax::{parse, FileId, Span};

const FILE: FileId = FileId(5);

struct Checker<'a> {
    text: &'a str,
    file: String,
}

impl Checker<'_> {
    /// `span` is well formed, tight, and inside `parent`.
    fn span(&self, span: Span, parent: Span, what: &str) {
        let context = format!("{}: {what} at {}..{}", self.file, span.start, span.end);
        assert_eq!(span.file, FILE, "{context}");
        assert!(span.start < span.end, "{context}: empty span");
        assert!(
            parent.start <= span.start && span.end <= parent.end,
            "{context}: outside its parent {}..{}",
            parent.start,
            parent.end
        );
        let snippet = &self.text[span.start as usize..span.end as usize];
        assert_eq!(snippet.trim(), snippet, "{context}: loose span {snippet:?}");
    }

    /// A binary operation spans from its left operand to its right one, plus
    /// the parentheses around it, if any.
    fn operands_to_parens(&self, span: Span, operands: Span) {
        let before = &self.text[span.start as usize..operands.start as usize];
        let after = &self.text[operands.end as usize..span.end as usize];
        assert!(
            before.chars().all(|c| c == '(' || c.is_whitespace())
                && after.chars().all(|c| c == ')' || c.is_whitespace())
                && before.matches('(').count() == after.matches(')').count(),
            "{}: binary span {}..{} is not its operands {}..{} in parentheses",
            self.file,
            span.start,
            span.end,
            operands.start,
            operands.end
        );
    }

    fn ident(&self, ident: &Ident, parent: Span) {
        self.span(ident.span, parent, "identifier");
        let snippet = &self.text[ident.span.start as usize..ident.span.end as usize];
        let quoted = format!("{:?}", ident.name);
        assert!(
            snippet == ident.name || snippet == quoted,
            "{}: identifier {:?} spans {snippet:?}",
            self.file,
            ident.name
        );
    }

    fn item(&self, item: &Item, whole: Span) {
        match item {
            Item::Import { span, .. } => self.span(*span, whole, "import"),
            Item::Function(function) => self.function(function, whole),
            Item::Struct(decl) => {
                self.span(decl.span, whole, "struct");
                self.ident(&decl.name, decl.span);
                for field in &decl.fields {
                    self.ident(&field.name, decl.span);
                    self.ty(&field.ty, decl.span);
                }
            }
            Item::Impl(block) => {
                self.span(block.span, whole, "impl");
                self.ident(&block.target, block.span);
                for method in &block.methods {
                    self.function(method, block.span);
                }
            }
            Item::Tensor(decl) => {
                self.span(decl.span, whole, "tensor");
                self.ident(&decl.name, decl.span);
                self.ty(&decl.ty, decl.span);
                if let Some(learnable) = decl.learnable {
                    self.span(learnable, decl.span, "learnable");
                }
                if let Some(init) = &decl.init {
                    self.expr(init, decl.span);
                }
            }
            Item::Main(body) => self.block(body, whole),
            Item::Test(named) | Item::Bench(named) => {
                self.span(named.span, whole, "test");
                self.ident(&named.name, named.span);
                self.block(&named.body, named.span);
            }
            Item::Equation(eq) => {
                self.span(eq.span, whole, "equation");
                self.ident(&eq.name, eq.span);
                eq.indices.iter().for_each(|i| self.ident(i, eq.span));
                self.expr(&eq.value, eq.span);
            }
            Item::Domain(d) => {
                self.span(d.span, whole, "domain");
                d.elements.iter().for_each(|e| self.ident(e, d.span));
            }
            Item::Relation(r) => {
                self.span(r.span, whole, "relation");
                for (column, domain) in &r.columns {
                    self.ident(column, r.span);
                    self.ident(domain, r.span);
                }
            }
            Item::Fact(atom) => self.atom(atom, whole),
            Item::Rule(rule) => {
                self.span(rule.span, whole, "rule");
                self.atom(&rule.head, rule.span);
                rule.body.iter().for_each(|l| self.atom(&l.atom, rule.span));
            }
        }
    }

    fn function(&self, function: &FnDecl, parent: Span) {
        self.span(function.span, parent, "fn");
        self.ident(&function.name, function.span);
        for param in &function.params {
            self.ident(&param.name, function.span);
            if let Some(ty) = &param.ty {
                self.ty(ty, function.span);
            }
        }
        if let Some(ty) = &function.return_type {
            self.ty(ty, function.span);
        }
        self.block(&function.body, function.span);
    }

    fn ty(&self, ty: &TypeExpr, parent: Span) {
        self.span(ty.span, parent, "type");
        if let tl_syntax::ast::TypeKind::List(Some(element)) = &ty.kind {
            self.ty(element, ty.span);
        }
    }

    fn block(&self, block: &Block, parent: Span) {
        self.span(block.span, parent, "block");
        for stmt in &block.stmts {
            self.stmt(stmt, block.span);
        }
        if let Some(tail) = &block.tail {
            self.expr(tail, block.span);
        }
    }

    fn stmt(&self, stmt: &Stmt, parent: Span) {
        self.span(stmt.span, parent, "statement");
        let span = stmt.span;
        match &stmt.kind {
            StmtKind::Let {
                name, ty, value, ..
            } => {
                self.ident(name, span);
                if let Some(ty) = ty {
                    self.ty(ty, span);
                }
                self.expr(value, span);
            }
            StmtKind::Assign { target, value, .. } => {
                self.expr(target, span);
                self.expr(value, span);
            }
            StmtKind::While { cond, body } => {
                self.expr(cond, span);
                self.block(body, span);
            }
            StmtKind::For {
                var,
                iterable,
                body,
                ..
            } => {
                self.ident(var, span);
                self.expr(iterable, span);
                self.block(body, span);
            }
            StmtKind::Loop(body) => self.block(body, span),
            StmtKind::Return(Some(value)) | StmtKind::Expr(value) => self.expr(value, span),
            StmtKind::Break | StmtKind::Continue | StmtKind::Return(None) => {}
        }
    }

    fn expr(&self, expr: &Expr, parent: Span) {
        self.span(expr.span, parent, "expression");
        let span = expr.span;
        match &expr.kind {
            ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bool(_)
            | ExprKind::None
            | ExprKind::Var(..) => {}
            ExprKind::List(elements) => elements.iter().for_each(|e| self.expr(e, span)),
            ExprKind::Unary { operand, .. } => self.expr(operand, span),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.operands_to_parens(span, lhs.span.to(rhs.span));
                self.expr(lhs, span);
                self.expr(rhs, span);
            }
            ExprKind::Range { start, end } => {
                start.iter().chain(end).for_each(|e| self.expr(e, span));
            }
            ExprKind::Call { callee, args, .. } => {
                self.ident(callee, span);
                args.iter().for_each(|e| self.expr(e, span));
            }
            ExprKind::MethodCall {
                receiver,
                method,
                args,
            } => {
                self.expr(receiver, span);
                self.ident(method, span);
                args.iter().for_each(|e| self.expr(e, span));
            }
            ExprKind::Field { base, field } => {
                self.expr(base, span);
                self.ident(field, span);
            }
            ExprKind::Index { base, indices } => {
                self.expr(base, span);
                for index in indices {
                    match index {
                        IndexArg::Expr(index) => self.expr(index, span),
                        IndexArg::Full(colon) => self.span(*colon, span, "`:`"),
                    }
                }
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.expr(cond, span);
                self.block(then_branch, span);
                if let Some(else_branch) = else_branch {
                    self.expr(else_branch, span);
                }
            }
            ExprKind::Block(block) => {
                assert_eq!(block.span, span, "{}: block expression span", self.file);
                self.block(block, span);
            }
            ExprKind::StructLit { name, fields } => {
                self.ident(name, span);
                for (field, value) in fields {
                    self.ident(field, span);
                    self.expr(value, span);
                }
            }
            ExprKind::Query(atom) => self.atom(atom, span),
        }
    }

    fn atom(&self, atom: &tl_syntax::ast::Atom, outer: Span) {
        self.span(atom.span, outer, "atom");
        self.ident(&atom.relation, atom.span);
        atom.args.iter().for_each(|a| self.ident(a, atom.span));
    }
}

#[test]
fn spans_are_tight_and_nested() {
    for path in common::inputs("parse_ok") {
        let text = std::fs::read_to_string(&path).expect("readable golden input");
        let program = parse(FILE, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let checker = Checker {
            text: &text,
            file: common::file_name(&path),
        };
        let whole = Span::new(FILE, 0, text.len());
        for item in &program.items {
            checker.item(item, whole);
        }
    }
}
