//! Developer tool: writes the logits after a prefill of a token list (the last
//! row, or every row with ALL_ROWS=1) as raw f32 to a file, for comparison with
//! another engine's logits.
//!
//! usage: dump_logits MODEL.gguf OUT.f32 ID ID ...

use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: dump_logits MODEL.gguf OUT.f32 ID ID ...".into());
    }
    let ids: Vec<u32> = args[3..]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let file = tl_gguf::GgufFile::open(&args[1])?;
    let model = tl_engine::model::Model::load(&file, 1024)?;
    let mut cache = model.new_cache(1024)?;
    let mut out = std::fs::File::create(&args[2])?;
    let which = if std::env::var_os("ALL_ROWS").is_some() {
        tl_engine::model::Logits::All
    } else {
        tl_engine::model::Logits::Last
    };
    let logits = model.forward(&ids, 0, &mut cache, which)?;
    for v in logits {
        out.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}
