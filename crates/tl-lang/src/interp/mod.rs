//! The tree-walking interpreter. It holds the program's declarations (functions,
//! structs and their methods, global tensors) and runs `main`, `test` and `bench`
//! blocks, or REPL input, against them.
//!
//! Variables live in a stack of scopes per call frame; a function sees its own
//! frame and the globals, nothing of its caller. Control flow (`break`,
//! `continue`, `return`) travels up as an [`Unwind`] next to errors.

mod call;
mod equation;
mod expr;
mod format;
mod methods;
mod stmt;
mod types;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use tl_syntax::ast::{Block, Equation, FnDecl, Item, NamedBlock, StructDecl, TensorDecl, TypeExpr};
use tl_syntax::Span;

use crate::builtins::Context;
use crate::equation::EquationRef;
use crate::error::{LangError, Result};
use crate::logic::Logic;
use crate::value::Value;

pub use format::format_template;

/// Deepest call nesting before a program is stopped (runaway recursion).
const MAX_CALL_DEPTH: usize = 2000;

/// A file-level definition of a global, evaluated in source order.
enum Global {
    Tensor(TensorDecl),
    Equation(Equation),
}

/// Why evaluation stopped early: an error, or control flow on its way up.
pub(crate) enum Unwind {
    Error(LangError),
    Break(Span),
    Continue(Span),
    Return(Value),
}

impl From<LangError> for Unwind {
    fn from(error: LangError) -> Self {
        Unwind::Error(error)
    }
}

/// One scope's variables, and the types written for those declared with one
/// (`let x: T`, a typed parameter): every later assignment must match it.
#[derive(Default)]
pub(crate) struct Scope {
    vars: HashMap<String, Value>,
    types: HashMap<String, DeclaredType>,
}

/// Where a variable's written type lives: copied from a `let`, or the called
/// function's parameter (shared, so a call copies no types).
pub(crate) enum DeclaredType {
    Written(TypeExpr),
    Param(Rc<FnDecl>, usize),
}

impl DeclaredType {
    fn get(&self) -> Option<&TypeExpr> {
        match self {
            DeclaredType::Written(ty) => Some(ty),
            DeclaredType::Param(decl, i) => decl.params.get(*i)?.ty.as_ref(),
        }
    }
}

impl Scope {
    /// A scope holding one untyped variable (a `for` loop's).
    fn with(name: &str, value: Value) -> Self {
        Scope {
            vars: HashMap::from([(name.to_string(), value)]),
            types: HashMap::new(),
        }
    }
}

/// Evaluation result inside the interpreter.
pub(crate) type Flow<T> = std::result::Result<T, Unwind>;

/// A running program.
pub struct Interpreter {
    /// Output, input and loaded models.
    pub ctx: Context,
    functions: HashMap<String, Rc<FnDecl>>,
    structs: HashMap<String, Rc<StructDecl>>,
    methods: HashMap<(String, String), Rc<FnDecl>>,
    globals: HashMap<String, Value>,
    /// The types written for the global tensors.
    global_types: HashMap<String, TypeExpr>,
    /// The relations, closed under the rules (none without logic items).
    logic: Option<Rc<Logic>>,
    /// Every logic item defined so far, to rebuild the relations when more come.
    logic_items: Vec<Item>,
    main: Option<Block>,
    tests: Vec<NamedBlock>,
    benches: Vec<NamedBlock>,
    /// Scopes of the running frame, innermost last.
    scopes: Vec<Scope>,
    depth: usize,
    /// Loop iterations and calls since the memory budget was last compared
    /// with what the process holds.
    since_budget_check: std::cell::Cell<u32>,
}

/// Loop iterations and calls between two checks of the memory budget (a check
/// reads `/proc/self/status`, some microseconds).
const BUDGET_CHECK_INTERVAL: u32 = 1024;

impl Interpreter {
    /// An interpreter with nothing declared.
    pub fn new(ctx: Context) -> Self {
        Interpreter {
            ctx,
            functions: HashMap::new(),
            structs: HashMap::new(),
            methods: HashMap::new(),
            globals: HashMap::new(),
            global_types: HashMap::new(),
            logic: None,
            logic_items: Vec::new(),
            main: None,
            tests: Vec::new(),
            benches: Vec::new(),
            scopes: vec![Scope::default()],
            depth: 0,
            since_budget_check: std::cell::Cell::new(0),
        }
    }

    /// Declares the items (functions, structs, methods, blocks) and evaluates
    /// global tensor declarations in order. A name declared twice is an error.
    pub fn define(&mut self, items: Vec<Item>) -> Result<()> {
        let mut globals = Vec::new();
        let logic_before = self.logic_items.len();
        for item in items {
            match item {
                Item::Import { .. } => {}
                Item::Function(f) => {
                    let name = f.name.clone();
                    if crate::builtins::find(&name.name).is_some() {
                        return Err(LangError::at(
                            format!("`{}` is a builtin and cannot be redefined", name.name),
                            name.span,
                        )
                        .with_hint("choose another name"));
                    }
                    self.functions.insert(name.name, Rc::new(f));
                }
                Item::Struct(s) => {
                    self.structs.insert(s.name.name.clone(), Rc::new(s));
                }
                Item::Impl(block) => {
                    for method in block.methods {
                        let key = (block.target.name.clone(), method.name.name.clone());
                        self.methods.insert(key, Rc::new(method));
                    }
                }
                Item::Tensor(t) => globals.push(Global::Tensor(t)),
                Item::Equation(eq) => globals.push(Global::Equation(eq)),
                Item::Domain(_) | Item::Relation(_) | Item::Fact(_) | Item::Rule(_) => {
                    self.logic_items.push(item)
                }
                Item::Main(block) => {
                    if self.main.is_some() {
                        return Err(LangError::at("a second `main` block", block.span)
                            .with_hint("a program has one `main`"));
                    }
                    self.main = Some(block);
                }
                Item::Test(t) => self.tests.push(t),
                Item::Bench(b) => self.benches.push(b),
            }
        }
        if self.logic_items.len() > logic_before {
            self.logic = Some(Rc::new(Logic::new(&self.logic_items)?));
        }
        globals.iter().try_for_each(|global| match global {
            Global::Tensor(t) => self.define_tensor(t),
            Global::Equation(eq) => self
                .eval_top(|interp| {
                    interp.run_equation(&EquationRef::item(eq), true)?;
                    Ok(Value::None)
                })
                .map(|_| ()),
        })
    }

    fn define_tensor(&mut self, decl: &TensorDecl) -> Result<()> {
        let value = match &decl.init {
            Some(init) => self.eval_top(|interp| interp.eval(init))?,
            None => types::zeros_of(&decl.ty)?,
        };
        let mut value =
            types::coerce(value, &decl.ty, &mut HashMap::new()).map_err(|e| e.or_at(decl.span))?;
        if let (Some(span), Value::Tensor(t)) = (decl.learnable, &value) {
            let learnable =
                crate::learning::learnable(&t.to_dense()?).map_err(|e| e.or_at(span))?;
            value = Value::tensor(learnable);
        }
        self.globals.insert(decl.name.name.clone(), value);
        self.global_types
            .insert(decl.name.name.clone(), decl.ty.clone());
        Ok(())
    }

    /// Runs the `main` block.
    pub fn run_main(&mut self) -> Result<Value> {
        let Some(main) = self.main.clone() else {
            return Err(LangError::user("the program has no `main { ... }` block")
                .with_hint("add one, or run the program's tests with `tl run --test`"));
        };
        self.run_block(&main)
    }

    /// Whether the program has a `main` block.
    pub fn has_main(&self) -> bool {
        self.main.is_some()
    }

    /// The program's `test` blocks.
    pub fn tests(&self) -> &[NamedBlock] {
        &self.tests
    }

    /// The program's `bench` blocks.
    pub fn benches(&self) -> &[NamedBlock] {
        &self.benches
    }

    /// Runs one block in a fresh frame (a test, a bench iteration, `main`).
    pub fn run_block(&mut self, block: &Block) -> Result<Value> {
        let saved = std::mem::replace(&mut self.scopes, vec![Scope::default()]);
        let result = self.eval_top(|interp| interp.eval_block(block));
        self.scopes = saved;
        result
    }

    /// Runs REPL input in the REPL's persistent scope; returns the tail's value.
    pub fn run_repl(
        &mut self,
        stmts: &[tl_syntax::ast::Stmt],
        tail: Option<&tl_syntax::ast::Expr>,
    ) -> Result<Value> {
        self.eval_top(|interp| {
            for stmt in stmts {
                interp.exec(stmt)?;
            }
            match tail {
                Some(expr) => interp.eval(expr),
                None => Ok(Value::None),
            }
        })
    }

    /// Variables of the REPL's scope and the globals, with their types, sorted.
    pub fn variables(&self) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = self
            .globals
            .iter()
            .chain(self.scopes.iter().flat_map(|s| &s.vars))
            .map(|(name, value)| (name.clone(), value.type_name()))
            .collect();
        vars.sort();
        vars.dedup_by(|a, b| a.0 == b.0);
        vars
    }

    /// Every name a user could type here: variables, functions, structs, builtins.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .globals
            .keys()
            .chain(self.scopes.iter().flat_map(|s| s.vars.keys()))
            .chain(self.functions.keys())
            .chain(self.structs.keys())
            .cloned()
            .chain(crate::builtins::all().map(|b| b.name.to_string()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// An error when the program was asked to stop (`ctx.interrupt`; the
    /// request is consumed, so the next input runs normally), or, every
    /// [`BUDGET_CHECK_INTERVAL`] loop iterations and calls, when the process
    /// holds more than the memory budget.
    pub(crate) fn check_interrupt(&self, span: Span) -> Result<()> {
        if self.ctx.interrupt.swap(false, Ordering::Relaxed) {
            return Err(LangError::at("interrupted", span));
        }
        if self.ctx.memory_limit.is_some() {
            let ticks = self.since_budget_check.get() + 1;
            self.since_budget_check.set(ticks % BUDGET_CHECK_INTERVAL);
            if ticks == BUDGET_CHECK_INTERVAL {
                self.ctx.check_budget(0).map_err(|e| e.or_at(span))?;
            }
        }
        Ok(())
    }

    /// Evaluates with control flow that escaped its construct turned into errors.
    fn eval_top(&mut self, f: impl FnOnce(&mut Self) -> Flow<Value>) -> Result<Value> {
        match f(self) {
            Ok(value) | Err(Unwind::Return(value)) => Ok(value),
            Err(Unwind::Error(e)) => Err(e),
            Err(Unwind::Break(span)) => Err(LangError::at("`break` outside of a loop", span)),
            Err(Unwind::Continue(span)) => Err(LangError::at("`continue` outside of a loop", span)),
        }
    }
}
