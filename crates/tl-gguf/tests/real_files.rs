//! The reader on real files written by llama.cpp's tools: the vocabulary files
//! in `testdata/vocab` and the default model (fetched by `tl model pull`, which
//! the README's test command runs first).
//! Rewriting each through `GgufWriter` must reproduce the original bytes, which
//! pins the writer's layout to the one real files have.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tl_gguf::{GgufFile, GgufWriter, TensorData};

/// The default model (`TL_TEST_MODEL`, else where `tl model pull` puts it).
fn real_model() -> PathBuf {
    tl_testdata::default_model().unwrap_or_else(|e| panic!("{e}"))
}

fn vocab_dir() -> PathBuf {
    tl_testdata::testdata().join("vocab")
}

fn vocab_files() -> Vec<PathBuf> {
    let dir = vocab_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "the vocab test files are missing: cannot read {}: {e}",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "gguf"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .gguf files in {}", dir.display());
    files
}

/// A writer holding everything `file` holds; tensor data is streamed from the
/// opened file by generators, as `tl model synth` streams its random data.
fn rewrite(file: &Arc<GgufFile>) -> GgufWriter {
    let mut writer = GgufWriter::new(file.version());
    for (key, value) in file.metadata() {
        writer.set_metadata(key.clone(), value.clone());
    }
    let mut by_offset: Vec<_> = file.tensors().iter().collect();
    by_offset.sort_by_key(|info| info.offset);
    for info in by_offset {
        let (source, name) = (Arc::clone(file), info.name.clone());
        let data = TensorData::generated(move |out| {
            let bytes = source.tensor_data(&name).map_err(std::io::Error::other)?;
            out.write_all(bytes)
        });
        writer
            .add_tensor(info.name.clone(), info.dims.clone(), info.ggml_type, data)
            .unwrap();
    }
    writer
}

/// The rewrite equals the original, except that files without tensors may lack
/// the padding after the header that the writer (like llama.cpp) always adds.
fn assert_rewrite_reproduces(path: &Path) {
    let original = std::fs::read(path).unwrap();
    let file = Arc::new(GgufFile::open(path).unwrap());
    let rewritten = rewrite(&file).to_bytes().unwrap();
    assert!(rewritten.len() >= original.len(), "{}", path.display());
    let (same, padding) = rewritten.split_at(original.len());
    assert!(same == original, "{}: rewrite differs", path.display());
    assert!((padding.len() as u64) < file.alignment() && padding.iter().all(|&b| b == 0));
}

#[test]
fn every_vocab_file_opens() {
    for path in vocab_files() {
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tokens = file.get_string_array("tokenizer.ggml.tokens").unwrap();
        assert!(tokens.is_some_and(|t| !t.is_empty()), "{}", path.display());
        assert!(file.get_str("tokenizer.ggml.model").unwrap().is_some());
    }
}

#[test]
fn every_vocab_file_is_reproduced_by_the_writer() {
    for path in vocab_files() {
        assert_rewrite_reproduces(&path);
    }
}

#[test]
fn real_model_opens_and_is_reproduced_by_the_writer() {
    let model = real_model();
    let file = GgufFile::open(&model).unwrap();
    assert_eq!(file.get_str("general.architecture").unwrap(), Some("llama"));
    assert_eq!(file.get_u64("llama.block_count").unwrap(), Some(30));
    assert_eq!(file.tensors().len(), 272);
    let embedding = file.tensor_info("token_embd.weight").unwrap();
    assert_eq!(embedding.shape(), [49152, 576]);
    assert_eq!(file.data_of(embedding).len() as u64, embedding.size_bytes);
    assert_rewrite_reproduces(&model);
}
