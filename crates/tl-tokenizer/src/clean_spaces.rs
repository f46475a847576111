//! llama.cpp's `clean_spaces` post-processing of decoded text, byte for byte.
//!
//! Hugging Face's `clean_up_tokenization_spaces` for tokenizers that put a space
//! before punctuation: three in-place passes over the bytes. They are ported
//! literally (including reads of bytes an earlier step overwrote) because the
//! output must match llama.cpp exactly.

/// Applies the three passes to `text` in place.
pub(crate) fn clean_spaces(text: &mut Vec<u8>) {
    remove_space_before_punctuation(text);
    remove_spaces_around_lone_apostrophe(text);
    remove_space_before_contraction(text);
}

/// `" ?"`, `" !"`, `" ."`, `" ,"` lose their space.
fn remove_space_before_punctuation(text: &mut Vec<u8>) {
    let len = text.len();
    let mut total = usize::from(len > 0);
    for i in 1..len {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

/// `" ' "` becomes `"'"`.
fn remove_spaces_around_lone_apostrophe(text: &mut Vec<u8>) {
    let len = text.len();
    let mut total = usize::from(len > 0);
    let mut i = 1;
    while i < len {
        let x = text[i];
        if x == b'\'' && i + 1 < len && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    text.truncate(total);
}

/// `" 's"`, `" 'm"`, `" 're"`, `" 've"` lose their space (`'t`, `'d`, `'ll` keep it).
fn remove_space_before_contraction(text: &mut Vec<u8>) {
    let len = text.len();
    let mut total = usize::from(len > 0);
    for i in 1..len {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < len && joins_previous_word(text, i, len) {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

fn joins_previous_word(text: &[u8], apostrophe: usize, len: usize) -> bool {
    let x1 = text[apostrophe + 1];
    if matches!(x1, b's' | b'm') {
        return true;
    }
    if matches!(x1, b't' | b'd') || apostrophe + 2 >= len {
        return false;
    }
    let x2 = text[apostrophe + 2];
    matches!((x1, x2), (b'r', b'e') | (b'v', b'e'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(text: &str) -> String {
        let mut bytes = text.as_bytes().to_vec();
        clean_spaces(&mut bytes);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn removes_spaces_like_llama_cpp() {
        assert_eq!(cleaned("Hello , world !"), "Hello, world!");
        assert_eq!(cleaned("a ' b"), "a'b");
        assert_eq!(
            cleaned("he 's I 'm we 're they 've"),
            "he's I'm we're they've"
        );
        assert_eq!(cleaned("don 't I 'd we 'll"), "don 't I 'd we 'll");
        assert_eq!(cleaned(""), "");
        assert_eq!(cleaned(" ."), ".");
    }
}
