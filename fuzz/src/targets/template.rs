//! `template`: a chat template from a stranger's GGUF file, and messages from
//! a stranger's request, rendered as the server renders them.
//!
//! An input is `TEMPLATE \0 MESSAGES \0 FLAGS`, each part optional after the
//! first. Messages are records separated by `\x1e`, each `role \x1f content`
//! (no `\x1f`: a user message); none at all gives a four-turn conversation.
//! Flag bits: 0 no generation prompt, 1 pass `tools`, 2 pass `date_string`.

use std::path::Path;

use serde_json::{json, Map, Value};
use tl_engine::chat_template::{ChatMessage, ChatTemplate};

use super::Runner;
use crate::mutate::text::harvest;
use crate::mutate::{Dictionary, Shape};
use crate::seeds;
use crate::signature::{magnitude, normalize_against};

const SECTION: u8 = 0;
const RECORD: u8 = 0x1e;
const FIELD: u8 = 0x1f;

/// Jinja syntax, the names templates use, and the methods and filters
/// minijinja and the pycompat layer give them.
const JINJA_WORDS: &[&str] = &[
    "{%",
    "%}",
    "{{",
    "}}",
    "{#",
    "#}",
    "{%-",
    "-%}",
    "{{-",
    "-}}",
    "for",
    "in",
    "endfor",
    "if",
    "elif",
    "else",
    "endif",
    "set",
    "endset",
    "macro",
    "endmacro",
    "call",
    "endcall",
    "filter",
    "endfilter",
    "with",
    "endwith",
    "block",
    "endblock",
    "extends",
    "include",
    "import",
    "from",
    "recursive",
    "loop",
    "loop.index",
    "loop.index0",
    "loop.last",
    "loop.first",
    "loop(",
    "caller()",
    "namespace(",
    "range(",
    "range(100000)",
    "messages",
    "message",
    "message['role']",
    "message['content']",
    "message.content",
    "messages[0]",
    "messages[-1]",
    "messages[1:]",
    "add_generation_prompt",
    "bos_token",
    "eos_token",
    "tools",
    "date_string",
    "raise_exception(",
    "strftime_now(",
    "'%Y-%m-%d'",
    "'%A %B'",
    "|tojson",
    "|length",
    "|trim",
    "|upper",
    "|replace(",
    "|join(",
    "|list",
    "|reverse",
    "|sort",
    "|map(",
    "|select(",
    "|selectattr(",
    "|items",
    "|indent(",
    "|wordcount",
    "|default(",
    "|safe",
    "|string",
    "|int",
    ".strip()",
    ".split(",
    ".startswith(",
    ".endswith(",
    ".items()",
    ".keys()",
    ".values()",
    ".append(",
    ".upper()",
    ".lower()",
    ".format(",
    ".get(",
    " is defined",
    " is not none",
    " is string",
    " is mapping",
    " and ",
    " or ",
    " not ",
    " ~ ",
    " + ",
    " * ",
    " ** ",
    " // ",
    " % ",
    "[::-1]",
    "[1:-1]",
    "'\\n'",
    "\"\"",
    "none",
    "true",
    "false",
    "self",
    "super()",
    "varargs",
    "kwargs",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    "=",
    "==",
    "!=",
    "|",
    ".",
];

pub fn seeds(repo: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let templates = seeds::read_all(&seeds::files_with_extension(
        &repo.join("testdata/templates"),
        "jinja",
    )?)?;
    let mut seeds = Vec::new();
    for (i, template) in templates.into_iter().enumerate() {
        let mut seed = template;
        // Every other seed carries messages and flags, so both shapes are in
        // the corpus from the start.
        if i % 2 == 1 {
            seed.push(SECTION);
            seed.extend_from_slice(b"system\x1fBe brief.\x1euser\x1fHi\x1eassistant\x1fHello");
            seed.extend_from_slice(&[SECTION, (i % 8) as u8]);
        }
        seeds.push(seed);
    }
    Ok(seeds)
}

pub fn dictionary(seeds: &[Vec<u8>]) -> (Shape, Dictionary) {
    let mut words = harvest(seeds, 800);
    words.extend(JINJA_WORDS.iter().map(|w| w.as_bytes().to_vec()));
    words.extend([vec![SECTION], vec![RECORD], vec![FIELD]]);
    (
        Shape::Text,
        Dictionary {
            words,
            ..Dictionary::default()
        },
    )
}

pub struct TemplateRunner;

impl Runner for TemplateRunner {
    fn run(&mut self, input: &[u8]) -> String {
        let mut sections = input.splitn(3, |&b| b == SECTION);
        let source = String::from_utf8_lossy(sections.next().unwrap_or_default());
        let messages = sections
            .next()
            .map_or_else(default_messages, parse_messages);
        let flags = sections
            .next()
            .and_then(|f| f.first().copied())
            .unwrap_or(0);
        let template = match ChatTemplate::new(&source, "<s>", "</s>") {
            Ok(template) => template,
            Err(e) => return format!("parse: {}", normalize_against(&e.to_string(), input)),
        };
        let add_generation_prompt = flags & 1 == 0;
        match template.render_with_extras(&messages, add_generation_prompt, &extras(flags)) {
            Ok(text) => format!("rendered {}", magnitude(text.len())),
            Err(e) => format!("render: {}", normalize_against(&e.to_string(), input)),
        }
    }
}

fn default_messages() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a helpful assistant."),
        ChatMessage::user("What is 2+2?"),
        ChatMessage::assistant("4"),
        ChatMessage::user("And 3+3?"),
    ]
}

fn parse_messages(section: &[u8]) -> Vec<ChatMessage> {
    section
        .split(|&b| b == RECORD)
        .map(|record| match record.iter().position(|&b| b == FIELD) {
            Some(at) => ChatMessage::new(
                String::from_utf8_lossy(&record[..at]),
                String::from_utf8_lossy(&record[at + 1..]),
            ),
            None => ChatMessage::user(String::from_utf8_lossy(record)),
        })
        .collect()
}

/// The keyword arguments transformers passes through, as the flags ask.
fn extras(flags: u8) -> Map<String, Value> {
    let mut extras = Map::new();
    if flags & 2 != 0 {
        extras.insert(
            "tools".into(),
            json!([{"type": "function", "function": {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}
            }}]),
        );
    }
    if flags & 4 != 0 {
        extras.insert("date_string".into(), json!("26 Jul 2024"));
    }
    extras
}
