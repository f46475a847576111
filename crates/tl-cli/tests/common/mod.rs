//! Helpers shared by the end-to-end tests: running the real `tl` binary and finding
//! the default model (fetched once into the cache folder, as a user would get it).

#![allow(dead_code)]

pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use tl_testdata::ModelMissing;

/// A `tl` command.
pub fn tl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tl"))
}

/// Runs `command` with `input` on its stdin; its output once it has ended.
pub fn output_with_stdin(command: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("tl's output")
}

/// `tl perplexity -c 512` of `model` on the GPL text (the reference text of
/// llama.cpp's figures), its last line's value.
pub fn gpl_perplexity(model: &Path) -> f64 {
    gpl_perplexity_at(model, 512)
}

/// [`gpl_perplexity`] with a context of `context` tokens.
pub fn gpl_perplexity_at(model: &Path, context: usize) -> f64 {
    let text = testdata().join("reference/gpl-3.txt");
    let context = context.to_string();
    let out = run(&[
        "perplexity",
        "-m",
        model.to_str().unwrap(),
        "-f",
        text.to_str().unwrap(),
        "-c",
        &context,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let last = stdout(&out).lines().last().unwrap_or_default().to_string();
    last.strip_prefix("perplexity: ")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("last line {last:?}"))
}

/// The greedy continuation of a raw prompt by `model` over `tokens` tokens,
/// without the newline `tl generate` ends its output with.
pub fn greedy_of(model: &Path, prompt: &str, tokens: usize) -> String {
    let n = tokens.to_string();
    let model = model.to_str().expect("model path is UTF-8");
    let args = [
        "generate",
        "-m",
        model,
        "--raw",
        "--temperature",
        "0",
        "-n",
        &n,
        "-p",
        prompt,
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

/// The default model's sha256 (the catalogue's).
pub const DEFAULT_MODEL_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// Runs `tl` with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    tl().args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cannot start tl")
}

/// The default model: `$TL_TEST_MODEL` if set, else the cached copy, else
/// `tl model pull` (which fetches it on first use, as a user would get it).
/// Fails the test with the reason when it cannot be had.
pub fn default_model() -> &'static Path {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    MODEL.get_or_init(|| match tl_testdata::default_model() {
        Ok(path) => path,
        Err(ModelMissing::NotPulled(_)) => pull_default_model(),
        Err(reason) => panic!("{reason}"),
    })
}

/// Runs `tl model pull` and returns the path it prints.
fn pull_default_model() -> PathBuf {
    let out = run(&["model", "pull"]);
    assert!(
        out.status.success(),
        "tl model pull failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The repository's golden test data (`testdata/`).
pub fn testdata() -> PathBuf {
    tl_testdata::testdata()
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// llama.cpp's embedding of `text` by `model` (`smollm2` or `gemma3`), from
/// `testdata/reference/embeddings.jsonl`.
pub fn reference_embedding(model: &str, text: &str) -> Vec<f32> {
    let path = testdata().join("reference/embeddings.jsonl");
    let rows = std::fs::read_to_string(&path).unwrap();
    rows.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|row| row["model"] == model && row["text"] == text)
        .unwrap_or_else(|| panic!("no reference embedding of {text:?} by {model}"))["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

/// `1 − cos(a, b)` of two embeddings.
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f64 {
    tl_engine::embedding::cosine_distance(a, b)
}

/// A tiny random-weight Qwen2 model (`tl model synth --shape tiny-qwen2`)
/// with the default model's vocabulary and Qwen2.5's chat template (which
/// renders tools), written to `dir/NAME.gguf`; served as `NAME`. Its
/// context is raised to 4096 so that tool descriptions fit.
pub fn qwen_tools_model(dir: &Path, name: &str) -> PathBuf {
    let synth = dir.join("synth.gguf");
    let vocab = default_model().to_str().expect("a UTF-8 path");
    let synth_path = synth.to_str().expect("a UTF-8 path");
    let out = run(&[
        "model",
        "synth",
        "--shape",
        "tiny-qwen2",
        "--quant",
        "q8_0",
        "--vocab",
        vocab,
        "-o",
        synth_path,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let template =
        std::fs::read_to_string(testdata().join("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))
            .expect("the Qwen2.5 template is in the test data");
    let file = tl_gguf::GgufFile::open(&synth).expect("the synthetic model reads");
    let mut writer = tl_gguf::GgufWriter::new(3);
    for (key, value) in file.metadata() {
        writer.set_metadata(key.clone(), value.clone());
    }
    writer.set_metadata("tokenizer.chat_template", tl_gguf::Value::String(template));
    writer.set_metadata("qwen2.context_length", tl_gguf::Value::U32(4096));
    for info in file.tensors() {
        let data = tl_gguf::TensorData::Bytes(file.data_of(info).to_vec());
        writer
            .add_tensor(info.name.clone(), info.dims.clone(), info.ggml_type, data)
            .expect("a well-formed tensor");
    }
    let path = dir.join(format!("{name}.gguf"));
    writer.write_to_path(&path).expect("the model is written");
    path
}
