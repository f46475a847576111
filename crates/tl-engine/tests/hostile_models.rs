//! Hostile model files: each is crafted with the project's GGUF writer from a
//! valid tiny model, and opening or loading it must give a clean error, or
//! succeed within its memory bound; never a panic, an abort or an allocation
//! without limit.
//!
//! Each case runs in a child process of this test binary whose data segment
//! is capped (`ulimit -d`, RLIMIT_DATA: heap and anonymous maps, not the
//! mapped file), so a regression fails its test instead of taking the
//! machine's memory; the child also checks that its peak resident memory grew
//! by less than 4× the file's size plus 200 MB. Both need Linux (RLIMIT_DATA
//! counting anonymous maps, `/proc/self/status`).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tl_engine::quantize::FileType;
use tl_engine::synth::{ShapeName, SynthPlan, SynthRequest};
use tl_engine::{DeviceChoice, Error, GpuOptions, ModelFile};
use tl_gguf::{Array, GgmlType, GgufFile, GgufWriter, TensorData, Value};
use tl_tokenizer::Tokenizer;

/// Set in a child process to the hostile file it is to open.
const CHILD_FILE: &str = "TL_HOSTILE_MODEL_FILE";
/// The memory a file may cost beyond 4× its size.
const ALLOWANCE_BYTES: u64 = 200 << 20;
/// Data segment the child may have beyond what the file may cost: the test
/// harness, its threads' stacks and the allocator's slack.
const HARNESS_BYTES: u64 = 512 << 20;
/// A million, for counts of crafted entries.
const MILLION: usize = 1_000_000;

/// Declares a hostile case: `make` writes the file into a folder (in the
/// parent), `check` opens it (in a capped child) and asserts what it gives.
macro_rules! hostile {
    ($(
        $(#[$meta:meta])*
        fn $name:ident: $make:expr => $check:expr;
    )*) => {$(
        $(#[$meta])*
        #[test]
        fn $name() {
            run_capped(stringify!($name), $make, $check);
        }
    )*};
}

/// In the parent: writes the case's file and runs this test again in a child
/// with its memory capped. In the child: runs `check` on the file and checks
/// the memory it took.
fn run_capped(name: &str, make: impl FnOnce(&Path) -> PathBuf, check: impl FnOnce(&Path)) {
    if let Some(path) = std::env::var_os(CHILD_FILE) {
        let path = PathBuf::from(path);
        let before = status_kb("VmRSS");
        check(&path);
        let grown = (status_kb("VmHWM") - before) * 1024;
        let bound = 4 * file_len(&path) + ALLOWANCE_BYTES;
        eprintln!(
            "{name}: peak memory grew by {:.1} MB for a file of {:.1} MB (bound {:.1} MB)",
            grown as f64 / 1e6,
            file_len(&path) as f64 / 1e6,
            bound as f64 / 1e6
        );
        assert!(
            grown <= bound,
            "{name}: memory grew by {grown} bytes, more than 4× the file plus 200 MB ({bound})"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = make(dir.path());
    let cap_kb = (4 * file_len(&path) + ALLOWANCE_BYTES + HARNESS_BYTES) / 1024;
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"ulimit -d "$0" && exec "$@""#)
        .arg(cap_kb.to_string())
        .arg(exe)
        .args(["--exact", name, "--test-threads=1", "--nocapture"])
        .env(CHILD_FILE, &path)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("the child test runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The child's measure, for `--nocapture` runs.
    for line in stderr.lines().filter(|l| l.contains("peak memory")) {
        eprintln!("{line}");
    }
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed in its capped child ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("the hostile file").len()
}

/// A `kB` line of `/proc/self/status`.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

// --- Crafting files ------------------------------------------------------------

/// A model file's contents, to change before writing.
struct Model {
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>, GgmlType, Vec<u8>)>,
}

impl Model {
    /// The synthetic tiny llama (2 blocks, 64 wide, 4/2 heads of 16, 512 tokens).
    fn tiny() -> Model {
        Model::synthetic(ShapeName::Tiny, None)
    }

    fn synthetic(shape: ShapeName, vocab: Option<&GgufFile>) -> Model {
        let request = SynthRequest {
            shape,
            architecture: None,
            quant: FileType::Q8_0,
            seed: 0,
        };
        let bytes = SynthPlan::new(&request, vocab)
            .and_then(|plan| plan.into_writer(Arc::new(|_| {})))
            .and_then(|writer| Ok(writer.to_bytes()?))
            .expect("the tiny model synthesizes");
        let file = GgufFile::from_bytes(bytes).expect("the tiny model reads back");
        Model {
            metadata: file.metadata().to_vec(),
            tensors: file
                .tensors()
                .iter()
                .map(|t| {
                    let data = file.data_of(t).to_vec();
                    (t.name.clone(), t.dims.clone(), t.ggml_type, data)
                })
                .collect(),
        }
    }

    fn set(mut self, key: &str, value: Value) -> Self {
        self.metadata.retain(|(k, _)| k != key);
        self.metadata.push((key.into(), value));
        self
    }

    fn without(mut self, key: &str) -> Self {
        self.metadata.retain(|(k, _)| k != key);
        self
    }

    fn without_tensors(mut self) -> Self {
        self.tensors.clear();
        self
    }

    /// The value of `key`, changed by `change`.
    fn edit(self, key: &str, change: impl FnOnce(&mut Value)) -> Self {
        let mut value = self
            .metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {key} in the tiny model"));
        change(&mut value);
        self.set(key, value)
    }

    fn write(&self, dir: &Path) -> PathBuf {
        let mut writer = GgufWriter::new(3);
        for (key, value) in &self.metadata {
            writer.set_metadata(key.clone(), value.clone());
        }
        for (name, dims, ty, data) in &self.tensors {
            writer
                .add_tensor(
                    name.clone(),
                    dims.clone(),
                    *ty,
                    TensorData::Bytes(data.clone()),
                )
                .expect("a well-formed tensor");
        }
        let path = dir.join("hostile.gguf");
        writer.write_to_path(&path).expect("the file is written");
        path
    }
}

fn u64_value(n: u64) -> Value {
    Value::U64(n)
}

fn strings(items: Vec<String>) -> Value {
    Value::Array(Array::String(items.into()))
}

/// `n` empty strings.
fn empty_strings(n: usize) -> Value {
    strings(vec![String::new(); n])
}

/// A GGUF file of `n` metadata keys `k.{i}` holding a `u8` each, written by
/// hand: the writer's `set_metadata` looks each key up, which would take
/// quadratic time here.
fn many_keys(n: usize) -> Vec<u8> {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend((n as u64).to_le_bytes());
    for i in 0..n {
        let key = format!("k.{i}");
        bytes.extend((key.len() as u64).to_le_bytes());
        bytes.extend(key.as_bytes());
        bytes.extend(0u32.to_le_bytes()); // u8
        bytes.push(0);
    }
    bytes
}

// --- Checking what opening gives ---------------------------------------------------

/// The error of opening `path` as a model; fails if it opens.
fn open_error(path: &Path) -> Error {
    match ModelFile::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e,
    }
}

fn assert_open_fails_with(path: &Path, expected: &str) {
    let message = open_error(path).to_string();
    assert!(message.contains(expected), "{message:?} lacks {expected:?}");
}

/// Loads the model at `path` on the CPU for `context` positions.
fn load(path: &Path, context: usize) -> tl_engine::Result<tl_engine::LoadedModel> {
    ModelFile::open(path)?.load(context, DeviceChoice::Cpu, &GpuOptions::default())
}

// --- Arithmetic on metadata ----------------------------------------------------

hostile! {
    /// 2^61 + 4 heads of 16 wrap to the 64-wide query projection, 2^60 + 2
    /// key/value heads to the 32-wide key projection: every shape matched,
    /// and loading allocated without bound.
    fn head_count_that_wraps_the_widths: |dir| {
        Model::tiny()
            .set("llama.attention.head_count", u64_value((1 << 61) + 4))
            .set("llama.attention.head_count_kv", u64_value((1 << 60) + 2))
            .set("llama.attention.key_length", u64_value(16))
            .write(dir)
    } => |path| assert_open_fails_with(path, "overflow");

    /// A head of 2^63 + 16 values: 4 heads wrap to 64, 2 to 32, and the RoPE
    /// table of 2^62 + 8 pairs a position overflowed its capacity (a panic).
    fn key_length_that_wraps_the_widths: |dir| {
        let head_dim = (1 << 63) + 16;
        Model::tiny()
            .set("llama.attention.key_length", u64_value(head_dim))
            .set("llama.rope.dimension_count", u64_value(head_dim))
            .write(dir)
    } => |path| assert_open_fails_with(path, "overflow");

    /// A training context of 2^62: fine to declare, but a context asked for
    /// beyond what memory or a 64-bit size holds is an error, not an abort.
    fn huge_contexts_are_refused_before_allocating: |dir| {
        Model::tiny()
            .set("llama.context_length", u64_value(1 << 62))
            .write(dir)
    } => |path| {
        // 10^11 positions of 256 bytes of KV cache: 25.6 TB, on no machine.
        for context in [100_000_000_000, usize::MAX] {
            match load(path, context) {
                Err(Error::Memory(message)) => assert!(message.contains("positions"), "{message}"),
                Err(other) => panic!("context {context}: {other}"),
                Ok(_) => panic!("context {context} loaded"),
            }
        }
        let file = ModelFile::open(path).expect("the model opens");
        let (context, _) = file.context_for(None, 4096, tl_engine::BeyondTraining::Cut);
        assert_eq!(context, 4096);
        assert!(load(path, context).is_ok());
    };
}

// --- Metadata that disagrees with the tensors --------------------------------------

/// The first `n` elements of an array value.
fn truncate_array(value: &mut Value, n: usize) {
    match value {
        Value::Array(Array::String(v)) => *v = v.iter().take(n).collect(),
        Value::Array(Array::F32(v)) => v.truncate(n),
        Value::Array(Array::I32(v)) => v.truncate(n),
        other => panic!("not a vocabulary array: {other:?}"),
    }
}

hostile! {
    fn vocabulary_shorter_than_the_embedding: |dir| {
        let keep = |v: &mut Value| truncate_array(v, 500);
        Model::tiny()
            .edit("tokenizer.ggml.tokens", keep)
            .edit("tokenizer.ggml.scores", keep)
            .edit("tokenizer.ggml.token_type", keep)
            .write(dir)
    } => |path| assert_open_fails_with(path, "has 500 tokens, but the embedding table has 512 rows");

    fn vocabulary_longer_than_the_embedding: |dir| {
        Model::tiny()
            .edit("tokenizer.ggml.tokens", |v| {
                if let Value::Array(Array::String(tokens)) = v {
                    let extra = (0..100).map(|i| format!("extra{i}"));
                    *tokens = tokens.iter().map(String::from).chain(extra).collect();
                }
            })
            .without("tokenizer.ggml.scores")
            .without("tokenizer.ggml.token_type")
            .write(dir)
    } => |path| assert_open_fails_with(path, "has 612 tokens");

    fn vocab_size_key_that_disagrees_with_the_embedding: |dir| {
        Model::tiny().set("llama.vocab_size", u64_value(1000)).write(dir)
    } => |path| assert_open_fails_with(path, "token_embd.weight");

    fn block_count_smaller_than_the_blocks_present: |dir| {
        Model::tiny().set("llama.block_count", u64_value(1)).write(dir)
    } => |path| assert_open_fails_with(path, "'blk.1.");

    fn block_count_larger_than_the_blocks_present: |dir| {
        Model::tiny().set("llama.block_count", u64_value(3)).write(dir)
    } => |path| assert_open_fails_with(path, "tensor 'blk.2.attn_norm.weight' is missing");

    fn block_count_of_a_trillion: |dir| {
        Model::tiny().set("llama.block_count", u64_value(1 << 40)).write(dir)
    } => |path| assert_open_fails_with(path, "block_count is 1099511627776");

    fn feed_forward_length_that_disagrees_with_the_tensors: |dir| {
        Model::tiny().set("llama.feed_forward_length", u64_value(256)).write(dir)
    } => |path| assert_open_fails_with(path, "but the metadata gives it [256, 64]");

    fn token_type_outside_the_enum: |dir| {
        Model::tiny()
            .edit("tokenizer.ggml.token_type", |v| {
                if let Value::Array(Array::I32(types)) = v {
                    types[300] = 99;
                }
            })
            .write(dir)
    } => |path| assert_open_fails_with(path, "token_type[300] = 99 is not a token type");
}

// --- Byte-level BPE vocabularies -----------------------------------------------------

/// The tiny model with a byte-level BPE vocabulary of its 512 tokens:
/// `t0`.., with `extra` in place of the last and the given merges.
fn with_bpe_vocabulary(extra: String, merges: Vec<String>) -> Model {
    let mut tokens: Vec<String> = (0..511).map(|i| format!("t{i}")).collect();
    tokens.push(extra);
    Model::tiny()
        .set("tokenizer.ggml.model", Value::String("gpt2".into()))
        .set("tokenizer.ggml.pre", Value::String("gpt2".into()))
        .set("tokenizer.ggml.tokens", strings(tokens))
        .set("tokenizer.ggml.merges", strings(merges))
        .without("tokenizer.ggml.scores")
        .set(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![1; 512])),
        )
        .set("tokenizer.ggml.bos_token_id", Value::U32(1))
        .set("tokenizer.ggml.eos_token_id", Value::U32(2))
        .without("tokenizer.ggml.unknown_token_id")
}

hostile! {
    fn merges_naming_unknown_tokens: |dir| {
        with_bpe_vocabulary("last".into(), vec!["t1 t2".into(), "t3 nowhere".into()]).write(dir)
    } => |path| assert_open_fails_with(path, "names \"nowhere\", which is not a token");

    /// Each character outside the byte-level alphabet makes llama.cpp's piece
    /// repeat the whole token: 100,000 of them (300 kB) were 30 GB of pieces.
    fn token_whose_piece_grows_quadratically: |dir| {
        with_bpe_vocabulary("\u{4e00}".repeat(100_000), Vec::new()).write(dir)
    } => |path| assert_open_fails_with(path, "the vocabulary's pieces would exceed");
}

// --- Memory amplification ----------------------------------------------------------

hostile! {
    /// 4 million empty tokens (32 MB) against an embedding of 512 rows: once
    /// 806 MB of tokenizer, now refused before the tokenizer is built.
    fn four_million_empty_tokens_in_a_model: |dir| {
        Model::tiny()
            .set("tokenizer.ggml.tokens", empty_strings(4 * MILLION))
            .without("tokenizer.ggml.scores")
            .without("tokenizer.ggml.token_type")
            .write(dir)
    } => |path| assert_open_fails_with(path, "has 4000000 tokens");

    /// The same vocabulary alone, built into a tokenizer (`tl model inspect`
    /// and the language's `load_tokenizer` do): it builds, within its bound.
    fn four_million_empty_tokens_in_a_vocabulary_file: |dir| {
        Model::tiny()
            .without_tensors()
            .set("tokenizer.ggml.tokens", empty_strings(4 * MILLION))
            .without("tokenizer.ggml.scores")
            .without("tokenizer.ggml.token_type")
            .write(dir)
    } => |path| {
        let file = GgufFile::open(path).expect("the vocabulary file opens");
        let tokenizer = Tokenizer::from_gguf(&file).expect("the tokenizer builds");
        assert_eq!(tokenizer.vocab_size(), 4 * MILLION);
    };

    /// An unused key holding 4 million empty strings: read, and the model
    /// loads, within the bound.
    fn unused_array_of_empty_strings: |dir| {
        Model::tiny().set("junk.strings", empty_strings(4 * MILLION)).write(dir)
    } => |path| assert!(load(path, 256).is_ok());

    /// 2 million keys of one-byte values (44 MB): each took about 250 bytes of
    /// keys, copies and index entries; now charged before reading and refused.
    fn two_million_metadata_keys: |dir| {
        let path = dir.join("keys.gguf");
        std::fs::write(&path, many_keys(2 * MILLION)).expect("the file is written");
        path
    } => |path| {
        let message = GgufFile::open(path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("of memory"), "{message:?}");
    };
}

// --- No false refusals ----------------------------------------------------------

hostile! {
    fn tiny_llama_loads: |dir| Model::tiny().write(dir) => |path| {
        assert!(load(path, 256).is_ok());
    };

    fn tiny_qwen3_loads: |dir| Model::synthetic(ShapeName::TinyQwen3, None).write(dir) => |path| {
        assert!(load(path, 256).is_ok());
    };
}

/// The default model opens and loads as before (without a child: it is the
/// file every other test loads).
#[test]
fn the_default_model_loads() {
    let Ok(path) = tl_testdata::default_model() else {
        eprintln!("skipped: the default model is not there");
        return;
    };
    let loaded = load(&path, 4096).expect("the default model loads");
    assert_eq!(loaded.config().vocab_size, 49_152);
}
