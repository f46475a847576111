//! The file types we write: llama.cpp's `llama_ftype` values for them and
//! the tensor type each starts from.

use std::fmt;
use std::str::FromStr;

use tl_gguf::GgmlType;

use crate::error::{Error, Result};

/// A whole file's weight type, as `llama-quantize` names it.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    F16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    /// Q4_K, with Q6_K for the output and a spread of `attn_v` and `ffn_down` layers.
    Q4_K_M,
    /// Q5_K, with Q6_K where Q4_K_M has it.
    Q5_K_M,
    Q6_K,
}

impl FileType {
    /// Every type, in the order help texts list them.
    pub const ALL: [FileType; 9] = [
        FileType::F16,
        FileType::Q8_0,
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q4_K_M,
        FileType::Q5_K_M,
        FileType::Q6_K,
    ];

    /// The name on the command line and in file names (`q4_k_m`).
    pub fn name(self) -> &'static str {
        match self {
            FileType::F16 => "f16",
            FileType::Q8_0 => "q8_0",
            FileType::Q4_0 => "q4_0",
            FileType::Q4_1 => "q4_1",
            FileType::Q5_0 => "q5_0",
            FileType::Q5_1 => "q5_1",
            FileType::Q4_K_M => "q4_k_m",
            FileType::Q5_K_M => "q5_k_m",
            FileType::Q6_K => "q6_k",
        }
    }

    /// The tensor type matrices get unless the recipe says otherwise
    /// (`llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::F16 => GgmlType::F16,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
            FileType::Q5_0 => GgmlType::Q5_0,
            FileType::Q5_1 => GgmlType::Q5_1,
            FileType::Q4_K_M => GgmlType::Q4_K,
            FileType::Q5_K_M => GgmlType::Q5_K,
            FileType::Q6_K => GgmlType::Q6_K,
        }
    }

    /// Whether the file mixes types per tensor (the K-quant files); the
    /// others put every matrix in [`default_type`](Self::default_type)
    /// when synthesized.
    pub fn is_mix(self) -> bool {
        self.default_type().block_elements() == 256
    }

    /// llama.cpp's `llama_ftype` (`general.file_type`).
    pub fn file_type(self) -> u32 {
        match self {
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q4_K_M => 15,
            FileType::Q5_K_M => 17,
            FileType::Q6_K => 18,
        }
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FileType {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.to_ascii_lowercase();
        FileType::ALL
            .into_iter()
            .find(|ty| ty.name() == wanted)
            .ok_or_else(|| {
                let known = FileType::ALL.map(FileType::name).join(", ");
                Error::InvalidRequest(format!("unknown weight type '{text}' (known: {known})"))
            })
    }
}
