//! What the engine's integration tests share: where their models are, the
//! backends a test body runs on, and small step helpers.
//!
//! [`backend_tests!`] is candle's `test_device!`: one test body, one `#[test]`
//! per backend, so each backend passes, fails or skips on its own line. The
//! CPU runs the default model and the tiny [`synthetic_models`] (CI time stays
//! flat); a GPU runs every model of `TL_GPU_TEST_MODELS`, as
//! `scripts/gpu_checks.sh` sets it, and the synthetic ones.

// Each test file includes this module and uses a part of it.
#![allow(dead_code, unused_macros)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tl_cuda::CudaError;
use tl_engine::{Backend, DeviceChoice, Error, GpuOptions, Picked, SequenceCache, Wanted};
use tl_gguf::{GgmlType, GgufFile, GgufWriter, TensorData, Value};

/// Positions every test model is loaded for and every test cache holds.
pub const CONTEXT: usize = 256;

/// Declares test bodies that run on every backend. Each
/// `fn name(backend: &Backend, model: &Path) { .. }` becomes a module `name`
/// with the tests `name::cpu` and `name::cuda`, which run the body on each of
/// that device's test models ([`run_on`]); the CUDA test prints
/// `skipped on cuda: ..` where no GPU can be opened. The body sees the test
/// file's items.
macro_rules! backend_tests {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($backend:ident: &Backend, $model:ident: &Path) $body:block
    )*) => {$(
        $(#[$meta])*
        mod $name {
            use super::*;

            fn body($backend: &tl_engine::Backend, $model: &std::path::Path) $body

            #[test]
            fn cpu() {
                crate::common::run_on(tl_engine::DeviceChoice::Cpu, body);
            }

            #[test]
            fn cuda() {
                crate::common::run_on(tl_engine::DeviceChoice::Cuda, body);
            }
        }
    )*};
}
#[allow(unused_imports)] // as above
pub(crate) use backend_tests;

/// Runs `body` on every test model of `device` ([`models_on`]), each loaded
/// there; returns at once, saying why, where `device` is a GPU this machine
/// cannot open.
pub fn run_on(device: DeviceChoice, body: fn(&Backend, &Path)) {
    for path in models_on(device) {
        let Some(backend) = load(&path, device) else {
            return;
        };
        eprintln!("{} on {}", path.display(), backend.device_name());
        body(&backend, &path);
    }
}

/// The models a test body runs on: on the CPU the default model and the
/// [`synthetic_models`]; on a GPU those of [`gpu_models`].
pub fn models_on(device: DeviceChoice) -> Vec<PathBuf> {
    match device {
        DeviceChoice::Cpu => [vec![default_model()], synthetic_models().to_vec()].concat(),
        DeviceChoice::Cuda | DeviceChoice::Auto => gpu_models(),
    }
}

/// `TL_GPU_TEST_MODELS` (paths separated by ':'), else the default model;
/// then the [`synthetic_models`].
pub fn gpu_models() -> Vec<PathBuf> {
    let listed = match std::env::var("TL_GPU_TEST_MODELS") {
        Ok(list) => list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect(),
        Err(_) => vec![default_model()],
    };
    [listed, synthetic_models().to_vec()].concat()
}

/// The weight types of a [`synthetic_models`] model: (Q, K, V, attention
/// output, gate and up, down, token embedding, output head or `None` for a
/// head tied to the embedding).
struct SyntheticTypes {
    name: &'static str,
    query_key: GgmlType,
    value: GgmlType,
    attention_output: GgmlType,
    gate_up: GgmlType,
    down: GgmlType,
    embedding: GgmlType,
    output: Option<GgmlType>,
}

impl SyntheticTypes {
    /// Every matrix and the tied head in one type.
    const fn uniform(name: &'static str, t: GgmlType) -> Self {
        SyntheticTypes {
            name,
            query_key: t,
            value: t,
            attention_output: t,
            gate_up: t,
            down: t,
            embedding: t,
            output: None,
        }
    }
}

/// The models of the weight types no model file here has: Q4_K_M's mix
/// (values and the MLP's down projection in Q6_K beside Q4_K, so Q, K and V
/// differ in type, and a Q6_K output head), and all of Q2_K, Q3_K, Q5_K,
/// Q5_0 and Q5_1. Written once into the temporary folder (the same bytes
/// every time: the name carries the generator's version).
const SYNTHETIC: [SyntheticTypes; 6] = [
    SyntheticTypes {
        name: "q4_k_m",
        query_key: GgmlType::Q4_K,
        value: GgmlType::Q6_K,
        attention_output: GgmlType::Q4_K,
        gate_up: GgmlType::Q4_K,
        down: GgmlType::Q6_K,
        embedding: GgmlType::Q4_K,
        output: Some(GgmlType::Q6_K),
    },
    SyntheticTypes::uniform("q2_k", GgmlType::Q2_K),
    SyntheticTypes::uniform("q3_k", GgmlType::Q3_K),
    SyntheticTypes::uniform("q5_k", GgmlType::Q5_K),
    SyntheticTypes::uniform("q5_0", GgmlType::Q5_0),
    SyntheticTypes::uniform("q5_1", GgmlType::Q5_1),
];

/// Hidden width, MLP width, blocks, query and key/value heads, head width of
/// the synthetic models (Llama: RoPE and the cache write fused into the QKV
/// projection where Q, K and V share a type). Widths are whole K-quant
/// super-blocks.
const SYNTHETIC_SHAPE: (usize, usize, usize, usize, usize, usize) = (256, 512, 2, 4, 2, 64);

/// Paths of the [`SYNTHETIC`] models, a tiny Qwen2 and a tiny Gemma 3,
/// written on first use.
pub fn synthetic_models() -> &'static [PathBuf] {
    static MODELS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    MODELS.get_or_init(|| {
        let dir = std::env::temp_dir().join("tl-test-models");
        std::fs::create_dir_all(&dir).unwrap();
        let mut models: Vec<PathBuf> = SYNTHETIC
            .iter()
            .map(|types| {
                let path = dir.join(format!("synthetic-{}-v1.gguf", types.name));
                if !path.exists() {
                    write_synthetic(types, &path);
                }
                path
            })
            .collect();
        // A tiny Qwen2 (query, key and value biases; RoPE on halves) and a
        // tiny Gemma 3 (GeGLU, post-norms, scaled embeddings and queries, a
        // window of 32 on every other layer), carried in the test binary like
        // the vocabulary below.
        let carried: [(&str, &[u8]); 2] = [
            (
                "synthetic-tiny-qwen2-v2.gguf",
                include_bytes!("../golden/tiny-qwen2-q8_0.gguf"),
            ),
            (
                "synthetic-tiny-gemma3-v1.gguf",
                include_bytes!("../golden/tiny-gemma3-q8_0.gguf"),
            ),
        ];
        for (name, bytes) in carried {
            let path = dir.join(name);
            if !path.exists() {
                let temp = dir.join(format!("{name}.{}.tmp", std::process::id()));
                std::fs::write(&temp, bytes).unwrap();
                std::fs::rename(&temp, &path).unwrap();
            }
            models.push(path);
        }
        models
    })
}

/// Writes one synthetic model to `path` (through a file of this process,
/// renamed: test processes may race to write the same model).
fn write_synthetic(types: &SyntheticTypes, path: &Path) {
    let (hidden, ffn, blocks, heads, kv_heads, head_dim) = SYNTHETIC_SHAPE;
    // The vocabulary travels in the test binary (it runs on machines without
    // the source tree).
    let vocab_bytes = include_bytes!("../golden/tiny-qwen3-q8_0.gguf");
    let vocab_file = GgufFile::from_bytes(vocab_bytes.to_vec()).unwrap();
    let mut writer = GgufWriter::new(3);
    let count = |n: usize| Value::U32(n as u32);
    writer.set_metadata("general.architecture", Value::String("llama".into()));
    writer.set_metadata(
        "general.name",
        Value::String(format!("synthetic {}", types.name)),
    );
    for (key, value) in [
        ("llama.context_length", count(256)),
        ("llama.embedding_length", count(hidden)),
        ("llama.block_count", count(blocks)),
        ("llama.feed_forward_length", count(ffn)),
        ("llama.attention.head_count", count(heads)),
        ("llama.attention.head_count_kv", count(kv_heads)),
        ("llama.rope.dimension_count", count(head_dim)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
    ] {
        writer.set_metadata(key, value);
    }
    for (key, value) in vocab_file.metadata() {
        if key.starts_with("tokenizer.") {
            writer.set_metadata(key.clone(), value.clone());
        }
    }
    let vocab = vocab_file
        .tensor_info("token_embd.weight")
        .map(|t| t.shape()[0])
        .unwrap();
    let mut rng = SplitMix(types.name.bytes().fold(0, |h, b| h * 31 + u64::from(b)));
    let mut matrix = |name: String, t: GgmlType, rows: usize, cols: usize| {
        let data = random_weights(&mut rng, t, rows, cols);
        writer
            .add_tensor(
                name,
                vec![cols as u64, rows as u64],
                t,
                TensorData::Bytes(data),
            )
            .unwrap();
    };
    matrix("token_embd.weight".into(), types.embedding, vocab, hidden);
    if let Some(t) = types.output {
        matrix("output.weight".into(), t, vocab, hidden);
    }
    let (q_width, kv_width) = (heads * head_dim, kv_heads * head_dim);
    for b in 0..blocks {
        let name = |tensor: &str| format!("blk.{b}.{tensor}.weight");
        matrix(name("attn_q"), types.query_key, q_width, hidden);
        matrix(name("attn_k"), types.query_key, kv_width, hidden);
        matrix(name("attn_v"), types.value, kv_width, hidden);
        matrix(name("attn_output"), types.attention_output, hidden, q_width);
        matrix(name("ffn_gate"), types.gate_up, ffn, hidden);
        matrix(name("ffn_up"), types.gate_up, ffn, hidden);
        matrix(name("ffn_down"), types.down, hidden, ffn);
    }
    let ones = |n: usize| TensorData::Bytes(1.0f32.to_le_bytes().repeat(n));
    for b in 0..blocks {
        for norm in ["attn_norm", "ffn_norm"] {
            let name = format!("blk.{b}.{norm}.weight");
            writer
                .add_tensor(name, vec![hidden as u64], GgmlType::F32, ones(hidden))
                .unwrap();
        }
    }
    writer
        .add_tensor(
            "output_norm.weight",
            vec![hidden as u64],
            GgmlType::F32,
            ones(hidden),
        )
        .unwrap();
    let partial = path.with_extension(format!("tmp{}", std::process::id()));
    writer.write_to_path(&partial).unwrap();
    std::fs::rename(&partial, path).unwrap();
}

/// splitmix64.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Random blocks of `t` for a `rows × cols` matrix: random bytes (any bytes
/// are a valid block) with the f16 factors set where `t` keeps them, scaled
/// so that weights are a few hundredths (as a trained model's).
fn random_weights(rng: &mut SplitMix, t: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    // (offset of an f16 factor, its largest magnitude)
    let factors: &[(usize, f32)] = match t {
        GgmlType::Q5_0 => &[(0, 4e-3)],
        GgmlType::Q5_1 => &[(0, 4e-3), (2, 5e-2)],
        GgmlType::Q2_K => &[(80, 4e-3), (82, 2e-3)],
        GgmlType::Q3_K => &[(108, 6e-4)],
        GgmlType::Q4_K => &[(0, 2e-4), (2, 1e-4)],
        GgmlType::Q5_K => &[(0, 1e-4), (2, 1e-4)],
        GgmlType::Q6_K => &[(208, 6e-5)],
        other => panic!("no synthetic weights of {other:?}"),
    };
    let (size, values) = (t.block_bytes() as usize, t.block_elements() as usize);
    let mut bytes = Vec::with_capacity(rows * cols / values * size);
    for _ in 0..rows * cols / values {
        let mut block: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        for &(at, largest) in factors {
            let factor = half::f16::from_f32(rng.unit() * largest);
            block[at..at + 2].copy_from_slice(&factor.to_le_bytes());
        }
        bytes.extend_from_slice(&block);
    }
    bytes
}

/// The default model: `TL_TEST_MODEL`, else where `tl model pull` puts it
/// (the README's test command runs that first).
pub fn default_model() -> PathBuf {
    tl_testdata::default_model().unwrap_or_else(|e| panic!("{e}"))
}

/// The model at `path` on `device`, for caches of [`CONTEXT`] positions; `None`,
/// after printing why, where `device` is a GPU and this machine has no usable
/// one (no CUDA library, no device). Any other failure panics: on a machine
/// with a GPU, a GPU that does not load is a failure. Holds the GPU for the
/// calling test ([`tl_testdata::hold_gpu`]).
pub fn load(path: &Path, device: DeviceChoice) -> Option<Backend> {
    load_for(path, device, CONTEXT)
}

/// [`load`] for caches of up to `context` positions.
pub fn load_for(path: &Path, device: DeviceChoice, context: usize) -> Option<Backend> {
    load_with(path, device, context, &GpuOptions::default())
}

/// [`load_for`] with a GPU opened with `options`.
pub fn load_with(
    path: &Path,
    device: DeviceChoice,
    context: usize,
    options: &GpuOptions,
) -> Option<Backend> {
    if device != DeviceChoice::Cpu {
        tl_testdata::hold_gpu();
    }
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match Backend::load(&file, context, device, options) {
        Ok(loaded) => Some(loaded.backend),
        Err(e @ Error::Cuda(CudaError::LibraryMissing { .. } | CudaError::NoDevice))
            if device == DeviceChoice::Cuda =>
        {
            eprintln!("skipped on cuda: no usable GPU here ({e})");
            None
        }
        Err(e) => panic!("{} on {device:?}: {e}", path.display()),
    }
}

/// One token per session, as [`tl_engine::Session::advance`] takes them.
pub fn singles(tokens: &[u32]) -> Vec<&[u32]> {
    tokens.iter().map(std::slice::from_ref).collect()
}

/// The logits after `tokens`, appended to `cache` in one step.
pub fn last_logits(backend: &Backend, tokens: &[u32], cache: &mut SequenceCache) -> Vec<f32> {
    match backend.step_one(tokens, cache, Wanted::Logits).unwrap() {
        Picked::Row(logits) => logits,
        Picked::Token(_) => panic!("a step asked for logits gave a token"),
    }
}

/// The backend's argmax after `token`, appended to `cache` (picked on the
/// device where there is one).
pub fn greedy(backend: &Backend, token: u32, cache: &mut SequenceCache) -> u32 {
    match backend.step_one(&[token], cache, Wanted::Argmax).unwrap() {
        Picked::Token(token) => token,
        Picked::Row(_) => panic!("a step asked for the argmax gave no token"),
    }
}

/// `len` prompt tokens spread over the vocabulary.
pub fn prompt_of(vocab: usize, len: u32) -> Vec<u32> {
    (0..len).map(|i| (i * 7919 + 13) % vocab as u32).collect()
}

/// Whether `a` and `b` hold the same bits (NaNs included).
pub fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The relative (L2) difference of `got` from `want`.
pub fn relative_error(got: &[f32], want: &[f32]) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        assert!(g.is_finite(), "non-finite logit");
        diff += (g as f64 - w as f64).powi(2);
        norm += (w as f64).powi(2);
    }
    (diff / norm).sqrt()
}

/// Whether every block matrix of the model at `path` is quantized (Q4_0,
/// Q4_1, Q5_0, Q5_1, Q8_0 or a K-quant). Then a GPU runs decode steps and
/// prompts under 64 tokens row by row, through the kernels that compute the
/// CPU's bits; float weights take cuBLAS GEMMs for any pass of several rows,
/// summed in another order.
/// Whether some block matrix of the model is a K-quant (256-value
/// super-blocks), whose products round by how many rows a pass has.
pub fn k_quant_blocks(path: &Path) -> bool {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.tensors()
        .iter()
        .filter(|t| t.name.starts_with("blk.") && t.dims.len() == 2)
        .any(|t| t.ggml_type.block_elements() == 256)
}

pub fn quantized_blocks(path: &Path) -> bool {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.tensors()
        .iter()
        .filter(|t| t.name.starts_with("blk.") && t.dims.len() == 2)
        .all(|t| t.ggml_type.is_quantized())
}
