//! The tables of shapes and sizes under `tl model synth --help`, computed from the
//! engine's shape list so they cannot drift from what the command writes.

use std::fmt::Write;

use tl_engine::synth::plan::{tensor_plan, PlannedTensor};
use tl_engine::synth::{ShapeName, SynthQuant};

use super::human_count;

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
    for quant in SynthQuant::ALL {
        let _ = write!(table, "{:>9}", quant.name());
    }
    for name in ShapeName::ALL {
        let shape = name.shape();
        let parameters: u64 = tensor_plan(&shape, SynthQuant::F16)
            .iter()
            .map(PlannedTensor::elements)
            .sum();
        let _ = write!(
            table,
            "\n  {:<11} {:>7}",
            name.name(),
            human_count(parameters)
        );
        for quant in SynthQuant::ALL {
            let bytes: u64 = tensor_plan(&shape, quant)
                .iter()
                .filter_map(PlannedTensor::size_bytes)
                .sum();
            let _ = write!(table, "{:>9}", compact_bytes(bytes));
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
