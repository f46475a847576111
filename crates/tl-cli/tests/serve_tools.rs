//! Tool calling over HTTP: a tiny random-weight model given Qwen2.5's chat
//! template (`common::qwen_tools_model`), whose text is noise, so every
//! well-formed call it makes is the grammar's doing. Calls forced by
//! `tool_choice` (required, or a named function) through both APIs,
//! streamed or whole; tool results sent back; and every malformed request a
//! 400 naming the problem. The official clients and LangChain drive the
//! same in `serve_python_clients`.

mod common;

use common::server::{request, sse_chunks, Server};
use serde_json::{json, Value};

const MODEL: &str = "qwen-tools";

fn start(dir: &tempfile::TempDir) -> Server {
    let model = common::qwen_tools_model(dir.path(), MODEL);
    Server::start(&["--ctx", "2048", "-m", model.to_str().unwrap()])
}

/// Two tools whose arguments are bounded (enums, small integers), so that
/// a random model's call always fits its tokens.
fn tools() -> Value {
    json!([
        {"type": "function", "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "London", "Tokyo"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7}
                },
                "required": ["city", "days"]
            }
        }},
        {"type": "function", "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                "required": ["zone"]
            }
        }}
    ])
}

fn question() -> Value {
    json!([{"role": "user", "content": "What is the weather in Paris?"}])
}

/// Whether `arguments` follow the schema of the tool `name` in [`tools`].
fn follows_schema(name: &str, arguments: &Value) -> bool {
    let keys = |want: &[&str]| {
        let have = arguments.as_object().map(|o| o.len());
        have == Some(want.len()) && want.iter().all(|k| arguments.get(*k).is_some())
    };
    match name {
        "get_weather" => {
            let city = arguments["city"].as_str().unwrap_or("");
            let days = arguments["days"].as_i64().unwrap_or(0);
            keys(&["city", "days"])
                && ["Paris", "London", "Tokyo"].contains(&city)
                && (1..=7).contains(&days)
        }
        "get_time" => {
            keys(&["zone"]) && ["UTC", "CET"].contains(&arguments["zone"].as_str().unwrap_or(""))
        }
        _ => false,
    }
}

fn chat(server: &Server, extra: Value) -> Value {
    let mut body =
        json!({"model": MODEL, "messages": question(), "tools": tools(), "max_tokens": 200});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let response = server.post("/v1/chat/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()
}

/// The calls of a streamed answer, gathered from their deltas as the
/// `openai` client does, and its finish reason.
fn streamed_calls(server: &Server, extra: Value) -> (Vec<(String, String, String)>, String) {
    let mut body = json!({"model": MODEL, "messages": question(), "tools": tools(),
        "max_tokens": 200, "stream": true});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let response = server.post("/v1/chat/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = String::new();
    for chunk in sse_chunks(response.body.lines().map(str::to_owned)) {
        let choice = &chunk["choices"][0];
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = reason.to_owned();
        }
        for delta in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = delta["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                calls.push(Default::default());
            }
            let call = &mut calls[index];
            call.0 += delta["id"].as_str().unwrap_or("");
            call.1 += delta["function"]["name"].as_str().unwrap_or("");
            call.2 += delta["function"]["arguments"].as_str().unwrap_or("");
        }
    }
    (calls, finish)
}

/// With `tool_choice: "required"` every answer is one call (several with
/// `parallel_tool_calls`) of the declared tools with arguments that follow
/// their schemas; the stream's deltas add up to the whole answer's calls.
#[test]
fn required_calls_follow_the_schemas_whole_and_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir);
    for seed in 0..4 {
        let parallel = seed % 2 == 0;
        let options = json!({"tool_choice": "required", "temperature": 1.0, "seed": seed,
            "parallel_tool_calls": parallel});
        let answer = chat(&server, options.clone());
        let choice = &answer["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "{answer}");
        let calls = choice["message"]["tool_calls"]
            .as_array()
            .expect("tool_calls");
        assert!(!calls.is_empty());
        assert!(parallel || calls.len() == 1, "{answer}");
        let mut whole = Vec::new();
        for call in calls {
            assert_eq!(call["type"], "function");
            assert!(call["id"].as_str().unwrap().starts_with("call_"));
            let name = call["function"]["name"].as_str().unwrap();
            let arguments: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert!(follows_schema(name, &arguments), "{name} {arguments}");
            whole.push((name.to_owned(), arguments));
        }
        let (streamed, finish) = streamed_calls(&server, options);
        assert_eq!(finish, "tool_calls");
        let streamed: Vec<(String, Value)> = streamed
            .into_iter()
            .map(|(id, name, arguments)| {
                assert!(id.starts_with("call_"), "{id}");
                (name, serde_json::from_str(&arguments).unwrap())
            })
            .collect();
        assert_eq!(streamed, whole, "seed {seed}");
    }
}

/// A named function is the one called, once, also through Ollama's
/// `/api/chat` (`tool_choice` is an extension there), whose calls carry
/// their arguments as an object.
#[test]
fn a_named_function_is_called_through_both_apis() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir);
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    let answer = chat(&server, json!({"tool_choice": named, "seed": 1}));
    let calls = answer["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1, "{answer}");
    assert_eq!(calls[0]["function"]["name"], "get_time");

    let body = json!({"model": MODEL, "messages": question(), "tools": tools(),
        "tool_choice": "required", "stream": false, "options": {"seed": 3, "num_predict": 200}});
    let response = server.post("/api/chat", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let answer = response.json();
    let call = &answer["message"]["tool_calls"][0]["function"];
    assert!(
        follows_schema(call["name"].as_str().unwrap(), &call["arguments"]),
        "{answer}"
    );
    assert_eq!(answer["done_reason"], "stop");

    let body = json!({"model": MODEL, "messages": question(), "tools": tools(),
        "tool_choice": "required", "options": {"seed": 3, "num_predict": 200}});
    let response = server.post("/api/chat", &body.to_string());
    let lines: Vec<Value> = response
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let streamed: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line["message"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(streamed, vec![&answer["message"]["tool_calls"][0]]);
    assert_eq!(lines.last().unwrap()["done"], true);
}

/// A conversation with a call (arguments as OpenAI's JSON string) and its
/// result renders as Jinja2 renders it: the prompt has the tokens of the
/// golden render of `chat_template::tests`.
#[test]
fn tool_results_render_as_the_template_renders_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir);
    let weather = json!([{"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the weather forecast for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city"},
            "days": {"type": "integer", "description": "How many days"}
        }, "required": ["city"]}
    }}]);
    let messages = json!([
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "{\"temperature\": 21}"}
    ]);
    let body = json!({"model": MODEL, "messages": messages, "tools": weather, "max_tokens": 1});
    let response = server.post("/v1/chat/completions", &body.to_string());
    assert_eq!(response.status, 200, "{}", response.body);
    let prompt_tokens = response.json()["usage"]["prompt_tokens"].clone();
    let golden = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tl-engine/tests/golden/templates/tools_qwen2.5.txt"),
    )
    .unwrap();
    let body = json!({"model": MODEL, "content": golden});
    let tokens = server.post("/tokenize", &body.to_string()).json();
    assert_eq!(
        prompt_tokens,
        json!(tokens["tokens"].as_array().unwrap().len())
    );
}

/// `tool_choice: "none"` shows the model no tools and reads no calls:
/// the prompt is the one without tools.
#[test]
fn tool_choice_none_is_a_plain_chat() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir);
    let plain = |extra: Value| {
        let mut body = json!({"model": MODEL, "messages": question(), "max_tokens": 4, "seed": 1});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        server
            .post("/v1/chat/completions", &body.to_string())
            .json()
    };
    let without = plain(json!({}));
    let none = plain(json!({"tools": tools(), "tool_choice": "none"}));
    assert_eq!(
        none["usage"]["prompt_tokens"],
        without["usage"]["prompt_tokens"]
    );
    assert_eq!(
        none["choices"][0]["message"],
        without["choices"][0]["message"]
    );
    let auto = plain(json!({"tools": tools()}));
    assert!(auto["usage"]["prompt_tokens"].as_u64() > without["usage"]["prompt_tokens"].as_u64());
}

/// Malformed tools, choices and calls are 400s in each API's shape, with a
/// message naming the problem (never serde's words for our types).
#[test]
fn malformed_tool_requests_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&dir);
    let function = |f: Value| json!([{"type": "function", "function": f}]);
    let cases = [
        (json!({"tools": {"name": "f"}}), "'tools' must be a list"),
        (
            json!({"tools": function(json!({"parameters": {}}))}),
            "'function.name' is missing",
        ),
        (
            json!({"tools": function(json!({"name": "f", "parameters": "object"}))}),
            "JSON schema object",
        ),
        (
            json!({"tools": function(json!({"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strnig"}}}})), "tool_choice": "required"}),
            "invalid tools",
        ),
        (
            json!({"tools": function(json!({"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}})), "tool_choice": "required"}),
            "invalid tools",
        ),
        (
            json!({"tools": function(json!({"name": "f", "parameters": {"$ref": "#"}})), "tool_choice": "required"}),
            "function 'f': the grammar allows no output",
        ),
        (
            json!({"tools": tools(), "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "'nope', which is not in 'tools'",
        ),
        (
            json!({"tool_choice": "required"}),
            "needs a non-empty 'tools'",
        ),
        (
            json!({"tools": tools(), "tool_choice": "required", "response_format": {"type": "json_object"}}),
            "cannot be combined",
        ),
        (
            json!({"tools": tools(), "messages": [{"role": "assistant", "tool_calls": [{"function": {}}]}]}),
            "messages[0].tool_calls[0]: 'function.name'",
        ),
        (
            json!({"tools": Value::Array(vec![tools()[0].clone(); 129])}),
            "at most 128 tools",
        ),
    ];
    for (extra, expected) in cases {
        let mut body = json!({"model": MODEL, "messages": question(), "max_tokens": 4});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let response = server.post("/v1/chat/completions", &body.to_string());
        assert_eq!(response.status, 400, "{extra}: {}", response.body);
        let message = response.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(message.contains(expected), "{extra}: {message}");
        let mut body = body.clone();
        body["options"] = json!({"num_predict": 4});
        let response = request(
            &server.address,
            "POST",
            "/api/chat",
            Some(&body.to_string()),
            &[],
        );
        if extra.get("response_format").is_none() {
            assert_eq!(response.status, 400, "ollama {extra}: {}", response.body);
            let message = response.json()["error"].as_str().unwrap().to_owned();
            assert!(message.contains(expected), "ollama {extra}: {message}");
        }
    }
}
