//! `tl serve` against clients that try to exhaust it: half-sent headers and
//! bodies, declared bodies larger than the limit, more connections than it
//! takes, oversized prompts and stop lists, and one key's prompt cache seen
//! from another key. Uses the default model on the CPU.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::server::{request, Server};
use serde_json::json;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";

/// A connection that has sent `text` and nothing more.
fn half_sent(address: &str, text: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.write_all(text.as_bytes()).expect("send");
    stream
}

/// What the server sends on `stream` before closing it or before `limit`
/// passes with nothing more; `None` if it neither answers nor closes.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Some(String::from_utf8_lossy(&answer).into_owned()),
            Ok(n) => answer.extend_from_slice(&buffer[..n]),
            // Reset by the server: it closed the connection.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&answer).into_owned())
            }
            Err(_) if answer.is_empty() => return None,
            Err(_) => return Some(String::from_utf8_lossy(&answer).into_owned()),
        }
    }
}

#[test]
fn slow_headers_and_bodies_are_cut_off_and_health_still_answers() {
    let server = Server::start(&["--ctx", "64", "--request-timeout", "2"]);
    let address = &server.address;
    let mut slow_headers: Vec<TcpStream> = (0..50)
        .map(|_| half_sent(address, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"))
        .collect();
    let body_head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\"";
    let mut slow_body = half_sent(address, body_head);
    // Meanwhile the server answers others at once.
    let started = Instant::now();
    assert_eq!(server.get("/health").status, 200);
    assert!(started.elapsed() < Duration::from_secs(1));
    let answer = closed_within(&mut slow_body, Duration::from_secs(10)).expect("a 408");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    for stream in &mut slow_headers {
        assert!(
            closed_within(stream, Duration::from_secs(10)).is_some(),
            "a connection sending half its headers stays open"
        );
    }
}

#[test]
fn a_body_declared_over_the_limit_is_refused_at_once() {
    let server = Server::start(&["--ctx", "64"]);
    let head =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000000\r\n\r\n";
    let mut stream = half_sent(&server.address, head);
    let answer = closed_within(&mut stream, Duration::from_secs(10)).expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[test]
fn connections_beyond_the_limit_wait_for_a_free_one() {
    let server = Server::start(&["--ctx", "64", "--max-connections", "4"]);
    let held: Vec<TcpStream> = (0..4)
        .map(|_| half_sent(&server.address, "GET /health HTTP/1.1\r\n"))
        .collect();
    // The fifth is accepted by the kernel but not served while four are open.
    let mut fifth = half_sent(
        &server.address,
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(closed_within(&mut fifth, Duration::from_millis(500)).is_none());
    drop(held);
    let answer = closed_within(&mut fifth, Duration::from_secs(10)).expect("served");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn prompts_that_cannot_fit_and_long_stop_lists_are_refused_before_work() {
    let server = Server::start(&["--ctx", "64"]);
    let huge = "word ".repeat(400_000);
    let started = Instant::now();
    let r = server.post(
        "/v1/completions",
        &json!({"model": MODEL, "prompt": huge}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("more than a context"), "{}", r.body);
    let r = server.post(
        "/tokenize",
        &json!({"content": "word ".repeat(400_000)}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(started.elapsed() < Duration::from_secs(5));
    let stops: Vec<String> = (0..5).map(|i| format!("s{i}")).collect();
    let r = server.post(
        "/v1/completions",
        &json!({"model": MODEL, "prompt": "hi", "stop": stops}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("at most 4 stop strings"), "{}", r.body);
    let long = json!({"model": MODEL, "prompt": "hi", "stream": false,
        "options": {"stop": ["x".repeat(300)]}});
    let r = server.post("/api/generate", &long.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    let show = server.post("/api/show", &json!({"model": MODEL}).to_string());
    let modelfile = show.json()["modelfile"].as_str().unwrap_or("").to_owned();
    assert_eq!(modelfile, format!("FROM {MODEL}.gguf\n"), "no server path");
}

#[test]
fn one_keys_prompt_cache_is_invisible_to_another() {
    let server = Server::start_with_env(
        &["--ctx", "256", "--prompt-cache", "--parallel", "1"],
        &[("TL_API_KEY", "alpha,beta")],
    );
    let ask = |key: &str| {
        let body = json!({
            "model": MODEL, "max_tokens": 2, "temperature": 0,
            "messages": [{"role": "user", "content": "The secret word is swordfish. Say hi."}],
        });
        let r = request(
            &server.address,
            "POST",
            "/v1/chat/completions",
            Some(&body.to_string()),
            &[("Authorization", &format!("Bearer {key}"))],
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .expect("cached_tokens")
    };
    assert_eq!(ask("alpha"), 0);
    assert!(ask("alpha") > 0, "the same key reuses its cache");
    assert_eq!(ask("beta"), 0, "another key does not see it");
    assert_eq!(
        ask("alpha"),
        0,
        "and beta's request emptied it for alpha too"
    );
}
