//! The builtin reference in `docs/language.md` (between the `builtins:start` and
//! `builtins:end` markers) is generated from the builtin tables; this test fails
//! when it is out of date, and `TL_BLESS=1` rewrites it.

use std::path::Path;

const START: &str = "<!-- builtins:start (generated from the builtin tables; TL_BLESS=1 cargo test -p tl-lang --test builtin_reference rewrites it) -->\n";
const END: &str = "<!-- builtins:end -->";

#[test]
fn reference_matches_the_builtin_tables() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md");
    let text = std::fs::read_to_string(&path).expect("docs/language.md is readable");
    let (Some(start), Some(end)) = (text.find(START), text.find(END)) else {
        panic!("docs/language.md lacks the builtins:start / builtins:end markers");
    };
    let current = &text[start + START.len()..end];
    let expected = format!("\n{}", tl_lang::builtins::reference_markdown());
    if current == expected {
        return;
    }
    if std::env::var_os("TL_BLESS").is_some() {
        let updated = format!("{}{START}{expected}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).expect("docs/language.md is writable");
        return;
    }
    panic!("the builtin reference in docs/language.md is out of date; run with TL_BLESS=1 to regenerate it");
}
