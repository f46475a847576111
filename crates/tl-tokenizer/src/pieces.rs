//! The bytes each token stands for (llama.cpp's `token_to_piece`), computed once.
//!
//! - control, unknown and user-defined tokens: their text as is;
//! - normal SPM tokens: their text with U+2581 turned back into spaces;
//! - normal byte-level BPE tokens: their characters mapped back to bytes;
//! - byte tokens `<0xXX>`: that byte;
//! - anything else (unused, undefined type): nothing.

use crate::byte_encoding::char_to_byte;
use crate::token_attr::TokenAttr;
use crate::vocab::Vocab;
use crate::TokenizerKind;

/// All pieces in one buffer; piece `id` is `bytes[ends[id-1]..ends[id]]`.
#[derive(Debug, Clone)]
pub(crate) struct PieceTable {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl PieceTable {
    pub(crate) fn new(vocab: &Vocab, kind: TokenizerKind) -> Self {
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(vocab.len());
        for (id, text) in vocab.iter() {
            append_piece(text, vocab.attr(id), kind, &mut bytes);
            ends.push(bytes.len());
        }
        Self { bytes, ends }
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
        let spm = PieceTable::new(&vocab, TokenizerKind::Spm);
        assert_eq!(spm.piece(0), b"<s>");
        assert_eq!(spm.piece(1), b" Hello");
        assert_eq!(spm.piece(2), b"\n");
        assert_eq!(spm.piece(4), b"");
        assert_eq!(spm.piece(99), b"");
        let bpe = PieceTable::new(&vocab, TokenizerKind::Bpe);
        assert_eq!(bpe.piece(3), b" Hi");
    }
}
