//! The program's declarations as the checker sees them: functions, structs,
//! methods and global tensors, gathered once before any body is checked. Names
//! declared twice are reported here, since the interpreter would silently keep
//! only one of them (or, for a function named like a builtin, refuse to start).

use std::collections::{HashMap, HashSet};

use tl_syntax::ast::{Equation, FnDecl, Ident, Item, StructDecl, TensorDecl};
use tl_syntax::Diagnostic;

use crate::builtins;
use crate::logic::program::LogicProgram;

/// Every top-level declaration of a program (its imports included).
pub struct Declarations<'a> {
    pub functions: HashMap<&'a str, &'a FnDecl>,
    pub structs: HashMap<&'a str, &'a StructDecl>,
    /// `(struct name, method name)`, from every `impl` block.
    pub methods: HashMap<(&'a str, &'a str), &'a FnDecl>,
    /// Global tensors and file-level equations in declaration order (the
    /// order they are evaluated in).
    pub globals: Vec<Global<'a>>,
    /// Domains, relations, facts and rules, resolved.
    pub logic: LogicProgram,
}

/// A file-level definition of a global tensor.
#[derive(Clone, Copy)]
pub enum Global<'a> {
    Tensor(&'a TensorDecl),
    Equation(&'a Equation),
}

impl Global<'_> {
    pub fn name(&self) -> &Ident {
        match self {
            Global::Tensor(t) => &t.name,
            Global::Equation(eq) => &eq.name,
        }
    }
}

impl<'a> Declarations<'a> {
    /// Gathers the declarations of `items`, reporting duplicates into `out`.
    pub fn collect(items: &'a [Item], out: &mut Vec<Diagnostic>) -> Self {
        let mut decls = Declarations {
            functions: HashMap::new(),
            structs: HashMap::new(),
            methods: HashMap::new(),
            globals: Vec::new(),
            logic: LogicProgram::default(),
        };
        let mut seen = Seen::default();
        for item in items {
            match item {
                Item::Function(f) => decls.add_function(f, out),
                Item::Struct(s) => {
                    seen.once("struct", &s.name, "rename one of the two structs", out);
                    report_duplicate_fields(s, out);
                    decls.structs.insert(&s.name.name, s);
                }
                Item::Impl(block) => {
                    for method in &block.methods {
                        report_duplicate_params(method, out);
                        let key = (block.target.name.as_str(), method.name.name.as_str());
                        if decls.methods.insert(key, method).is_some() {
                            let message = format!("method `{}::{}` is defined twice", key.0, key.1);
                            out.push(Diagnostic::error(message, method.name.span));
                        }
                    }
                }
                Item::Tensor(t) => {
                    seen.once(
                        "global tensor",
                        &t.name,
                        "rename one of the two tensors",
                        out,
                    );
                    decls.globals.push(Global::Tensor(t));
                }
                Item::Equation(eq) => {
                    seen.once(
                        "global tensor",
                        &eq.name,
                        "rename one of the two tensors",
                        out,
                    );
                    decls.globals.push(Global::Equation(eq));
                }
                Item::Domain(_) | Item::Relation(_) | Item::Fact(_) | Item::Rule(_) => {}
                Item::Main(block) => {
                    if seen.main {
                        out.push(
                            Diagnostic::error("a second `main` block", block.span)
                                .with_hint("a program has one `main`"),
                        );
                    }
                    seen.main = true;
                }
                Item::Test(t) => seen.once("test", &t.name, "give each test its own name", out),
                Item::Bench(b) => seen.once("bench", &b.name, "give each bench its own name", out),
                Item::Import { .. } => {}
            }
        }
        decls.report_impls_of_unknown_structs(items, out);
        let (logic, errors) = LogicProgram::build(items);
        out.extend(errors);
        for global in &decls.globals {
            let name = global.name();
            if logic.relation(&name.name).is_some() {
                out.push(
                    Diagnostic::error(
                        format!(
                            "`{}` is a relation; a tensor cannot share its name",
                            name.name
                        ),
                        name.span,
                    )
                    .with_hint("rules define a relation; give the tensor another name"),
                );
            }
        }
        decls.logic = logic;
        decls
    }

    fn add_function(&mut self, f: &'a FnDecl, out: &mut Vec<Diagnostic>) {
        let name = &f.name;
        if builtins::find(&name.name).is_some() {
            out.push(
                Diagnostic::error(
                    format!("`{}` is a builtin and cannot be redefined", name.name),
                    name.span,
                )
                .with_hint("choose another name"),
            );
        } else if self.functions.contains_key(name.name.as_str()) {
            out.push(
                Diagnostic::error(
                    format!("function `{}` is defined twice", name.name),
                    name.span,
                )
                .with_hint("rename one of the two functions"),
            );
        }
        report_duplicate_params(f, out);
        self.functions.insert(&name.name, f);
    }

    fn report_impls_of_unknown_structs(&self, items: &[Item], out: &mut Vec<Diagnostic>) {
        for item in items {
            if let Item::Impl(block) = item {
                if !self.structs.contains_key(block.target.name.as_str()) {
                    let error = Diagnostic::error(
                        format!("`impl` of unknown struct `{}`", block.target.name),
                        block.target.span,
                    );
                    out.push(self.with_struct_suggestion(error, &block.target.name));
                }
            }
        }
    }

    /// The error with "did you mean `Name`?" when a declared struct is close.
    pub fn with_struct_suggestion(&self, error: Diagnostic, name: &str) -> Diagnostic {
        let names = self.structs.keys().copied().chain(super::ty::HANDLE_TYPES);
        match crate::suggest::closest(name, names) {
            Some(close) => error.with_hint(format!("did you mean `{close}`?")),
            None => error.with_hint(format!("declare it with `struct {name} {{ ... }}`")),
        }
    }
}

/// Names already used by structs, tests, benches and global tensors.
#[derive(Default)]
struct Seen {
    names: HashSet<(&'static str, String)>,
    main: bool,
}

impl Seen {
    fn once(&mut self, kind: &'static str, name: &Ident, hint: &str, out: &mut Vec<Diagnostic>) {
        if !self.names.insert((kind, name.name.clone())) {
            out.push(
                Diagnostic::error(
                    format!("{kind} `{}` is defined twice", name.name),
                    name.span,
                )
                .with_hint(hint),
            );
        }
    }
}

fn report_duplicate_params(f: &FnDecl, out: &mut Vec<Diagnostic>) {
    let names = f.params.iter().map(|p| &p.name);
    report_declared_twice(names, "parameter", &f.name.name, out);
}

fn report_duplicate_fields(s: &StructDecl, out: &mut Vec<Diagnostic>) {
    let names = s.fields.iter().map(|f| &f.name);
    report_declared_twice(names, "field", &s.name.name, out);
}

/// "`what` `x` of `owner` is declared twice", at each repeat of a name.
fn report_declared_twice<'a>(
    names: impl Iterator<Item = &'a Ident>,
    what: &str,
    owner: &str,
    out: &mut Vec<Diagnostic>,
) {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name.name.as_str()) {
            out.push(Diagnostic::error(
                format!("{what} `{}` of `{owner}` is declared twice", name.name),
                name.span,
            ));
        }
    }
}
