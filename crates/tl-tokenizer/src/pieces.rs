//! The bytes each token stands for (llama.cpp's `token_to_piece`), computed once.
//!
//! - control, unknown and user-defined tokens: their text as is;
//! - normal SPM tokens: their text with U+2581 turned back into spaces;
//! - normal byte-level BPE tokens: their characters mapped back to bytes;
//! - byte tokens `<0xXX>`: that byte;
//! - anything else (unused, undefined type): nothing.

use crate::byte_encoding::char_to_byte;
use crate::error::{Error, Result};
use crate::token_attr::TokenAttr;
use crate::vocab::Vocab;
use crate::TokenizerKind;

/// Bytes the pieces may take beyond four times the tokens' text: a real
/// vocabulary's pieces are about its text, but llama.cpp's rendering of a
/// character outside the byte-level alphabet repeats the whole token, so a
/// crafted token of many such characters would grow quadratically.
const PIECE_ALLOWANCE: usize = 1 << 20;

/// All pieces in one buffer; piece `id` is `bytes[ends[id-1]..ends[id]]`.
#[derive(Debug, Clone)]
pub(crate) struct PieceTable {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl PieceTable {
    /// The pieces of every token, or an error when they would take more than
    /// four times the vocabulary's text (plus 1 MiB).
    pub(crate) fn new(vocab: &Vocab, kind: TokenizerKind) -> Result<Self> {
        let limit = vocab
            .text_bytes()
            .saturating_mul(4)
            .saturating_add(PIECE_ALLOWANCE);
        let mut bytes = Vec::with_capacity(vocab.text_bytes());
        let mut ends = Vec::with_capacity(vocab.len());
        for (id, text) in vocab.iter() {
            let room = limit - bytes.len();
            if piece_bound(text, vocab.attr(id), kind) > room {
                return Err(Error::InvalidVocab(format!(
                    "token {id} ({} bytes) has characters outside the byte-level alphabet, \
                     each of which repeats the token in its piece: the vocabulary's pieces \
                     would exceed {limit} bytes",
                    text.len()
                )));
            }
            append_piece(text, vocab.attr(id), kind, &mut bytes);
            ends.push(bytes.len());
        }
        Ok(Self { bytes, ends })
    }

    /// The piece of a token, special tokens included; empty for unknown ids.
    pub(crate) fn piece(&self, id: u32) -> &[u8] {
        let index = id as usize;
        let Some(&end) = self.ends.get(index) else {
            return &[];
        };
        let start = match index {
            0 => 0,
            _ => self.ends[index - 1],
        };
        &self.bytes[start..end]
    }
}

fn append_piece(text: &str, attr: TokenAttr, kind: TokenizerKind, out: &mut Vec<u8>) {
    let verbatim = TokenAttr::CONTROL
        .with(TokenAttr::UNKNOWN)
        .with(TokenAttr::USER_DEFINED);
    if attr.has_any(verbatim) {
        out.extend_from_slice(text.as_bytes());
    } else if attr.has_any(TokenAttr::NORMAL) {
        match kind {
            TokenizerKind::Spm => out.extend_from_slice(text.replace('\u{2581}', " ").as_bytes()),
            TokenizerKind::Bpe => append_byte_decoded(text, out),
        }
    } else if attr.has_any(TokenAttr::BYTE) {
        out.push(byte_of_byte_token(text));
    }
}

/// At least the bytes [`append_piece`] writes for a token, counted without
/// writing them: its text, plus, for each character outside GPT-2's byte
/// mapping in a byte-level token, the `[UNK_BYTE_0x…]` wrapper and the text again.
fn piece_bound(text: &str, attr: TokenAttr, kind: TokenizerKind) -> usize {
    let repeats_text = kind == TokenizerKind::Bpe
        && attr.has_any(TokenAttr::NORMAL)
        && !attr.has_any(
            TokenAttr::CONTROL
                .with(TokenAttr::UNKNOWN)
                .with(TokenAttr::USER_DEFINED),
        );
    if !repeats_text {
        return text.len();
    }
    let unmapped = text.chars().filter(|&c| char_to_byte(c).is_none()).count();
    // "[UNK_BYTE_0x", two hex digits per byte (at most 4), the text, "]".
    let each = 12 + 8 + text.len() + 1;
    text.len().saturating_add(unmapped.saturating_mul(each))
}

/// Reverses GPT-2's byte mapping. A character outside it is written the way
/// llama.cpp's `llama_decode_text` writes it.
fn append_byte_decoded(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match char_to_byte(c) {
            Some(byte) => out.push(byte),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                    out.extend_from_slice(format!("{byte:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
}

/// The byte of a `<0xXX>` token; like `strtol`, an unreadable value gives 0.
fn byte_of_byte_token(text: &str) -> u8 {
    let hex = text.get(3..5).unwrap_or("");
    let digits: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
    u8::from_str_radix(&digits, 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_by_kind_and_attribute() {
        let texts = ["<s>", "▁Hello", "<0x0A>", "ĠHi", "[unused]"];
        let attrs = [
            TokenAttr::CONTROL,
            TokenAttr::NORMAL,
            TokenAttr::BYTE,
            TokenAttr::NORMAL,
            TokenAttr::UNUSED,
        ];
        let vocab = Vocab::new(
            texts.iter().map(|t| t.to_string()).collect(),
            vec![0.0; 5],
            attrs.to_vec(),
        )
        .unwrap();
        let spm = PieceTable::new(&vocab, TokenizerKind::Spm).unwrap();
        assert_eq!(spm.piece(0), b"<s>");
        assert_eq!(spm.piece(1), b" Hello");
        assert_eq!(spm.piece(2), b"\n");
        assert_eq!(spm.piece(4), b"");
        assert_eq!(spm.piece(99), b"");
        let bpe = PieceTable::new(&vocab, TokenizerKind::Bpe).unwrap();
        assert_eq!(bpe.piece(3), b" Hi");
    }

    #[test]
    fn a_token_that_would_grow_quadratically_is_refused() {
        // Each of the 1000 characters outside the byte alphabet repeats the
        // whole 3000-byte token: 3 MB of pieces from 3 kB of text.
        let texts = vec!["\u{4e00}".repeat(1000), "\u{4e00}".repeat(2)];
        let vocab = Vocab::new(texts, vec![0.0; 2], vec![TokenAttr::NORMAL; 2]).unwrap();
        assert!(PieceTable::new(&vocab, TokenizerKind::Bpe).is_err());
        // As SPM text, the same token is just its bytes.
        assert!(PieceTable::new(&vocab, TokenizerKind::Spm).is_ok());
    }
}
