//! The tokens the lexer produces and the parser consumes.
//!
//! Only the words that can never be a name are keywords here; `main`, `test`,
//! `bench`, `tensor`, the type names and `self` are identifiers that the parser
//! recognises by position, so they stay usable as variable and field names.

use crate::span::Span;

/// One token with the bytes it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// What a token is. Literals carry their decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    Ident(String),
    Int(i64),
    Float(f64),
    /// A string literal, escapes already decoded.
    Str(String),

    // Keywords.
    Fn,
    Struct,
    Impl,
    Import,
    Let,
    If,
    Else,
    While,
    For,
    In,
    Loop,
    Break,
    Continue,
    Return,
    True,
    False,
    None,

    // Punctuation.
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Colon,
    Dot,
    DotDot,
    Arrow,
    Eq,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    At,
    Bang,
    AndAnd,
    OrOr,
    PlusEq,
    MinusEq,
    StarEq,
    SlashEq,
    Question,

    /// The end of the input; the lexer always ends its output with one, so the
    /// parser can always look at a current token.
    Eof,
}

impl TokenKind {
    /// The keyword a word is, if it is one.
    pub fn keyword(word: &str) -> Option<TokenKind> {
        Some(match word {
            "fn" => TokenKind::Fn,
            "struct" => TokenKind::Struct,
            "impl" => TokenKind::Impl,
            "import" => TokenKind::Import,
            "let" => TokenKind::Let,
            "if" => TokenKind::If,
            "else" => TokenKind::Else,
            "while" => TokenKind::While,
            "for" => TokenKind::For,
            "in" => TokenKind::In,
            "loop" => TokenKind::Loop,
            "break" => TokenKind::Break,
            "continue" => TokenKind::Continue,
            "return" => TokenKind::Return,
            "true" => TokenKind::True,
            "false" => TokenKind::False,
            "none" => TokenKind::None,
            _ => return Option::None,
        })
    }

    /// A stable name for the kind, used by token dumps and tests.
    pub fn name(&self) -> &'static str {
        use TokenKind::*;
        match self {
            Ident(_) => "Ident",
            Int(_) => "Int",
            Float(_) => "Float",
            Str(_) => "Str",
            Fn => "Fn",
            Struct => "Struct",
            Impl => "Impl",
            Import => "Import",
            Let => "Let",
            If => "If",
            Else => "Else",
            While => "While",
            For => "For",
            In => "In",
            Loop => "Loop",
            Break => "Break",
            Continue => "Continue",
            Return => "Return",
            True => "True",
            False => "False",
            None => "None",
            LParen => "LParen",
            RParen => "RParen",
            LBracket => "LBracket",
            RBracket => "RBracket",
            LBrace => "LBrace",
            RBrace => "RBrace",
            Comma => "Comma",
            Semi => "Semi",
            Colon => "Colon",
            Dot => "Dot",
            DotDot => "DotDot",
            Arrow => "Arrow",
            Eq => "Eq",
            EqEq => "EqEq",
            Ne => "Ne",
            Lt => "Lt",
            Le => "Le",
            Gt => "Gt",
            Ge => "Ge",
            Plus => "Plus",
            Minus => "Minus",
            Star => "Star",
            Slash => "Slash",
            Percent => "Percent",
            At => "At",
            Bang => "Bang",
            AndAnd => "AndAnd",
            OrOr => "OrOr",
            PlusEq => "PlusEq",
            MinusEq => "MinusEq",
            StarEq => "StarEq",
            SlashEq => "SlashEq",
            Question => "Question",
            Eof => "Eof",
        }
    }

    /// The fixed text of a punctuation token or keyword (`None` for literals,
    /// identifiers and the end of input), used in "expected `;`" messages.
    pub fn text(&self) -> Option<&'static str> {
        use TokenKind::*;
        Some(match self {
            Ident(_) | Int(_) | Float(_) | Str(_) | Eof => return Option::None,
            Fn => "fn",
            Struct => "struct",
            Impl => "impl",
            Import => "import",
            Let => "let",
            If => "if",
            Else => "else",
            While => "while",
            For => "for",
            In => "in",
            Loop => "loop",
            Break => "break",
            Continue => "continue",
            Return => "return",
            True => "true",
            False => "false",
            None => "none",
            LParen => "(",
            RParen => ")",
            LBracket => "[",
            RBracket => "]",
            LBrace => "{",
            RBrace => "}",
            Comma => ",",
            Semi => ";",
            Colon => ":",
            Dot => ".",
            DotDot => "..",
            Arrow => "->",
            Eq => "=",
            EqEq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            Plus => "+",
            Minus => "-",
            Star => "*",
            Slash => "/",
            Percent => "%",
            At => "@",
            Bang => "!",
            AndAnd => "&&",
            OrOr => "||",
            PlusEq => "+=",
            MinusEq => "-=",
            StarEq => "*=",
            SlashEq => "/=",
            Question => "?",
        })
    }

    /// Whether two kinds are the same ignoring literal values (`Ident("a")`
    /// matches `Ident("b")`).
    pub fn same_kind(&self, other: &TokenKind) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}
