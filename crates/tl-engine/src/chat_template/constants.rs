//! A compile-time guard: minijinja folds constant expressions while it
//! compiles (`'=' * 80` becomes one string), bounded only by its own caps of
//! 100 MB per repeated string and 100 million items per repeated list. Before
//! compiling, we walk the template's syntax tree and estimate, without
//! building anything, what each foldable expression would build; a template
//! whose constants would exceed [`MAX_CONSTANT_BYTES`] is refused.

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};
use minijinja::machinery::parse;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;

/// The most a constant expression may build (printed bytes or list items).
/// Real templates fold a separator line or two.
pub(crate) const MAX_CONSTANT_BYTES: u64 = 1 << 20;

/// Printed bytes assumed for numbers, booleans and none.
const SCALAR_BYTES: u64 = 40;

/// What folding an expression would build.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Folded {
    Int(i128),
    Float,
    /// A string of this many bytes.
    Text(u64),
    /// A list, tuple or map: items and printed bytes.
    Items(u64, u64),
    /// A boolean or none.
    Small,
}

impl Folded {
    fn printed_bytes(self) -> u64 {
        match self {
            Folded::Int(_) | Folded::Float | Folded::Small => SCALAR_BYTES,
            Folded::Text(bytes) | Folded::Items(_, bytes) => bytes,
        }
    }

    fn items(self) -> u64 {
        match self {
            Folded::Items(items, _) => items,
            _ => 1,
        }
    }
}

/// Refuses `source` when one of its constant expressions would build more
/// than [`MAX_CONSTANT_BYTES`] while compiling. Syntax errors are left to
/// the compiler, which reports them better.
pub(crate) fn check_constant_folding(
    source: &str,
    name: &str,
    syntax: SyntaxConfig,
) -> Result<(), String> {
    match parse(source, name, syntax) {
        Ok(template) => visit_stmt(&template),
        Err(_) => Ok(()),
    }
}

fn visit_body(body: &[Stmt<'_>]) -> Result<(), String> {
    body.iter().try_for_each(visit_stmt)
}

fn visit_stmt(stmt: &Stmt<'_>) -> Result<(), String> {
    match stmt {
        Stmt::Template(template) => visit_body(&template.children),
        Stmt::EmitExpr(emit) => visit(&emit.expr).map(drop),
        Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => Ok(()),
        Stmt::ForLoop(for_loop) => {
            visit(&for_loop.target)?;
            visit(&for_loop.iter)?;
            visit_optional(for_loop.filter_expr.as_ref())?;
            visit_body(&for_loop.body)?;
            visit_body(&for_loop.else_body)
        }
        Stmt::IfCond(cond) => {
            visit(&cond.expr)?;
            visit_body(&cond.true_body)?;
            visit_body(&cond.false_body)
        }
        Stmt::WithBlock(with) => {
            for (target, value) in &with.assignments {
                visit(target)?;
                visit(value)?;
            }
            visit_body(&with.body)
        }
        Stmt::Set(set) => {
            visit(&set.target)?;
            visit(&set.expr).map(drop)
        }
        Stmt::SetBlock(set) => {
            visit(&set.target)?;
            visit_optional(set.filter.as_ref())?;
            visit_body(&set.body)
        }
        Stmt::AutoEscape(block) => {
            visit(&block.enabled)?;
            visit_body(&block.body)
        }
        Stmt::FilterBlock(block) => {
            visit(&block.filter)?;
            visit_body(&block.body)
        }
        Stmt::Block(block) => visit_body(&block.body),
        Stmt::Import(import) => {
            visit(&import.expr)?;
            visit(&import.name).map(drop)
        }
        Stmt::FromImport(import) => {
            visit(&import.expr)?;
            for (name, alias) in &import.names {
                visit(name)?;
                visit_optional(alias.as_ref())?;
            }
            Ok(())
        }
        Stmt::Extends(extends) => visit(&extends.name).map(drop),
        Stmt::Include(include) => visit(&include.name).map(drop),
        Stmt::Macro(decl) => visit_macro(decl),
        Stmt::CallBlock(block) => {
            visit_call(&block.call)?;
            visit_macro(&block.macro_decl)
        }
        Stmt::Do(call) => visit_call(&call.call),
    }
}

fn visit_macro(decl: &ast::Macro<'_>) -> Result<(), String> {
    for expr in decl.args.iter().chain(&decl.defaults) {
        visit(expr)?;
    }
    visit_body(&decl.body)
}

fn visit_call(call: &ast::Call<'_>) -> Result<(), String> {
    visit(&call.expr)?;
    visit_args(&call.args)
}

fn visit_args(args: &[CallArg<'_>]) -> Result<(), String> {
    for arg in args {
        match arg {
            CallArg::Pos(expr)
            | CallArg::Kwarg(_, expr)
            | CallArg::PosSplat(expr)
            | CallArg::KwargSplat(expr) => visit(expr).map(drop)?,
        }
    }
    Ok(())
}

fn visit_optional(expr: Option<&Expr<'_>>) -> Result<(), String> {
    expr.map_or(Ok(()), |expr| visit(expr).map(drop))
}

/// Visits `expr` and everything in it; returns what folding it would build,
/// or `None` when it is not constant.
fn visit(expr: &Expr<'_>) -> Result<Option<Folded>, String> {
    let folded = match expr {
        Expr::Var(_) => None,
        Expr::Const(constant) => Some(fold_const(&constant.value)),
        Expr::Slice(slice) => {
            visit(&slice.expr)?;
            for part in [&slice.start, &slice.stop, &slice.step] {
                visit_optional(part.as_ref())?;
            }
            None
        }
        Expr::UnaryOp(unary) => match (&unary.op, visit(&unary.expr)?) {
            (UnaryOpKind::Not, Some(_)) => Some(Folded::Small),
            (UnaryOpKind::Neg, Some(Folded::Int(value))) => value.checked_neg().map(Folded::Int),
            (UnaryOpKind::Neg, Some(Folded::Float)) => Some(Folded::Float),
            _ => None,
        },
        Expr::BinOp(binop) => {
            let left = visit(&binop.left)?;
            let right = visit(&binop.right)?;
            match (left, right) {
                (Some(left), Some(right)) => fold_binop(&binop.op, left, right),
                _ => None,
            }
        }
        Expr::Compare(compare) => {
            let mut constant = visit(&compare.expr)?.is_some();
            for op in &compare.ops {
                constant &= visit(&op.expr)?.is_some();
            }
            constant.then_some(Folded::Small)
        }
        Expr::IfExpr(if_expr) => {
            visit(&if_expr.test_expr)?;
            visit(&if_expr.true_expr)?;
            visit_optional(if_expr.false_expr.as_ref())?;
            None
        }
        Expr::Filter(filter) => {
            visit_optional(filter.expr.as_ref())?;
            visit_args(&filter.args)?;
            None
        }
        Expr::Test(test) => {
            visit(&test.expr)?;
            visit_args(&test.args)?;
            None
        }
        Expr::GetAttr(get) => visit(&get.expr).map(|_| None)?,
        Expr::GetItem(get) => {
            visit(&get.expr)?;
            visit(&get.subscript_expr)?;
            None
        }
        Expr::Call(call) => {
            visit_call(call)?;
            None
        }
        Expr::List(list) => fold_items(&list.items)?,
        Expr::Tuple(tuple) => fold_items(&tuple.items)?,
        Expr::Map(map) => {
            let keys = fold_items(&map.keys)?;
            let values = fold_items(&map.values)?;
            match (keys, values) {
                (Some(keys), Some(values)) => Some(Folded::Items(
                    values.items(),
                    keys.printed_bytes().saturating_add(values.printed_bytes()),
                )),
                _ => None,
            }
        }
    };
    if let Some(folded) = folded {
        let size = folded.printed_bytes().max(folded.items());
        if size > MAX_CONSTANT_BYTES {
            return Err(format!(
                "a constant expression on line {} would build about {size} bytes while \
                 compiling (at most {MAX_CONSTANT_BYTES})",
                expr.span().start_line
            ));
        }
    }
    Ok(folded)
}

fn fold_const(value: &minijinja::Value) -> Folded {
    if let Some(text) = value.as_str() {
        return Folded::Text(text.len() as u64);
    }
    match value.kind() {
        ValueKind::Number if value.is_integer() => {
            i128::try_from(value.clone()).map_or(Folded::Float, Folded::Int)
        }
        ValueKind::Number => Folded::Float,
        _ => Folded::Small,
    }
}

/// minijinja folds a list, tuple or map only when every item is a literal.
fn fold_items(items: &[Expr<'_>]) -> Result<Option<Folded>, String> {
    let mut bytes = 2u64;
    let mut literal = true;
    for item in items {
        let folded = visit(item)?;
        literal &= matches!(item, Expr::Const(_));
        if let Some(folded) = folded {
            bytes = bytes.saturating_add(folded.printed_bytes() + 2);
        }
    }
    Ok(literal.then_some(Folded::Items(items.len() as u64, bytes)))
}

/// What minijinja's folding of `left op right` builds; `None` where it would
/// fail (and so not fold).
fn fold_binop(op: &BinOpKind, left: Folded, right: Folded) -> Option<Folded> {
    use Folded::{Float, Int, Items, Small, Text};
    match op {
        BinOpKind::Mul => match (left, right) {
            (Text(bytes), Int(count)) | (Int(count), Text(bytes)) => repeat(bytes, count).map(Text),
            (Items(items, bytes), Int(count)) | (Int(count), Items(items, bytes)) => {
                Some(Items(repeat(items, count)?, repeat(bytes, count)?))
            }
            (Int(a), Int(b)) => a.checked_mul(b).map(Int),
            (Int(_) | Float, Int(_) | Float) => Some(Float),
            _ => None,
        },
        BinOpKind::Add => match (left, right) {
            (Text(a), Text(b)) => Some(Text(a.saturating_add(b))),
            (Items(a, x), Items(b, y)) => Some(Items(a.saturating_add(b), x.saturating_add(y))),
            (Int(a), Int(b)) => a.checked_add(b).map(Int),
            (Int(_) | Float, Int(_) | Float) => Some(Float),
            _ => None,
        },
        BinOpKind::Sub => match (left, right) {
            (Int(a), Int(b)) => a.checked_sub(b).map(Int),
            (Int(_) | Float, Int(_) | Float) => Some(Float),
            _ => None,
        },
        BinOpKind::Pow => match (left, right) {
            (Int(base), Int(exponent)) => u32::try_from(exponent)
                .ok()
                .and_then(|exponent| base.checked_pow(exponent))
                .map(Int),
            (Int(_) | Float, Int(_) | Float) => Some(Float),
            _ => None,
        },
        BinOpKind::Div | BinOpKind::FloorDiv | BinOpKind::Rem => match (left, right) {
            (Int(a), Int(b)) if b != 0 => Some(Int(a / b)),
            (Int(_) | Float, Int(_) | Float) => Some(Float),
            _ => None,
        },
        BinOpKind::Concat => Some(Text(
            left.printed_bytes().saturating_add(right.printed_bytes()),
        )),
        BinOpKind::ScAnd | BinOpKind::ScOr => {
            Some(if left.printed_bytes() >= right.printed_bytes() {
                left
            } else {
                right
            })
        }
        BinOpKind::Eq
        | BinOpKind::Ne
        | BinOpKind::Lt
        | BinOpKind::Lte
        | BinOpKind::Gt
        | BinOpKind::Gte
        | BinOpKind::In => Some(Small),
    }
}

/// `size` repeated `count` times, as minijinja repeats (a negative count is an
/// error, hence no folding).
fn repeat(size: u64, count: i128) -> Option<u64> {
    let count = u64::try_from(count).ok()?;
    Some(size.saturating_mul(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(source: &str) -> Result<(), String> {
        check_constant_folding(source, "t", SyntaxConfig::default())
    }

    #[test]
    fn small_constants_pass() {
        assert_eq!(
            check("{{ '=' * 80 }}{{ 1 + 2 }}{{ [1, 2] * 3 }}{{ x * 1000000000 }}"),
            Ok(())
        );
    }

    #[test]
    fn big_constants_are_refused_before_compiling() {
        for source in [
            "{{ 'x' * 99999999 }}",
            "{% set s = 'xy' * 10 ** 8 %}",
            "{{ (1,) * 99999999 }}",
            "{{ 'a' ~ [1] * 99999999 }}",
            "{% if x %}{{ ('ab' * 600000) ~ ('cd' * 600000) }}{% endif %}",
            "{% macro m(a=('x' * 2000000)) %}{% endmacro %}",
            "{{ f(x, y=('x' * 2000000)) }}",
        ] {
            let outcome = check(source);
            assert!(
                matches!(&outcome, Err(message) if message.contains("constant expression")),
                "{source}: {outcome:?}"
            );
        }
    }
}
