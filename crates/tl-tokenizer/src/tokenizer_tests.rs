//! Unit tests of the public tokenizer on small in-memory vocabularies.

use super::*;
use crate::test_vocab::{bpe_vocab, spm_vocab, MetaValue};
use crate::StreamDecoder;

fn bpe() -> Tokenizer {
    let merges = [
        ("h", "i"),
        ("Ġ", "hi"),
        ("u", "s"),
        ("us", "e"),
        ("use", "r"),
    ];
    Tokenizer::from_gguf(&bpe_vocab(&merges).build()).unwrap()
}

#[test]
fn tokenizer_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tokenizer>();
    assert_send_sync::<StreamDecoder>();
}

#[test]
fn parse_special_turns_markup_into_special_ids() {
    let tokenizer = bpe();
    let start = tokenizer.token_id("<|im_start|>").unwrap();
    let end = tokenizer.token_id("<|im_end|>").unwrap();
    let user = tokenizer.token_id("user").unwrap();
    let hi = tokenizer.token_id("hi").unwrap();
    let text = "<|im_start|>user\nhi<|im_end|>";
    let ids = tokenizer.encode(text, false, true).unwrap();
    assert_eq!(ids, [start, user, u32::from(b'\n'), hi, end]);
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), text);
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), "user\nhi");
}

#[test]
fn without_parse_special_markup_is_plain_text() {
    let tokenizer = bpe();
    let text = "<|im_start|>user";
    let ids = tokenizer.encode(text, false, false).unwrap();
    assert!(!ids.contains(&tokenizer.token_id("<|im_start|>").unwrap()));
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), text);
}

#[test]
fn end_of_generation_includes_eos_and_im_end() {
    let tokenizer = bpe();
    let end = tokenizer.token_id("<|im_end|>").unwrap();
    assert!(tokenizer.is_end_of_generation(end));
    assert_eq!(tokenizer.eot_id(), Some(end));
    assert!(!tokenizer.is_end_of_generation(u32::from(b'a')));
}

#[test]
fn bpe_adds_bos_only_when_asked() {
    let meta = bpe_vocab(&[]).set("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    let tokenizer = Tokenizer::from_gguf(&meta.build()).unwrap();
    let bos = tokenizer.bos_id().unwrap();
    assert_eq!(
        tokenizer.encode("a", true, false).unwrap(),
        [bos, u32::from(b'a')]
    );
    assert_eq!(
        tokenizer.encode("a", false, false).unwrap(),
        [u32::from(b'a')]
    );
    assert!(!bpe().add_bos());
}

#[test]
fn spm_prefixes_space_and_decode_removes_it() {
    let tokenizer = Tokenizer::from_gguf(&spm_vocab(&["▁h", "i", "▁hi"]).build()).unwrap();
    let ids = tokenizer.encode("hi", true, false).unwrap();
    let hi = tokenizer.token_id("▁hi").unwrap();
    assert_eq!(ids, [1, hi]);
    assert_eq!(tokenizer.decode(&ids[1..], true).unwrap(), "hi");
    // llama.cpp keeps the space when it removed a BOS first.
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), " hi");
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), "<s> hi");
}

#[test]
fn spm_byte_fallback_for_unknown_characters() {
    let tokenizer = Tokenizer::from_gguf(&spm_vocab(&["▁"]).build()).unwrap();
    let ids = tokenizer.encode("é", false, false).unwrap();
    let space = tokenizer.token_id("▁").unwrap();
    // Byte token <0xXX> has id 3 + XX; 'é' is C3 A9.
    assert_eq!(ids, [space, 3 + 0xC3, 3 + 0xA9]);
    assert_eq!(tokenizer.decode(&ids, true).unwrap(), "é");
}

#[test]
fn spm_special_token_is_followed_by_a_space_prefix() {
    let tokenizer = Tokenizer::from_gguf(&spm_vocab(&["▁h", "▁hi"]).build()).unwrap();
    let start = tokenizer.token_id("<|im_start|>").unwrap();
    let hi = tokenizer.token_id("▁hi").unwrap();
    assert_eq!(
        tokenizer.encode("<|im_start|>hi", false, true).unwrap(),
        [start, hi]
    );
}

#[test]
fn stream_decoder_waits_for_whole_characters() {
    let tokenizer = Tokenizer::from_gguf(&spm_vocab(&["▁"]).build()).unwrap();
    // 🦙 is F0 9F A6 99: four byte tokens after the space prefix.
    let ids = tokenizer.encode("🦙!", false, false).unwrap();
    let mut stream = StreamDecoder::new(true);
    let outputs: Vec<String> = ids.iter().map(|&id| stream.push(&tokenizer, id)).collect();
    assert_eq!(outputs, [" ", "", "", "", "🦙", "!"]);
    assert_eq!(stream.finish(), "");
}

#[test]
fn stream_decoder_on_byte_level_bpe() {
    let tokenizer = bpe();
    let ids = tokenizer.encode("é", false, false).unwrap();
    assert_eq!(ids, [0xC3, 0xA9]);
    let mut stream = StreamDecoder::new(false);
    assert_eq!(stream.push(&tokenizer, ids[0]), "");
    assert_eq!(stream.push(&tokenizer, ids[1]), "é");
}

#[test]
fn stream_decoder_replaces_invalid_and_drops_an_unfinished_character() {
    let tokenizer = bpe();
    let mut stream = StreamDecoder::new(false);
    // A lone continuation byte can never start a character: replaced at once.
    assert_eq!(stream.push(&tokenizer, 0x80), "\u{FFFD}");
    assert_eq!(stream.push(&tokenizer, u32::from(b'a')), "a");
    // The first of three bytes, then the end (a token limit): dropped.
    assert_eq!(stream.push(&tokenizer, 0xE2), "");
    assert_eq!(stream.finish(), "");
}

#[test]
fn decode_rejects_unknown_ids() {
    let tokenizer = bpe();
    let err = tokenizer.decode(&[1_000_000], false).unwrap_err();
    assert!(matches!(err, Error::UnknownTokenId { id: 1_000_000, .. }));
    assert!(tokenizer.token_to_bytes(1_000_000, false).is_empty());
}

#[test]
fn unknown_pre_tokenizer_falls_back_with_a_warning() {
    let meta = bpe_vocab(&[]).set("tokenizer.ggml.pre", MetaValue::Str("brand-new".into()));
    let tokenizer = Tokenizer::from_gguf(&meta.build()).unwrap();
    assert_eq!(tokenizer.pre_tokenizer_name(), "default");
    assert_eq!(tokenizer.warnings().len(), 1);
    assert!(tokenizer.warnings()[0].contains("brand-new"));
    assert!(bpe().warnings().is_empty());
}

fn load_error(meta: crate::test_vocab::MetaBuilder) -> String {
    match Tokenizer::from_gguf(&meta.build()) {
        Ok(_) => panic!("the vocabulary should have been rejected"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn malformed_vocabularies_are_rejected_naming_the_key() {
    let short_scores = spm_vocab(&[]).set("tokenizer.ggml.scores", MetaValue::F32s(vec![0.0; 3]));
    assert!(load_error(short_scores).contains("tokenizer.ggml.scores"));

    let short_types = bpe_vocab(&[]).set("tokenizer.ggml.token_type", MetaValue::I32s(vec![1]));
    assert!(load_error(short_types).contains("tokenizer.ggml.token_type"));

    let bad_bos = bpe_vocab(&[]).set("tokenizer.ggml.bos_token_id", MetaValue::U32(99_999));
    assert!(load_error(bad_bos).contains("tokenizer.ggml.bos_token_id"));

    let duplicate = spm_vocab(&["a", "a"]);
    assert!(load_error(duplicate).contains("duplicate token"));

    let no_tokens = spm_vocab(&[]).remove("tokenizer.ggml.tokens");
    assert!(load_error(no_tokens).contains("tokenizer.ggml.tokens"));

    let bad_merge = bpe_vocab(&[]).set(
        "tokenizer.ggml.merges",
        MetaValue::Strings(vec!["a zz".into()]),
    );
    assert!(load_error(bad_merge).contains("tokenizer.ggml.merges"));

    let no_merges = bpe_vocab(&[]).remove("tokenizer.ggml.merges");
    assert!(load_error(no_merges).contains("tokenizer.ggml.merges"));

    let types_as_strings = spm_vocab(&[])
        .set("tokenizer.ggml.bos_token_id", MetaValue::U32(0))
        .set("tokenizer.ggml.token_type", MetaValue::Strings(vec![]));
    assert!(load_error(types_as_strings).contains("tokenizer.ggml.token_type"));

    let wrong_model = spm_vocab(&[]).set("tokenizer.ggml.model", MetaValue::Str("t5".into()));
    assert!(load_error(wrong_model).contains("t5"));
}

#[test]
fn plain_ranges_keep_special_text_as_text() {
    let tokenizer = bpe();
    let start = tokenizer.token_id("<|im_start|>").unwrap();
    let end = tokenizer.token_id("<|im_end|>").unwrap();
    // The template wrote the markers; a user wrote "hi<|im_end|>".
    let text = "<|im_start|>user\nhi<|im_end|><|im_end|>";
    let user = 17..29;
    assert_eq!(&text[user.clone()], "hi<|im_end|>");
    let ids = tokenizer
        .encode_with_plain_text(text, false, std::slice::from_ref(&user))
        .unwrap();
    assert_eq!(ids.first(), Some(&start));
    assert_eq!(ids.last(), Some(&end));
    assert_eq!(ids.iter().filter(|&&id| id == end).count(), 1, "{ids:?}");
    assert_eq!(tokenizer.decode(&ids, false).unwrap(), text);
    // The user's part is tokenized exactly as plain text would be.
    let plain = tokenizer.encode("hi<|im_end|>", false, false).unwrap();
    assert!(ids
        .windows(plain.len())
        .any(|window| window == plain.as_slice()));
}

#[test]
fn plain_ranges_match_encode_at_the_extremes() {
    let tokenizer = bpe();
    let text = "<|im_start|>user\nhi<|im_end|>\n";
    let all = 0..text.len();
    assert_eq!(
        tokenizer.encode_with_plain_text(text, true, &[]).unwrap(),
        tokenizer.encode(text, true, true).unwrap()
    );
    assert_eq!(
        tokenizer
            .encode_with_plain_text(text, true, &[all])
            .unwrap(),
        tokenizer.encode(text, true, false).unwrap()
    );
}

#[test]
fn a_token_straddling_a_plain_range_stays_text() {
    let tokenizer = bpe();
    let start = tokenizer.token_id("<|im_start|>").unwrap();
    // Only the final ">" came from a user: the token it completes is refused.
    let text = "<|im_start|>";
    let last_byte = 11..12;
    let ids = tokenizer
        .encode_with_plain_text(text, false, std::slice::from_ref(&last_byte))
        .unwrap();
    assert!(!ids.contains(&start), "{ids:?}");
    // Unsorted, overlapping and empty ranges are accepted.
    let text = "<|im_start|>a<|im_start|>b<|im_start|>";
    let ids = tokenizer
        .encode_with_plain_text(text, false, &[26..30, 12..13, 5..5, 27..29])
        .unwrap();
    assert_eq!(ids.iter().filter(|&&id| id == start).count(), 2, "{ids:?}");
}

#[test]
fn special_token_texts_are_the_control_tokens() {
    let tokenizer = bpe();
    let mut texts: Vec<&str> = tokenizer.special_token_texts().collect();
    texts.sort_unstable();
    assert_eq!(texts, ["<|im_end|>", "<|im_start|>"]);
    let spm = Tokenizer::from_gguf(&spm_vocab(&["a"]).build()).unwrap();
    let mut texts: Vec<&str> = spm.special_token_texts().collect();
    texts.sort_unstable();
    assert_eq!(
        texts,
        ["</s>", "<s>", "<unk>", "<|im_end|>", "<|im_start|>"]
    );
}
