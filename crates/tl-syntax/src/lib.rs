//! The TensorLogic language's front end: source files and spans, diagnostics that
//! render with the offending line and a caret, the lexer, the syntax tree and the
//! parser.

pub mod ast;
pub mod diagnostic;
pub mod dump;
mod lexer;
mod parse_error;
mod parser;
pub mod source_map;
pub mod span;
pub mod token;

pub use ast::DType;
pub use diagnostic::{Diagnostic, Note, Severity};
pub use dump::{dump, dump_expr, dump_repl};
pub use lexer::lex;
pub use parser::{parse, parse_repl, ParseError, ReplInput};
pub use source_map::{SourceFile, SourceMap};
pub use span::{FileId, Span};
pub use token::{Token, TokenKind};
