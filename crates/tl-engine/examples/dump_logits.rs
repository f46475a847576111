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
    let options = tl_engine::GpuOptions::default();
    let model = tl_engine::Backend::load(&file, 1024, tl_engine::DeviceChoice::Cpu, &options)?;
    let model = model.backend;
    let mut cache = model.new_cache(1024)?;
    let mut out = std::fs::File::create(&args[2])?;
    let want = if std::env::var_os("ALL_ROWS").is_some() {
        tl_engine::Wanted::EveryRow
    } else {
        tl_engine::Wanted::Logits
    };
    let tl_engine::Picked::Row(logits) = model.step_one(&ids, &mut cache, want)? else {
        return Err("a step asked for logits gave a token".into());
    };
    for v in logits {
        out.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}
