//! Where the tests find their data, and the lock their GPU use shares,
//! written once for every crate's tests: the repository's `testdata/` folder
//! (golden files that travel with the checkout, so a fresh clone tests
//! anywhere) and the default model, which is too big to
//! commit and is fetched into the user's cache folder by `tl model pull`.
//!
//! Only a dev-dependency: nothing here is built into `tl`.

use std::path::{Path, PathBuf};

/// File name of the default model in the cache folder; the same name
/// `tl model pull` saves it under (`tl-cli`'s `default_model::FILE_NAME`).
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// File name of Gemma 3 270M (Q4_K_M) in the cache folder, as `tl model pull
/// gemma3` saves it (`tl-cli`'s catalogue).
pub const GEMMA3_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// Why the default model cannot be had; each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ModelMissing {
    /// `TL_TEST_MODEL` names a path that is not a file.
    #[error("TL_TEST_MODEL is {}, which is not a file", .0.display())]
    TestModelNotAFile(PathBuf),
    /// The cache folder has no default model: `tl model pull` has not run.
    #[error(
        "the default model is needed at {}: run `cargo run --release --bin tl -- model pull` \
         (the README's test command does) or point TL_TEST_MODEL at it",
        .0.display()
    )]
    NotPulled(PathBuf),
    /// A catalogue model other than the default is not in the cache folder.
    #[error(
        "the model '{name}' is needed at {}: run `cargo run --release --bin tl -- model pull {name}` \
         (the README's test command does)",
        .path.display()
    )]
    CatalogueNotPulled { name: &'static str, path: PathBuf },
    /// Neither `TL_CACHE_DIR` nor a platform cache folder is there.
    #[error("cannot find a cache folder for the default model; set TL_CACHE_DIR or TL_TEST_MODEL")]
    NoCacheFolder,
}

/// The repository's `testdata/` folder. Panics if it is missing, since every
/// checkout has it and no test can mean to run without it.
pub fn testdata() -> PathBuf {
    let dir = repository_root().join("testdata");
    assert!(
        dir.is_dir(),
        "the test data is missing: {} should come with the repository",
        dir.display()
    );
    dir
}

/// Where the default model is, or would be once fetched: `$TL_TEST_MODEL` if
/// set, else the file `tl model pull` writes into the model cache folder.
pub fn default_model_path() -> Result<PathBuf, ModelMissing> {
    if let Some(path) = std::env::var_os("TL_TEST_MODEL") {
        return Ok(PathBuf::from(path));
    }
    Ok(model_cache_dir()?.join(DEFAULT_MODEL_FILE))
}

/// The default model's file, if it is there (see [`default_model_path`]).
pub fn default_model() -> Result<PathBuf, ModelMissing> {
    let path = default_model_path()?;
    if path.is_file() {
        Ok(path)
    } else if std::env::var_os("TL_TEST_MODEL").is_some() {
        Err(ModelMissing::TestModelNotAFile(path))
    } else {
        Err(ModelMissing::NotPulled(path))
    }
}

/// Gemma 3 270M's file (catalogue name `gemma3`), if `tl model pull gemma3`
/// has fetched it into the cache folder.
pub fn gemma3_model() -> Result<PathBuf, ModelMissing> {
    let path = model_cache_dir()?.join(GEMMA3_MODEL_FILE);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ModelMissing::CatalogueNotPulled {
            name: "gemma3",
            path,
        })
    }
}

/// The folder models are cached in, by the rule of `tl-cli`'s
/// `default_model::cache_dir` (keep the two identical): `$TL_CACHE_DIR`, else
/// the platform's cache folder (`$XDG_CACHE_HOME` or `~/.cache` on Linux) +
/// `tensorlogic/models`.
fn model_cache_dir() -> Result<PathBuf, ModelMissing> {
    if let Some(dir) = std::env::var_os("TL_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = dirs::cache_dir().ok_or(ModelMissing::NoCacheFolder)?;
    Ok(base.join("tensorlogic").join("models"))
}

/// The workspace root: this crate sits at `crates/tl-testdata`.
fn repository_root() -> &'static Path {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.ancestors().nth(2).unwrap_or(manifest_dir)
}

/// Makes the calling test the only one of its process using the GPU until
/// its thread ends. Tests run on threads of their own, and a CUDA graph one
/// of them captures is invalidated by another's launches
/// (`CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`), so GPU tests take turns; the
/// guard lives in a thread-local, dropped when the test's thread exits (a
/// thread that holds it already keeps it).
pub fn hold_gpu() {
    use std::cell::RefCell;
    use std::sync::{Mutex, MutexGuard};
    static GPU: Mutex<()> = Mutex::new(());
    thread_local! {
        static HELD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
    }
    HELD.with_borrow_mut(|held| {
        if held.is_none() {
            *held = Some(GPU.lock().unwrap_or_else(|e| e.into_inner()));
        }
    });
}
