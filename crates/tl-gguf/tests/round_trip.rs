//! The writer's output read back by the reader: every value type, arrays of every
//! kind (strings, nested, empty), tensors of several types and shapes, both
//! versions, default and custom alignment, bytes and generated data.

mod common;

use common::pseudo_random_bytes;
use tl_gguf::{Array, GgmlType, GgufFile, GgufWriter, StringArray, TensorData, Value};

/// One metadata entry of every value type and array kind the format has.
fn every_kind_of_metadata() -> Vec<(String, Value)> {
    let entries = vec![
        ("u8", Value::U8(200)),
        ("i8", Value::I8(-100)),
        ("u16", Value::U16(60_000)),
        ("i16", Value::I16(-30_000)),
        ("u32", Value::U32(4_000_000_000)),
        ("i32", Value::I32(-2_000_000_000)),
        ("f32", Value::F32(-1.5e-5)),
        ("bool.true", Value::Bool(true)),
        ("bool.false", Value::Bool(false)),
        ("string", Value::String("héllo, wörld ✓".into())),
        ("string.empty", Value::String(String::new())),
        ("u64", Value::U64(u64::MAX)),
        ("i64", Value::I64(i64::MIN)),
        ("f64", Value::F64(std::f64::consts::PI)),
        ("array.u8", Value::Array(Array::U8(vec![0, 1, 255]))),
        ("array.i8", Value::Array(Array::I8(vec![-128, 0, 127]))),
        ("array.u16", Value::Array(Array::U16(vec![1, 65535]))),
        ("array.i16", Value::Array(Array::I16(vec![-32768, 32767]))),
        ("array.u32", Value::Array(Array::U32(vec![7, u32::MAX]))),
        ("array.i32", Value::Array(Array::I32(vec![-1, 0, 1]))),
        (
            "array.f32",
            Value::Array(Array::F32(vec![0.0, -0.0, 1e30, f32::MIN_POSITIVE])),
        ),
        (
            "array.bool",
            Value::Array(Array::Bool(vec![true, false, true])),
        ),
        (
            "array.string",
            Value::Array(Array::String(vec!["<s>", "", "Ġthe"].into())),
        ),
        ("array.u64", Value::Array(Array::U64(vec![u64::MAX, 0]))),
        (
            "array.i64",
            Value::Array(Array::I64(vec![i64::MIN, i64::MAX])),
        ),
        ("array.f64", Value::Array(Array::F64(vec![f64::MAX, -2.5]))),
        ("array.empty.u32", Value::Array(Array::U32(vec![]))),
        (
            "array.empty.string",
            Value::Array(Array::String(StringArray::new())),
        ),
        ("array.empty.array", Value::Array(Array::Array(vec![]))),
        (
            "array.nested",
            Value::Array(Array::Array(vec![
                Array::U8(vec![1, 2]),
                Array::String(vec!["x"].into()),
                Array::Array(vec![Array::F32(vec![0.5]), Array::Bool(vec![])]),
                Array::I64(vec![]),
            ])),
        ),
    ];
    entries
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect()
}

struct TestTensor {
    name: &'static str,
    dims: Vec<u64>,
    ggml_type: GgmlType,
}

/// Tensors of several types, ranks and sizes, some not a multiple of the alignment.
fn several_tensors() -> Vec<TestTensor> {
    let tensor = |name, dims: &[u64], ggml_type| TestTensor {
        name,
        dims: dims.to_vec(),
        ggml_type,
    };
    vec![
        tensor("token_embd.weight", &[64, 3], GgmlType::Q8_0),
        tensor("blk.0.attn_norm.weight", &[5], GgmlType::F32),
        tensor("blk.0.attn_q.weight", &[256, 2], GgmlType::Q4_K),
        tensor("blk.0.ffn_down.weight", &[256, 1, 1], GgmlType::Q6_K),
        tensor("blk.0.ffn_up.weight", &[32, 4], GgmlType::Q4_0),
        tensor("blk.0.ffn_gate.weight", &[32, 2], GgmlType::Q4_1),
        tensor("f16.matrix", &[3, 7], GgmlType::F16),
        tensor("bf16.vector", &[9], GgmlType::BF16),
        tensor("i8.odd", &[3], GgmlType::I8),
        tensor("i32.4d", &[2, 2, 2, 2], GgmlType::I32),
        tensor("f64.scalar", &[1], GgmlType::F64),
        tensor("q5_k.rows", &[512, 2], GgmlType::Q5_K),
    ]
}

fn data_for(tensor: &TestTensor) -> Vec<u8> {
    let elements = tensor.dims.iter().product();
    let size = tensor
        .ggml_type
        .bytes_for(elements)
        .expect("valid test shape");
    pseudo_random_bytes(size as usize, u64::from(tensor.ggml_type.id()) + size)
}

/// A writer holding every kind of metadata and the test tensors; every other
/// tensor's data comes from a generator so both paths are exercised.
fn full_writer(version: u32) -> GgufWriter {
    let mut writer = GgufWriter::new(version);
    for (key, value) in every_kind_of_metadata() {
        writer.set_metadata(key, value);
    }
    for (i, tensor) in several_tensors().into_iter().enumerate() {
        let bytes = data_for(&tensor);
        let data = if i % 2 == 0 {
            TensorData::Bytes(bytes)
        } else {
            TensorData::generated(move |out| out.write_all(&bytes))
        };
        writer
            .add_tensor(tensor.name, tensor.dims, tensor.ggml_type, data)
            .expect("valid test tensor");
    }
    writer
}

/// Checks everything `file` says against what `full_writer` put in, at `alignment`.
fn assert_matches_full_writer(file: &GgufFile, version: u32, alignment: u64) {
    assert_eq!(file.version(), version);
    assert_eq!(file.alignment(), alignment);
    assert_eq!(file.data_offset() % alignment, 0);
    assert_eq!(file.file_size() % alignment, 0, "the last tensor is padded");
    let mut expected_metadata = every_kind_of_metadata();
    if alignment != 32 {
        expected_metadata.push(("general.alignment".into(), Value::U32(alignment as u32)));
    }
    assert_eq!(file.metadata(), expected_metadata.as_slice());
    let expected_tensors = several_tensors();
    assert_eq!(file.tensors().len(), expected_tensors.len());
    for (info, expected) in file.tensors().iter().zip(&expected_tensors) {
        assert_eq!(info.name, expected.name);
        assert_eq!(info.dims, expected.dims);
        assert_eq!(info.ggml_type, expected.ggml_type);
        assert_eq!(info.offset % alignment, 0, "{} is aligned", info.name);
        assert_eq!(file.tensor_data(expected.name).unwrap(), data_for(expected));
    }
}

#[test]
fn every_value_type_and_tensor_round_trips_in_v2_and_v3() {
    for version in [2, 3] {
        let bytes = full_writer(version).to_bytes().unwrap();
        let file = GgufFile::from_bytes(bytes).unwrap();
        assert_matches_full_writer(&file, version, 32);
    }
}

#[test]
fn custom_alignment_64_round_trips() {
    for version in [2, 3] {
        let mut writer = full_writer(version);
        writer.set_metadata("general.alignment", Value::U32(64));
        let file = GgufFile::from_bytes(writer.to_bytes().unwrap()).unwrap();
        assert_matches_full_writer(&file, version, 64);
    }
}

#[test]
fn set_metadata_replaces_in_place() {
    let mut writer = GgufWriter::new(3);
    writer
        .set_metadata("a", Value::U32(1))
        .set_metadata("b", Value::U32(2))
        .set_metadata("a", Value::String("again".into()));
    let file = GgufFile::from_bytes(writer.to_bytes().unwrap()).unwrap();
    let keys: Vec<&str> = file.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(file.get_str("a").unwrap(), Some("again"));
}

#[test]
fn empty_writer_gives_a_valid_file() {
    let bytes = GgufWriter::new(3).to_bytes().unwrap();
    assert_eq!(bytes.len(), 32, "24 header bytes padded to the alignment");
    let file = GgufFile::from_bytes(bytes).unwrap();
    assert!(file.metadata().is_empty() && file.tensors().is_empty());
}

#[test]
fn tensors_are_packed_like_llama_cpp() {
    // Each tensor starts at the previous one's end rounded up to the alignment.
    let file = GgufFile::from_bytes(full_writer(3).to_bytes().unwrap()).unwrap();
    let mut expected_offset = 0;
    for info in file.tensors() {
        assert_eq!(info.offset, expected_offset, "{}", info.name);
        expected_offset = (info.offset + info.size_bytes).next_multiple_of(32);
    }
    assert_eq!(file.data_offset() + expected_offset, file.file_size());
}

#[test]
fn generator_is_called_again_for_each_write() {
    let writer = full_writer(3);
    assert_eq!(writer.to_bytes().unwrap(), writer.to_bytes().unwrap());
}

#[test]
fn write_to_path_then_open_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    full_writer(3).write_to_path(&path).unwrap();
    assert!(!dir.path().join("model.gguf.tmp").exists());
    let file = GgufFile::open(&path).unwrap();
    assert_matches_full_writer(&file, 3, 32);
}
