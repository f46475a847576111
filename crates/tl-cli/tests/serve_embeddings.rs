//! `tl serve`'s embedding routes end to end, through the real binary and
//! plain HTTP: every hostile batch is a 4xx naming the problem in its API's
//! shape, an abandoned batch is cancelled, and generation goes on beside a
//! batch. (The official clients' view is in `serve_python_clients`.) Uses
//! the default model on the CPU.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::server::Server;
use serde_json::{json, Value};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";

/// A body for `path` with `input` (or, for the older Ollama route, `prompt`)
/// and `extra` fields.
fn body(path: &str, input: Value, extra: Value) -> String {
    let key = if path == "/api/embeddings" {
        "prompt"
    } else {
        "input"
    };
    let mut body = json!({"model": MODEL});
    body[key] = input;
    if let Value::Object(fields) = extra {
        for (k, v) in fields {
            body[k] = v;
        }
    }
    body.to_string()
}

/// The error message of a response in either API's shape.
fn message(json: &Value) -> String {
    match &json["error"] {
        Value::String(text) => text.clone(),
        other => other["message"].as_str().unwrap_or_default().to_owned(),
    }
}

#[test]
fn hostile_batches_are_refused_with_a_reason() {
    let server = Server::start(&["--ctx", "32"]);
    let long = "word ".repeat(100);
    let many: Vec<&str> = vec!["a"; 2049];
    let huge_id = json!([1, 1u64 << 40]);
    let cases: Vec<(&str, Value, Value, &str)> = vec![
        ("/v1/embeddings", json!([]), json!({}), "'input' is empty"),
        (
            "/v1/embeddings",
            json!(""),
            json!({}),
            "input 0: the text is empty",
        ),
        (
            "/v1/embeddings",
            json!(["a", ""]),
            json!({}),
            "input 1: the text is empty",
        ),
        (
            "/v1/embeddings",
            json!([[]]),
            json!({}),
            "token ids is empty",
        ),
        (
            "/v1/embeddings",
            json!([5, -1]),
            json!({}),
            "token id -1 is outside",
        ),
        (
            "/v1/embeddings",
            huge_id,
            json!({}),
            "outside the vocabulary",
        ),
        ("/v1/embeddings", json!(null), json!({}), "`input` takes"),
        (
            "/v1/embeddings",
            json!({"a": 1}),
            json!({}),
            "`input` takes",
        ),
        (
            "/v1/embeddings",
            json!(long),
            json!({}),
            "more than the context of 32",
        ),
        (
            "/v1/embeddings",
            json!(many),
            json!({}),
            "at most 2048 inputs",
        ),
        (
            "/v1/embeddings",
            json!("a"),
            json!({"dimensions": 0}),
            "dimensions must be",
        ),
        (
            "/v1/embeddings",
            json!("a"),
            json!({"dimensions": 577}),
            "dimensions must be",
        ),
        (
            "/v1/embeddings",
            json!("a"),
            json!({"encoding_format": "hex"}),
            "encoding_format",
        ),
        ("/api/embed", json!([]), json!({}), "'input' is empty"),
        (
            "/api/embed",
            json!(long),
            json!({}),
            "more than the context of 32",
        ),
        (
            "/api/embed",
            json!([1, 2]),
            json!({}),
            "`input` takes a string or a list of strings",
        ),
        ("/api/embeddings", json!(""), json!({}), "the text is empty"),
    ];
    for (path, input, extra, expected) in cases {
        let response = server.post(path, &body(path, input.clone(), extra));
        let text = message(&response.json());
        assert_eq!(response.status, 400, "{path} {input}: {}", response.body);
        assert!(text.contains(expected), "{path} {input}: {text}");
        assert!(!text.contains("untagged"), "{path}: {text}");
    }
    let unknown = server.post(
        "/v1/embeddings",
        &json!({"model": "nope", "input": "a"}).to_string(),
    );
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // Asked for, a long input is cut to the context; the server still
    // answers everything else.
    let cut = server.post(
        "/api/embed",
        &body("/api/embed", json!(long), json!({"truncate": true})),
    );
    assert_eq!(cut.status, 200, "{}", cut.body);
    assert_eq!(cut.json()["prompt_eval_count"], 32);
    let ids = server.post(
        "/v1/embeddings",
        &body("/v1/embeddings", json!([[19556, 905], [64]]), json!({})),
    );
    assert_eq!(ids.status, 200, "{}", ids.body);
    let ids = ids.json();
    assert_eq!(ids["usage"]["prompt_tokens"], 3);
    let hello: Vec<f32> = ids["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    // "Hello world" as its token ids gives llama.cpp's vector of the text.
    let reference = common::reference_embedding("smollm2", "Hello world");
    assert!(common::cosine_distance(&hello, &reference) < 1e-4);
    assert_eq!(server.get("/health").status, 200);
}

#[test]
fn an_abandoned_batch_is_cancelled_and_chats_go_on_beside_one() {
    let server = Server::start(&["--ctx", "64", "--prefill-chunk", "8"]);
    let texts: Vec<String> = (0..400)
        .map(|i| format!("item number {i} of a long list"))
        .collect();
    let batch = body("/v1/embeddings", json!(texts), json!({}));
    let mut abandoned = TcpStream::connect(&server.address).unwrap();
    write!(
        abandoned,
        "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{batch}",
        batch.len()
    )
    .unwrap();
    // Once it runs, a chat is answered beside it, and hanging up cancels it.
    let start = std::time::Instant::now();
    while server.metric("tl_prompt_tokens_total") == 0.0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the batch never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let chat = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0});
    let answered = server.post("/v1/chat/completions", &chat.to_string());
    assert_eq!(answered.status, 200, "{}", answered.body);
    drop(abandoned);
    let cancelled = "tl_requests_total{outcome=\"cancelled\"}";
    server.wait_for_metric(cancelled, 1.0, Duration::from_secs(30));
    server.wait_for_metric("tl_queue_depth", 0.0, Duration::from_secs(5));
    let after = server.post(
        "/api/embed",
        &body("/api/embed", json!(["a", "b"]), json!({})),
    );
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.json()["embeddings"].as_array().map(Vec::len), Some(2));
}
