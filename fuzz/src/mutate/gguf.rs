//! Structure-aware GGUF mutations: a file the reader accepts is taken apart
//! into metadata and tensors, one of them is changed (a value, a count, a
//! type, a key, a tensor's dims or element type), and the project's own
//! `GgufWriter` puts it back together. The result is well-formed where the
//! writer checks and odd everywhere else, so it gets past the reader's framing
//! into the code that interprets the metadata (configuration, tokenizer,
//! template). Byte mutations of the header (the caller's) then break the
//! framing itself.

use tl_gguf::{GgmlType, GgufFile, GgufWriter, TensorData, Value};

use super::gguf_values::{edge_integer, random_value, tweak_tokenizer_value, tweak_value};
use crate::rng::Rng;

/// Tensors whose data would exceed this are not made: the fuzzer is after
/// header handling, and big inputs only slow it down.
const MAX_TENSOR_BYTES: u64 = 1 << 20;

/// A GGUF file taken apart.
#[derive(Debug, Clone)]
pub struct GgufParts {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorPart>,
}

#[derive(Debug, Clone)]
pub struct TensorPart {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    pub data: Vec<u8>,
}

impl GgufParts {
    /// The parts of `bytes`, if the reader accepts it.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let file = GgufFile::from_bytes(bytes.to_vec()).ok()?;
        let tensors = file
            .tensors()
            .iter()
            .map(|info| TensorPart {
                name: info.name.clone(),
                dims: info.dims.clone(),
                ggml_type: info.ggml_type,
                data: file.data_of(info).to_vec(),
            })
            .collect();
        Some(Self {
            version: file.version(),
            metadata: file.metadata().to_vec(),
            tensors,
        })
    }

    /// The file, if the writer accepts the parts.
    pub fn to_bytes(&self) -> Option<Vec<u8>> {
        let mut writer = GgufWriter::new(self.version);
        for (key, value) in &self.metadata {
            writer.set_metadata(key.clone(), value.clone());
        }
        for tensor in &self.tensors {
            writer
                .add_tensor(
                    tensor.name.clone(),
                    tensor.dims.clone(),
                    tensor.ggml_type,
                    TensorData::Bytes(tensor.data.clone()),
                )
                .ok()?;
        }
        writer.to_bytes().ok()
    }

    /// About how many bytes the file would take, to skip writing one that
    /// would be cut to the length limit anyway. Padding counts: an alignment
    /// of 2^31 (a power of two, so the writer takes it) pads the header to
    /// 2 GiB.
    pub fn approx_len(&self) -> usize {
        let alignment = self
            .metadata
            .iter()
            .find(|(key, _)| key == "general.alignment")
            .and_then(|(_, value)| value.as_u64())
            .unwrap_or(32) as usize;
        let padding = alignment.saturating_mul(self.tensors.len() + 1);
        let metadata: usize = self
            .metadata
            .iter()
            .map(|(key, value)| 12 + key.len() + value_len(value))
            .sum();
        let tensors: usize = self.tensors.iter().map(|t| 64 + t.name.len()).sum();
        (metadata + tensors + self.data_len()).saturating_add(padding)
    }

    /// Bytes of tensor data: the end of the file, where byte mutations are
    /// wasted.
    pub fn data_len(&self) -> usize {
        self.tensors.iter().map(|t| t.data.len()).sum()
    }

    fn tokens(&self) -> Vec<String> {
        self.metadata
            .iter()
            .find(|(key, _)| key == "tokenizer.ggml.tokens")
            .and_then(|(_, value)| match value {
                Value::Array(tl_gguf::Array::String(tokens)) => {
                    Some(tokens.iter().map(str::to_owned).collect())
                }
                _ => None,
            })
            .unwrap_or_default()
    }
}

fn value_len(value: &Value) -> usize {
    match value {
        Value::String(text) => 8 + text.len(),
        Value::Array(array) => 12 + array_len(array),
        _ => 8,
    }
}

fn array_len(array: &tl_gguf::Array) -> usize {
    match array {
        tl_gguf::Array::String(items) => items.iter().map(|s| 8 + s.len()).sum(),
        tl_gguf::Array::Array(items) => items.iter().map(|a| 12 + array_len(a)).sum(),
        other => other.len() * 8,
    }
}

/// What a GGUF mutation may draw on: keys the target reads, strings worth
/// trying as values, tensor names the engine looks for.
pub struct GgufDictionary<'a> {
    pub keys: &'a [&'a str],
    pub strings: &'a [&'a str],
    pub tensor_names: &'a [&'a str],
}

/// Applies one structural mutation.
pub fn mutate(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    match rng.below(12) {
        0..=4 => tweak_metadata(parts, dictionary, rng),
        5 => remove_metadata(parts, rng),
        6 | 7 => add_metadata(parts, dictionary, rng),
        8 => rename_key(parts, dictionary, rng),
        9 | 10 => tweak_tensor(parts, dictionary, rng),
        _ => tweak_file(parts, rng),
    }
}

fn tweak_metadata(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    if parts.metadata.is_empty() {
        return add_metadata(parts, dictionary, rng);
    }
    let tokens = parts.tokens();
    let at = rng.below(parts.metadata.len());
    let (key, value) = &mut parts.metadata[at];
    if rng.one_in(3) || !tweak_tokenizer_value(key, value, &tokens, dictionary.strings, rng) {
        tweak_value(value, dictionary.strings, rng);
    }
}

fn remove_metadata(parts: &mut GgufParts, rng: &mut Rng) {
    if !parts.metadata.is_empty() {
        parts.metadata.remove(rng.below(parts.metadata.len()));
    }
}

/// Adds (or replaces) a key the target reads, with a random value.
fn add_metadata(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    let Some(&key) = rng.pick(dictionary.keys) else {
        return;
    };
    let value = random_value(dictionary.strings, rng, 2);
    match parts.metadata.iter_mut().find(|(k, _)| k == key) {
        Some((_, slot)) => *slot = value,
        None => {
            let at = rng.below(parts.metadata.len() + 1);
            parts.metadata.insert(at, (key.to_string(), value));
        }
    }
}

/// Gives an entry another key: the value is then read where it was not meant
/// to be (a `llama.` key under `qwen2.`), or not read at all.
fn rename_key(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    let Some(&new_key) = rng.pick(dictionary.keys) else {
        return;
    };
    if parts.metadata.iter().any(|(k, _)| k == new_key) {
        return;
    }
    let at = rng.below(parts.metadata.len());
    if let Some((key, _)) = parts.metadata.get_mut(at) {
        *key = new_key.to_string();
    }
}

fn tweak_tensor(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    let count = parts.tensors.len();
    if count == 0 {
        return add_tensor(parts, dictionary, rng);
    }
    let at = rng.below(count);
    match rng.below(6) {
        0 | 1 => resize_dim(&mut parts.tensors[at], rng),
        2 => {
            let ty = GgmlType::ALL[rng.below(GgmlType::ALL.len())];
            retype(&mut parts.tensors[at], ty);
        }
        3 => {
            parts.tensors.remove(at);
        }
        4 => rename_tensor(parts, at, dictionary, rng),
        _ => add_tensor(parts, dictionary, rng),
    }
}

fn resize_dim(tensor: &mut TensorPart, rng: &mut Rng) {
    let mut dims = tensor.dims.clone();
    match rng.below(4) {
        0 if dims.len() < 4 => dims.push(1 + rng.skewed(8) as u64),
        1 if dims.len() > 1 => {
            dims.pop();
        }
        _ => {
            let axis = rng.below(dims.len());
            let old = dims[axis];
            dims[axis] = match rng.below(4) {
                0 => old.saturating_mul(2),
                1 => old / 2,
                2 => edge_integer(rng) as u64,
                _ => old.saturating_add(tensor.ggml_type.block_elements()),
            };
        }
    }
    if let Some(data) = zeroed_data(&dims, tensor.ggml_type) {
        tensor.dims = dims;
        tensor.data = data;
    }
}

fn retype(tensor: &mut TensorPart, ty: GgmlType) {
    let mut dims = tensor.dims.clone();
    if let Some(row) = dims.first_mut() {
        // Round the row up to whole blocks of the new type.
        *row = row
            .div_ceil(ty.block_elements())
            .max(1)
            .saturating_mul(ty.block_elements());
    }
    if let Some(data) = zeroed_data(&dims, ty) {
        tensor.dims = dims;
        tensor.ggml_type = ty;
        tensor.data = data;
    }
}

fn rename_tensor(parts: &mut GgufParts, at: usize, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    let Some(&name) = rng.pick(dictionary.tensor_names) else {
        return;
    };
    if !parts.tensors.iter().any(|t| t.name == name) {
        parts.tensors[at].name = name.to_string();
    }
}

/// Adds a small tensor under a name the engine looks for.
fn add_tensor(parts: &mut GgufParts, dictionary: &GgufDictionary<'_>, rng: &mut Rng) {
    let Some(&name) = rng.pick(dictionary.tensor_names) else {
        return;
    };
    if parts.tensors.iter().any(|t| t.name == name) {
        return;
    }
    let ty = GgmlType::ALL[rng.below(GgmlType::ALL.len())];
    let dims = vec![
        ty.block_elements() * (1 + rng.skewed(4) as u64),
        1 + rng.skewed(8) as u64,
    ];
    if let Some(data) = zeroed_data(&dims, ty) {
        parts.tensors.push(TensorPart {
            name: name.to_string(),
            dims,
            ggml_type: ty,
            data,
        });
    }
}

/// The GGUF version, or the data section's alignment.
fn tweak_file(parts: &mut GgufParts, rng: &mut Rng) {
    if rng.one_in(2) {
        parts.version = if parts.version == 3 { 2 } else { 3 };
        return;
    }
    let alignment = 1u32 << rng.below(16);
    let value = Value::U32(alignment);
    match parts
        .metadata
        .iter_mut()
        .find(|(k, _)| k == "general.alignment")
    {
        Some((_, slot)) => *slot = value,
        None => parts.metadata.push(("general.alignment".into(), value)),
    }
}

/// Zeros of the size a tensor of `dims` and `ty` has, if that is small and
/// the dims are ones GGML can hold.
fn zeroed_data(dims: &[u64], ty: GgmlType) -> Option<Vec<u8>> {
    if dims.is_empty() || dims.len() > 4 || !dims[0].is_multiple_of(ty.block_elements()) {
        return None;
    }
    let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    let bytes = ty.bytes_for(elements)?;
    (bytes <= MAX_TENSOR_BYTES).then(|| vec![0u8; bytes as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut writer = GgufWriter::new(3);
        writer.set_metadata("general.architecture", Value::String("llama".into()));
        writer
            .add_tensor(
                "a",
                vec![32, 2],
                GgmlType::Q8_0,
                TensorData::Bytes(vec![0; 68]),
            )
            .unwrap();
        writer.to_bytes().unwrap()
    }

    #[test]
    fn parts_round_trip() {
        let bytes = sample();
        let parts = GgufParts::parse(&bytes).unwrap();
        assert_eq!(parts.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn mutants_are_written_or_refused_without_panics() {
        let dictionary = GgufDictionary {
            keys: &["llama.block_count", "tokenizer.ggml.tokens"],
            strings: &["llama", "<s>"],
            tensor_names: &["token_embd.weight"],
        };
        let mut rng = Rng::new(2);
        let mut written = 0;
        for _ in 0..500 {
            let mut parts = GgufParts::parse(&sample()).unwrap();
            for _ in 0..3 {
                mutate(&mut parts, &dictionary, &mut rng);
            }
            written += usize::from(parts.to_bytes().is_some());
        }
        assert!(
            written > 100,
            "only {written} of 500 mutants could be written"
        );
    }
}
