//! Hand-written versions of the GPT-2 and Llama 3 split regexes.
//!
//! llama.cpp does not run these two regexes through a regex engine: it walks the
//! code points with the rules below (`unicode_regex_split_custom_gpt2/llama3`), and
//! where that walk differs from the regex (e.g. a lone space before a letter-less
//! end), llama.cpp's output is the reference. So these mirror the walk step by step.
//!
//! Both work on segments of a [`CodepointText`] given as lengths in code points
//! and return the lengths of the pieces they cut each segment into.

use crate::codepoint::CodepointFlags;
use crate::split::CodepointText;

/// One segment of the text; positions past its end read as "outside".
struct Segment<'a> {
    text: &'a CodepointText,
    start: usize,
    end: usize,
}

impl Segment<'_> {
    fn char_at(&self, pos: usize) -> Option<char> {
        (self.start..self.end)
            .contains(&pos)
            .then(|| self.text.chars[pos])
    }

    fn flags_at(&self, pos: usize) -> CodepointFlags {
        if (self.start..self.end).contains(&pos) {
            self.text.flags[pos]
        } else {
            CodepointFlags::OUTSIDE
        }
    }

    /// How many whitespace code points start at `pos`, and where the last `\r`
    /// or `\n` among them ends.
    fn whitespace_run(&self, pos: usize) -> (usize, Option<usize>) {
        let mut count = 0;
        let mut end_of_last_newline = None;
        while self.flags_at(pos + count).is_whitespace() {
            if matches!(self.char_at(pos + count), Some('\r' | '\n')) {
                end_of_last_newline = Some(pos + count + 1);
            }
            count += 1;
        }
        (count, end_of_last_newline)
    }

    /// The end of the English contraction (`'s`, `'re`, ...) starting at `pos`, if any.
    fn contraction_end(&self, pos: usize, fold_case: bool) -> Option<usize> {
        if self.char_at(pos) != Some('\'') || pos + 1 >= self.end {
            return None;
        }
        let fold = |c: Option<char>| c.map(|c| if fold_case { c.to_ascii_lowercase() } else { c });
        let next = fold(self.char_at(pos + 1));
        if matches!(next, Some('s' | 't' | 'm' | 'd')) {
            return Some(pos + 2);
        }
        if pos + 2 >= self.end {
            return None;
        }
        let after = fold(self.char_at(pos + 2));
        match (next, after) {
            (Some('r'), Some('e')) | (Some('v'), Some('e')) | (Some('l'), Some('l')) => {
                Some(pos + 3)
            }
            _ => None,
        }
    }
}

/// Collects piece lengths; `cut(end)` closes the piece that began at the last cut.
struct Pieces<'a> {
    last_cut: usize,
    lengths: &'a mut Vec<usize>,
}

impl Pieces<'_> {
    fn cut(&mut self, end: usize) {
        if end > self.last_cut {
            self.lengths.push(end - self.last_cut);
        }
        self.last_cut = end;
    }
}

fn is_word_char(flags: CodepointFlags) -> bool {
    flags.is_whitespace() || flags.is_letter() || flags.is_number()
}

/// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
pub(crate) fn split_gpt2(text: &CodepointText, segments: &[usize]) -> Vec<usize> {
    for_each_segment(text, segments, gpt2_segment)
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
///  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
pub(crate) fn split_llama3(text: &CodepointText, segments: &[usize]) -> Vec<usize> {
    for_each_segment(text, segments, llama3_segment)
}

fn for_each_segment(
    text: &CodepointText,
    segments: &[usize],
    split_segment: fn(&Segment<'_>, &mut Pieces<'_>),
) -> Vec<usize> {
    let mut lengths = Vec::with_capacity(segments.len());
    let mut start = 0;
    for &len in segments {
        let segment = Segment {
            text,
            start,
            end: start + len,
        };
        let mut pieces = Pieces {
            last_cut: start,
            lengths: &mut lengths,
        };
        split_segment(&segment, &mut pieces);
        start += len;
    }
    lengths
}

fn gpt2_segment(seg: &Segment<'_>, pieces: &mut Pieces<'_>) {
    let mut pos = seg.start;
    while pos < seg.end {
        if let Some(end) = seg.contraction_end(pos, false) {
            pos = end;
            pieces.cut(pos);
            continue;
        }
        let space_first = seg.char_at(pos) == Some(' ');
        let mut flags = if space_first {
            seg.flags_at(pos + 1)
        } else {
            seg.flags_at(pos)
        };
        // One class per alternative: letters, numbers, then anything else that is
        // neither whitespace nor outside the segment.
        let same_class: Option<fn(CodepointFlags) -> bool> = if flags.is_letter() {
            Some(CodepointFlags::is_letter)
        } else if flags.is_number() {
            Some(CodepointFlags::is_number)
        } else if !is_word_char(flags) && flags.is_inside() {
            Some(|f| !is_word_char(f) && f.is_inside())
        } else {
            None
        };
        if let Some(in_class) = same_class {
            pos += usize::from(space_first);
            while in_class(flags) {
                pos += 1;
                flags = seg.flags_at(pos);
            }
            pieces.cut(pos);
            continue;
        }
        pos = whitespace_piece_end(seg, pos);
        pieces.cut(pos);
    }
}

/// `\s+(?!\S)|\s+`, or a single code point when nothing matches.
fn whitespace_piece_end(seg: &Segment<'_>, pos: usize) -> usize {
    let (count, _) = seg.whitespace_run(pos);
    if count > 1 && seg.char_at(pos + count).is_some() {
        // Leave the last space to the word that follows.
        pos + count - 1
    } else if count > 0 {
        pos + count
    } else {
        pos + 1
    }
}

fn llama3_segment(seg: &Segment<'_>, pieces: &mut Pieces<'_>) {
    let mut pos = seg.start;
    while pos < seg.end {
        pos = llama3_piece_end(seg, pos);
        pieces.cut(pos);
    }
}

fn llama3_piece_end(seg: &Segment<'_>, mut pos: usize) -> usize {
    if let Some(end) = seg.contraction_end(pos, true) {
        return end;
    }
    let c = seg.char_at(pos);
    let flags = seg.flags_at(pos);
    let is_newline = matches!(c, Some('\r' | '\n'));
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if !(is_newline || flags.is_number())
        && (flags.is_letter() || seg.flags_at(pos + 1).is_letter())
    {
        pos += 1;
        while seg.flags_at(pos).is_letter() {
            pos += 1;
        }
        return pos;
    }
    // \p{N}{1,3}
    if flags.is_number() {
        let start = pos;
        while seg.flags_at(pos).is_number() && pos - start < 3 {
            pos += 1;
        }
        return pos;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' — llama.cpp tests the first code point's own
    // flags here, not the one after the optional space.
    let space_first = c == Some(' ');
    let mut next_flags = if space_first {
        seg.flags_at(pos + 1)
    } else {
        flags
    };
    if !is_word_char(next_flags) && flags.is_inside() {
        pos += usize::from(space_first);
        while !is_word_char(next_flags) && next_flags.is_inside() {
            pos += 1;
            next_flags = seg.flags_at(pos);
        }
        while matches!(seg.char_at(pos), Some('\r' | '\n')) {
            pos += 1;
        }
        return pos;
    }
    // \s*[\r\n]+
    let (count, end_of_last_newline) = seg.whitespace_run(pos);
    if let Some(end) = end_of_last_newline {
        return end;
    }
    if count > 1 && seg.char_at(pos + count).is_some() {
        return pos + count - 1;
    }
    if count > 0 {
        return pos + count;
    }
    pos + 1
}
