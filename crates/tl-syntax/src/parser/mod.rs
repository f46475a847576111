//! The parser: tokens to the syntax tree of [`crate::ast`], by recursive descent
//! with a Pratt loop for operators. Each non-terminal below is a method of the
//! same name on [`cursor::Parser`] (lists between delimiters share
//! `comma_list`). It stops at the first error.
//!
//! ```text
//! program     := item*
//! repl_input  := (item | stmt)* expr?            items start with fn, struct, impl,
//!                                                import, `tensor NAME`, `main {`,
//!                                                `test NAME {`, `bench NAME {`,
//!                                                `domain NAME`, `relation NAME`,
//!                                                a fact or a rule
//!
//! item        := import | fn_decl | struct_decl | impl_block | tensor_decl
//!              | main_block | named_block
//!              | equation | domain | relation | fact | rule
//! import      := "import" STRING ";"?
//! fn_decl     := "fn" IDENT "(" params ")" ("->" type_expr)? block
//! params      := (param ("," param)* ","?)?
//! param       := IDENT (":" type_expr)?          `self` is a parameter without type
//! struct_decl := "struct" IDENT "{" (field_decl ("," field_decl)* ","?)? "}"
//! field_decl  := IDENT ":" type_expr
//! impl_block  := "impl" IDENT "{" fn_decl* "}"
//! tensor_decl := "tensor" IDENT ":" type_expr "learnable"? ("=" expr)? ";"
//! main_block  := "main" block
//! named_block := ("test" | "bench") (IDENT | STRING) block
//! equation    := IDENT ("[" IDENT ("," IDENT)* ","? "]")? "=" expr ";"
//! domain      := "domain" IDENT "=" "{" IDENT ("," IDENT)* ","? "}" ";"
//! relation    := "relation" IDENT "(" IDENT ":" IDENT ("," IDENT ":" IDENT)* ","? ")" ";"
//! fact        := atom "."
//! rule        := atom "<-" literal ("," literal)* "."
//! literal     := "!"? atom
//! atom        := IDENT "(" IDENT ("," IDENT)* ","? ")"
//!
//! type_expr   := DTYPE dims                      float16 float32 bfloat16 int32 int64 bool
//!              | DTYPE                           a tensor of any shape (not `bool`)
//!              | "bool" | "int" | "float" | "string"
//!              | "list" ("[" type_expr "]")?
//!              | IDENT                           a struct or handle type
//! dims        := "[" dim ("," dim)* ","? "]"
//! dim         := INT | IDENT | "?"
//!
//! block       := "{" stmt* expr? "}"
//! stmt        := ";"                             (empty statement, ignored)
//!              | "let" IDENT (":" type_expr)? "=" expr stmt_end
//!              | "while" expr_no_struct block
//!              | "for" IDENT "in" expr_no_struct block
//!              | "loop" block
//!              | "break" stmt_end | "continue" stmt_end
//!              | "return" expr? stmt_end
//!              | block_like ";"?                 an `if` or a block ends the statement
//!              | expr assign_op expr stmt_end    target: variable, field or index
//!              | expr ";"
//! stmt_end    := ";"                             optional before a block's `}`
//! assign_op   := "=" | "+=" | "-=" | "*=" | "/="
//!
//! expr        := range
//! range       := ".." or_expr? | or_expr (".." or_expr?)?     not chainable
//! or_expr     := binary operators by precedence, loosest first:
//!                  ||  then  &&  then  == != < <= > >= (not chainable)
//!                  then  + -  then  * / % @   (all left associative)
//!                and juxtaposition at the level of `*`: an operand ending
//!                in `]` or `)` followed on the same line by IDENT, or by a
//!                space and "(" (`W[i, j] X[j]`, `(a[i] - b[i]) (a[i] - b[i])`)
//! unary       := ("-" | "!") unary | postfix
//! postfix     := primary ("." IDENT call_args? | "[" index_args "]")*
//! index_args  := index_arg ("," index_arg)* ","?
//! index_arg   := ":" | expr
//! primary     := INT | FLOAT | STRING | "true" | "false" | "none"
//!              | IDENT call_args                 a call: only names can be called
//!              | IDENT call_args "?"             a query; its arguments are names
//!              | IDENT "{" (IDENT ":" expr),* ","? "}"
//!                                                a struct literal, outside
//!                                                expr_no_struct, when `{` is
//!                                                followed by `}` or IDENT ":"
//!              | IDENT
//!              | "(" expr ")"
//!              | "[" (expr ("," expr)* ","?)? "]"
//!              | block_like
//! block_like  := if_expr | block
//! if_expr     := "if" expr_no_struct block ("else" (if_expr | block))?
//! call_args   := "(" (expr ("," expr)* ","?)? ")"
//! ```
//!
//! `expr_no_struct` is `expr` where a struct literal may not appear outside
//! parentheses, brackets or braces: in `if x { … }` the `{` opens the body.

mod cursor;
mod delimited;
mod expressions;
mod items;
mod logic;
mod nesting;
mod postfix;
mod primary;
mod repl;
mod statements;
#[cfg(test)]
mod tests;
mod types;

pub use crate::parse_error::ParseError;
pub use repl::{parse_repl, ReplInput};

use crate::ast::Program;
use crate::span::FileId;
use crate::token::TokenKind;
use cursor::Parser;

/// Parses a whole source file: a sequence of items.
pub fn parse(file: FileId, text: &str) -> Result<Program, ParseError> {
    Parser::new(file, text)?.program()
}

impl Parser<'_> {
    /// program := item*
    fn program(&mut self) -> Result<Program, ParseError> {
        let mut items = Vec::new();
        while !self.at(&TokenKind::Eof) {
            items.push(self.item()?);
        }
        Ok(Program { items })
    }
}
