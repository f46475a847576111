//! Per-token attributes (llama.cpp's `llama_token_attr`).
//!
//! GGUF stores one `token_type` per token; llama.cpp turns it into a bit set so
//! that later fix-ups can add bits (a text-detected end-of-turn token becomes
//! CONTROL, a phi-3 special token gains RSTRIP) without losing the original type.

/// A set of token attribute bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TokenAttr(u16);

impl TokenAttr {
    pub(crate) const UNDEFINED: Self = Self(0);
    pub(crate) const UNKNOWN: Self = Self(1 << 0);
    pub(crate) const UNUSED: Self = Self(1 << 1);
    pub(crate) const NORMAL: Self = Self(1 << 2);
    pub(crate) const CONTROL: Self = Self(1 << 3);
    pub(crate) const USER_DEFINED: Self = Self(1 << 4);
    pub(crate) const BYTE: Self = Self(1 << 5);
    pub(crate) const LSTRIP: Self = Self(1 << 7);
    pub(crate) const RSTRIP: Self = Self(1 << 8);

    /// The attribute of a GGUF `tokenizer.ggml.token_type` value, or `None` for
    /// a value outside llama.cpp's `llama_token_type` (0 to 6).
    pub(crate) fn from_gguf_type(token_type: i64) -> Option<Self> {
        Some(match token_type {
            0 => Self::UNDEFINED,
            1 => Self::NORMAL,
            2 => Self::UNKNOWN,
            3 => Self::CONTROL,
            4 => Self::USER_DEFINED,
            5 => Self::UNUSED,
            6 => Self::BYTE,
            _ => return None,
        })
    }

    /// True when any bit of `other` is set.
    pub(crate) fn has_any(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    pub(crate) fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub(crate) fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}
