//! The static checker: finds mistakes in a program before it runs (`tl check`,
//! and `tl run` before running) and reports each with the span of the code it
//! is about.
//!
//! It checks names (variables, functions, structs, fields, methods, types),
//! the number of arguments of every call, `break`/`continue` outside loops,
//! names defined twice, format strings, and a small static type per expression
//! (numbers, strings, lists, structs, handles, and tensors with element type
//! and shape), which catches `@` between matrices whose inner dimensions
//! differ, elementwise operators on tensors that cannot broadcast, values that
//! contradict a written type, and conditions that are not bools.
//!
//! A program the interpreter would run must never be rejected, so the checker
//! reports only contradictions between facts it is sure of. Whatever it cannot
//! be sure of (the result of a builtin it does not model, a variable assigned
//! in a loop, a dimension bound at run time) is unknown, and unknown is silent.
//!
//! Files: `ty` (static types), `written` (written types), `decls` (the
//! declarations and duplicates), `items` (one pass over all bodies),
//! `reassigned` (globals and fields a program changes the type of), `body`
//! (scopes), `stmt`, `bindings` (`let` and assignment), `expr`, `calls`,
//! `members`, `operators`, `tensor_ops`, `builtin_types`, `coerce` (a value
//! against a written type), `format`, `assigned` (variables a loop
//! rebinds), `equation` (index equations) and `logic` (relations and
//! queries in expressions; the logic items are checked by
//! `crate::logic::program`).

mod assigned;
mod bindings;
mod body;
mod builtin_types;
mod calls;
mod coerce;
mod decls;
mod equation;
mod expr;
mod format;
mod items;
mod logic;
mod members;
mod operators;
mod reassigned;
mod stmt;
mod tensor_ops;
mod ty;
mod written;

#[cfg(test)]
mod tests;

use tl_syntax::ast::Item;
use tl_syntax::Diagnostic;

/// Checks a whole program (its imports' items included) and returns its errors
/// and warnings in source order; the caller renders them.
pub fn check(items: &[Item]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let decls = decls::Declarations::collect(items, &mut out);
    let mut unknown = reassigned::Reassigned::default();
    out.extend(settled_pass(&decls, items, &mut unknown).out);
    in_source_order(out)
}

/// The pass over all bodies whose assumptions about globals and fields hold.
/// A place assigned a value of another type somewhere may hold either, so it is
/// checked again as unknown; that can change what is assigned elsewhere, hence
/// the loop (each round adds a place, so it ends).
fn settled_pass<'a>(
    decls: &'a decls::Declarations<'a>,
    items: &'a [Item],
    unknown: &'a mut reassigned::Reassigned,
) -> body::Pass<'a> {
    loop {
        let more = reassigned::reassigned(&items::run_pass(decls, items, unknown));
        if !unknown.extend(more) {
            break;
        }
    }
    items::run_pass(decls, items, unknown)
}

/// Sorted by position (files in load order), without repeats.
fn in_source_order(mut diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diagnostics.sort_by_key(|d| d.span.map(|s| (s.file.0, s.start, s.end)));
    diagnostics.dedup();
    diagnostics
}
