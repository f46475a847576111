//! Helpers shared by the integration tests: a byte-level GGUF builder that can write
//! what the real writer refuses to (for malformed-file tests, remembering where each
//! field starts), a small valid file, and a seeded PRNG (no `rand` dependency).

#![allow(dead_code)] // each test file uses a different part of this module

use tl_gguf::{Error, GgmlType, GgufWriter, TensorData, Value};

/// Builds GGUF bytes field by field, with no validation at all.
#[derive(Default)]
pub struct RawGguf {
    pub bytes: Vec<u8>,
}

impl RawGguf {
    /// Magic, version and the two counts.
    pub fn header(version: u32, tensor_count: u64, metadata_count: u64) -> Self {
        let mut raw = Self::default();
        raw.raw(b"GGUF")
            .u32(version)
            .u64(tensor_count)
            .u64(metadata_count);
        raw
    }

    /// Current length: the offset of the next field.
    pub fn pos(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn string(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// A key with a `u32` value (type tag 4).
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.string(key).u32(4).u32(v)
    }

    /// A key with a string value (type tag 8).
    pub fn kv_string(&mut self, key: &str, v: &str) -> &mut Self {
        self.string(key).u32(8).string(v)
    }

    /// A tensor descriptor with `dims.len()` as n_dims.
    pub fn tensor_info(
        &mut self,
        name: &str,
        dims: &[u64],
        type_id: u32,
        offset: u64,
    ) -> &mut Self {
        self.string(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }

    /// Zeros up to the next multiple of `alignment`.
    pub fn pad(&mut self, alignment: u64) -> &mut Self {
        let len = self.pos().next_multiple_of(alignment) as usize;
        self.bytes.resize(len, 0);
        self
    }

    /// `n` bytes of tensor data.
    pub fn data(&mut self, n: usize) -> &mut Self {
        self.bytes.extend((0..n).map(|i| i as u8));
        self
    }
}

/// The `(offset, field, reason)` of a `Malformed` error; fails the test otherwise.
pub fn expect_malformed(result: Result<tl_gguf::GgufFile, Error>) -> (u64, String, String) {
    match result {
        Err(Error::Malformed {
            offset,
            field,
            reason,
        }) => (offset, field, reason),
        other => panic!("expected Error::Malformed, got {other:?}"),
    }
}

/// A small valid file with metadata of a few kinds and three tensors, the last of
/// which ends exactly at the end of the file (no trailing padding), so that every
/// strict prefix of it is invalid.
pub fn small_valid_file() -> Vec<u8> {
    let mut writer = GgufWriter::new(3);
    writer
        .set_metadata("general.architecture", Value::String("llama".into()))
        .set_metadata("llama.block_count", Value::U32(2))
        .set_metadata(
            "tokenizer.ggml.tokens",
            Value::Array(tl_gguf::Array::String(vec!["a", "bc"].into())),
        )
        .set_metadata("llama.rope.freq_base", Value::F32(10000.0));
    let tensors = [
        ("token_embd.weight", vec![32, 2], GgmlType::Q8_0),
        ("norm.weight", vec![3], GgmlType::F16),
        ("output.weight", vec![8], GgmlType::F32),
    ];
    for (name, dims, ty) in tensors {
        let size = ty
            .bytes_for(dims.iter().product())
            .expect("valid test shape") as usize;
        let data = pseudo_random_bytes(size, size as u64);
        writer
            .add_tensor(name, dims, ty, TensorData::Bytes(data))
            .expect("valid test tensor");
    }
    writer.to_bytes().expect("valid test file")
}

/// SplitMix64: a tiny, good-enough PRNG for deterministic fuzzing.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound > 0`).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// `len` deterministic bytes for tensor data.
pub fn pseudo_random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}
