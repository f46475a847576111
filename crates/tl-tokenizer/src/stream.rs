//! Incremental detokenization for streaming generated text.
//!
//! A token can end in the middle of a UTF-8 character (byte-fallback tokens, or
//! byte-level BPE splitting an emoji), so bytes are buffered until they form whole
//! characters. Bytes that can never become valid UTF-8 are emitted as U+FFFD at
//! once, so one bad byte does not hold back the rest of the stream; a character
//! still unfinished when the stream ends is dropped.

use crate::Tokenizer;

/// Turns a stream of token ids into text, one complete character at a time.
#[derive(Debug, Clone, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    skip_special: bool,
}

impl StreamDecoder {
    /// A decoder; with `skip_special`, control tokens produce no text.
    pub fn new(skip_special: bool) -> Self {
        Self {
            pending: Vec::new(),
            skip_special,
        }
    }

    /// Adds one token and returns the text it completed (possibly empty). Ids
    /// outside the vocabulary add nothing.
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> String {
        self.pending
            .extend_from_slice(&tokenizer.token_to_bytes(id, self.skip_special));
        self.take_complete()
    }

    /// Ends the stream: what is left is the start of a character that never
    /// finished (the stream was cut inside it, by a token limit say), so it
    /// is dropped rather than sent as U+FFFD; invalid bytes were replaced
    /// when they came. Returns the text still held back, which is none.
    pub fn finish(self) -> String {
        // `take_complete` leaves only a trailing incomplete character.
        debug_assert!(
            matches!(
                std::str::from_utf8(&self.pending),
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none()
            ) || self.pending.is_empty()
        );
        String::new()
    }

    /// Removes and returns the longest prefix of the buffer that is decided:
    /// everything except a trailing, still incomplete character.
    fn take_complete(&mut self) -> String {
        let mut text = String::new();
        let mut consumed = 0;
        loop {
            match std::str::from_utf8(&self.pending[consumed..]) {
                Ok(valid) => {
                    text.push_str(valid);
                    consumed = self.pending.len();
                    break;
                }
                Err(error) => {
                    let valid_end = consumed + error.valid_up_to();
                    text.push_str(&String::from_utf8_lossy(&self.pending[consumed..valid_end]));
                    match error.error_len() {
                        // Invalid bytes: decided now, they will never become a character.
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            consumed = valid_end + bad;
                        }
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            consumed = valid_end;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..consumed);
        text
    }
}
