//! Whole synthetic files of the tiny shape: byte-identical for a seed on any
//! number of threads, loadable by the engine with finite logits, and carrying a
//! tokenizer the tokenizer crate accepts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

use super::*;
use crate::cpu::model::Model;
use crate::model::step::Logits;

fn request(quant: FileType, seed: u64) -> SynthRequest {
    SynthRequest {
        shape: ShapeName::Tiny,
        architecture: None,
        quant,
        seed,
    }
}

fn no_progress() -> Progress {
    Arc::new(|_| {})
}

fn synthesize(request: &SynthRequest, vocab: Option<&GgufFile>) -> Vec<u8> {
    SynthPlan::new(request, vocab)
        .unwrap()
        .into_writer(no_progress())
        .unwrap()
        .to_bytes()
        .unwrap()
}

fn spm_vocab_path() -> PathBuf {
    tl_testdata::testdata().join("vocab/ggml-vocab-llama-spm.gguf")
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let first = synthesize(&request(FileType::Q4_0, 0), None);
    assert_eq!(first, synthesize(&request(FileType::Q4_0, 0), None));
    assert_ne!(first, synthesize(&request(FileType::Q4_0, 1), None));
}

#[test]
fn bytes_do_not_depend_on_the_thread_count() {
    let on_threads = |threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| synthesize(&request(FileType::Q8_0, 7), None))
    };
    assert_eq!(on_threads(1), on_threads(3));
}

#[test]
fn progress_adds_up_to_the_tensor_bytes() {
    let plan = SynthPlan::new(&request(FileType::Q4_1, 0), None).unwrap();
    let expected = plan.tensor_bytes();
    let approximate = plan.approximate_file_bytes();
    let written = Arc::new(AtomicU64::new(0));
    let counter = written.clone();
    let bytes = plan
        .into_writer(Arc::new(move |n| {
            counter.fetch_add(n, Ordering::Relaxed);
        }))
        .unwrap()
        .to_bytes()
        .unwrap();
    assert_eq!(written.load(Ordering::Relaxed), expected);
    let actual = bytes.len() as u64;
    assert!(
        actual <= approximate && approximate <= actual + 4096,
        "file of {actual} bytes, estimated {approximate}"
    );
}

#[test]
fn every_weight_type_loads_and_gives_finite_logits() {
    for quant in FileType::ALL {
        let file = GgufFile::from_bytes(synthesize(&request(quant, 0), None)).unwrap();
        assert_eq!(
            file.get_str("general.name").unwrap(),
            Some(format!("synthetic tiny {quant}").as_str())
        );
        let model = Model::load(&file, 64).unwrap();
        assert_eq!(model.config().vocab_size, 512);
        let mut cache = model.new_cache(64).unwrap();
        let logits = model
            .forward(&[1, 300, 301, 302], 0, &mut cache, Logits::All)
            .unwrap();
        assert_eq!(logits.len(), 4 * 512);
        assert!(
            logits.iter().all(|v| v.is_finite()),
            "{quant}: non-finite logits"
        );
        assert!(logits.iter().any(|&v| v != 0.0), "{quant}: all-zero logits");
    }
}

#[test]
fn the_synthetic_vocabulary_tokenizes_round_trip() {
    let file = GgufFile::from_bytes(synthesize(&request(FileType::F16, 0), None)).unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(tokenizer.vocab_size(), 512);
    assert_eq!((tokenizer.bos_id(), tokenizer.eos_id()), (Some(1), Some(2)));
    let text = "hello, world! ünïcode";
    let ids = tokenizer.encode(text, true, false).unwrap();
    assert_eq!(ids[0], 1, "BOS first");
    assert!(ids.iter().all(|&id| id < 512));
    // Characters outside the vocabulary (ü, ï) go through the byte tokens.
    assert_eq!(tokenizer.decode(&ids[1..], false).unwrap(), text);
}

#[test]
fn a_vocabulary_file_sets_the_tokenizer_and_the_vocabulary_size() {
    let vocab = GgufFile::open(spm_vocab_path()).unwrap();
    let file = GgufFile::from_bytes(synthesize(&request(FileType::Q4_0, 0), Some(&vocab))).unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(tokenizer.vocab_size(), 32_000);
    let model = Model::load(&file, 16).unwrap();
    assert_eq!(model.config().vocab_size, 32_000);
    let ids = tokenizer.encode("Hello world", true, false).unwrap();
    let mut cache = model.new_cache(16).unwrap();
    let logits = model.forward(&ids, 0, &mut cache, Logits::Last).unwrap();
    assert!(logits.iter().all(|v| v.is_finite()));
}

#[test]
fn a_real_shape_warns_when_the_vocabulary_size_changes() {
    let vocab = GgufFile::open(spm_vocab_path()).unwrap();
    let mut smollm = request(FileType::Q8_0, 0);
    smollm.shape = ShapeName::SmolLm2;
    let plan = SynthPlan::new(&smollm, Some(&vocab)).unwrap();
    assert_eq!(plan.shape().vocab_size, 32_000);
    assert_eq!(plan.warnings().len(), 1, "{:?}", plan.warnings());
    assert!(
        plan.warnings()[0].contains("49152"),
        "{:?}",
        plan.warnings()
    );
}

#[test]
fn a_mismatched_architecture_is_refused() {
    let mut qwen_tiny = request(FileType::F16, 0);
    qwen_tiny.architecture = Some(Architecture::Qwen3);
    let message = SynthPlan::new(&qwen_tiny, None).unwrap_err().to_string();
    assert!(
        message.contains("shape tiny is a llama model, not qwen3"),
        "{message}"
    );
}
