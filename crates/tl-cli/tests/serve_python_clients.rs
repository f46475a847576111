//! The official `openai` and `ollama` Python clients against `tl serve`:
//! chat, streaming chat, completions and generate, embeddings (checked
//! against llama.cpp's, LangChain's `OpenAIEmbeddings` too), model listing,
//! a missing model's error, structured output (JSON schemas through both
//! clients and LangChain's `with_structured_output`, checked with
//! `jsonschema`), and Ollama's model management (`ps`, `pull`, `create`,
//! `copy`, `delete`, `keep_alive`), and tool calling (both clients, and
//! LangChain's `bind_tools` agent loop and function-calling structured
//! output, on a random-weight model given Qwen2.5's template). The clients
//! are installed from pip once
//! into the cache folder (pinned versions, so the test means the same thing
//! every run).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::server::Server;
use serde_json::{json, Value};

const CLIENTS: [&str; 4] = [
    "openai==3.54.0",
    "ollama==0.6.3",
    "langchain-openai==1.6.6",
    "jsonschema==4.26.0",
];

/// Sampled JSON-schema answers the structured-output test asks for (the
/// full acceptance run of 100 is `scripts/json_mode_acceptance.py`).
const SAMPLED_REQUESTS: &str = "10";

/// Where the clients are installed: `$TL_CACHE_DIR/python-clients`, else the
/// platform cache folder's `tensorlogic/python-clients`.
fn clients_dir() -> PathBuf {
    let base = std::env::var_os("TL_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|c| c.join("tensorlogic"))
        })
        .expect("no cache folder: set TL_CACHE_DIR or HOME");
    base.join("python-clients").join(CLIENTS.join("-"))
}

fn install_clients() -> PathBuf {
    let dir = clients_dir();
    let marker = dir.join(".installed");
    if marker.is_file() {
        return dir;
    }
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(&dir)
        .args(CLIENTS)
        .output()
        .expect("cannot run python3 -m pip");
    assert!(
        out.status.success(),
        "pip could not install {CLIENTS:?} into {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, "").expect("write the install marker");
    dir
}

#[test]
fn official_python_clients_work_unchanged() {
    let clients = install_clients();
    let server = Server::start(&["--ctx", "512"]);
    let results = run_script("python_clients.py", (&server, DEFAULT_MODEL), &clients, &[]);
    let text = |key: &str| {
        results[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key}: {results}"))
            .to_owned()
    };

    // One greedy answer to the same question, whichever client and mode asked.
    let answer = text("openai_chat");
    assert!(!answer.is_empty());
    for key in [
        "openai_chat_stream",
        "ollama_chat",
        "ollama_chat_stream",
        "ollama_generate",
        "ollama_generate_stream",
        "openai_without_v1",
    ] {
        assert_eq!(text(key), answer, "{key}");
    }
    // Four tokens: ' ', '5', ',', ' '.
    assert_eq!(text("openai_completion"), " 5, ");
    assert_eq!(text("openai_completion_stream"), " 5, ");
    let usage = results["openai_chat_usage"].as_array().unwrap();
    assert!(usage[0].as_u64() > Some(0) && usage[1].as_u64() <= Some(8));
    assert_eq!(results["openai_models"][0], "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(
        results["openai_models_without_v1"],
        results["openai_models"]
    );
    assert_eq!(results["ollama_list"][0], "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(results["ollama_show_family"], "llama");
    assert_eq!(results["openai_missing_model"], "NotFoundError");
    assert_eq!(results["ollama_missing_model"], 404);
    // Four greedy tokens' log-probabilities, each the best of its step, the
    // same through both clients.
    let logprobs = results["openai_logprobs"].as_array().unwrap();
    assert_eq!(logprobs.len(), 4, "{logprobs:?}");
    for entry in logprobs {
        let (own, top) = (entry[1].as_f64().unwrap(), entry[2].as_array().unwrap());
        assert!(
            own <= 0.0 && top.len() == 2 && top[0].as_f64() == Some(own),
            "{entry}"
        );
    }
    assert_eq!(results["ollama_logprobs"], results["openai_logprobs"]);
    let choices = results["openai_choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{choices:?}");
    assert_eq!((&choices[0][0], &choices[1][0]), (&json!(0), &json!(1)));
    check_embeddings(&results);
}

/// The name the default model is served under.
const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1";

/// Runs `script` (in `tests/data`) against `server`'s `model` with `extra`
/// arguments after the URL and model name, returning the JSON it printed.
fn run_script(
    script: &str,
    (server, model): (&Server, &str),
    clients: &std::path::Path,
    extra: &[&str],
) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(script);
    let out = Command::new("python3")
        .arg(&script)
        .arg(server.url())
        .arg(model)
        .args(extra)
        .env("PYTHONPATH", clients)
        .output()
        .expect("cannot run python3");
    assert!(
        out.status.success(),
        "{} failed:\n{}\nserver log:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    serde_json::from_slice(&out.stdout).expect("the script prints JSON")
}

#[test]
fn ollama_client_manages_models() {
    let clients = install_clients();
    // A models folder of the test's own, holding the default model (a link,
    // so `pull` finds it and fetches nothing) and a copy it may delete.
    let cache = tempfile::tempdir().unwrap();
    let default = common::default_model();
    let cached = cache.path().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if std::fs::hard_link(default, &cached).is_err() {
        std::fs::copy(default, &cached).unwrap();
    }
    let spare = cache.path().join("spare.gguf");
    std::fs::copy(default, &spare).unwrap();
    let server = Server::start_with_env(
        &["--ctx", "256", "-m", spare.to_str().unwrap()],
        &[("TL_CACHE_DIR", cache.path().to_str().unwrap())],
    );
    let results = run_script("ollama_manage.py", (&server, DEFAULT_MODEL), &clients, &[]);
    let model = "SmolLM2-135M-Instruct.Q4_1";
    assert_eq!(results["ps"], serde_json::json!([[model, 0, true, 64]]));
    let statuses = results["pull_stream"].as_array().unwrap();
    assert!(
        statuses.iter().any(|s| s == "verifying sha256 digest"),
        "{statuses:?}"
    );
    assert_eq!(statuses.last().unwrap(), "success");
    assert_eq!(results["pull"], "success");
    assert_eq!(results["pull_unknown"], 404);
    assert_eq!(results["create"], "success");
    assert_eq!(results["create_bad_name"], 400);
    let modelfile = results["show_modelfile"].as_str().unwrap();
    assert!(
        modelfile.contains("SYSTEM \"\"\"You are Mario.\"\"\""),
        "{modelfile}"
    );
    assert!(results["show_parameters"]
        .as_str()
        .unwrap()
        .contains("num_predict 6"));
    assert_eq!(results["mario_eval_count"], 6);
    assert_eq!(results["mario_model"], "mario");
    assert_eq!(results["copy"], "success");
    assert_eq!(
        results["tags"],
        serde_json::json!([model, "spare", "mario", "luigi"])
    );
    let digests = &results["digests"];
    assert_eq!(digests[model], common::DEFAULT_MODEL_SHA256);
    assert_eq!(digests["mario"], digests[model]);
    assert_eq!(results["delete_luigi"], "success");
    assert_eq!(results["delete_default"], 409);
    assert_eq!(results["delete_spare"], "success");
    assert!(!spare.exists());
    assert_eq!(results["tags_after"], serde_json::json!([model, "mario"]));
    assert_eq!(results["unload"], "unload");
    assert_eq!(results["ps_after_unload"], serde_json::json!([]));
    let kept = std::fs::read_to_string(cache.path().join("presets.json")).unwrap();
    assert!(
        kept.contains("\"mario\"") && !kept.contains("luigi"),
        "{kept}"
    );
}

/// The vectors every embedding route gave for "Hello world" and "The
/// capital of France is Paris.", against llama.cpp's.
fn check_embeddings(results: &Value) {
    let vector = |v: &Value| -> Vec<f32> {
        v.as_array()
            .unwrap_or_else(|| panic!("not a vector: {v}"))
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let hello = common::reference_embedding("smollm2", "Hello world");
    let paris = common::reference_embedding("smollm2", "The capital of France is Paris.");
    let close = |got: &[f32], want: &[f32], what: &str| {
        let distance = common::cosine_distance(got, want);
        assert!(distance < 1e-4, "{what}: {distance:e} from llama.cpp");
    };
    let batch = results["openai_embeddings"].as_array().unwrap();
    assert_eq!(batch.len(), 2);
    close(&vector(&batch[0]), &hello, "openai (base64) [0]");
    close(&vector(&batch[1]), &paris, "openai (base64) [1]");
    close(
        &vector(&results["openai_embedding_float"]),
        &hello,
        "openai (float)",
    );
    assert_eq!(results["openai_embedding_tokens"], 2);
    let ollama = results["ollama_embed"].as_array().unwrap();
    assert_eq!(ollama.len(), 2);
    close(&vector(&ollama[0]), &hello, "ollama embed [0]");
    close(&vector(&ollama[1]), &paris, "ollama embed [1]");
    close(
        &vector(&results["ollama_embeddings"]),
        &hello,
        "ollama embeddings",
    );
    let documents = results["langchain_documents"].as_array().unwrap();
    assert_eq!(documents.len(), 2);
    close(&vector(&documents[0]), &hello, "langchain documents [0]");
    close(&vector(&documents[1]), &paris, "langchain documents [1]");
    close(
        &vector(&results["langchain_query"]),
        &hello,
        "langchain query",
    );
    // 64 dimensions: the first 64 of the full vector, unit length again.
    let short = vector(&results["openai_embedding_64"]);
    assert_eq!(short.len(), 64);
    close(&short, &hello[..64], "openai dimensions=64");
    assert_eq!(results["openai_empty_embedding"], "BadRequestError");
}

/// Every structured answer ends with "stop" and validates against its
/// schema, sampled at temperature 1.0 too; bad formats are 400s.
#[test]
fn structured_output_through_official_clients_and_langchain() {
    let clients = install_clients();
    let server = Server::start(&["--ctx", "1024"]);
    let results = run_script(
        "structured_output.py",
        (&server, DEFAULT_MODEL),
        &clients,
        &[SAMPLED_REQUESTS],
    );
    let sampled = results["openai_sampled"]
        .as_array()
        .expect("sampled results");
    assert_eq!(sampled.len().to_string(), SAMPLED_REQUESTS);
    for (seed, result) in sampled.iter().enumerate() {
        assert_eq!(result[0], "stop", "seed {seed}: {result}");
        assert_eq!(result[1], "valid", "seed {seed}: {result}");
    }
    assert_eq!(results["openai_stream"], "valid", "{results}");
    for key in [
        "openai_completion_json_object",
        "ollama_chat_schema",
        "ollama_generate_json",
    ] {
        assert_eq!(results[key][0], "stop", "{key}: {results}");
        assert_eq!(results[key][1], "valid", "{key}: {results}");
    }
    assert_eq!(results["openai_bad_schema"], "BadRequestError");
    assert_eq!(results["ollama_bad_format"], 400);
    assert_eq!(results["langchain_structured"], "Owner");
    assert_eq!(results["langchain_valid"], "valid");
}

/// Tool calls forced by `tool_choice` through both clients validate against
/// their tools' schemas, streamed or whole, on a random-weight model given
/// Qwen2.5's template (its text is noise: the grammar makes the calls);
/// calls and results go back through the template; LangChain's agent loop
/// and function-calling structured output run to the end.
#[test]
fn tool_calls_through_official_clients_and_langchain() {
    let clients = install_clients();
    let dir = tempfile::tempdir().unwrap();
    let model = common::qwen_tools_model(dir.path(), "qwen-tools");
    let server = Server::start(&["--ctx", "2048", "-m", model.to_str().unwrap()]);
    let results = run_script("tools.py", (&server, "qwen-tools"), &clients, &[]);
    let all_valid = |key: &str| {
        let calls = results[key][1]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {results}"));
        assert!(!calls.is_empty(), "{key}: {results}");
        for call in calls {
            assert_eq!(call[1], "valid", "{key}: {results}");
        }
    };
    assert_eq!(results["openai_required"][0], "tool_calls", "{results}");
    all_valid("openai_required");
    assert_eq!(
        results["openai_stream"],
        serde_json::json!(["tool_calls", true, true])
    );
    assert_eq!(results["openai_named"], serde_json::json!(["get_time"]));
    for result in results["openai_strict_auto"].as_array().unwrap() {
        match result {
            Value::Array(checks) => assert!(checks.iter().all(|c| c == "valid"), "{results}"),
            other => assert_eq!(other, &Value::Bool(true), "{results}"),
        }
    }
    assert_eq!(results["openai_round_trip"][1], Value::Null, "{results}");
    assert_eq!(
        results["openai_bad_tools"],
        serde_json::json!(["BadRequestError", true])
    );
    assert!(results["ollama_auto"].is_string(), "{results}");
    assert_eq!(results["ollama_required"][0], "stop", "{results}");
    all_valid("ollama_required");
    assert_eq!(results["ollama_stream"], true, "{results}");
    assert!(results["ollama_round_trip"].is_string(), "{results}");
    let ran = results["langchain_agent"][0].as_array().unwrap();
    assert!(ran.len() >= 2, "{results}");
    for call in ran {
        assert_eq!(call, &serde_json::json!(["get_weather", true]), "{results}");
    }
    assert_eq!(results["langchain_agent"][1], true);
    assert_eq!(
        results["langchain_structured"],
        serde_json::json!(["Weather", true])
    );
}
