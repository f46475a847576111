//! One interactive input: items and statements in any order, optionally ending
//! with an expression whose value the REPL prints.

use super::cursor::Parser;
use super::statements::{End, Parsed};
use crate::ast::{Expr, Item, Stmt};
use crate::parse_error::ParseError;
use crate::span::FileId;
use crate::token::TokenKind;

/// What one REPL input declares and runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplInput {
    /// Declarations, in order.
    pub items: Vec<Item>,
    /// Statements, in order.
    pub stmts: Vec<Stmt>,
    /// A final expression without `;`: its value is shown.
    pub tail: Option<Expr>,
}

/// Parses one interactive input. When the input merely stops too early
/// (`fn f() {`, `1 +`, `let x = 1` without its `;`), the error has `at_eof` set
/// so the caller can read another line and try again.
pub fn parse_repl(file: FileId, text: &str) -> Result<ReplInput, ParseError> {
    Parser::new(file, text)?.repl_input()
}

impl Parser<'_> {
    /// repl_input := (item | stmt)* expr?
    fn repl_input(&mut self) -> Result<ReplInput, ParseError> {
        let mut input = ReplInput {
            items: Vec::new(),
            stmts: Vec::new(),
            tail: None,
        };
        loop {
            if self.eat(&TokenKind::Semi).is_some() {
                continue;
            }
            if self.at(&TokenKind::Eof) {
                return Ok(input);
            }
            if self.at_item_start() {
                input.items.push(self.item()?);
                continue;
            }
            match self.stmt(End::Input)? {
                Parsed::Stmt(stmt) => input.stmts.push(stmt),
                // `stmt` only returns a tail at the end of the input.
                Parsed::Tail(expr) => input.tail = Some(expr),
            }
        }
    }

    /// Whether an item starts here. The contextual words count only in their
    /// item shape, so `tensor`, `main` and `test` stay usable as variables.
    fn at_item_start(&self) -> bool {
        let next = &self.nth(1).kind;
        match self.peek_kind() {
            TokenKind::Fn | TokenKind::Struct | TokenKind::Impl | TokenKind::Import => true,
            TokenKind::Ident(word) => match word.as_str() {
                "tensor" | "domain" | "relation" => matches!(next, TokenKind::Ident(_)),
                "main" => *next == TokenKind::LBrace,
                "test" | "bench" => {
                    matches!(next, TokenKind::Ident(_) | TokenKind::Str(_))
                        && self.nth(2).kind == TokenKind::LBrace
                }
                // A fact or a rule; an equation is a statement here, as in a body.
                _ => *next == TokenKind::LParen && self.at_fact_or_rule(false),
            },
            _ => false,
        }
    }
}
