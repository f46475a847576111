//! The routes and habits clients of both APIs expect beyond generation:
//! CORS preflights, `null` for optional fields, OpenAI's routes without
//! `/v1`, `keep_alive` and `/api/ps`, the port bound before the model
//! loads, a last event for streams open at shutdown, and the bounds of the
//! model-management routes (`/api/create`, `/api/copy`, `/api/delete`,
//! `/api/pull`) against hostile input. The official `ollama` client drives
//! the same routes in `serve_python_clients.rs`.

mod common;

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::server::{open_stream, request, Server};
use serde_json::{json, Value};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";
/// A prompt the model continues for as long as it is allowed to.
const COUNTING: &str = "1, 2, 3, 4, 5, 6, 7, 8,";

/// A models folder of the test's own (`TL_CACHE_DIR`), holding a copy of
/// the default model named `inside.gguf` (a link would be the same file
/// as the default model, which the server refuses).
struct Cache {
    dir: tempfile::TempDir,
}

impl Cache {
    fn new() -> Cache {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("models")).unwrap();
        Cache { dir }
    }

    fn models(&self) -> PathBuf {
        self.dir.path().join("models")
    }

    /// A copy of the default model at `path`.
    fn copy_model(&self, path: &Path) -> String {
        std::fs::copy(common::default_model(), path).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn start(&self, args: &[&str]) -> Server {
        let models = self.models();
        Server::start_with_env(args, &[("TL_CACHE_DIR", models.to_str().unwrap())])
    }
}

fn header_of<'a>(response: &'a common::server::Response, name: &str) -> Option<&'a str> {
    response.header(name)
}

#[test]
fn cors_is_off_by_default_and_answers_preflights_when_on() {
    let preflight = [
        ("Origin", "http://localhost:3000"),
        ("Access-Control-Request-Method", "POST"),
        (
            "Access-Control-Request-Headers",
            "authorization, content-type",
        ),
    ];
    let off = Server::start(&["--ctx", "64"]);
    let r = request(
        &off.address,
        "OPTIONS",
        "/v1/chat/completions",
        None,
        &preflight,
    );
    assert_eq!(header_of(&r, "access-control-allow-origin"), None, "{r:?}");
    drop(off);

    let on = Server::start(&[
        "--ctx",
        "64",
        "--api-key",
        "secret",
        "--cors",
        "http://localhost:3000",
    ]);
    // The preflight carries no key, and is answered all the same.
    let r = request(
        &on.address,
        "OPTIONS",
        "/v1/chat/completions",
        None,
        &preflight,
    );
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(
        header_of(&r, "access-control-allow-origin"),
        Some("http://localhost:3000")
    );
    let methods = header_of(&r, "access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let headers = header_of(&r, "access-control-allow-headers").unwrap_or_default();
    assert!(headers.contains("authorization"), "{headers}");
    // Answers, errors included, carry the header for the allowed origin...
    let origin = ("Origin", "http://localhost:3000");
    let auth = ("Authorization", "Bearer secret");
    let r = request(&on.address, "GET", "/v1/models", None, &[origin, auth]);
    assert_eq!(r.status, 200);
    assert_eq!(
        header_of(&r, "access-control-allow-origin"),
        Some("http://localhost:3000")
    );
    let r = request(&on.address, "GET", "/v1/models", None, &[origin]);
    assert_eq!(r.status, 401);
    assert!(header_of(&r, "access-control-allow-origin").is_some());
    // ...and nothing for another origin.
    let evil = [
        ("Origin", "http://evil.example"),
        preflight[1],
        preflight[2],
    ];
    let r = request(&on.address, "OPTIONS", "/v1/chat/completions", None, &evil);
    assert_eq!(header_of(&r, "access-control-allow-origin"), None, "{r:?}");

    let model = common::default_model().to_str().unwrap();
    let out = common::run(&[
        "serve",
        "-m",
        model,
        "--cors",
        "localhost:3000",
        "--port",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(common::stderr(&out).contains("--cors takes an origin"));
}

/// Every request type with `null` for each optional field: each means the
/// field's default, as if it were left out.
#[test]
fn null_means_the_default_for_every_optional_field() {
    let server = Server::start(&["--ctx", "96"]);
    let openai_sampling = json!({
        "max_tokens": 4, "max_completion_tokens": null, "temperature": null, "top_p": null,
        "top_k": null, "min_p": null, "presence_penalty": null, "frequency_penalty": null,
        "repeat_penalty": null, "seed": null, "stop": null, "n": null, "stream": null,
        "stream_options": null, "user": null, "logprobs": null, "tools": null,
    });
    let mut chat = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi", "name": null}, {"role": "assistant", "content": null}, {"role": "user", "content": "Hi"}],
    });
    let mut completion = json!({"model": MODEL, "prompt": COUNTING});
    for body in [&mut chat, &mut completion] {
        body.as_object_mut()
            .unwrap()
            .extend(openai_sampling.as_object().unwrap().clone());
    }
    let ollama_options = json!({
        "num_ctx": null, "num_predict": 4, "seed": null, "temperature": null, "top_k": null,
        "top_p": null, "min_p": null, "repeat_penalty": null, "repeat_last_n": null,
        "presence_penalty": null, "frequency_penalty": null, "stop": null,
    });
    let cases = [
        ("/v1/chat/completions", chat),
        ("/v1/completions", completion),
        (
            "/api/chat",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "stream": null, "options": ollama_options, "keep_alive": null, "format": null}),
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": "Hi", "system": null, "raw": null, "stream": false, "options": ollama_options, "keep_alive": null}),
        ),
        (
            "/api/chat",
            json!({"model": MODEL, "messages": null, "stream": false, "options": null}),
        ),
        (
            "/api/generate",
            json!({"model": MODEL, "prompt": null, "stream": false}),
        ),
        (
            "/v1/embeddings",
            json!({"model": MODEL, "input": "Hi", "encoding_format": null, "dimensions": null, "user": null}),
        ),
        (
            "/api/embed",
            json!({"model": MODEL, "input": "Hi", "truncate": null, "dimensions": null, "keep_alive": null, "options": null}),
        ),
        (
            "/tokenize",
            json!({"content": "Hi", "model": null, "add_special": null, "parse_special": null}),
        ),
        ("/detokenize", json!({"tokens": [1], "model": null})),
        ("/api/show", json!({"model": MODEL, "verbose": null})),
    ];
    for (path, body) in cases {
        let r = server.post(path, &body.to_string());
        assert_eq!(r.status, 200, "{path} {body}: {}", r.body);
    }
}

#[test]
fn openai_routes_answer_without_v1() {
    let server = Server::start(&["--ctx", "64"]);
    let chat = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0});
    let with = server
        .post("/v1/chat/completions", &chat.to_string())
        .json();
    let without = server.post("/chat/completions", &chat.to_string()).json();
    assert_eq!(without["object"], "chat.completion");
    assert_eq!(
        with["choices"][0]["message"],
        without["choices"][0]["message"]
    );
    let completion = json!({"model": MODEL, "prompt": COUNTING, "max_tokens": 2, "temperature": 0});
    let r = server.post("/completions", &completion.to_string());
    assert_eq!(r.json()["object"], "text_completion", "{}", r.body);
    assert_eq!(server.get("/models").json()["data"][0]["id"], MODEL);
    assert_eq!(server.get(&format!("/models/{MODEL}")).json()["id"], MODEL);
    let r = server.post(
        "/embeddings",
        &json!({"model": MODEL, "input": "Hi"}).to_string(),
    );
    assert_eq!(r.json()["object"], "list", "{}", r.body);
    let root = server.get("/");
    assert_eq!(root.status, 200);
    assert!(root.body.contains("is running"), "{}", root.body);
}

/// `/api/ps`' models, by name.
fn loaded(server: &Server) -> Vec<Value> {
    let ps = server.get("/api/ps");
    assert_eq!(ps.status, 200, "{}", ps.body);
    ps.json()["models"].as_array().cloned().unwrap_or_default()
}

#[test]
fn keep_alive_zero_unloads_the_model_after_the_request() {
    let server = Server::start(&["--ctx", "64"]);
    let ps = loaded(&server);
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0]["name"], MODEL);
    assert_eq!(ps[0]["size_vram"], 0);
    assert!(ps[0]["size"].as_u64() > Some(98_000_000));
    assert_eq!(ps[0]["digest"].as_str().map(str::len), Some(64));
    assert!(ps[0]["expires_at"].as_str().unwrap().starts_with("9999"));

    let generate = |keep_alive: Value| {
        let body = json!({"model": MODEL, "prompt": COUNTING, "raw": true, "stream": false,
            "options": {"num_predict": 2, "temperature": 0}, "keep_alive": keep_alive});
        let r = server.post("/api/generate", &body.to_string());
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["response"].as_str().unwrap().to_owned()
    };
    let first = generate(json!(0));
    assert!(loaded(&server).is_empty(), "keep_alive 0 left it loaded");
    assert_eq!(server.metric("tl_models_loaded"), 0.0);
    // The next request loads it again, and answers the same.
    assert_eq!(generate(json!("5m")), first);
    let ps = loaded(&server);
    assert_eq!(ps.len(), 1);
    let expires = ps[0]["expires_at"].as_str().unwrap();
    assert!(!expires.starts_with("9999"), "{expires}");
    // A request without a prompt only sets the keep-alive: 0 unloads.
    let body = json!({"model": MODEL, "keep_alive": 0, "stream": false});
    let r = server.post("/api/generate", &body.to_string()).json();
    assert_eq!(r["done_reason"], "unload");
    let start = Instant::now();
    while !loaded(&server).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "not unloaded");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bad = json!({"model": MODEL, "prompt": "x", "keep_alive": "5 parsecs"});
    let r = server.post("/api/generate", &bad.to_string());
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("keep_alive"));
}

#[test]
fn a_port_in_use_is_reported_before_the_model_loads() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    // A broken model file: had it been read first, its error would show.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.gguf");
    std::fs::write(&broken, b"not a gguf file at all").unwrap();
    let started = Instant::now();
    let out = common::run(&[
        "serve",
        "-m",
        broken.to_str().unwrap(),
        "--port",
        &port,
        "--device",
        "cpu",
    ]);
    let stderr = common::stderr(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    assert!(!stderr.contains("broken.gguf"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Reads a stream to its end on a thread of its own (so the server never
/// waits for the test to read), returning its lines.
fn drain(mut reader: Box<dyn BufRead + Send>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = reader.read_to_string(&mut text);
        text.lines().map(str::to_owned).collect()
    })
}

#[test]
fn requests_open_at_shutdown_get_a_last_event() {
    let mut server = Server::start(&["--ctx", "4096"]);
    // Greedy counting goes on for thousands of tokens.
    let long = |extra: Value| {
        let mut body = json!({"model": MODEL, "stream": true});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body.to_string()
    };
    let sse = long(json!({"prompt": COUNTING, "max_tokens": 4000, "temperature": 0}));
    let (status, mut openai) = open_stream(&server.address, "/v1/completions", &sse);
    assert_eq!(status, 200);
    let options = json!({"num_predict": 4000, "temperature": 0});
    let ndjson = long(json!({"prompt": COUNTING, "raw": true, "options": options.clone()}));
    let (status, mut ollama) = open_stream(&server.address, "/api/generate", &ndjson);
    assert_eq!(status, 200);
    let mut line = String::new();
    openai.read_line(&mut line).unwrap();
    ollama.read_line(&mut line).unwrap();
    let (openai, ollama) = (drain(openai), drain(ollama));
    // A request answered whole gets an error rather than a cut connection.
    let address = server.address.clone();
    let whole = json!({"model": MODEL, "prompt": COUNTING, "raw": true, "stream": false, "options": options});
    let whole = std::thread::spawn(move || {
        request(
            &address,
            "POST",
            "/api/generate",
            Some(&whole.to_string()),
            &[],
        )
    });
    server.wait_for_metric("tl_active_sequences", 3.0, Duration::from_secs(30));
    server.signal("TERM");
    assert!(
        server.exits_within(Duration::from_secs(10)),
        "{}",
        server.log()
    );

    let openai = openai.join().unwrap();
    let data: Vec<&str> = openai
        .iter()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{openai:?}");
    let error: Value = serde_json::from_str(data[data.len() - 2]).unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down"),
        "{error}"
    );
    let ollama = ollama.join().unwrap();
    let last: Value = serde_json::from_str(ollama.last().unwrap()).unwrap();
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["done_reason"], "shutdown");
    let whole = whole.join().unwrap();
    assert_eq!(whole.status, 503, "{}", whole.body);
    assert!(whole.body.contains("shutting down"), "{}", whole.body);
}

/// A create request's status and error text.
fn create(server: &Server, body: Value) -> (u16, String) {
    let r = server.post("/api/create", &body.to_string());
    let error = match r.status {
        200 => String::new(),
        _ => r.json()["error"].as_str().unwrap_or_default().to_owned(),
    };
    (r.status, error)
}

fn names(server: &Server) -> Vec<String> {
    let tags = server.get("/api/tags").json();
    tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn model_management_bounds_hostile_requests_and_persists() {
    let cache = Cache::new();
    let inside = cache.copy_model(&cache.models().join("inside.gguf"));
    let outside = cache.copy_model(&cache.dir.path().join("outside.gguf"));
    let args = ["--ctx", "64", "-m", &inside, "-m", &outside];
    let server = cache.start(&args);

    // Names that could be paths, and other bad names.
    let long_name = "a".repeat(101);
    for name in [
        "../evil",
        "a/b",
        ".hidden",
        "a..b",
        "x y",
        long_name.as_str(),
        "",
    ] {
        let (status, error) = create(&server, json!({"model": name, "from": MODEL}));
        assert_eq!(status, 400, "{name:?}: {error}");
    }
    let cases = [
        (
            json!({"model": "m", "from": MODEL, "system": "x".repeat(40_000)}),
            400,
            "system prompt",
        ),
        (
            json!({"model": "m", "from": MODEL, "parameters": {"mirostat": 1}}),
            400,
            "mirostat",
        ),
        (
            json!({"model": "m", "from": MODEL, "parameters": {"temperature": "hot"}}),
            400,
            "parameters",
        ),
        (
            json!({"model": "m", "from": MODEL, "parameters": {"top_p": 1e30}}),
            400,
            "top_p",
        ),
        (
            json!({"model": "m", "from": MODEL, "parameters": {"stop": vec!["s"; 17]}}),
            400,
            "stop",
        ),
        (
            json!({"model": "m", "from": MODEL, "parameters": {"stop": ["x".repeat(300)]}}),
            400,
            "stop",
        ),
        (
            json!({"model": "m", "from": "no-such-model"}),
            404,
            "no-such-model",
        ),
        (json!({"model": "m"}), 400, "'from'"),
        (
            json!({"model": "m", "from": MODEL, "files": {"a.gguf": "sha256:00"}}),
            400,
            "'files'",
        ),
        (
            json!({"model": MODEL, "from": "inside"}),
            409,
            "served model",
        ),
    ];
    for (body, status, needle) in cases {
        let (got, error) = create(&server, body.clone());
        assert_eq!(got, status, "{body}: {error}");
        assert!(error.contains(needle), "{body}: {error}");
    }
    // A huge num_ctx is cut to the server's context when used.
    let (status, error) = create(
        &server,
        json!({"model": "wide", "from": MODEL, "system": "Be brief.",
               "parameters": {"num_ctx": 1u64 << 40, "num_predict": 2, "temperature": 0}}),
    );
    assert_eq!(status, 200, "{error}");
    let chat =
        json!({"model": "wide", "messages": [{"role": "user", "content": "Hi"}], "stream": false});
    let r = server.post("/api/chat", &chat.to_string());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["eval_count"], 2);
    assert_eq!(r.json()["model"], "wide");

    let copy = |source: &str, destination: &str| {
        let body = json!({"source": source, "destination": destination});
        server.post("/api/copy", &body.to_string()).status
    };
    assert_eq!(copy("wide", "../../etc/passwd"), 400);
    assert_eq!(copy("wide", "inside"), 409);
    assert_eq!(copy("nothing", "x"), 404);
    assert_eq!(copy("wide", "narrow:latest"), 200);

    let delete = |name: &str| {
        let body = json!({"model": name}).to_string();
        let r = request(&server.address, "DELETE", "/api/delete", Some(&body), &[]);
        (r.status, r.body)
    };
    // The default model, a file outside the models folder, a missing name.
    assert_eq!(delete(MODEL).0, 409, "{:?}", delete(MODEL));
    assert_eq!(delete("outside").0, 403);
    assert!(Path::new(&outside).exists());
    assert_eq!(delete("../inside").0, 404);
    // A file in the models folder goes, and the names made from it.
    let (status, error) = create(&server, json!({"model": "of-inside", "from": "inside"}));
    assert_eq!(status, 200, "{error}");
    assert_eq!(delete("inside").0, 200);
    assert!(!Path::new(&inside).exists());
    assert_eq!(delete("narrow").0, 200);
    let listed = names(&server);
    assert_eq!(listed, [MODEL, "outside", "wide"], "{listed:?}");

    let pull = |name: &str| server.post("/api/pull", &json!({"model": name}).to_string());
    let r = pull("no-such-model");
    assert_eq!(r.status, 404);
    assert!(r.json()["error"].as_str().unwrap().contains("smollm2"));
    assert_eq!(pull("../smollm2").status, 404);

    // What create made is there after a restart.
    drop(server);
    let server = cache.start(&["--ctx", "64", "-m", &outside]);
    assert_eq!(names(&server), [MODEL, "outside", "wide"]);
    let show = server
        .post("/api/show", &json!({"model": "wide"}).to_string())
        .json();
    assert_eq!(show["system"], "Be brief.");
    assert!(show["parameters"]
        .as_str()
        .unwrap()
        .contains("num_predict 2"));
}
