//! Token-level mutations of text (templates, programs, JSON, prompts): the text
//! is cut into words, runs of spaces and single symbols, and whole tokens are
//! deleted, repeated, swapped, replaced by dictionary words (the target's
//! keywords and operators) or taken from another input. Mutants then stay
//! close enough to the language to get past the lexer.

use std::ops::Range;

use crate::rng::Rng;

/// Numbers at the edges, as text.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "2",
    "255",
    "256",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e309",
    "5e-324",
    "0.5",
    "-0.0",
    "NaN",
    "nan",
    "inf",
    "1000000000",
];

/// Characters that are easy to mishandle: control characters, multi-byte UTF-8
/// (combining marks, joiners, the BOM, the replacement character, non-BMP
/// code points), line and paragraph separators.
const ODD_CHARS: &[&str] = &[
    "\0",
    "\t",
    "\r",
    "\n",
    "\r\n",
    "\x0b",
    "\x0c",
    "\x7f",
    "\u{80}",
    "\u{a0}",
    "\u{300}",
    "\u{301}",
    "\u{200b}",
    "\u{200d}",
    "\u{2028}",
    "\u{2029}",
    "\u{fe0f}",
    "\u{feff}",
    "\u{fffd}",
    "\u{ffff}",
    "\u{1f600}",
    "\u{1f469}\u{200d}\u{1f4bb}",
    "\u{10ffff}",
    "é",
    "e\u{301}",
    "ß",
    "İ",
    "ﬁ",
    "中文",
    "한국어",
    "ا",
    "▁",
    "Ġ",
    "Ċ",
    "\\",
    "\\u",
    "\\x",
    "\\ud800",
    "\\u0000",
];

/// Applies one token-level mutation; repetitions stop growing the text at
/// about `limit` bytes.
pub fn mutate(
    data: &mut Vec<u8>,
    other: &[u8],
    dictionary: &[Vec<u8>],
    limit: usize,
    rng: &mut Rng,
) {
    let tokens = tokenize(data);
    match rng.below(10) {
        0 => delete_tokens(data, &tokens, rng),
        1 => repeat_tokens(data, &tokens, limit, rng),
        2 => swap_tokens(data, &tokens, rng),
        3 | 4 => {
            let word = dictionary_word(dictionary, rng);
            replace_token(data, &tokens, &word, rng);
        }
        5 | 6 => {
            let word = dictionary_word(dictionary, rng);
            insert_at_boundary(data, &tokens, &word, rng);
        }
        7 => insert_from_other(data, &tokens, other, rng),
        8 => {
            let number = NUMBERS[rng.below(NUMBERS.len())].as_bytes().to_vec();
            replace_number(data, &tokens, &number, rng);
        }
        _ => {
            let odd = ODD_CHARS[rng.below(ODD_CHARS.len())].as_bytes().to_vec();
            insert_at_boundary(data, &tokens, &odd, rng);
        }
    }
}

/// Byte ranges of the tokens: ASCII words, runs of ASCII whitespace, one UTF-8
/// character, or one byte of invalid UTF-8.
pub fn tokenize(data: &[u8]) -> Vec<Range<usize>> {
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let len = token_len(&data[at..]);
        tokens.push(at..at + len);
        at += len;
    }
    tokens
}

fn token_len(rest: &[u8]) -> usize {
    let is_word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let first = rest[0];
    let run = |pred: &dyn Fn(&u8) -> bool| rest.iter().take_while(|b| pred(b)).count();
    if is_word(&first) {
        return run(&is_word);
    }
    if first.is_ascii_whitespace() {
        return run(&|b: &u8| b.is_ascii_whitespace());
    }
    let char_len = match first {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    };
    match rest.get(..char_len).map(std::str::from_utf8) {
        Some(Ok(_)) => char_len,
        _ => 1,
    }
}

fn dictionary_word(dictionary: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    match rng.pick(dictionary) {
        Some(word) => word.clone(),
        None => NUMBERS[rng.below(NUMBERS.len())].as_bytes().to_vec(),
    }
}

/// A run of tokens: `start..end` indexes into `tokens`, never empty.
fn token_run(tokens: &[Range<usize>], rng: &mut Rng) -> Option<Range<usize>> {
    if tokens.is_empty() {
        return None;
    }
    let start = rng.below(tokens.len());
    let len = 1 + rng.skewed(tokens.len() - start - 1);
    Some(start..start + len)
}

/// The bytes the tokens `run` cover.
fn byte_span(tokens: &[Range<usize>], run: &Range<usize>) -> Range<usize> {
    tokens[run.start].start..tokens[run.end - 1].end
}

fn delete_tokens(data: &mut Vec<u8>, tokens: &[Range<usize>], rng: &mut Rng) {
    if let Some(run) = token_run(tokens, rng) {
        data.drain(byte_span(tokens, &run));
    }
}

/// Repeats a run of tokens, sometimes many times: `((((` is how nesting
/// limits and quadratic paths are found.
fn repeat_tokens(data: &mut Vec<u8>, tokens: &[Range<usize>], limit: usize, rng: &mut Rng) {
    let Some(run) = token_run(tokens, rng) else {
        return;
    };
    let span = byte_span(tokens, &run);
    let piece = data[span.clone()].to_vec();
    let times = if rng.one_in(8) {
        rng.between(100, 2000)
    } else {
        1 + rng.skewed(8)
    };
    let room = limit.saturating_sub(data.len()) / piece.len().max(1);
    let times = times.min(room.max(1));
    let repeated: Vec<u8> = piece
        .iter()
        .copied()
        .cycle()
        .take(piece.len() * times)
        .collect();
    data.splice(span.end..span.end, repeated);
}

fn swap_tokens(data: &mut Vec<u8>, tokens: &[Range<usize>], rng: &mut Rng) {
    if tokens.len() < 2 {
        return;
    }
    let (mut a, mut b) = (rng.below(tokens.len()), rng.below(tokens.len()));
    if a == b {
        return;
    }
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let (first, second) = (tokens[a].clone(), tokens[b].clone());
    let mut swapped = Vec::with_capacity(data.len());
    swapped.extend_from_slice(&data[..first.start]);
    swapped.extend_from_slice(&data[second.clone()]);
    swapped.extend_from_slice(&data[first.end..second.start]);
    swapped.extend_from_slice(&data[first]);
    swapped.extend_from_slice(&data[second.end..]);
    *data = swapped;
}

fn replace_token(data: &mut Vec<u8>, tokens: &[Range<usize>], word: &[u8], rng: &mut Rng) {
    match rng.pick(tokens) {
        Some(token) => {
            data.splice(token.clone(), word.iter().copied());
        }
        None => data.extend_from_slice(word),
    }
}

fn insert_at_boundary(data: &mut Vec<u8>, tokens: &[Range<usize>], word: &[u8], rng: &mut Rng) {
    let at = tokens
        .get(rng.below(tokens.len() + 1))
        .map_or(data.len(), |t| t.start);
    data.splice(at..at, word.iter().copied());
}

fn insert_from_other(data: &mut Vec<u8>, tokens: &[Range<usize>], other: &[u8], rng: &mut Rng) {
    let other_tokens = tokenize(other);
    let Some(run) = token_run(&other_tokens, rng) else {
        return;
    };
    let piece = other[byte_span(&other_tokens, &run)].to_vec();
    insert_at_boundary(data, tokens, &piece, rng);
}

fn replace_number(data: &mut Vec<u8>, tokens: &[Range<usize>], number: &[u8], rng: &mut Rng) {
    let numeric: Vec<&Range<usize>> = tokens
        .iter()
        .filter(|t| data[t.start].is_ascii_digit())
        .collect();
    match rng.pick(&numeric) {
        Some(&token) => {
            data.splice(token.clone(), number.iter().copied());
        }
        None => insert_at_boundary(data, tokens, number, rng),
    }
}

/// The distinct tokens of `texts` that are worth inserting elsewhere (no
/// whitespace runs, no long words), at most `limit` of them, to add to a
/// target's dictionary.
pub fn harvest(texts: &[Vec<u8>], limit: usize) -> Vec<Vec<u8>> {
    let mut seen = std::collections::BTreeSet::new();
    for text in texts {
        for token in tokenize(text) {
            let bytes = &text[token];
            if bytes.len() <= 24 && !bytes[0].is_ascii_whitespace() {
                seen.insert(bytes.to_vec());
            }
            if seen.len() >= limit {
                return seen.into_iter().collect();
            }
        }
    }
    seen.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_cover_the_text() {
        let text = "fn main() {\n  let x = 12; // é\u{1f600}\n}".as_bytes();
        let tokens = tokenize(text);
        assert_eq!(tokens.first().map(|t| t.start), Some(0));
        assert!(tokens.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(tokens.last().map(|t| t.end), Some(text.len()));
        assert!(tokens.iter().any(|t| &text[t.clone()] == "main".as_bytes()));
        assert!(tokens
            .iter()
            .any(|t| &text[t.clone()] == "\u{1f600}".as_bytes()));
    }

    #[test]
    fn invalid_utf8_is_split_into_bytes() {
        assert_eq!(tokenize(&[0xe2, 0x28, 0xa1]).len(), 3);
    }

    #[test]
    fn mutations_do_not_panic() {
        let mut rng = Rng::new(5);
        let dictionary = vec![b"{%".to_vec(), b"endfor".to_vec()];
        for round in 0..3000 {
            let mut data = b"{% for m in messages %}{{ m.content }}{% endfor %}".to_vec();
            data.truncate(round % 50);
            mutate(&mut data, b"x = [1, 2]", &dictionary, 1000, &mut rng);
            assert!(data.len() <= 2000, "{} bytes", data.len());
        }
    }
}
