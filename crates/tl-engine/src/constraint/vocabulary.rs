//! The vocabulary as llguidance sees it: each token's bytes, with control
//! tokens marked so that no grammar can produce them by their text.

use tl_tokenizer::Tokenizer;

/// Every token's bytes, by id, and the tokens that end an answer (the first
/// is the end-of-sequence token llguidance reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintVocabulary {
    pub token_bytes: Vec<Vec<u8>>,
    pub end_tokens: Vec<u32>,
}

/// llguidance's mark for a special token: 0xFF never occurs in UTF-8, so a
/// grammar's text cannot match `<|im_start|>` spelled this way.
const SPECIAL_TOKEN_MARKER: u8 = 0xff;

impl ConstraintVocabulary {
    /// The vocabulary of `tokenizer`: control, unknown and end tokens get
    /// the special mark, the others their decoded bytes.
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> Self {
        let vocab_size = u32::try_from(tokenizer.vocab_size()).unwrap_or(u32::MAX);
        let token_bytes = (0..vocab_size)
            .map(|id| token_bytes(tokenizer, id))
            .collect();
        let mut end_tokens: Vec<u32> = tokenizer.end_of_generation_ids().collect();
        // The model's own end-of-sequence token first, when it has one.
        if let Some(eos) = tokenizer.eos_id() {
            end_tokens.retain(|&t| t != eos);
            end_tokens.insert(0, eos);
        }
        end_tokens.retain(|&t| t < vocab_size);
        ConstraintVocabulary {
            token_bytes,
            end_tokens,
        }
    }
}

fn token_bytes(tokenizer: &Tokenizer, id: u32) -> Vec<u8> {
    let special = tokenizer.is_control(id)
        || tokenizer.is_end_of_generation(id)
        || tokenizer.unk_id() == Some(id);
    if !special {
        return tokenizer.token_to_bytes(id, false);
    }
    let text = tokenizer.token_text(id).unwrap_or_default();
    let mut bytes = Vec::with_capacity(1 + text.len());
    bytes.push(SPECIAL_TOKEN_MARKER);
    bytes.extend_from_slice(text.as_bytes());
    bytes
}
