//! Tensor-logic items: file-level index equations, domains, relations, facts
//! and rules. `domain` and `relation` are plain identifiers that only mean
//! something at the start of an item; an item that starts with a name is an
//! equation (`Y[i] = ...;`, `T = ...;`), a fact (`R(a, b).`) or a rule
//! (`R(x, z) <- R(x, y), S(y, z).`).

use super::cursor::Parser;
use crate::ast::{Atom, DomainDecl, Equation, Ident, Item, Literal, RelationDecl, Rule};
use crate::parse_error::ParseError;
use crate::token::TokenKind;

impl Parser<'_> {
    /// equation := IDENT ("[" IDENT ("," IDENT)* ","? "]")? "=" expr ";"
    pub(super) fn equation_item(&mut self) -> Result<Equation, ParseError> {
        let name = self.ident("a tensor name")?;
        let indices = match self.eat(&TokenKind::LBracket) {
            Some(open) => {
                let names = self.comma_list(open, TokenKind::RBracket, "index", |p| {
                    p.ident("an index name")
                });
                names
                    .map_err(|e| {
                        e.with_hint(
                            "the left side of an equation names its indices, as in `Y[i, j]`",
                        )
                    })?
                    .0
            }
            None => Vec::new(),
        };
        self.expect(TokenKind::Eq, " after the equation's left side")?;
        let value = self.expr()?;
        let end = self.expect(TokenKind::Semi, " after the equation")?;
        Ok(Equation {
            span: name.span.to(end),
            name,
            indices,
            value,
        })
    }

    /// domain := "domain" IDENT "=" "{" IDENT ("," IDENT)* ","? "}" ";"
    pub(super) fn domain_decl(&mut self) -> Result<DomainDecl, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a domain name after `domain`")?;
        self.expect(TokenKind::Eq, " after the domain name")?;
        let open = self.expect(TokenKind::LBrace, " to list the domain's elements")?;
        let (elements, _) = self.comma_list(open, TokenKind::RBrace, "element", |p| {
            p.ident("an element name")
        })?;
        let end = self.expect(TokenKind::Semi, " after the domain")?;
        Ok(DomainDecl {
            name,
            elements,
            span: start.to(end),
        })
    }

    /// relation := "relation" IDENT "(" IDENT ":" IDENT ("," ...)* ","? ")" ";"
    pub(super) fn relation_decl(&mut self) -> Result<RelationDecl, ParseError> {
        let start = self.bump().span;
        let name = self.ident("a relation name after `relation`")?;
        let open = self.expect(TokenKind::LParen, " after the relation name")?;
        let (columns, _) = self.comma_list(open, TokenKind::RParen, "column", |p| {
            let column = p.ident("a column name")?;
            if p.eat(&TokenKind::Colon).is_none() {
                return Err(p
                    .expected_token("`:` and a domain after the column name")
                    .with_hint("write `relation Parent(x: Person, y: Person);`"));
            }
            Ok((column, p.ident("a domain name")?))
        })?;
        let end = self.expect(TokenKind::Semi, " after the relation")?;
        Ok(RelationDecl {
            name,
            columns,
            span: start.to(end),
        })
    }

    /// fact := atom "." ; rule := atom "<-" literal ("," literal)* "."
    pub(super) fn fact_or_rule(&mut self) -> Result<Item, ParseError> {
        let head = self.atom()?;
        if let Some(end) = self.eat(&TokenKind::Dot) {
            return Ok(Item::Fact(Atom {
                span: head.span.to(end),
                ..head
            }));
        }
        if !self.at_rule_arrow() {
            return Err(self
                .expected_token("`.` after a fact or `<-` before a rule's body")
                .with_hint("write `Parent(alice, bob).` or `R(x, z) <- R(x, y), S(y, z).`"));
        }
        self.bump();
        self.bump();
        let mut body = vec![self.literal()?];
        while self.eat(&TokenKind::Comma).is_some() {
            body.push(self.literal()?);
        }
        let end = self.expect(TokenKind::Dot, " at the end of the rule")?;
        Ok(Item::Rule(Rule {
            span: head.span.to(end),
            head,
            body,
        }))
    }

    /// Whether an atom `NAME(names)` starts here and is followed by `.` or
    /// `<`, as a fact or a rule is (`print("hi");` at file level is a
    /// misplaced statement). Input that ends inside the atom may still
    /// become one; input that ends right after it does when `cut_counts`
    /// (a file, where nothing else could follow; not REPL input, where
    /// `f(x)` is an expression).
    pub(super) fn at_fact_or_rule(&self, cut_counts: bool) -> bool {
        let mut n = 2;
        loop {
            match self.nth(n).kind {
                TokenKind::RParen => break,
                TokenKind::Ident(_) => n += 1,
                TokenKind::Eof => return true,
                _ => return false,
            }
            match self.nth(n).kind {
                TokenKind::Comma => n += 1,
                TokenKind::RParen => break,
                TokenKind::Eof => return true,
                _ => return false,
            }
        }
        match self.nth(n + 1).kind {
            TokenKind::Dot | TokenKind::Lt => true,
            TokenKind::Eof => cut_counts,
            _ => false,
        }
    }

    /// `<-` is lexed as `<` and `-`; written together they are the arrow.
    fn at_rule_arrow(&self) -> bool {
        let (lt, minus) = (self.peek(), self.nth(1));
        lt.kind == TokenKind::Lt
            && minus.kind == TokenKind::Minus
            && lt.span.end == minus.span.start
    }

    /// literal := "!"? atom
    fn literal(&mut self) -> Result<Literal, ParseError> {
        let bang = self.eat(&TokenKind::Bang);
        let atom = self.atom()?;
        Ok(Literal {
            atom: match bang {
                Some(bang) => Atom {
                    span: bang.to(atom.span),
                    ..atom
                },
                None => atom,
            },
            negated: bang.is_some(),
        })
    }

    /// atom := IDENT "(" IDENT ("," IDENT)* ","? ")"
    fn atom(&mut self) -> Result<Atom, ParseError> {
        let relation = self.ident("a relation name")?;
        let open = self.expect(TokenKind::LParen, " after the relation name")?;
        let (args, close) = self.comma_list(open, TokenKind::RParen, "argument", |p| {
            p.ident("a variable or a domain element")
        })?;
        Ok(Atom {
            span: relation.span.to(close),
            relation,
            args,
        })
    }
}

/// The arguments of a call written as a query `R(args)?`: each must be a name.
pub(super) fn query_args(args: Vec<crate::ast::Expr>) -> Result<Vec<Ident>, ParseError> {
    args.into_iter()
        .map(|arg| match arg.kind {
            crate::ast::ExprKind::Var(name, _) => Ok(Ident {
                name,
                span: arg.span,
            }),
            _ => Err(ParseError::new(
                "a query's arguments are domain elements or variables",
                arg.span,
            )
            .with_hint("write a name, as in `Parent(alice, x)?`")),
        })
        .collect()
}
