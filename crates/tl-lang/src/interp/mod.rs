//! The interpreter. It holds the program's declarations (functions, structs
//! and their methods, global tensors) and runs `main`, `test` and `bench`
//! blocks, or REPL input, against them.
//!
//! Code is resolved before it runs (`resolve`): each local variable has a slot
//! in its function's frame, a run of one stack of slots, so that reading a
//! variable is an index. A function sees its own frame and the globals,
//! nothing of its caller. Function bodies and `main`, `test` and `bench`
//! blocks are then compiled to closures (`compile`); REPL input, global
//! initializers and the kinds the compiler leaves alone are walked as
//! syntax trees (`expr`, `stmt`). Control flow (`break`, `continue`,
//! `return`) travels up as an [`Unwind`] next to errors.

mod call;
mod compile;
mod equation;
mod expr;
mod format;
mod frame;
mod methods;
mod resolve;
mod stmt;
mod types;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use tl_syntax::ast::{
    Block, Equation, Expr, FnDecl, Item, NamedBlock, Stmt, StructDecl, TensorDecl, TypeExpr,
};
use tl_syntax::Span;

use crate::builtins::Context;
use crate::equation::EquationRef;
use crate::error::{LangError, Result};
use crate::logic::Logic;
use crate::value::Value;
use resolve::{Function, Known, Layout, Resolver};

pub use format::format_template;

/// Deepest call nesting before a program is stopped (runaway recursion).
const MAX_CALL_DEPTH: usize = 2000;

/// A file-level definition of a global, evaluated in source order.
enum Global {
    Tensor(TensorDecl),
    Equation(Equation),
}

/// Why evaluation stopped early: an error, or control flow on its way up.
///
/// Both are one pointer wide, so that a `Flow<Value>`, which every
/// expression returns, is the size of a value: the error is boxed, and a
/// jump's kind travels in [`Interpreter::jump`].
pub(crate) enum Unwind {
    Error(Box<LangError>),
    Jump,
}

/// A `break`, `continue` or `return` on its way to its loop or function.
pub(crate) enum Jump {
    Break(Span),
    Continue(Span),
    Return(Value),
}

impl From<LangError> for Unwind {
    fn from(error: LangError) -> Self {
        Unwind::Error(Box::new(error))
    }
}

/// The running function's frame: where its slots start on the stack, and
/// what each holds.
pub(crate) struct Frame {
    base: usize,
    layout: Rc<Layout>,
}

/// Evaluation result inside the interpreter.
pub(crate) type Flow<T> = std::result::Result<T, Unwind>;

/// A running program.
pub struct Interpreter {
    /// Output, input and loaded models.
    pub ctx: Context,
    /// User functions by name: their index in `function_table`, which
    /// resolved calls use.
    functions: HashMap<String, u32>,
    function_table: Vec<Rc<Function>>,
    structs: HashMap<String, Rc<StructDecl>>,
    /// Methods by struct name, then method name.
    methods: HashMap<String, HashMap<String, Rc<Function>>>,
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
    /// The slots of every frame of the running calls (`None`: a variable not
    /// declared yet, or whose block has ended).
    stack: Vec<Option<Value>>,
    frame: Frame,
    /// Emptied argument buffers of builtin and method calls, to reuse.
    spare_args: Vec<call::ArgValues>,
    /// The names visible at the top of the bottom frame: the REPL's
    /// variables, which later input resolves against.
    top_visible: Vec<(String, u32)>,
    depth: usize,
    /// The jump an [`Unwind::Jump`] on its way up stands for.
    jump: Jump,
    /// Loop iterations and calls since the memory budget was last compared
    /// with what the process holds.
    since_budget_check: std::cell::Cell<u32>,
    /// Counts the definitions that can change what a name in an equation
    /// is (a new global, function or relation); a kept equation plan made
    /// under another count is made again.
    definitions: u64,
    /// The GPU the program's equations use under `--device cuda`, once
    /// opened (see `equation/contract.rs`).
    gpu: Option<tl_engine::ops::GpuOps>,
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
            function_table: Vec::new(),
            structs: HashMap::new(),
            methods: HashMap::new(),
            globals: HashMap::new(),
            global_types: HashMap::new(),
            logic: None,
            logic_items: Vec::new(),
            main: None,
            tests: Vec::new(),
            benches: Vec::new(),
            stack: Vec::new(),
            frame: Frame {
                base: 0,
                layout: Rc::new(Layout::default()),
            },
            top_visible: Vec::new(),
            spare_args: Vec::new(),
            depth: 0,
            jump: Jump::Return(Value::None),
            since_budget_check: std::cell::Cell::new(0),
            definitions: 0,
            gpu: None,
        }
    }

    /// Declares the items (functions, structs, methods, blocks) and evaluates
    /// global tensor declarations in order. A name declared twice is an error.
    pub fn define(&mut self, items: Vec<Item>) -> Result<()> {
        self.definitions += 1;
        let mut globals = Vec::new();
        let mut functions = Vec::new();
        let mut methods = Vec::new();
        let logic_before = self.logic_items.len();
        for item in items {
            match item {
                Item::Import { .. } => {}
                Item::Function(f) => {
                    if crate::builtins::find(&f.name.name).is_some() {
                        return Err(LangError::at(
                            format!("`{}` is a builtin and cannot be redefined", f.name.name),
                            f.name.span,
                        )
                        .with_hint("choose another name"));
                    }
                    functions.push(f);
                }
                Item::Struct(s) => {
                    self.structs.insert(s.name.name.clone(), Rc::new(s));
                }
                Item::Impl(block) => {
                    let target = &block.target.name;
                    methods.extend(block.methods.into_iter().map(|m| (target.clone(), m)));
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
        let pending: Vec<&str> = (globals.iter())
            .map(|global| match global {
                Global::Tensor(t) => t.name.name.as_str(),
                Global::Equation(eq) => eq.name.name.as_str(),
            })
            .collect();
        self.define_functions(functions, methods, &pending);
        globals.iter().try_for_each(|global| match global {
            Global::Tensor(t) => self.define_tensor(t),
            Global::Equation(eq) => self
                .eval_top(|interp| {
                    interp.run_equation(&EquationRef::item(eq), equation::Binding::Global)?;
                    Ok(Value::None)
                })
                .map(|_| ()),
        })
    }

    /// Resolves and stores functions and methods. Every function of the
    /// batch has its index before any body is resolved, so that calls
    /// between them, in either order, resolve.
    fn define_functions(
        &mut self,
        functions: Vec<FnDecl>,
        methods: Vec<(String, FnDecl)>,
        pending_globals: &[&str],
    ) {
        let indices: Vec<u32> = (functions.iter())
            .map(|f| {
                let next = self.functions.len() as u32;
                *self.functions.entry(f.name.name.clone()).or_insert(next)
            })
            .collect();
        for (decl, index) in functions.into_iter().zip(indices) {
            let function = Rc::new(self.resolve_function(decl, pending_globals));
            match self.function_table.get_mut(index as usize) {
                Some(entry) => *entry = function,
                None => self.function_table.push(function),
            }
        }
        for (target, decl) in methods {
            let name = decl.name.name.clone();
            let method = Rc::new(self.resolve_function(decl, pending_globals));
            self.methods.entry(target).or_default().insert(name, method);
        }
    }

    fn resolve_function(&self, decl: FnDecl, pending_globals: &[&str]) -> Function {
        let is_global = |n: &str| self.globals.contains_key(n) || pending_globals.contains(&n);
        let known = Known {
            functions: &self.functions,
            is_global: &is_global,
        };
        Resolver::function(known, decl)
    }

    /// Resolves code that runs in a frame of its own (`main`, a test, a
    /// bench iteration).
    fn resolve_block(&self, block: &mut Block) -> Layout {
        let is_global = |n: &str| self.globals.contains_key(n);
        let known = Known {
            functions: &self.functions,
            is_global: &is_global,
        };
        let mut resolver = Resolver::new(known);
        resolver.block(block);
        resolver.finish().0
    }

    /// Resolves code that runs at the top of the bottom frame (the REPL's
    /// input, a global's initializer), whose variables stay in that frame
    /// for later input; the frame grows to hold them.
    fn resolve_at_top(&mut self, stmts: &mut [Stmt], tail: Option<&mut Expr>) {
        let is_global = |n: &str| self.globals.contains_key(n);
        let known = Known {
            functions: &self.functions,
            is_global: &is_global,
        };
        let visible = std::mem::take(&mut self.top_visible);
        let layout = Layout::clone(&self.frame.layout);
        let mut resolver = Resolver::continuing(known, layout, visible);
        resolver.stmts(stmts);
        if let Some(tail) = tail {
            resolver.expr(tail);
        }
        let (layout, visible) = resolver.finish();
        self.top_visible = visible;
        self.stack.resize(self.frame.base + layout.len(), None);
        self.frame.layout = Rc::new(layout);
    }

    fn define_tensor(&mut self, decl: &TensorDecl) -> Result<()> {
        let value = match &decl.init {
            Some(init) => {
                let mut init = init.clone();
                self.resolve_at_top(&mut [], Some(&mut init));
                self.eval_top(|interp| interp.eval(&init))?
            }
            None => types::zeros_of(&decl.ty)?,
        };
        let mut value =
            types::coerce(value, &decl.ty, &mut HashMap::new()).map_err(|e| e.or_at(decl.span))?;
        if let (Some(span), Value::Tensor(t)) = (decl.learnable, &value) {
            let learnable =
                crate::learning::learnable(&t.to_dense()?).map_err(|e| e.or_at(span))?;
            value = Value::tensor(learnable);
        }
        self.set_global(&decl.name.name, value);
        self.global_types
            .insert(decl.name.name.clone(), decl.ty.clone());
        Ok(())
    }

    /// Sets a global, counting a new one as a definition.
    fn set_global(&mut self, name: &str, value: Value) {
        if self.globals.insert(name.to_string(), value).is_none() {
            self.definitions += 1;
        }
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
        let mut block = block.clone();
        let layout = Rc::new(self.resolve_block(&mut block));
        let body = compile::Compiler::new(&layout).block(&block);
        let base = self.stack.len();
        self.stack.resize(base + layout.len(), None);
        let saved = std::mem::replace(&mut self.frame, Frame { base, layout });
        let result = self.eval_top(|interp| body.run(interp));
        self.frame = saved;
        self.stack.truncate(base);
        result
    }

    /// Runs REPL input in the REPL's persistent scope; returns the tail's value.
    pub fn run_repl(
        &mut self,
        stmts: &[tl_syntax::ast::Stmt],
        tail: Option<&tl_syntax::ast::Expr>,
    ) -> Result<Value> {
        let mut stmts = stmts.to_vec();
        let mut tail = tail.cloned();
        self.resolve_at_top(&mut stmts, tail.as_mut());
        self.eval_top(|interp| {
            for stmt in &stmts {
                interp.exec(stmt)?;
            }
            match &tail {
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
            .map(|(name, value)| (name.clone(), value.type_name()))
            .chain(
                self.live_locals()
                    .map(|(name, value)| (name.to_string(), value.type_name())),
            )
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
            .map(String::as_str)
            .chain(self.live_locals().map(|(name, _)| name))
            .chain(self.functions.keys().map(String::as_str))
            .chain(self.structs.keys().map(String::as_str))
            .map(str::to_string)
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
    #[inline]
    pub(crate) fn check_interrupt(&self, span: Span) -> Result<()> {
        // A load first: the swap, a locked instruction, only when it is set.
        if self.ctx.interrupt.load(Ordering::Relaxed) || self.ctx.memory_limit.is_some() {
            return self.check_interrupt_slowly(span);
        }
        Ok(())
    }

    #[inline(never)]
    fn check_interrupt_slowly(&self, span: Span) -> Result<()> {
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
            Ok(value) => Ok(value),
            Err(Unwind::Error(e)) => Err(*e),
            Err(Unwind::Jump) => self.landed().map_err(|e| *e),
        }
    }

    /// Starts a jump up to its loop or function.
    #[inline]
    pub(crate) fn jump(&mut self, jump: Jump) -> Unwind {
        self.jump = jump;
        Unwind::Jump
    }

    /// The value of a jump that reached the top of a function or block:
    /// `return`'s, or an error for a `break` or `continue` outside a loop.
    pub(crate) fn landed(&mut self) -> std::result::Result<Value, Box<LangError>> {
        match std::mem::replace(&mut self.jump, Jump::Return(Value::None)) {
            Jump::Return(value) => Ok(value),
            Jump::Break(span) => Err(Box::new(LangError::at("`break` outside of a loop", span))),
            Jump::Continue(span) => Err(Box::new(LangError::at(
                "`continue` outside of a loop",
                span,
            ))),
        }
    }
}
