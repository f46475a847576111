//! Encoding and loading stay fast: a 5,000-token text encodes in well under
//! 100 ms and a 50k-token vocabulary loads in well under a second.
//!
//! The bounds are far above the measured times (about 2 ms and 50 ms with the
//! test profile) so that a loaded CI machine does not make the test flaky; they
//! catch accidental quadratic behaviour, not small regressions.

use std::time::{Duration, Instant};

use tl_gguf::GgufFile;
use tl_tokenizer::Tokenizer;

fn vocab_path(name: &str) -> String {
    let dir = tl_testdata::testdata().join("vocab");
    dir.join(name).display().to_string()
}

#[test]
fn five_thousand_tokens_encode_quickly() {
    for name in ["ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"] {
        let path = vocab_path(name);
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let started = Instant::now();
        let tokenizer = Tokenizer::from_gguf(&file).unwrap();
        let load_time = started.elapsed();
        assert!(
            load_time < Duration::from_secs(1),
            "{name}: loading took {load_time:?}"
        );

        let sample = std::fs::read_to_string(format!("{path}.inp")).unwrap();
        let mut text = String::new();
        while tokenizer.encode(&text, false, false).unwrap().len() < 5_000 {
            text.push_str(&sample);
        }
        let started = Instant::now();
        let ids = tokenizer.encode(&text, true, true).unwrap();
        let encode_time = started.elapsed();
        assert!(ids.len() >= 5_000);
        assert!(
            encode_time < Duration::from_millis(100),
            "{name}: encoding {} tokens took {encode_time:?}",
            ids.len()
        );
    }
}
