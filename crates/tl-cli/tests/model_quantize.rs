//! `tl model quantize` through the real binary: the bytes `llama-quantize`
//! (llama.cpp 0c1e570, no importance matrix) writes for the same input,
//! for every file type, from a synthetic F16 model and from the default
//! model requantized; the K-quant files' perplexity and greedy text equal
//! llama.cpp's; and one-line refusals (exit 1, nothing written) for what it
//! cannot do.

mod common;

use std::path::Path;

use common::{
    default_model, gpl_perplexity as perplexity, greedy_of, run, stderr, stdout, testdata,
};
use sha2::{Digest, Sha256};

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `tl model quantize IN OUT --type TYPE [EXTRA...]`, checking it succeeded.
fn quantize(input: &Path, output: &Path, file_type: &str, extra: &[&str]) {
    let mut args = vec![
        "model",
        "quantize",
        input.to_str().unwrap(),
        output.to_str().unwrap(),
        "--type",
        file_type,
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(stdout(&out).contains("wrote"), "{}", stdout(&out));
}

/// sha256 of `llama-quantize tiny-wide-f16.gguf OUT TYPE` for the synthetic
/// model below (`tl model synth --shape tiny-wide --quant f16`, seed 0).
const TINY_WIDE_F16: &str = "dc7024ca9d125b1054ec398a9ef1434f0a298b70da624daa02b4b210c534aa3c";
const FROM_TINY_WIDE: [(&str, &str); 8] = [
    (
        "q4_k_m",
        "68483df275e4caefa0500b1d4465147cf1256ddcfda999157d9d4b212d2b803a",
    ),
    (
        "q5_k_m",
        "1c137ed447e6ce0123b400d5ca8e68af5a5c3af7a87aaf75c950e07d0d75cf1e",
    ),
    (
        "q6_k",
        "a1d82139a0ec009eb50797c7287e8fcd1806f9a98f81d23bb1aa7c561bbe9d1c",
    ),
    (
        "q8_0",
        "7710ce39a8b54dbc3ad046cf8a4173e787af1dfc93d4b18cdc0944bf370c1cf3",
    ),
    (
        "q4_0",
        "1307985a0a4eb4df39b592ca8065b06614a0a54e06ee7810b9e06b9c699bda9d",
    ),
    (
        "q4_1",
        "0e5398ceb0a15d65ba16c09b9f0c38e811ccf70b82277f4f8cdb6a8ddec6d292",
    ),
    (
        "q5_0",
        "74f9fb463219cec82f26d7601ed426b169006db7d76e0b974750cb2620488014",
    ),
    (
        "q5_1",
        "d133332c07b04e4d70bd01851e2f200db64e78ced1d68be746f82f1a700496b2",
    ),
];

#[test]
fn a_synthetic_f16_model_quantizes_to_llama_quantize_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let f16 = dir.path().join("tiny-wide-f16.gguf");
    let out = run(&[
        "model",
        "synth",
        "--shape",
        "tiny-wide",
        "--quant",
        "f16",
        "-o",
        f16.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The input the hashes below were made from (it depends on libm's logf/sinf).
    assert_eq!(sha256(&f16), TINY_WIDE_F16, "the synthetic input changed");
    for (file_type, expected) in FROM_TINY_WIDE {
        let output = dir.path().join(format!("{file_type}.gguf"));
        quantize(&f16, &output, file_type, &[]);
        assert_eq!(sha256(&output), expected, "{file_type}");
    }
}

/// sha256 of `llama-quantize --allow-requantize` on the default model (Q4_1);
/// the first two are in testdata/reference/README.md.
const FROM_DEFAULT: [(&str, &str); 8] = [
    (
        "q4_k_m",
        "dc0f3a02e821146247a0af6895adf9872124f368682cb110cb9ed09ff2a9f9f1",
    ),
    (
        "q6_k",
        "a969ae2086dd4945a7c61594bf72b2bcc3b7df8571c92aed8f213918673a7f80",
    ),
    (
        "q5_k_m",
        "8170c7ef444692b3b2fe63459c326def0358807ef9be6e3cb020efb86a71015e",
    ),
    (
        "q8_0",
        "7b46609d11703c058397e5cfe4cc6e4b2508cb1eb4c80ddc472a5d421fbdb508",
    ),
    (
        "q4_0",
        "aa4256f3b46eb4add75ece1c0eeac1c6e4f1ec0c93e6fbe64fe1770f4ad09ae8",
    ),
    (
        "q5_0",
        "2f90a7511cf340144dda963a9fd73f708601517f0f8038d31c9069654526be44",
    ),
    (
        "q5_1",
        "d0fe3cbb20771ac9dab0f4dd5aaa259785158177f6503d4dca32f4495dcffaea",
    ),
    (
        "f16",
        "a269e3181fcbb25046f99f64ba8d3c159165b211c2ff4ffca7ba1bb219d2ccd0",
    ),
];

#[test]
fn the_default_model_requantizes_to_llama_quantize_bytes_and_perplexity() {
    let dir = tempfile::tempdir().unwrap();
    for (file_type, expected) in FROM_DEFAULT {
        let output = dir.path().join(format!("{file_type}.gguf"));
        quantize(default_model(), &output, file_type, &["--allow-requantize"]);
        assert_eq!(sha256(&output), expected, "{file_type}");
        // llama-perplexity -c 512 on these files (testdata/reference/README.md).
        let llama_cpp = match file_type {
            "q4_k_m" => 19.0973,
            "q6_k" => 18.5078,
            _ => continue,
        };
        let value = perplexity(&output);
        assert!(
            (value - llama_cpp).abs() < 5e-5,
            "{file_type}: perplexity {value} vs llama.cpp {llama_cpp}"
        );
        greedy_text_equals_llama_cpp_s(&output, file_type);
    }
}

/// The greedy continuations of `model` (the default model requantized to
/// `file_type`) equal `llama-completion`'s on the same file
/// (`testdata/reference/k_quant_greedy_32.jsonl`, written by
/// `scripts/llama_cpp_greedy_references.py`): decode steps round K-quant
/// products as its single-row kernels do.
fn greedy_text_equals_llama_cpp_s(model: &Path, file_type: &str) {
    let file = testdata().join("reference/k_quant_greedy_32.jsonl");
    let text = std::fs::read_to_string(file).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let reference: serde_json::Value = serde_json::from_str(line).unwrap();
        if reference["model"] != file_type {
            continue;
        }
        let prompt = reference["prompt"].as_str().unwrap();
        let tokens = reference["n_predict"].as_u64().unwrap() as usize;
        let ours = greedy_of(model, prompt, tokens);
        assert_eq!(ours, reference["completion"], "{file_type}: {prompt:?}");
        checked += 1;
    }
    assert_eq!(checked, 11, "{file_type}: reference prompts");
}

#[test]
fn quantized_input_is_refused_without_allow_requantize() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.gguf");
    let out = run(&[
        "model",
        "quantize",
        default_model().to_str().unwrap(),
        output.to_str().unwrap(),
        "--type",
        "q4_k_m",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("--allow-requantize"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!output.exists());
}

#[test]
fn bad_requests_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = default_model().to_str().unwrap();
    let output = dir.path().join("out.gguf");
    let out_arg = output.to_str().unwrap();
    let not_gguf = dir.path().join("text.gguf");
    std::fs::write(&not_gguf, "not a model").unwrap();
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec![input, out_arg, "--type", "q3_k_xl"],
            "unknown weight type",
        ),
        (vec![input, input, "--type", "q8_0"], "it is the input file"),
        (
            vec![not_gguf.to_str().unwrap(), out_arg, "--type", "q8_0"],
            "cannot read",
        ),
        (
            vec![
                input,
                "/nonexistent/dir/out.gguf",
                "--type",
                "q8_0",
                "--allow-requantize",
            ],
            "does not exist",
        ),
    ];
    for (args, expected) in cases {
        let mut full = vec!["model", "quantize"];
        full.extend(args);
        let out = run(&full);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{full:?}: {err}");
        assert!(err.contains(expected), "{full:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!output.exists());
    }
}
