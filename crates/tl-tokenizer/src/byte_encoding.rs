//! GPT-2's reversible byte-to-character mapping (`bytes_to_unicode`).
//!
//! Byte-level BPE vocabularies spell every byte as a printable character so that
//! tokens are valid text: printable Latin-1 bytes stand for themselves, the other
//! 68 bytes are moved to U+0100 and up, in byte order.

/// The character that spells `byte` in a byte-level BPE vocabulary.
pub(crate) fn byte_to_char(byte: u8) -> char {
    if stands_for_itself(byte) {
        return char::from(byte);
    }
    // The moved bytes are 0x00..=0x20, 0x7F..=0xA0 and 0xAD, numbered in order.
    let moved_index = match byte {
        0x00..=0x20 => u32::from(byte),
        0x7F..=0xA0 => 33 + u32::from(byte - 0x7F),
        _ => 67,
    };
    // 256 + at most 67 is always a valid scalar value.
    char::from_u32(256 + moved_index).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The byte a vocabulary character spells, if it is one of the 256.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let code = u32::from(c);
    if let Ok(byte) = u8::try_from(code) {
        return stands_for_itself(byte).then_some(byte);
    }
    match code.checked_sub(256)? {
        index @ 0..=32 => u8::try_from(index).ok(),
        index @ 33..=66 => u8::try_from(index - 33 + 0x7F).ok(),
        67 => Some(0xAD),
        _ => None,
    }
}

/// `!`..`~`, `¡`..`¬` and `®`..`ÿ` are printable and kept as they are.
fn stands_for_itself(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// Precomputed mapping both ways, for the hot paths.
#[derive(Debug, Clone)]
pub(crate) struct ByteEncoding {
    chars: [char; 256],
}

impl ByteEncoding {
    pub(crate) fn new() -> Self {
        let mut chars = ['\0'; 256];
        for (byte, slot) in (0..=255u8).zip(chars.iter_mut()) {
            *slot = byte_to_char(byte);
        }
        Self { chars }
    }

    pub(crate) fn char_of(&self, byte: u8) -> char {
        self.chars[usize::from(byte)]
    }

    /// Spells raw bytes the way the vocabulary does.
    pub(crate) fn encode(&self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.char_of(b)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_matches_gpt2() {
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(0), 'Ā');
        assert_eq!(byte_to_char(0xAD), 'Ń');
    }

    #[test]
    fn mapping_round_trips() {
        for byte in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(byte)), Some(byte));
        }
        assert_eq!(char_to_byte('€'), None);
    }
}
