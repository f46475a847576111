//! Tool calls read from outputs in each format, as the models' own
//! documentation and llama.cpp's chat tests record them, malformed ones
//! included; the same outputs streamed in pieces; and the forcing grammar
//! on the SmolLM2 vocabulary of the test data.

use serde_json::{json, Value};
use tl_tokenizer::Tokenizer;

use super::*;
use crate::constraint::{Constraint, ConstraintCompiler, ConstraintVocabulary};

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        name: name.into(),
        arguments,
    }
}

fn parsed(content: &str, calls: Vec<ToolCall>) -> ParsedOutput {
    ParsedOutput {
        content: content.into(),
        calls,
    }
}

/// Qwen2.5's parallel calls, from its function-calling guide.
const QWEN_PARALLEL: &str = "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>";

fn qwen_parallel_calls() -> Vec<ToolCall> {
    vec![
        call(
            "get_current_temperature",
            json!({"location": "San Francisco, CA, USA"}),
        ),
        call(
            "get_temperature_date",
            json!({"location": "San Francisco, CA, USA", "date": "2024-10-01"}),
        ),
    ]
}

#[test]
fn hermes_blocks_become_calls() {
    let cases = [
        (QWEN_PARALLEL.to_owned(), parsed("", qwen_parallel_calls())),
        // Hermes 2 Pro, as llama.cpp records it: no newline before the close.
        (
            "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>"
                .to_owned(),
            parsed("", vec![call("special_function", json!({"arg1": 1}))]),
        ),
        // Text before the call stays content.
        (
            "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>"
                .to_owned(),
            parsed(
                "Hello, world!\nWhat's up?",
                vec![call("special_function", json!({"arg1": 1}))],
            ),
        ),
        // Cut off before the closing tag: the call is whole, so it counts.
        (
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n".to_owned(),
            parsed("", vec![call("f", json!({}))]),
        ),
        // Cut off inside the closing tag.
        (
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_c".to_owned(),
            parsed("", vec![call("f", json!({}))]),
        ),
        // Arguments written as a JSON string, as OpenAI's are.
        (
            "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 2}\"}\n</tool_call>"
                .to_owned(),
            parsed("", vec![call("f", json!({"a": 2}))]),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(
            parse_tool_calls(ToolCallFormat::Hermes, &text),
            want,
            "{text:?}"
        );
    }
}

#[test]
fn llama3_json_answers_become_calls() {
    // Meta's prompt-format guide for Llama 3.1 custom tools.
    let text = "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, CA\", \"unit\": \"Fahrenheit\"}}";
    let want = parsed(
        "",
        vec![call(
            "get_current_conditions",
            json!({"location": "San Francisco, CA", "unit": "Fahrenheit"}),
        )],
    );
    assert_eq!(parse_tool_calls(ToolCallFormat::Llama3Json, text), want);
    // Decoded with its control token, and Llama 3.2's several calls.
    let tagged = format!("<|python_tag|>{text}");
    assert_eq!(parse_tool_calls(ToolCallFormat::Llama3Json, &tagged), want);
    let two =
        "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}";
    assert_eq!(
        parse_tool_calls(ToolCallFormat::Llama3Json, two).calls,
        vec![call("a", json!({})), call("b", json!({"x": 1}))]
    );
}

#[test]
fn mistral_lists_become_calls() {
    // llama.cpp's Mistral Nemo test output, and the same without the
    // control token (as the engine streams it).
    let text = "[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}, \"id\": \"123456789\"}]";
    let want = parsed("", vec![call("special_function", json!({"arg1": 1}))]);
    assert_eq!(parse_tool_calls(ToolCallFormat::Mistral, text), want);
    let bare = text.trim_start_matches("[TOOL_CALLS]");
    assert_eq!(parse_tool_calls(ToolCallFormat::Mistral, bare), want);
}

#[test]
fn the_generic_format_tries_every_form() {
    let cases = [
        QWEN_PARALLEL,
        "[TOOL_CALLS][{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}, {\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}]",
        "```json\n{\"tool_calls\": [{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}, {\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}}]}\n```",
    ];
    for text in cases {
        assert_eq!(
            parse_tool_calls(ToolCallFormat::Generic, text).calls,
            qwen_parallel_calls(),
            "{text}"
        );
    }
}

/// Malformed calls in every format are left as text, whole.
#[test]
fn malformed_calls_stay_text() {
    let cases = [
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>",
        ),
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        ),
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",
        ),
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",
        ),
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        ),
        (
            ToolCallFormat::Hermes,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>",
        ),
        (ToolCallFormat::Hermes, "<tool_call><tool_call></tool_call>"),
        (ToolCallFormat::Hermes, "I would call <tool_call> here."),
        (
            ToolCallFormat::Llama3Json,
            "{\"name\": \"f\", \"parameters\": {}} and then some text",
        ),
        (ToolCallFormat::Llama3Json, "{\"city\": \"Paris\"}"),
        (
            ToolCallFormat::Llama3Json,
            "The answer is {\"name\": \"f\"}",
        ),
        (
            ToolCallFormat::Mistral,
            "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}",
        ),
        (ToolCallFormat::Mistral, "[1, 2, 3]"),
        (ToolCallFormat::Mistral, "[]"),
        (
            ToolCallFormat::Generic,
            "{\"name\": \"f\", \"arguments\": 5}",
        ),
        (ToolCallFormat::Generic, "```json\n{\"a\": 1}\n```"),
        (ToolCallFormat::Generic, "Paris is the capital of France."),
    ];
    for (format, text) in cases {
        assert_eq!(
            parse_tool_calls(format, text),
            parsed(text, vec![]),
            "{format:?}: {text:?}"
        );
    }
}

#[test]
fn hostile_text_is_read_without_panicking() {
    let deep = format!(
        "<tool_call>{}{}</tool_call>",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let unclosed = "<tool_call>".repeat(10_000);
    let odd = "<tool_call>\u{FDD0}\u{0}é{\"name\": \"é\"}</tool_call>".to_owned();
    for text in [deep, unclosed, odd] {
        for format in FORMATS {
            let whole = parse_tool_calls(format, &text);
            assert!(whole.calls.is_empty(), "{format:?}");
            assert_eq!(streamed(format, &text, 7), whole, "{format:?}");
        }
    }
}

const FORMATS: [ToolCallFormat; 4] = [
    ToolCallFormat::Hermes,
    ToolCallFormat::Llama3Json,
    ToolCallFormat::Mistral,
    ToolCallFormat::Generic,
];

/// What the splitter gives for `text` sent in pieces of `size` characters,
/// gathered into one answer.
fn streamed(format: ToolCallFormat, text: &str, size: usize) -> ParsedOutput {
    let mut splitter = ToolCallSplitter::new(format);
    let mut pieces = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(size) {
        pieces.extend(splitter.push(&chunk.iter().collect::<String>()));
    }
    pieces.extend(splitter.finish());
    let mut out = ParsedOutput::default();
    for piece in pieces {
        match piece {
            Piece::Text(text) => out.content.push_str(&text),
            Piece::Calls(calls) => out.calls.extend(calls),
        }
    }
    if !out.calls.is_empty() {
        out.content = out.content.trim().to_owned();
    }
    out
}

/// Streamed in pieces of any size, each output reads as it does whole.
#[test]
fn streaming_reads_what_the_whole_answer_reads() {
    let texts = [
        (ToolCallFormat::Hermes, QWEN_PARALLEL),
        (ToolCallFormat::Hermes, "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"f\", \"arguments\": {\"arg1\": 1}}</tool_call>"),
        (ToolCallFormat::Hermes, "Plain text with < and <tool and <tool_cal signs."),
        (ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": </tool_call> rest"),
        (ToolCallFormat::Llama3Json, "{\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}"),
        (ToolCallFormat::Llama3Json, "  Not a call {\"name\": \"f\"}"),
        (ToolCallFormat::Mistral, "[{\"name\": \"f\", \"arguments\": {}}]"),
        (ToolCallFormat::Mistral, "[1] is a citation, not a call."),
        (ToolCallFormat::Generic, "```json\n{\"name\": \"f\", \"arguments\": {}}\n```"),
        (ToolCallFormat::Generic, "Prose, then <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"),
    ];
    for (format, text) in texts {
        let whole = parse_tool_calls(format, text);
        for size in [1, 2, 3, 5, 11, 1000] {
            assert_eq!(
                streamed(format, text, size),
                whole,
                "{format:?} by {size}: {text:?}"
            );
        }
    }
}

/// Text that cannot start a call goes out at once; a call goes out when
/// its block closes.
#[test]
fn streaming_holds_back_only_what_may_be_a_call() {
    let mut splitter = ToolCallSplitter::new(ToolCallFormat::Hermes);
    assert_eq!(
        splitter.push("Let me check <tool"),
        vec![Piece::Text("Let me check ".into())]
    );
    assert_eq!(splitter.push("_call>\n{\"name\": \"f\", "), vec![]);
    assert_eq!(
        splitter.push("\"arguments\": {}}\n</tool_call>"),
        vec![Piece::Calls(vec![call("f", json!({}))])]
    );
    assert_eq!(splitter.finish(), vec![]);
    let mut splitter = ToolCallSplitter::new(ToolCallFormat::Llama3Json);
    assert_eq!(splitter.push("  "), vec![]);
    assert_eq!(splitter.push("Sure"), vec![Piece::Text("  Sure".into())]);
}

#[test]
fn formats_are_read_from_the_templates() {
    let cases = [
        ("Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::Hermes),
        (
            "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
            ToolCallFormat::Hermes,
        ),
        (
            "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
            ToolCallFormat::Hermes,
        ),
        (
            "meta-llama-Llama-3.1-8B-Instruct.jinja",
            ToolCallFormat::Llama3Json,
        ),
        (
            "meta-llama-Llama-3.2-3B-Instruct.jinja",
            ToolCallFormat::Llama3Json,
        ),
        (
            "meta-llama-Llama-3.3-70B-Instruct.jinja",
            ToolCallFormat::Llama3Json,
        ),
        (
            "mistralai-Mistral-Nemo-Instruct-2407.jinja",
            ToolCallFormat::Mistral,
        ),
        (
            "meetkai-functionary-medium-v3.2.jinja",
            ToolCallFormat::Generic,
        ),
        ("google-gemma-2-2b-it.jinja", ToolCallFormat::Hermes),
    ];
    for (file, want) in cases {
        let path = tl_testdata::testdata().join("templates").join(file);
        let source = std::fs::read_to_string(&path).unwrap();
        assert_eq!(ToolCallFormat::for_template(&source), want, "{file}");
    }
    let gemma = std::fs::read_to_string(
        tl_testdata::testdata().join("templates/google-gemma-2-2b-it.jinja"),
    )
    .unwrap();
    assert!(!ToolCallFormat::renders_tools(&gemma));
}

/// The SmolLM2 vocabulary of the test data (byte-level BPE, ChatML's
/// control tokens), and its grammar compiler.
fn vocabulary() -> (Tokenizer, ConstraintCompiler) {
    let path = tl_testdata::testdata().join("vocab/ggml-vocab-llama3-pre.gguf");
    let tokenizer = Tokenizer::from_gguf(&tl_gguf::GgufFile::open(&path).unwrap()).unwrap();
    let compiler = ConstraintCompiler::new(&ConstraintVocabulary::from_tokenizer(&tokenizer))
        .expect("the vocabulary indexes");
    (tokenizer, compiler)
}

fn weather_tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "get_weather".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "London"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city", "days"],
            }),
        },
        ToolSchema {
            name: "get_time".into(),
            parameters: json!({
                "type": "object",
                "properties": {"zone": {"$ref": "#/$defs/Zone"}},
                "required": ["zone"],
                "$defs": {"Zone": {"type": "string", "enum": ["UTC", "CET"]}},
            }),
        },
    ]
}

/// Whether the grammar takes `text`, tokenized as the model would write it,
/// and may end after it.
fn accepts(constraint: &mut Constraint, tokenizer: &Tokenizer, text: &str) -> bool {
    let tokens = tokenizer.encode(text, false, false).unwrap();
    let mut logits = vec![0.0f32; tokenizer.vocab_size()];
    for token in tokens {
        logits.fill(0.0);
        if constraint.mask_logits(&mut logits).is_err()
            || logits[token as usize] == f32::NEG_INFINITY
        {
            return false;
        }
        constraint.accept(token).unwrap();
    }
    if constraint.is_complete() {
        return true;
    }
    logits.fill(0.0);
    let eos = tokenizer.eos_id().unwrap() as usize;
    constraint.mask_logits(&mut logits).is_ok() && logits[eos] > f32::NEG_INFINITY
}

#[test]
fn required_calls_must_follow_the_schemas() {
    let (tokenizer, compiler) = vocabulary();
    let tools = weather_tools();
    let hermes = |parallel| {
        let mode = ToolCallMode::Required { parallel };
        tool_call_grammar(ToolCallFormat::Hermes, &tools, mode, &tokenizer)
    };
    let good = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
    let second =
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>";
    let cases = [
        (hermes(false), good.to_owned(), true),
        (hermes(true), format!("{good}\n{second}"), true),
        (hermes(false), format!("{good}\n{second}"), false),
        (hermes(false), good.replace("Paris", "Rome"), false),
        (hermes(false), good.replace("get_weather", "get_wether"), false),
        (hermes(false), good.replace(", \"days\": 3", ""), false),
        (hermes(false), second.replace("CET", "PST"), false),
        (hermes(false), "Sure! ".to_owned() + good, false),
        (
            tool_call_grammar(
                ToolCallFormat::Llama3Json,
                &tools,
                ToolCallMode::Required { parallel: false },
                &tokenizer,
            ),
            "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}".to_owned(),
            true,
        ),
        (
            tool_call_grammar(
                ToolCallFormat::Mistral,
                &tools,
                ToolCallMode::Required { parallel: true },
                &tokenizer,
            ),
            "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\", \"days\": 7}}]".to_owned(),
            true,
        ),
        (
            tool_call_grammar(
                ToolCallFormat::Generic,
                &tools,
                ToolCallMode::Required { parallel: false },
                &tokenizer,
            ),
            "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}".to_owned(),
            true,
        ),
    ];
    for (grammar, text, want) in cases {
        let mut constraint = compiler
            .compile(&grammar)
            .unwrap_or_else(|e| panic!("{e}\n{grammar:?}"));
        assert_eq!(accepts(&mut constraint, &tokenizer, &text), want, "{text}");
    }
}

#[test]
fn optional_calls_allow_text_but_not_broken_calls() {
    let (tokenizer, compiler) = vocabulary();
    let tools = weather_tools();
    let cases = [
        (ToolCallFormat::Hermes, "The weather is fine.", true),
        (ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", true),
        (ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false),
        (ToolCallFormat::Hermes, "Text, then <tool_call>\n{}", false),
        (ToolCallFormat::Llama3Json, "It is sunny.", true),
        (ToolCallFormat::Llama3Json, "{\"name\": \"nope\", \"parameters\": {}}", false),
        (ToolCallFormat::Mistral, "[1] says so", false),
        (ToolCallFormat::Generic, "Fine, thanks.", true),
    ];
    for (format, text, want) in cases {
        let mode = ToolCallMode::Optional { parallel: true };
        let grammar = tool_call_grammar(format, &tools, mode, &tokenizer);
        let mut constraint = compiler.compile(&grammar).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            accepts(&mut constraint, &tokenizer, text),
            want,
            "{format:?}: {text}"
        );
    }
}

/// A walk that takes a random allowed token at each step (what a model
/// with random weights does) always ends in a call that parses.
#[test]
fn random_walks_through_the_grammar_end_in_calls() {
    let (tokenizer, compiler) = vocabulary();
    let tools = weather_tools();
    let grammar = tool_call_grammar(
        ToolCallFormat::Hermes,
        &tools,
        ToolCallMode::Required { parallel: false },
        &tokenizer,
    );
    for seed in 0..4 {
        // xorshift64: any fixed sequence of picks will do.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15 ^ seed;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut constraint = compiler.compile(&grammar).unwrap();
        let mut tokens = Vec::new();
        let mut logits = vec![0.0f32; tokenizer.vocab_size()];
        while !constraint.is_complete() && tokens.len() < 200 {
            logits.fill(0.0);
            constraint.mask_logits(&mut logits).unwrap();
            let allowed: Vec<u32> = (0u32..)
                .zip(&logits)
                .filter(|(_, l)| **l > f32::NEG_INFINITY)
                .map(|(t, _)| t)
                .collect();
            let token = allowed[next(allowed.len())];
            if tokenizer.eos_id() == Some(token) {
                break;
            }
            constraint.accept(token).unwrap();
            tokens.push(token);
        }
        let text = tokenizer.decode(&tokens, true).unwrap();
        let calls = parse_tool_calls(ToolCallFormat::Hermes, &text).calls;
        assert_eq!(calls.len(), 1, "seed {seed}: {text}");
    }
}

/// The most tools a request may declare compile, and their masks are
/// computed, in bounded time (printed: `--nocapture`).
#[test]
fn the_most_tools_compile_and_mask_in_bounded_time() {
    let (tokenizer, compiler) = vocabulary();
    let tools: Vec<ToolSchema> = (0..128)
        .map(|i| ToolSchema {
            name: format!("tool_{i}"),
            parameters: json!({
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 9},
                    "mode": {"type": "string", "enum": ["a", "b", "c"]},
                },
                "required": ["x", "mode"],
            }),
        })
        .collect();
    for mode in [
        ToolCallMode::Required { parallel: true },
        ToolCallMode::Optional { parallel: true },
    ] {
        let grammar = tool_call_grammar(ToolCallFormat::Hermes, &tools, mode, &tokenizer);
        let started = std::time::Instant::now();
        let mut constraint = compiler.compile(&grammar).unwrap();
        let compiled = started.elapsed();
        let text = "<tool_call>\n{\"name\": \"tool_127\", \"arguments\": {\"x\": 3, \"mode\": \"b\"}}\n</tool_call>";
        let tokens = tokenizer.encode(text, false, false).unwrap();
        let started = std::time::Instant::now();
        assert!(accepts(&mut constraint, &tokenizer, text));
        let per_token = started.elapsed() / tokens.len() as u32;
        println!("{mode:?}: compiled in {compiled:?}, {per_token:?} a token");
        // Generous for a loaded two-core machine.
        assert!(compiled < std::time::Duration::from_secs(5), "{compiled:?}");
        assert!(
            per_token < std::time::Duration::from_millis(200),
            "{per_token:?}"
        );
    }
}
