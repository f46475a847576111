//! The syntax tree of a `.tl` program, as the parser builds it. Every node carries
//! the [`Span`] of the code it came from, so the checker and the interpreter can
//! point at it in their errors.

use crate::span::Span;

/// A whole source file.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub items: Vec<Item>,
}

/// A number the interpreter's resolver gives a name before the code runs, so
/// that running it indexes instead of searching by name: a local variable's
/// slot in its function's frame, or a called function's entry in the table of
/// functions. The parser writes `Unresolved`: looked up by name when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resolved {
    #[default]
    Unresolved,
    At(u32),
}

/// The slots of the locals declared in a block (its nested blocks included),
/// `start..end`: the interpreter empties them when the block ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Locals {
    pub start: u32,
    pub end: u32,
}

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `import "other.tl";`
    Import { path: String, span: Span },
    /// `fn name(params) -> type { body }`
    Function(FnDecl),
    /// `struct Name { field: type, ... }`
    Struct(StructDecl),
    /// `impl Name { fn method(self, ...) { ... } ... }`
    Impl(ImplBlock),
    /// `tensor name: type = init;` — a global tensor.
    Tensor(TensorDecl),
    /// `main { ... }`
    Main(Block),
    /// `test name { ... }`
    Test(NamedBlock),
    /// `bench name { ... }`
    Bench(NamedBlock),
    /// `Y[i, k] = W[i, j] X[j, k];` at file level: defines a global tensor.
    Equation(Equation),
    /// `domain Person = {alice, bob};`
    Domain(DomainDecl),
    /// `relation Parent(x: Person, y: Person);`
    Relation(RelationDecl),
    /// `Parent(alice, bob).`
    Fact(Atom),
    /// `Ancestor(x, z) <- Ancestor(x, y), Parent(y, z).`
    Rule(Rule),
}

/// An index equation `name[indices] = value;` (no indices for a 0-d result).
/// In a body, an assignment is one when it names an index that is not a
/// variable; the language crate decides that, since it knows the scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct Equation {
    pub name: Ident,
    pub indices: Vec<Ident>,
    pub value: Expr,
    pub span: Span,
}

/// `domain Name = {a, b, ...};`: a finite set of named elements, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainDecl {
    pub name: Ident,
    pub elements: Vec<Ident>,
    pub span: Span,
}

/// `relation Name(x: Domain, ...);`
#[derive(Debug, Clone, PartialEq)]
pub struct RelationDecl {
    pub name: Ident,
    /// Each column's name (documentation only) and domain.
    pub columns: Vec<(Ident, Ident)>,
    pub span: Span,
}

/// `Name(a, b)`: a relation applied to constants (domain elements) and
/// variables; which is which depends on the column's domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Atom {
    pub relation: Ident,
    pub args: Vec<Ident>,
    pub span: Span,
}

/// One conjunct of a rule's body: an atom, or `!atom`.
#[derive(Debug, Clone, PartialEq)]
pub struct Literal {
    pub atom: Atom,
    pub negated: bool,
}

/// `head <- body1, body2, ... .`
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub head: Atom,
    pub body: Vec<Literal>,
    pub span: Span,
}

/// A function or method.
#[derive(Debug, Clone, PartialEq)]
pub struct FnDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub return_type: Option<TypeExpr>,
    pub body: Block,
    pub span: Span,
}

/// One parameter; `self` is a parameter named `self` without a type.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
}

/// A struct declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct StructDecl {
    pub name: Ident,
    pub fields: Vec<FieldDecl>,
    pub span: Span,
}

/// One field of a struct declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDecl {
    pub name: Ident,
    pub ty: TypeExpr,
}

/// Methods of a struct.
#[derive(Debug, Clone, PartialEq)]
pub struct ImplBlock {
    pub target: Ident,
    pub methods: Vec<FnDecl>,
    pub span: Span,
}

/// A global tensor declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    /// Where `learnable` was written after the type, if it was: the tensor
    /// is a parameter that `grad` and the optimizers differentiate by.
    pub learnable: Option<Span>,
    pub init: Option<Expr>,
    pub span: Span,
}

/// A `test` or `bench` block.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedBlock {
    pub name: Ident,
    pub body: Block,
    pub span: Span,
}

/// A written type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeKind,
    pub span: Span,
}

/// The kinds of written types.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// `float16[?, 2048]`; `dims` is `None` when no shape is written (any rank).
    Tensor {
        dtype: DType,
        dims: Option<Vec<Dim>>,
    },
    Int,
    Float,
    Bool,
    Str,
    /// `list` or `list[T]`.
    List(Option<Box<TypeExpr>>),
    /// A struct or handle type by name (`Layer`, `Model`, `Tokenizer`, `Cache`).
    Named(String),
}

/// Element types of tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    F32,
    BF16,
    I32,
    I64,
    Bool,
}

impl DType {
    /// The keyword that names the type.
    pub fn keyword(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::BF16 => "bfloat16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }

    /// The type a keyword names (`bool` is the scalar type unless followed by `[`).
    pub fn from_keyword(word: &str) -> Option<DType> {
        Some(match word {
            "float16" => DType::F16,
            "float32" => DType::F32,
            "bfloat16" => DType::BF16,
            "int32" => DType::I32,
            "int64" => DType::I64,
            _ => return None,
        })
    }

    /// Whether values of this type are floating point.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::BF16)
    }
}

/// One dimension of a tensor type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// `2048`
    Known(usize),
    /// `n`: the same name means the same size within one signature.
    Named(String),
    /// `?`
    Unknown,
}

/// `{ statements; tail }`: a block's value is its tail expression, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub tail: Option<Box<Expr>>,
    pub span: Span,
    pub locals: Locals,
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

/// The kinds of statements.
#[derive(Debug, Clone, PartialEq)]
pub enum StmtKind {
    /// `let name: type = value;`
    Let {
        name: Ident,
        ty: Option<TypeExpr>,
        value: Expr,
        slot: Resolved,
    },
    /// `target = value;` or `target op= value;` (`op` is then `Some`). The target
    /// is a variable, a field (`a.b`) or an index (`a[i]`).
    ///
    /// `equation` is filled in by the interpreter's resolver: `Some` when the
    /// assignment is an index equation, holding the slot of the local it
    /// declares (`Unresolved` when its name is a variable already).
    Assign {
        target: Expr,
        op: Option<BinaryOp>,
        value: Expr,
        equation: Option<Resolved>,
    },
    /// `while cond { ... }`
    While {
        cond: Expr,
        body: Block,
    },
    /// `for var in iterable { ... }` (a range `a..b` or a list).
    For {
        var: Ident,
        iterable: Expr,
        body: Block,
        slot: Resolved,
    },
    /// `loop { ... }`
    Loop(Block),
    Break,
    Continue,
    /// `return value;`
    Return(Option<Expr>),
    /// An expression evaluated for its effect.
    Expr(Expr),
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// The kinds of expressions.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    /// `none`: the absence of a value.
    None,
    /// A variable, with its slot once resolved.
    Var(String, Resolved),
    /// `[a, b, c]`
    List(Vec<Expr>),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `a..b`, `a..`, `..b`, `..`
    Range {
        start: Option<Box<Expr>>,
        end: Option<Box<Expr>>,
    },
    /// `name(args)`: a function or builtin.
    Call {
        callee: Ident,
        args: Vec<Expr>,
        function: Resolved,
    },
    /// `receiver.method(args)`
    MethodCall {
        receiver: Box<Expr>,
        method: Ident,
        args: Vec<Expr>,
    },
    /// `base.field`
    Field {
        base: Box<Expr>,
        field: Ident,
    },
    /// `base[i, j..k, :]`
    Index {
        base: Box<Expr>,
        indices: Vec<IndexArg>,
    },
    /// `if cond { ... } else { ... }`; `else_branch` is a block or another `if`.
    If {
        cond: Box<Expr>,
        then_branch: Block,
        else_branch: Option<Box<Expr>>,
    },
    Block(Block),
    /// `Name { field: value, ... }`
    StructLit {
        name: Ident,
        fields: Vec<(Ident, Expr)>,
    },
    /// `Relation(args)?`: whether, or for which elements, a relation holds.
    Query(Atom),
}

/// One position of an index expression.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexArg {
    /// A single index or a range `a..b` (an [`ExprKind::Range`]).
    Expr(Expr),
    /// `:`: the whole dimension.
    Full(Span),
}

/// Prefix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

/// Infix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    MatMul,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::MatMul => "@",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
        }
    }
}

impl UnaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::Not => "!",
        }
    }
}
