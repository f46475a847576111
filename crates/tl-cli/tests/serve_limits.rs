//! `tl serve` against clients that try to exhaust it: half-sent headers and
//! bodies, declared bodies larger than the limit, more connections than it
//! takes, oversized prompts and stop lists, and one key's prompt cache seen
//! from another key. Uses the default model on the CPU.

mod common;

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::server::{request, resident_kib, Server};
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

/// Percentile `p` (0 to 100) of `values`.
fn percentile(values: &mut [Duration], p: usize) -> Duration {
    values.sort();
    values[(values.len() - 1) * p / 100]
}

/// Every fault at once, for a few seconds: half-sent headers and bodies,
/// streams dropped mid-way, bodies over the limit and garbage, and ten times
/// the queue in requests. Throughout, /health answers quickly and a stream
/// that was running keeps running; afterwards memory is back to what it was.
#[test]
fn under_load_and_faults_health_stays_fast_and_streams_go_on() {
    let server = Server::start(&[
        "--ctx",
        "256",
        "--parallel",
        "2",
        "--max-queue",
        "4",
        "--request-timeout",
        "2",
    ]);
    let address = server.address.clone();
    let warm = json!({"model": MODEL, "prompt": "Hi", "max_tokens": 8}).to_string();
    for _ in 0..3 {
        assert_eq!(server.post("/v1/completions", &warm).status, 200);
    }
    let after_warm_up = resident_kib(server.pid());
    let address_for_stream = address.clone();
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the health prober however the scope ends: a failed assertion in
    /// another thread must fail the test, not leave the prober (and the
    /// scope that waits for it) running for ever.
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let (latencies, watched) = std::thread::scope(|scope| {
        let _stop = StopOnDrop(&stop);
        let health = scope.spawn(|| {
            let mut latencies = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let r = request(&address, "GET", "/health", None, &[]);
                assert_eq!(r.status, 200);
                latencies.push(started.elapsed());
                std::thread::sleep(Duration::from_millis(20));
            }
            latencies
        });
        // The watched stream is admitted before the faults start: ten times
        // the queue in requests would otherwise get it a 429 now and then.
        let (admitted, is_admitted) = std::sync::mpsc::channel();
        let watched = scope.spawn(move || {
            let body = json!({"model": MODEL, "prompt": "1, 2, 3,", "max_tokens": 120,
                "temperature": 0, "stream": true});
            let (status, mut lines) = common::server::open_stream(
                &address_for_stream,
                "/v1/completions",
                &body.to_string(),
            );
            assert_eq!(status, 200);
            let _ = admitted.send(());
            let (mut chunks, mut longest_gap, mut last) = (0, Duration::ZERO, Instant::now());
            let mut line = String::new();
            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                if line.starts_with("data: {") {
                    chunks += 1;
                    longest_gap = longest_gap.max(last.elapsed());
                    last = Instant::now();
                }
                line.clear();
            }
            (chunks, longest_gap)
        });
        is_admitted
            .recv()
            .expect("the watched stream was not admitted");
        let faults: Vec<_> = (0..4)
            .map(|kind| {
                let address = address.clone();
                scope.spawn(move || faults_of_kind(&address, kind))
            })
            .collect();
        for fault in faults {
            fault.join().expect("a fault thread failed");
        }
        let watched = watched.join().expect("the watched stream failed");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (health.join().expect("the health prober failed"), watched)
    });
    let mut latencies = latencies;
    let p99 = percentile(&mut latencies, 99);
    assert!(
        p99 <= Duration::from_millis(100),
        "/health p99 {p99:?} over {} probes",
        latencies.len()
    );
    let (chunks, longest_gap) = watched;
    assert!(
        chunks >= 100,
        "the watched stream ended after {chunks} chunks"
    );
    assert!(
        longest_gap < Duration::from_secs(5),
        "the watched stream stalled for {longest_gap:?}"
    );
    for name in ["tl_active_sequences", "tl_queue_depth", "tl_kv_tokens"] {
        server.wait_for_metric(name, 0.0, Duration::from_secs(60));
    }
    let after = resident_kib(server.pid());
    assert!(
        after <= after_warm_up + after_warm_up / 10,
        "resident memory {after} KiB after the faults, {after_warm_up} KiB after warm-up"
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
}

/// A few seconds of one kind of fault.
fn faults_of_kind(address: &str, kind: usize) {
    let until = Instant::now() + Duration::from_secs(4);
    let mut round = 0;
    while Instant::now() < until {
        round += 1;
        match kind {
            0 => {
                let held: Vec<TcpStream> = (0..20)
                    .map(|_| half_sent(address, "POST /api/chat HTTP/1.1\r\nHost: x\r\n"))
                    .collect();
                std::thread::sleep(Duration::from_millis(500));
                drop(held);
            }
            1 => {
                let body = json!({"model": MODEL, "prompt": "Tell me a story.", "max_tokens": 40, "stream": true});
                let (_, mut lines) =
                    common::server::open_stream(address, "/v1/completions", &body.to_string());
                let mut line = String::new();
                let _ = lines.read_line(&mut line);
                // Dropped: the client hangs up mid-stream.
            }
            2 => {
                if round % 3 == 0 {
                    let head = "POST /api/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 41943040\r\n\r\n{";
                    let mut stream = half_sent(address, head);
                    let answer =
                        closed_within(&mut stream, Duration::from_secs(5)).unwrap_or_default();
                    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
                } else {
                    let body = ["{", "\u{0}"][round % 2];
                    let r = request(address, "POST", "/api/generate", Some(body), &[]);
                    assert!((400..500).contains(&r.status), "{}: {}", r.status, r.body);
                }
            }
            _ => {
                // Ten times what the queue holds, at once.
                std::thread::scope(|scope| {
                    for _ in 0..60 {
                        scope.spawn(|| {
                            let body = json!({"model": MODEL, "prompt": "Hi", "max_tokens": 4});
                            let r = request(
                                address,
                                "POST",
                                "/v1/completions",
                                Some(&body.to_string()),
                                &[],
                            );
                            assert!(
                                r.status == 200 || r.status == 429,
                                "{}: {}",
                                r.status,
                                r.body
                            );
                        });
                    }
                });
            }
        }
    }
}

/// The tiny synthetic model (Q8_0) written to `dir` as `NAME.gguf`, with
/// `change` applied to its metadata and, when `poison` holds, every Q8_0
/// block's scale a NaN.
fn write_tiny_model(
    dir: &std::path::Path,
    name: &str,
    change: impl Fn(&str, &tl_gguf::Value) -> Option<tl_gguf::Value>,
    poison: bool,
) -> std::path::PathBuf {
    let tiny = dir.join("tiny.gguf");
    let tiny_path = tiny.to_str().expect("a UTF-8 path");
    let out = common::run(&[
        "model", "synth", "--shape", "tiny", "--quant", "q8_0", "-o", tiny_path,
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let file = tl_gguf::GgufFile::open(&tiny).expect("the tiny model reads");
    let mut writer = tl_gguf::GgufWriter::new(3);
    for (key, value) in file.metadata() {
        let value = change(key, value).unwrap_or_else(|| value.clone());
        writer.set_metadata(key.clone(), value);
    }
    for info in file.tensors() {
        let mut data = file.data_of(info).to_vec();
        if poison && info.ggml_type == tl_gguf::GgmlType::Q8_0 {
            for block in data.chunks_exact_mut(34) {
                block[..2].copy_from_slice(&0x7e00u16.to_le_bytes());
            }
        }
        let data = tl_gguf::TensorData::Bytes(data);
        writer
            .add_tensor(info.name.clone(), info.dims.clone(), info.ggml_type, data)
            .expect("a well-formed tensor");
    }
    let path = dir.join(format!("{name}.gguf"));
    writer
        .write_to_path(&path)
        .expect("the hostile model is written");
    path
}

/// A hostile model served beside a good one. One whose metadata is hostile
/// (head counts that wrap the widths) stops the server at start with the
/// reason; one whose weights are all NaN (nothing to see until it runs)
/// gets an error saying so for every request naming it, while the server's memory stays put and the
/// good model goes on answering the same text.
#[test]
fn a_hostile_model_beside_a_good_one_is_refused_and_the_good_one_serves() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let wrapping = write_tiny_model(
        dir.path(),
        "wrapping",
        |key, _| match key {
            "llama.attention.head_count" => Some(tl_gguf::Value::U64((1 << 61) + 4)),
            "llama.attention.head_count_kv" => Some(tl_gguf::Value::U64((1 << 60) + 2)),
            _ => None,
        },
        false,
    );
    let default = common::default_model().to_str().expect("a UTF-8 path");
    let wrapping = wrapping.to_str().expect("a UTF-8 path");
    let mut child = common::tl()
        .args(["serve", "-m", default, "-m", wrapping, "--port", "0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tl serve starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for tl serve") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("tl serve kept running with a hostile model");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut log = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut log)
        .expect("stderr");
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("wrapping.gguf") && log.contains("head"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");

    let poisoned = write_tiny_model(dir.path(), "poisoned", |_, _| None, true);
    let poisoned = poisoned.to_str().expect("a UTF-8 path");
    let server = Server::start(&["-m", poisoned, "--ctx", "128"]);
    let good = json!({"model": MODEL, "prompt": "Hi", "max_tokens": 8, "temperature": 0});
    let good_text = || {
        let r = server.post("/v1/completions", &good.to_string());
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["choices"][0]["text"].clone()
    };
    let text_before = good_text();
    let before = resident_kib(server.pid());
    for (path, temperature) in [
        ("/v1/completions", 0.0),
        ("/api/generate", 0.8),
        ("/v1/completions", 1.0),
    ] {
        let body = json!({"model": "poisoned", "prompt": "Hi", "max_tokens": 4, "stream": false,
            "temperature": temperature, "options": {"temperature": temperature}});
        let r = server.post(path, &body.to_string());
        assert_eq!(r.status, 500, "{path}: {}", r.body);
        assert!(r.body.contains("every logit is NaN"), "{path}: {}", r.body);
        assert!(
            [200, 500].contains(&r.status),
            "{path}: {} {}",
            r.status,
            r.body
        );
    }
    assert_eq!(good_text(), text_before);
    let after = resident_kib(server.pid());
    assert!(
        after <= before + 64 * 1024,
        "resident memory {after} KiB after the hostile requests, {before} KiB before"
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
}
