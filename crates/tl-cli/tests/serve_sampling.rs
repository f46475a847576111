//! What `tl serve` samples beyond one answer (issue 29): `logprobs`, every
//! token's log-probability being `log_softmax` of the step's logits as the
//! engine computes them for the same prompt, in the shape each API gives
//! it, streamed or whole; and `n` choices, choice `i` the answer its own
//! request with the seed plus `i` gets. Bad requests are 400s. Uses the
//! default model on the CPU.

mod common;

use std::io::BufRead;

use common::server::{open_stream, sse_chunks, Server};
use serde_json::{json, Value};
use tl_engine::{Backend, DeviceChoice, GpuOptions, Session};
use tl_gguf::GgufFile;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";
const PROMPT: &str = "The three primary colours are";

/// `log_softmax` of `logits` in f64, computed here on its own.
fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &l| m.max(f64::from(l)));
    let total: f64 = logits.iter().map(|&l| (f64::from(l) - max).exp()).sum();
    logits
        .iter()
        .map(|&l| f64::from(l) - max - total.ln())
        .collect()
}

/// The engine's log-probabilities of the greedy continuation of `prompt`,
/// step by step: each step's row and its picked (best) token.
fn engine_steps(prompt: &str, steps: usize) -> Vec<(Vec<f64>, u32)> {
    let path = common::default_model();
    let file = GgufFile::open(path).unwrap();
    let backend = Backend::load(&file, 256, DeviceChoice::Cpu, &GpuOptions::default())
        .unwrap()
        .backend;
    let model = tl_engine::ModelFile::open(path).unwrap();
    let tokens = model.tokenizer.encode(prompt, true, true).unwrap();
    let mut session = Session::new(&backend, 256).unwrap();
    let mut logits = session.feed(&backend, &tokens).unwrap();
    let mut out = Vec::new();
    for _ in 0..steps {
        let row = log_softmax(&logits);
        let best = tl_engine::sampler::argmax(&logits).unwrap();
        out.push((row, best));
        logits = session.feed(&backend, &[best]).unwrap();
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

#[test]
fn completion_logprobs_equal_the_engines_log_softmax() {
    let steps = engine_steps(PROMPT, 3);
    let tokenizer = tl_engine::ModelFile::open(common::default_model())
        .unwrap()
        .tokenizer;
    let server = Server::start(&[]);
    let body = json!({"model": MODEL, "prompt": PROMPT, "max_tokens": 3,
        "temperature": 0, "logprobs": 5});
    let response = server.post("/v1/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let json = response.json();
    let logprobs = &json["choices"][0]["logprobs"];
    let text = json["choices"][0]["text"].as_str().unwrap();
    for (i, (row, best)) in steps.iter().enumerate() {
        let piece = String::from_utf8_lossy(&tokenizer.token_to_bytes(*best, false)).into_owned();
        assert_eq!(logprobs["tokens"][i], json!(piece), "token {i}");
        let logprob = logprobs["token_logprobs"][i].as_f64().unwrap();
        assert!(
            close(logprob, row[*best as usize]),
            "token {i}: {logprob} against {}",
            row[*best as usize]
        );
        // The five alternatives are the row's five best, with their values.
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let top = logprobs["top_logprobs"][i].as_object().unwrap();
        assert_eq!(top.len(), 5, "{top:?}");
        for &token in &order[..5] {
            let piece = String::from_utf8_lossy(&tokenizer.token_to_bytes(token as u32, false))
                .into_owned();
            let value = top[&piece].as_f64().unwrap();
            assert!(
                close(value, row[token]),
                "alternative {piece:?} of token {i}"
            );
        }
    }
    let offsets: Vec<u64> = logprobs["text_offset"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(offsets[0], 0);
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]) && offsets[2] as usize <= text.len());
}

/// The chat entries' bytes make up the answer, and the Ollama routes give
/// the same values as OpenAI's for the same prompt.
#[test]
fn chat_and_ollama_logprobs_cover_each_token() {
    let server = Server::start(&[]);
    let messages = json!([{"role": "user", "content": "Name a colour."}]);
    let body = json!({"model": MODEL, "messages": messages, "max_tokens": 8,
        "temperature": 0, "logprobs": true, "top_logprobs": 2});
    let response = server.post("/v1/chat/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let json = response.json();
    let content = json["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap();
    let tokens = json["usage"]["completion_tokens"].as_u64().unwrap() as usize;
    assert_eq!(content.len(), tokens);
    let bytes: Vec<u8> = content
        .iter()
        .flat_map(|e| {
            e["bytes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_u64().unwrap() as u8)
        })
        .collect();
    let text = json["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(&bytes).starts_with(text.trim_end()),
        "{bytes:?} {text:?}"
    );
    for entry in content {
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2);
        // Greedy: the pick is the most likely token.
        assert_eq!(top[0]["logprob"], entry["logprob"]);
        assert!(top[0]["logprob"].as_f64() >= top[1]["logprob"].as_f64());
    }

    // Streamed, the same entries arrive spread over the chunks.
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    let (status, reader) = open_stream(
        &server.address,
        "/v1/chat/completions",
        &streamed_body.to_string(),
    );
    assert_eq!(status, 200);
    let mut streamed = Vec::new();
    for chunk in sse_chunks(reader.lines().map_while(Result::ok)) {
        if let Some(entries) = chunk["choices"][0]["logprobs"]["content"].as_array() {
            streamed.extend(entries.iter().cloned());
        }
    }
    assert_eq!(&streamed, content);

    // Ollama: the same first token and value.
    let body = json!({"model": MODEL, "messages": messages, "stream": false,
        "options": {"temperature": 0, "num_predict": 8}, "logprobs": true, "top_logprobs": 2});
    let response = server.post("/api/chat", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let ollama = response.json()["logprobs"].as_array().unwrap().clone();
    assert_eq!(ollama.len(), content.len());
    assert_eq!(ollama[0], content[0]);
}

#[test]
fn bad_logprobs_requests_are_refused() {
    let server = Server::start(&[]);
    let messages = json!([{"role": "user", "content": "Hi"}]);
    let cases = [
        (
            "/v1/chat/completions",
            json!({"messages": messages, "logprobs": true, "top_logprobs": 21}),
            "top_logprobs must be 0 to 20",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": messages, "top_logprobs": 2}),
            "needs 'logprobs'",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": messages, "logprobs": 3}),
            "true or false",
        ),
        (
            "/v1/completions",
            json!({"prompt": "Hi", "logprobs": -1}),
            "top_logprobs must be 0 to 20",
        ),
        (
            "/v1/completions",
            json!({"prompt": "Hi", "logprobs": "yes"}),
            "whole number",
        ),
        (
            "/api/generate",
            json!({"prompt": "Hi", "logprobs": true, "top_logprobs": 99}),
            "top_logprobs must be 0 to 20",
        ),
    ];
    for (path, mut body, expected) in cases {
        body["model"] = json!(MODEL);
        let response = server.post(path, &body.to_string());
        assert_eq!(response.status, 400, "{path} {body}: {}", response.body);
        assert!(
            response.body.contains(expected),
            "{path} {body}: {}",
            response.body
        );
    }
}

/// The chat answer of `body` with `fields` added.
fn chat(server: &Server, fields: Value) -> Value {
    let mut body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story."}],
        "max_tokens": 12, "temperature": 1.0});
    for (key, value) in fields.as_object().unwrap() {
        body[key] = value.clone();
    }
    let response = server.post("/v1/chat/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()
}

#[test]
fn n_choices_are_the_answers_of_consecutive_seeds() {
    let server = Server::start(&["--parallel", "3"]);
    let alone: Vec<Value> = (0..3)
        .map(|i| chat(&server, json!({"seed": 40 + i}))["choices"][0]["message"].clone())
        .collect();
    let together = chat(&server, json!({"seed": 40, "n": 3}));
    let choices = together["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    let mut completion_tokens = 0;
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], json!(i));
        assert_eq!(choice["message"], alone[i], "choice {i}");
        completion_tokens += 12 * usize::from(choice["finish_reason"] == "length");
    }
    assert_eq!(together["seed"], json!(40));
    let counted = together["usage"]["completion_tokens"].as_u64().unwrap() as usize;
    assert!(
        counted >= completion_tokens && counted <= 36,
        "{}",
        together["usage"]
    );

    // Streamed: each index's deltas make up its answer; the usage comes once.
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story."}],
        "max_tokens": 12, "temperature": 1.0, "seed": 40, "n": 3, "stream": true,
        "stream_options": {"include_usage": true}});
    let (status, reader) = open_stream(&server.address, "/v1/chat/completions", &body.to_string());
    assert_eq!(status, 200);
    let (mut texts, mut usages, mut finishes) = (vec![String::new(); 3], 0, 0);
    for chunk in sse_chunks(reader.lines().map_while(Result::ok)) {
        if chunk["usage"].is_object() {
            usages += 1;
            assert_eq!(
                chunk["usage"]["completion_tokens"].as_u64().unwrap() as usize,
                counted
            );
        }
        if let Some(choice) = chunk["choices"].get(0) {
            let i = choice["index"].as_u64().unwrap() as usize;
            texts[i].push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            finishes += usize::from(choice["finish_reason"].is_string());
        }
    }
    assert_eq!((usages, finishes), (1, 3));
    for (i, text) in texts.iter().enumerate() {
        assert_eq!(
            Some(text.as_str()),
            alone[i]["content"].as_str(),
            "streamed choice {i}"
        );
    }
    for n in [0, 17] {
        let body = json!({"model": MODEL, "prompt": "Hi", "n": n});
        let response = server.post("/v1/completions", &body.to_string());
        assert_eq!(response.status, 400, "{}", response.body);
        assert!(
            response.body.contains("n must be 1 to 16"),
            "{}",
            response.body
        );
    }
}
