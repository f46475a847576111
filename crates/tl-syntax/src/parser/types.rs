//! Written types. The type names are identifiers, not keywords, so the same
//! words stay usable as builtin function names (`float32(x)`).

use super::cursor::Parser;
use crate::ast::{DType, Dim, TypeExpr, TypeKind};
use crate::parse_error::ParseError;
use crate::span::Span;
use crate::token::TokenKind;

impl Parser<'_> {
    /// type := DTYPE "[" dims "]" | DTYPE | "bool" | "int" | "float" | "string"
    ///       | "list" ("[" type "]")? | IDENT
    pub(super) fn type_expr(&mut self) -> Result<TypeExpr, ParseError> {
        self.enter()?;
        let ty = self.type_inner()?;
        self.leave();
        Ok(ty)
    }

    fn type_inner(&mut self) -> Result<TypeExpr, ParseError> {
        let TokenKind::Ident(word) = self.peek_kind().clone() else {
            return Err(self.expected("a type"));
        };
        let start = self.bump().span;
        let tensor_dtype = match word.as_str() {
            "bool" if self.at(&TokenKind::LBracket) => Some(DType::Bool),
            _ => DType::from_keyword(&word),
        };
        if let Some(dtype) = tensor_dtype {
            let dims = match self.at(&TokenKind::LBracket) {
                true => Some(self.dims()?),
                false => None,
            };
            return Ok(TypeExpr {
                kind: TypeKind::Tensor { dtype, dims },
                span: start.to(self.prev_span()),
            });
        }
        let kind = match word.as_str() {
            "int" | "float" | "string" if self.at(&TokenKind::LBracket) => {
                return Err(self.scalar_with_shape(&word, start))
            }
            "bool" => TypeKind::Bool,
            "int" => TypeKind::Int,
            "float" => TypeKind::Float,
            "string" => TypeKind::Str,
            "list" => TypeKind::List(self.list_element()?),
            "tensor" => {
                return Err(ParseError::new("expected a type, found `tensor`", start)
                    .with_hint("name the element type and shape, as in `float32[n, m]`"))
            }
            _ => TypeKind::Named(word),
        };
        Ok(TypeExpr {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    /// The `[type]` of `list[type]`, if written.
    fn list_element(&mut self) -> Result<Option<Box<TypeExpr>>, ParseError> {
        if self.eat(&TokenKind::LBracket).is_none() {
            return Ok(None);
        }
        let element = self.type_expr()?;
        self.expect(TokenKind::RBracket, " after the list's element type")?;
        Ok(Some(Box::new(element)))
    }

    /// `int[3]`: the scalar types take no shape.
    fn scalar_with_shape(&self, word: &str, start: Span) -> ParseError {
        let span = start.to(self.peek().span);
        let error = ParseError::new(
            format!("`{word}` is a scalar type and takes no shape"),
            span,
        );
        match word {
            "int" => error.with_hint("for an integer tensor write `int64[...]` or `int32[...]`"),
            "float" => error.with_hint(
                "for a float tensor write `float32[...]`, `float16[...]` or `bfloat16[...]`",
            ),
            _ => error.with_hint("a string has no shape"),
        }
    }

    /// dims := "[" dim ("," dim)* ","? "]"
    fn dims(&mut self) -> Result<Vec<Dim>, ParseError> {
        let open = self.bump().span;
        if self.at(&TokenKind::RBracket) {
            return Err(self.expected("a dimension").with_hint(
                "for a tensor of any shape, write the element type alone, as in `float32`",
            ));
        }
        let (dims, _) = self.comma_list(open, TokenKind::RBracket, "dimension", |p| p.dim())?;
        Ok(dims)
    }

    /// dim := INT | IDENT | "?"
    fn dim(&mut self) -> Result<Dim, ParseError> {
        let token = self.peek().clone();
        let dim = match token.kind {
            TokenKind::Int(size) => match usize::try_from(size) {
                Ok(size) => Dim::Known(size),
                Err(_) => return Err(ParseError::new("dimension is too large", token.span)),
            },
            TokenKind::Ident(name) => Dim::Named(name),
            TokenKind::Question => Dim::Unknown,
            _ => return Err(self.expected("a dimension (a number, a name or `?`)")),
        };
        self.bump();
        Ok(dim)
    }
}
