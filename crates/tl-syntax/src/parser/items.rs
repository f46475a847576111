//! Top-level items: imports, functions, structs, impls, global tensors and the
//! `main`, `test` and `bench` blocks. `tensor`, `main`, `test` and `bench` are
//! plain identifiers that only mean something at the start of an item.

use super::cursor::Parser;
use crate::ast::{
    FieldDecl, FnDecl, Ident, ImplBlock, Item, NamedBlock, Param, StructDecl, TensorDecl,
};
use crate::parse_error::ParseError;
use crate::token::TokenKind;

impl Parser<'_> {
    /// item := import | fn_decl | struct_decl | impl_block | tensor_decl
    ///       | main_block | test_block | bench_block
    pub(super) fn item(&mut self) -> Result<Item, ParseError> {
        match self.peek_kind() {
            TokenKind::Import => self.import(),
            TokenKind::Fn => self.fn_decl().map(Item::Function),
            TokenKind::Struct => self.struct_decl().map(Item::Struct),
            TokenKind::Impl => self.impl_block().map(Item::Impl),
            _ if self.at_word("tensor") => self.tensor_decl().map(Item::Tensor),
            _ if self.at_word("main") => self.main_block(),
            _ if self.at_word("test") => self.named_block("test").map(Item::Test),
            _ if self.at_word("bench") => self.named_block("bench").map(Item::Bench),
            _ if self.at_word("domain") && self.named_next() => {
                self.domain_decl().map(Item::Domain)
            }
            _ if self.at_word("relation") && self.named_next() => {
                self.relation_decl().map(Item::Relation)
            }
            // A name cut short by the end of input may become an equation.
            TokenKind::Ident(_) => match self.nth(1).kind {
                TokenKind::LBracket | TokenKind::Eq | TokenKind::Eof => {
                    self.equation_item().map(Item::Equation)
                }
                TokenKind::LParen if self.at_fact_or_rule(true) => self.fact_or_rule(),
                _ => Err(self.not_an_item()),
            },
            _ => Err(self.not_an_item()),
        }
    }

    /// Whether a name (or the end of input, which may bring one) follows the
    /// current word, as in `domain Person`.
    fn named_next(&self) -> bool {
        matches!(self.nth(1).kind, TokenKind::Ident(_) | TokenKind::Eof)
    }

    fn not_an_item(&self) -> ParseError {
        use TokenKind as T;
        let error = self.expected("an item");
        match self.peek_kind() {
            T::Let | T::While | T::For | T::Loop | T::If | T::Return | T::Break | T::Continue => {
                error.with_hint("statements go inside `main { ... }` or a function")
            }
            T::Ident(_) | T::Int(_) | T::Float(_) | T::Str(_) | T::LParen | T::LBracket => {
                error.with_hint("statements go inside `main { ... }` or a function")
            }
            T::RBrace => error.with_hint("this `}` has no matching `{`"),
            _ => error.with_hint(
                "a file holds `fn`, `struct`, `impl`, `import`, `tensor`, `main`, `test` and `bench` items, \
                 equations, `domain`, `relation`, facts and rules",
            ),
        }
    }

    /// import := "import" STRING ";"?
    fn import(&mut self) -> Result<Item, ParseError> {
        let start = self.bump().span;
        let TokenKind::Str(path) = self.peek_kind().clone() else {
            return Err(self
                .expected("a file path after `import`")
                .with_hint("write `import \"layers.tl\";`"));
        };
        let mut end = self.bump().span;
        if let Some(semi) = self.eat(&TokenKind::Semi) {
            end = semi;
        }
        Ok(Item::Import {
            path,
            span: start.to(end),
        })
    }

    /// fn_decl := "fn" IDENT "(" params ")" ("->" type)? block
    pub(super) fn fn_decl(&mut self) -> Result<FnDecl, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a function name after `fn`")?;
        let open = self.expect(TokenKind::LParen, " after the function name")?;
        let (params, _) = self.comma_list(open, TokenKind::RParen, "parameter", |p| p.param())?;
        let return_type = match self.eat(&TokenKind::Arrow) {
            Some(_) => Some(self.type_expr()?),
            None => None,
        };
        if self.at(&TokenKind::Colon) {
            return Err(self
                .expected("`{` to start the function body")
                .with_hint("a return type is written after `->`, as in `fn f(x: int) -> int`"));
        }
        let body = self.block(" to start the function body")?;
        Ok(FnDecl {
            span: start.to(body.span),
            name,
            params,
            return_type,
            body,
        })
    }

    /// param := IDENT (":" type)?
    fn param(&mut self) -> Result<Param, ParseError> {
        let name = self.ident("a parameter name")?;
        let ty = match self.eat(&TokenKind::Colon) {
            Some(_) => Some(self.type_expr()?),
            None => None,
        };
        Ok(Param { name, ty })
    }

    /// struct_decl := "struct" IDENT "{" (field_decl ("," field_decl)* ","?)? "}"
    fn struct_decl(&mut self) -> Result<StructDecl, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a struct name after `struct`")?;
        let open = self.expect(TokenKind::LBrace, " after the struct name")?;
        let (fields, close) =
            self.comma_list(open, TokenKind::RBrace, "field", |p| p.field_decl())?;
        Ok(StructDecl {
            name,
            fields,
            span: start.to(close),
        })
    }

    /// field_decl := IDENT ":" type
    fn field_decl(&mut self) -> Result<FieldDecl, ParseError> {
        let name = self.ident("a field name")?;
        if self.eat(&TokenKind::Colon).is_none() {
            return Err(self
                .expected_token("`:` after the field name")
                .with_hint("every field has a type, as in `weight: float32[n, m]`"));
        }
        let ty = self.type_expr()?;
        Ok(FieldDecl { name, ty })
    }

    /// impl_block := "impl" IDENT "{" fn_decl* "}"
    fn impl_block(&mut self) -> Result<ImplBlock, ParseError> {
        let start = self.bump().span;
        let target = self.ident("a struct name after `impl`")?;
        let open = self.expect(TokenKind::LBrace, " after the struct name")?;
        let mut methods = Vec::new();
        let close = loop {
            match self.peek_kind() {
                TokenKind::RBrace => break self.bump().span,
                TokenKind::Fn => methods.push(self.fn_decl()?),
                TokenKind::Eof => return Err(self.unclosed(open, &TokenKind::RBrace)),
                _ => {
                    return Err(self
                        .expected("`fn` or `}` in the `impl` block")
                        .with_hint("an `impl` block holds only methods"))
                }
            }
        };
        Ok(ImplBlock {
            target,
            methods,
            span: start.to(close),
        })
    }

    /// tensor_decl := "tensor" IDENT ":" type "learnable"? ("=" expr)? ";"
    fn tensor_decl(&mut self) -> Result<TensorDecl, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a tensor name after `tensor`")?;
        if self.eat(&TokenKind::Colon).is_none() {
            return Err(self
                .expected_token("`:` and a type after the tensor name")
                .with_hint("a global tensor needs a type, as in `tensor w: float32[n, m];`"));
        }
        let ty = self.type_expr()?;
        // A word, not a keyword: `learnable(v)` stays a call everywhere else.
        let learnable = match self.at_word("learnable") {
            true => Some(self.bump().span),
            false => None,
        };
        let init = match self.eat(&TokenKind::Eq) {
            Some(_) => Some(self.expr()?),
            None => None,
        };
        let end = self.expect(TokenKind::Semi, " after the tensor declaration")?;
        Ok(TensorDecl {
            name,
            ty,
            learnable,
            init,
            span: start.to(end),
        })
    }

    /// main_block := "main" block
    fn main_block(&mut self) -> Result<Item, ParseError> {
        self.bump();
        Ok(Item::Main(self.block(" after `main`")?))
    }

    /// test_block := "test" (IDENT | STRING) block, and the same for `bench`.
    fn named_block(&mut self, keyword: &str) -> Result<NamedBlock, ParseError> {
        let start = self.bump().span;
        let name = match self.peek_kind().clone() {
            TokenKind::Ident(name) | TokenKind::Str(name) => Ident {
                name,
                span: self.bump().span,
            },
            _ => {
                return Err(self
                    .expected(&format!("a name after `{keyword}`"))
                    .with_hint(format!("write `{keyword} name {{ ... }}`")))
            }
        };
        let body = self.block(&format!(" after the {keyword} name"))?;
        Ok(NamedBlock {
            name,
            span: start.to(body.span),
            body,
        })
    }
}
