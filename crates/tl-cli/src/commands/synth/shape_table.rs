//! The tables of shapes and sizes under `tl model synth --help`, computed from the
//! engine's shape list so they cannot drift from what the command writes.

use std::fmt::Write;

use tl_engine::quantize::FileType;
use tl_engine::synth::plan::{tensor_plan, PlannedTensor};
use tl_engine::synth::ShapeName;

use super::human_count;

/// The types the size table shows (Q5_0 and Q5_1 fall between Q4_1 and Q8_0),
/// so it fits 80 columns.
const SIZE_COLUMNS: [FileType; 7] = [
    FileType::F16,
    FileType::Q8_0,
    FileType::Q4_0,
    FileType::Q4_1,
    FileType::Q4_K_M,
    FileType::Q5_K_M,
    FileType::Q6_K,
];

/// Hyperparameters of every shape, then parameter count and tensor data size
/// per weight type (the vocabulary adds a few MB to a file).
pub fn shape_table() -> String {
    let mut table = String::from(
        "Shapes (output tied: the output head reuses the token embedding):\n\
         \n  shape       arch   blocks hidden   ffn heads head  vocab output",
    );
    for name in ShapeName::ALL {
        let shape = name.shape();
        let _ = write!(
            table,
            "\n  {:<11} {:<6} {:>6} {:>6} {:>5} {:>5} {:>4} {:>6} {}",
            name.name(),
            shape.architecture.name(),
            shape.block_count,
            shape.embedding_length,
            shape.feed_forward_length,
            format!("{}/{}", shape.head_count, shape.head_count_kv),
            shape.head_dim,
            shape.vocab_size,
            if shape.tied_embeddings {
                "tied"
            } else {
                "separate"
            },
        );
    }
    table.push_str(
        "\n\nSizes (tensor data; the vocabulary adds up to a few MB):\n\
         \n  shape        params",
    );
    for quant in SIZE_COLUMNS {
        let _ = write!(table, "{:>8}", quant.name());
    }
    for name in ShapeName::ALL {
        let shape = name.shape();
        let parameters: u64 = tensor_plan(&shape, FileType::F16)
            .iter()
            .map(PlannedTensor::elements)
            .sum();
        let _ = write!(
            table,
            "\n  {:<11} {:>7}",
            name.name(),
            human_count(parameters)
        );
        for quant in SIZE_COLUMNS {
            let bytes: u64 = tensor_plan(&shape, quant)
                .iter()
                .filter_map(PlannedTensor::size_bytes)
                .sum();
            let _ = write!(table, "{:>8}", compact_bytes(bytes));
        }
    }
    table.push_str("\n\nThe tiny shapes' vocabulary is the --vocab file's size (512 without one).");
    table
}

/// Sizes rounded to fit a column: `2.2 GB`, `619 MB`, `80 KB`.
fn compact_bytes(n: u64) -> String {
    match n as f64 {
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.0} MB", n / 1e6),
        n => format!("{:.0} KB", n / 1e3),
    }
}
