//! Reading a program from disk: the main file and, transitively, every file it
//! imports (paths relative to the importing file), each read and parsed once.
//! Import cycles are fine: a file already loaded is not loaded again. Imported
//! files give their declarations; only the main file's `main`, `test` and
//! `bench` blocks run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tl_syntax::ast::Item;
use tl_syntax::{parse, Diagnostic, FileId, SourceMap, Span};

/// Every item of a program and the sources they came from.
pub struct LoadedProgram {
    pub sources: SourceMap,
    /// Items of imported files come before the items of the file importing them.
    pub items: Vec<Item>,
    /// The folder of the main file (relative paths at run time resolve here).
    pub base_dir: PathBuf,
}

/// Loads `path` and its imports. On failure returns the sources read so far
/// (so the diagnostic can be rendered) and the diagnostic.
pub fn load_file(path: &Path) -> Result<LoadedProgram, (SourceMap, Diagnostic)> {
    load_file_into(SourceMap::new(), path)
}

/// Like [`load_file`], adding the files to existing sources (the REPL's `:load`,
/// whose spans must stay valid next to earlier input).
pub fn load_file_into(
    sources: SourceMap,
    path: &Path,
) -> Result<LoadedProgram, (SourceMap, Diagnostic)> {
    let mut loader = Loader {
        sources,
        seen: HashSet::new(),
        items: Vec::new(),
    };
    match loader.load(path, None) {
        Ok(()) => Ok(LoadedProgram {
            sources: loader.sources,
            items: loader.items,
            base_dir: base_dir_of(path),
        }),
        Err(diagnostic) => Err((loader.sources, diagnostic)),
    }
}

/// Parses a program given as text (tests, docs); imports resolve against `base_dir`.
pub fn load_source(
    name: &str,
    text: &str,
    base_dir: &Path,
) -> Result<LoadedProgram, (SourceMap, Diagnostic)> {
    let mut loader = Loader {
        sources: SourceMap::new(),
        seen: HashSet::new(),
        items: Vec::new(),
    };
    let file = loader.sources.add(name, text);
    match loader.parse_and_follow(file, base_dir, false) {
        Ok(()) => Ok(LoadedProgram {
            sources: loader.sources,
            items: loader.items,
            base_dir: base_dir.to_path_buf(),
        }),
        Err(diagnostic) => Err((loader.sources, diagnostic)),
    }
}

fn base_dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether the file at `path` starts with the GGUF magic (a model given
/// where a program was expected).
fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"GGUF")
}

struct Loader {
    sources: SourceMap,
    seen: HashSet<PathBuf>,
    items: Vec<Item>,
}

impl Loader {
    fn load(&mut self, path: &Path, imported_at: Option<Span>) -> Result<(), Diagnostic> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if !self.seen.insert(key) {
            return Ok(());
        }
        let error = |message: String| match imported_at {
            Some(span) => Diagnostic::error(message, span),
            None => Diagnostic::error_without_span(message),
        };
        if is_gguf(path) {
            let message = format!(
                "{} is a GGUF model, not a TensorLogic program",
                path.display()
            );
            return Err(error(message).with_hint(format!(
                "to chat with the model: `tl chat -m {}`",
                path.display()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| error(format!("cannot read {}: {e}", path.display())))?;
        let file = self.sources.add(path.display().to_string(), text);
        self.parse_and_follow(file, &base_dir_of(path), imported_at.is_some())
    }

    /// Parses a file and loads its imports first. An imported file contributes
    /// its declarations only: its `main`, `test` and `bench` blocks belong to it
    /// being run on its own.
    fn parse_and_follow(
        &mut self,
        file: FileId,
        dir: &Path,
        imported: bool,
    ) -> Result<(), Diagnostic> {
        let program = parse(file, &self.sources.file(file).text).map_err(|e| e.diagnostic)?;
        let mut own = Vec::new();
        for item in program.items {
            match &item {
                Item::Import { path, span } => self.load(&dir.join(path), Some(*span))?,
                Item::Main(_) | Item::Test(_) | Item::Bench(_) if imported => {}
                _ => own.push(item),
            }
        }
        self.items.extend(own);
        Ok(())
    }
}
