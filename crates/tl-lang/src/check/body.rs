//! The state of checking one body (a function, a method, `main`, a test, a bench
//! or a global's initializer): its scopes of variables with their static types,
//! the dimension names of its signature, and how deep in loops it is. As in the
//! interpreter, a body sees its own variables and the globals, nothing of its
//! caller.

use std::collections::{HashMap, HashSet};

use tl_syntax::ast::{Expr, ExprKind, FnDecl};
use tl_syntax::Diagnostic;

use super::decls::Declarations;
use super::reassigned::{Assignments, Reassigned};
use super::ty::{StaticDim, Ty};

/// What one variable is known to hold.
#[derive(Debug, Clone)]
pub struct Binding {
    pub ty: Ty,
    /// For ints that name a size (a literal, or a dimension name of the
    /// signature such as `n`): that size, so `zeros([n, 4])` has a known shape.
    pub dim: StaticDim,
}

impl Binding {
    pub fn of(ty: Ty) -> Self {
        Binding {
            ty,
            dim: StaticDim::Unknown,
        }
    }
}

/// What every body of one pass over the program shares.
pub struct Pass<'a> {
    pub decls: &'a Declarations<'a>,
    /// Global tensors in declaration order, with the type each is assumed to keep.
    pub globals: Vec<(String, Ty)>,
    /// Globals and fields this pass takes as unknown.
    pub unknown: &'a Reassigned,
    /// What the program assigns to globals and fields, to learn whether they
    /// keep the types this pass assumed.
    pub assigned: Assignments,
    pub out: Vec<Diagnostic>,
}

/// The checker inside one body.
pub struct Body<'p, 'a> {
    pub pass: &'p mut Pass<'a>,
    scopes: Vec<HashMap<String, Binding>>,
    /// How many globals (in declaration order) this body can see.
    visible_globals: usize,
    /// Dimension names of the enclosing signature.
    pub symbols: HashSet<String>,
    pub loop_depth: usize,
    /// The function whose `return`s and tail are checked against its result type.
    pub function: Option<&'a FnDecl>,
}

impl<'p, 'a> Body<'p, 'a> {
    /// A body that sees the first `visible_globals` globals.
    pub fn new(pass: &'p mut Pass<'a>, visible_globals: usize) -> Self {
        Body {
            pass,
            scopes: vec![HashMap::new()],
            visible_globals,
            symbols: HashSet::new(),
            loop_depth: 0,
            function: None,
        }
    }

    pub fn decls(&self) -> &'a Declarations<'a> {
        self.pass.decls
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.pass.out.push(diagnostic);
    }

    pub fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
    }

    pub fn pop_scope(&mut self) {
        self.scopes.pop();
    }

    /// Declares a variable in the innermost scope (shadowing any outer one).
    pub fn declare(&mut self, name: &str, binding: Binding) {
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), binding);
        }
    }

    /// The variable of that name: innermost scope first, then the globals.
    pub fn lookup(&self, name: &str) -> Option<Binding> {
        if let Some(binding) = self.scopes.iter().rev().find_map(|s| s.get(name)) {
            return Some(binding.clone());
        }
        self.visible_globals()
            .iter()
            .rev()
            .find(|(global, _)| global == name)
            .map(|(_, ty)| Binding::of(ty.clone()))
    }

    /// Whether `name` is a variable of this body (not a global).
    pub fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains_key(name))
    }

    fn visible_globals(&self) -> &[(String, Ty)] {
        let end = self.visible_globals.min(self.pass.globals.len());
        &self.pass.globals[..end]
    }

    /// Records `name = value`; false when there is no such variable. The
    /// variable may hold either type afterwards (the assignment may sit in a
    /// branch), so its type becomes what both agree on.
    pub fn assign(&mut self, name: &str, assigned: Binding) -> bool {
        if let Some(binding) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(name)) {
            binding.ty = binding.ty.join(&assigned.ty);
            if binding.dim != assigned.dim {
                binding.dim = StaticDim::Unknown;
            }
            return true;
        }
        if self
            .visible_globals()
            .iter()
            .any(|(global, _)| global == name)
        {
            self.pass.assigned.global(name, &assigned.ty);
            return true;
        }
        false
    }

    /// Forgets what is known about a local variable (it is assigned in a loop,
    /// so earlier iterations may have changed it before any use).
    pub fn forget(&mut self, name: &str) {
        if let Some(binding) = self.scopes.iter_mut().rev().find_map(|s| s.get_mut(name)) {
            *binding = Binding::of(Ty::Unknown);
        }
    }

    /// Every variable name visible here, for "did you mean" hints.
    pub fn variable_names(&self) -> Vec<&str> {
        self.scopes
            .iter()
            .flat_map(|s| s.keys())
            .map(String::as_str)
            .chain(self.visible_globals().iter().map(|(n, _)| n.as_str()))
            .collect()
    }

    /// The size an int expression stands for, where it is evident.
    pub fn dim_of(&self, expr: &Expr) -> StaticDim {
        match &expr.kind {
            ExprKind::Int(n) => usize::try_from(*n).map_or(StaticDim::Unknown, StaticDim::Known),
            ExprKind::Var(name, _) => self.lookup(name).map_or(StaticDim::Unknown, |b| b.dim),
            _ => StaticDim::Unknown,
        }
    }
}
