//! One pass over the program's bodies: global tensors in the order they are
//! evaluated, then every function, method, `main`, test and bench, each in a
//! fresh [`Body`] that sees its parameters and the globals.

use std::collections::HashSet;

use tl_syntax::ast::{FnDecl, Item, TensorDecl, TypeKind};
use tl_syntax::Diagnostic;

use super::bindings::refine;
use super::body::{Binding, Body, Pass};
use super::coerce::{contradiction, DimBindings};
use super::decls::{Declarations, Global};
use super::reassigned::Reassigned;
use super::ty::{StaticDim, Ty};
use super::written::dim_names;
use crate::equation::EquationRef;

/// Checks every body, taking the globals and fields in `unknown` as holding
/// values of any type (some code assigns them values of another type).
pub fn run_pass<'a>(
    decls: &'a Declarations<'a>,
    items: &'a [Item],
    unknown: &'a Reassigned,
) -> Pass<'a> {
    let mut pass = Pass {
        decls,
        globals: Vec::new(),
        unknown,
        assigned: Default::default(),
        out: Vec::new(),
    };
    for (index, global) in decls.globals.iter().enumerate() {
        let ty = match global {
            Global::Tensor(decl) => check_global(&mut pass, decl, index),
            Global::Equation(eq) => Body::new(&mut pass, index).equation(&EquationRef::item(eq)),
        };
        let name = &global.name().name;
        let ty = if unknown.globals.contains(name) {
            Ty::Unknown
        } else {
            ty
        };
        pass.globals.push((name.clone(), ty));
    }
    for item in items {
        match item {
            Item::Function(f) => check_function(&mut pass, f, None),
            Item::Impl(block) => {
                for method in &block.methods {
                    check_function(&mut pass, method, Some(&block.target.name));
                }
            }
            Item::Main(block) => {
                Body::new(&mut pass, usize::MAX).block(block);
            }
            Item::Test(named) | Item::Bench(named) => {
                Body::new(&mut pass, usize::MAX).block(&named.body);
            }
            Item::Struct(s) => {
                for field in &s.fields {
                    decls.check_type_names(&field.ty, &mut pass.out);
                }
            }
            Item::Tensor(_)
            | Item::Import { .. }
            | Item::Equation(_)
            | Item::Domain(_)
            | Item::Relation(_)
            | Item::Fact(_)
            | Item::Rule(_) => {}
        }
    }
    pass
}

/// A global tensor's initializer (which sees only the globals before it); its
/// type is the declared one, sharpened by the value's.
fn check_global(pass: &mut Pass, decl: &TensorDecl, index: usize) -> Ty {
    pass.decls.check_type_names(&decl.ty, &mut pass.out);
    check_learnable(pass, decl);
    let declared = pass.decls.ty_of_unbound(&decl.ty);
    let Some(init) = &decl.init else {
        check_zero_initialized(pass, decl);
        return declared;
    };
    let mut body = Body::new(pass, index);
    let found = body.infer(init);
    if let Some(m) = contradiction(&found, &decl.ty, &mut DimBindings::new()) {
        let context = format!("tensor `{}`", decl.name.name);
        body.report_mismatch(m, init.span, Some(&context));
    }
    refine(declared, &found)
}

/// Only float tensors can be learnable.
fn check_learnable(pass: &mut Pass, decl: &TensorDecl) {
    let Some(span) = decl.learnable else {
        return;
    };
    if let TypeKind::Tensor { dtype, .. } = &decl.ty.kind {
        if dtype.is_float() {
            return;
        }
    }
    pass.out.push(
        Diagnostic::error(
            format!(
                "only float tensors can be learnable, and `{}` is declared {}",
                decl.name.name,
                tl_syntax::dump::type_to_string(&decl.ty)
            ),
            span,
        )
        .with_hint("declare it float32 (or float16, bfloat16)"),
    );
}

/// `tensor w: float32[2, 3];` starts as zeros, so it needs every size.
fn check_zero_initialized(pass: &mut Pass, decl: &TensorDecl) {
    let error = match &decl.ty.kind {
        TypeKind::Tensor {
            dims: Some(dims), ..
        } => {
            if dims
                .iter()
                .all(|d| matches!(d, tl_syntax::ast::Dim::Known(_)))
            {
                return;
            }
            Diagnostic::error(
                "a tensor declared without a value needs every dimension's size",
                decl.ty.span,
            )
            .with_hint("write the sizes, or give it a value with `= ...`")
        }
        _ => Diagnostic::error(
            "a tensor declared without a value needs a tensor type with a shape",
            decl.ty.span,
        )
        .with_hint("write a shape such as `float32[2, 3]`, or give it a value with `= ...`"),
    };
    pass.out.push(error);
}

/// A function or method: its parameters (and the dimension names of their
/// types, which the body may use as ints) in scope, then its body, whose value
/// must fit the result type.
fn check_function<'a>(pass: &mut Pass<'a>, f: &'a FnDecl, impl_target: Option<&str>) {
    let decls = pass.decls;
    for ty in f
        .params
        .iter()
        .filter_map(|p| p.ty.as_ref())
        .chain(&f.return_type)
    {
        decls.check_type_names(ty, &mut pass.out);
    }
    let symbols: HashSet<String> = f
        .params
        .iter()
        .filter_map(|p| p.ty.as_ref())
        .flat_map(dim_names)
        .map(str::to_string)
        .collect();
    let mut body = Body::new(pass, usize::MAX);
    body.function = Some(f);
    for symbol in &symbols {
        let size = Binding {
            ty: Ty::Int,
            dim: StaticDim::Symbol(symbol.clone()),
        };
        body.declare(symbol, size);
    }
    body.symbols = symbols;
    body.push_scope();
    for (i, param) in f.params.iter().enumerate() {
        let ty = match (&param.ty, impl_target) {
            (Some(written), _) => {
                let symbols = &body.symbols;
                decls.ty_of(written, &|n| {
                    if symbols.contains(n) {
                        StaticDim::Symbol(n.to_string())
                    } else {
                        StaticDim::Unknown
                    }
                })
            }
            (None, Some(target))
                if i == 0 && param.name.name == "self" && decls.structs.contains_key(target) =>
            {
                Ty::Struct(target.to_string())
            }
            (None, _) => Ty::Unknown,
        };
        body.declare(&param.name.name, Binding::of(ty));
    }
    let ty = body.block(&f.body);
    if let Some(tail) = &f.body.tail {
        body.check_result(&ty, tail.span);
    }
}
