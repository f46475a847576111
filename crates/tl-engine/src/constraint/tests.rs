//! The mask on a vocabulary small enough to reason about: single bytes for
//! JSON's punctuation, digits and a few letters, some multi-byte tokens, a
//! control token and an end token.

use serde_json::json;

use super::*;
use crate::sampler::{Sampler, SamplerConfig};

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"\"",
    b":",
    b",",
    b" ",
    b"[",
    b"]",
    b"0",
    b"1",
    b"2",
    b"a",
    b"b",
    b"c",
    b"\"a\"",
    b": ",
    b", ",
    b"ab",
    b"\n",
    b"\xffim_start",
    b"\xffeos",
];
const END: u32 = 20;
const CONTROL: u32 = 19;

fn compiler() -> ConstraintCompiler {
    let vocabulary = ConstraintVocabulary {
        token_bytes: TOKENS.iter().map(|t| t.to_vec()).collect(),
        end_tokens: vec![END],
    };
    ConstraintCompiler::new(&vocabulary).expect("a tiny vocabulary indexes")
}

fn id(bytes: &[u8]) -> u32 {
    TOKENS
        .iter()
        .position(|t| *t == bytes)
        .expect("in vocabulary") as u32
}

/// The tokens the constraint allows next.
fn allowed(constraint: &mut Constraint) -> Vec<u32> {
    let mut logits = vec![0.0; TOKENS.len()];
    constraint.mask_logits(&mut logits).expect("a mask");
    (0u32..)
        .zip(&logits)
        .filter(|(_, &l)| l > f32::NEG_INFINITY)
        .map(|(t, _)| t)
        .collect()
}

fn accept_all(constraint: &mut Constraint, tokens: &[&[u8]]) {
    for token in tokens {
        let token = id(token);
        assert!(allowed(constraint).contains(&token), "token {token}");
        constraint.accept(token).expect("an allowed token");
    }
}

fn object_schema() -> Grammar {
    Grammar::JsonSchema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 2}},
        "required": ["a"],
        "additionalProperties": false,
    }))
}

#[test]
fn schema_mask_allows_only_the_next_json_piece() {
    let mut constraint = compiler().compile(&object_schema()).unwrap();
    assert_eq!(allowed(&mut constraint), vec![id(b"{")]);
    accept_all(&mut constraint, &[b"{"]);
    // The key, whole or as a quote; never the control or end token.
    assert_eq!(allowed(&mut constraint), vec![id(b"\""), id(b"\"a\"")]);
    accept_all(&mut constraint, &[b"\"a\"", b": "]);
    assert_eq!(allowed(&mut constraint), vec![id(b"0"), id(b"1"), id(b"2")]);
    accept_all(&mut constraint, &[b"1"]);
    assert!(!constraint.is_complete());
    accept_all(&mut constraint, &[b"}"]);
    // Nothing can follow the closing brace: the output is complete.
    assert!(constraint.is_complete());
}

#[test]
fn separators_are_python_json_dumps() {
    let mut constraint = compiler()
        .compile(&Grammar::JsonSchema(json!({
            "type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2
        })))
        .unwrap();
    accept_all(&mut constraint, &[b"[", b"1"]);
    // More digits, or the separator; no bare space, no end (two items).
    let next = vec![id(b","), id(b"0"), id(b"1"), id(b"2"), id(b", ")];
    assert_eq!(allowed(&mut constraint), next);
    accept_all(&mut constraint, &[b",", b" ", b"2", b"]"]);
    assert!(constraint.is_complete());
}

#[test]
fn lark_grammar_ends_with_the_end_token_where_it_may() {
    let grammar = Grammar::Lark("start: \"a\" \"b\"*".into());
    let mut constraint = compiler().compile(&grammar).unwrap();
    assert_eq!(allowed(&mut constraint), vec![id(b"a"), id(b"ab")]);
    accept_all(&mut constraint, &[b"a"]);
    assert_eq!(allowed(&mut constraint), vec![id(b"b"), END]);
    assert!(!constraint.is_complete());
    constraint.accept(END).unwrap();
}

#[test]
fn sampler_draws_only_allowed_tokens_greedy_and_sampled() {
    for temperature in [0.0, 1.0] {
        for seed in 0..20 {
            let config = SamplerConfig {
                temperature,
                seed,
                ..SamplerConfig::default()
            };
            let constraint = compiler().compile(&object_schema()).unwrap();
            let mut sampler = Sampler::new(config).with_constraint(Some(constraint));
            assert!(sampler.device_sampling().is_none());
            assert!(!sampler.is_plain_argmax());
            // The model "prefers" the control token and letters.
            let mut logits = vec![0.0; TOKENS.len() + 3];
            logits[CONTROL as usize] = 10.0;
            logits[id(b"b") as usize] = 5.0;
            let mut text = Vec::new();
            while !sampler.constraint_complete() {
                let token = sampler.sample(&logits, &[]).unwrap();
                assert!(token != END && (token as usize) < TOKENS.len());
                text.extend_from_slice(TOKENS[token as usize]);
                assert!(text.len() < 64, "{}", String::from_utf8_lossy(&text));
            }
            let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
            assert!(value["a"].as_u64().is_some_and(|a| a <= 2), "{value}");
        }
    }
}

#[test]
fn bad_grammars_are_refused_with_a_reason() {
    let compiler = compiler();
    let huge = Grammar::Lark(format!("start: \"{}\"", "a".repeat(MAX_GRAMMAR_BYTES)));
    let cases = [
        (huge, "bytes"),
        (Grammar::JsonSchema(json!(false)), "allows no output"),
        (Grammar::JsonSchema(json!([1])), "must be an object"),
        (
            Grammar::JsonSchema(json!({"type": "string", "pattern": "(unclosed"})),
            "",
        ),
        (Grammar::JsonSchema(json!({"type": "strnig"})), ""),
        (Grammar::Lark("start: foo".into()), ""),
        (Grammar::Lark("start: /[/".into()), ""),
        // Only letters the vocabulary lacks.
        (Grammar::Lark("start: \"xyz\"".into()), "allows no output"),
    ];
    for (grammar, reason) in cases {
        match compiler.compile(&grammar) {
            Err(Error::Grammar(message)) => {
                assert!(message.contains(reason), "{grammar:?}: {message}")
            }
            other => panic!("{grammar:?}: {other:?}"),
        }
    }
}

/// As deep as the size bound and JSON parsing (128 levels) allow, on a
/// 2 MiB stack like the server's threads: compiled or refused, never a
/// stack overflow; errors quote little of the grammar.
#[test]
fn deep_nesting_is_refused_or_compiled_without_overflow() {
    let deep = || {
        let compiler = compiler();
        let mut schema = json!({"type": "integer"});
        for _ in 0..120 {
            schema = json!({"type": "array", "items": schema, "maxItems": 1});
        }
        assert!(compiler.compile(&Grammar::JsonSchema(schema)).is_ok());
        let depth = MAX_GRAMMAR_BYTES / 2 - 10;
        let lark = format!("start: {}\"a\"{}", "(".repeat(depth), ")".repeat(depth));
        match compiler.compile(&Grammar::Lark(lark)) {
            Err(Error::Grammar(message)) => assert!(message.len() < 400, "{message}"),
            other => panic!("{other:?}"),
        }
    };
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(deep)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn a_grammar_that_can_never_finish_allows_no_output() {
    let grammar = Grammar::Lark("start: a\na: a \"a\"".into());
    match compiler().compile(&grammar) {
        Err(Error::Grammar(message)) => assert_eq!(message, "the grammar allows no output"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn vocabulary_without_end_token_is_refused() {
    let vocabulary = ConstraintVocabulary {
        token_bytes: vec![b"a".to_vec()],
        end_tokens: Vec::new(),
    };
    assert!(matches!(
        ConstraintCompiler::new(&vocabulary),
        Err(Error::Grammar(_))
    ));
}

#[test]
fn a_mask_prepared_ahead_is_the_one_computed_on_demand() {
    let mut fresh = compiler().compile(&object_schema()).unwrap();
    let mut ahead = fresh.clone();
    for token in [b"{".as_slice(), b"\"a\"", b": ", b"2"] {
        ahead.prepare_mask();
        assert_eq!(allowed(&mut ahead), allowed(&mut fresh));
        let token = id(token);
        ahead.accept(token).unwrap();
        fresh.accept(token).unwrap();
    }
    // A mask prepared before a token was accepted is not used after it.
    ahead.prepare_mask();
    ahead.accept(id(b"}")).unwrap();
    fresh.accept(id(b"}")).unwrap();
    assert_eq!(allowed(&mut ahead), allowed(&mut fresh));
}
