//! Making new inputs from old ones. Each target's inputs have a shape, and the
//! mutations follow it: GGUF files are changed through their structure and
//! then in their header bytes, text by tokens, requests by their JSON tree.
//! Blind byte mutations are always in the mix, since what a structure-aware
//! mutation cannot express (a string that is not UTF-8, a count that lies) is
//! exactly what a parser must survive.

pub mod bytes;
pub mod gguf;
pub mod gguf_values;
pub mod json;
pub mod text;

use crate::rng::Rng;
use gguf::{GgufDictionary, GgufParts};

/// How a target's inputs are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A GGUF file.
    Gguf,
    /// Text in some language (Jinja, `.tl`, prompts).
    Text,
    /// `METHOD PATH`, a newline, then a JSON body.
    Request,
}

/// What mutations may insert: text words (keywords, operators, odd strings),
/// keys (GGUF metadata keys or JSON field names), string values, and GGUF
/// tensor names.
#[derive(Debug, Clone, Default)]
pub struct Dictionary {
    pub words: Vec<Vec<u8>>,
    pub keys: Vec<&'static str>,
    pub strings: Vec<&'static str>,
    pub tensor_names: Vec<&'static str>,
    /// Request lines (`POST /api/chat`), for `Shape::Request`.
    pub routes: Vec<&'static str>,
}

/// A new input.
pub struct Mutant {
    pub bytes: Vec<u8>,
    /// For a GGUF input written by a structural mutation with no byte
    /// mutation after it: the parts it was written from, so that it can be
    /// shrunk through its structure if it fails.
    pub parts: Option<GgufParts>,
}

/// A target's mutator.
#[derive(Debug, Clone)]
pub struct Mutator {
    pub shape: Shape,
    pub dictionary: Dictionary,
    pub max_len: usize,
}

impl Mutator {
    /// A mutant of `input`; `other` is another corpus entry to splice from.
    pub fn mutate(&self, input: &[u8], other: &[u8], rng: &mut Rng) -> Mutant {
        let (mut bytes, mut parts) = match self.shape {
            Shape::Gguf => self.mutate_gguf(input, other, rng),
            Shape::Text => (self.mutate_text(input.to_vec(), other, rng), None),
            Shape::Request => (self.mutate_request(input, other, rng), None),
        };
        if bytes.len() > self.max_len {
            bytes.truncate(self.max_len);
            parts = None;
        }
        Mutant { bytes, parts }
    }

    fn mutate_gguf(
        &self,
        input: &[u8],
        other: &[u8],
        rng: &mut Rng,
    ) -> (Vec<u8>, Option<GgufParts>) {
        let dictionary = GgufDictionary {
            keys: &self.dictionary.keys,
            strings: &self.dictionary.strings,
            tensor_names: &self.dictionary.tensor_names,
        };
        let parsed = GgufParts::parse(input);
        // Unparsable input: all of it may be header.
        let input_header_end = input
            .len()
            .saturating_sub(parsed.as_ref().map_or(0, GgufParts::data_len));
        let structural = parsed.filter(|_| !rng.one_in(4)).and_then(|mut parts| {
            for _ in 0..1 + rng.skewed(3) {
                gguf::mutate(&mut parts, &dictionary, rng);
            }
            if parts.approx_len() > self.max_len {
                return None;
            }
            let bytes = parts.to_bytes()?;
            let header_end = bytes.len().saturating_sub(parts.data_len());
            Some((bytes, header_end, parts))
        });
        let (mut data, header_end, mut parts) = match structural {
            Some((bytes, header_end, parts)) => (bytes, header_end, Some(parts)),
            None => (input.to_vec(), input_header_end, None),
        };
        if parts.is_none() || rng.one_in(3) {
            parts = None;
            for _ in 0..1 + rng.skewed(3) {
                // Header bytes mostly; now and then anywhere (a truncated file).
                let end = if rng.one_in(8) {
                    data.len()
                } else {
                    header_end
                };
                bytes::mutate(&mut data, other, 0..end, rng);
            }
        }
        (data, parts)
    }

    fn mutate_text(&self, mut data: Vec<u8>, other: &[u8], rng: &mut Rng) -> Vec<u8> {
        for _ in 0..1 + rng.skewed(4) {
            if rng.one_in(7) {
                let len = data.len();
                bytes::mutate(&mut data, other, 0..len, rng);
            } else {
                text::mutate(&mut data, other, &self.dictionary.words, self.max_len, rng);
            }
        }
        data
    }

    /// The request line is kept (or, now and then, swapped for another
    /// route); the body gets JSON-tree mutations while it parses, text
    /// mutations otherwise.
    fn mutate_request(&self, input: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
        let split = input
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(input.len());
        let (mut head, body) = (
            input[..split].to_vec(),
            input.get(split + 1..).unwrap_or(&[]),
        );
        if rng.one_in(10) {
            if let Some(route) = rng.pick(&self.dictionary.routes) {
                head = route.as_bytes().to_vec();
            }
        }
        let parsed = serde_json::from_slice::<serde_json::Value>(body).ok();
        let body = match parsed.filter(|_| !rng.one_in(3)) {
            Some(mut document) => {
                let dictionary = json::JsonDictionary {
                    keys: &self.dictionary.keys,
                    strings: &self.dictionary.strings,
                    limit: self.max_len,
                };
                for _ in 0..1 + rng.skewed(3) {
                    json::mutate(&mut document, &dictionary, rng);
                }
                serde_json::to_vec(&document).unwrap_or_default()
            }
            None => self.mutate_text(body.to_vec(), other, rng),
        };
        head.push(b'\n');
        head.extend_from_slice(&body);
        head
    }
}
