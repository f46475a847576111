//! What the writer refuses, and that a failed `write_to_path` leaves no file behind.

use std::io;

use tl_gguf::{Array, Error, GgmlType, GgufWriter, TensorData, Value};

/// The message of an `Error::Write`; fails the test for anything else.
fn write_error<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Write(message)) => message,
        other => panic!("expected Error::Write, got {other:?}"),
    }
}

fn zeros(n: usize) -> TensorData {
    TensorData::Bytes(vec![0; n])
}

#[test]
fn add_tensor_rejects_bad_shapes_and_sizes() {
    let mut writer = GgufWriter::new(3);
    let cases: [(Vec<u64>, GgmlType, usize, &str); 6] = [
        (vec![], GgmlType::F32, 0, "no dimensions"),
        (vec![1, 1, 1, 1, 1], GgmlType::F32, 4, "5 dimensions"),
        (
            vec![33],
            GgmlType::Q4_0,
            18,
            "not a multiple of the Q4_0 block size 32",
        ),
        (vec![1 << 32, 1 << 32], GgmlType::F32, 0, "overflow"),
        (vec![u64::MAX, 0], GgmlType::F32, 0, "exceeds i64::MAX"),
        (vec![4], GgmlType::F32, 15, "15 bytes of data given"),
    ];
    for (dims, ty, len, expected) in cases {
        let message = write_error(writer.add_tensor("t", dims.clone(), ty, zeros(len)));
        assert!(message.contains(expected), "{dims:?}: {message}");
        assert!(message.contains("tensor 't'"), "{message}");
    }
}

#[test]
fn add_tensor_rejects_duplicate_and_long_names() {
    let mut writer = GgufWriter::new(3);
    writer
        .add_tensor("w", vec![1], GgmlType::F32, zeros(4))
        .unwrap();
    let message = write_error(writer.add_tensor("w", vec![1], GgmlType::F32, zeros(4)));
    assert!(message.contains("already added"), "{message}");
    let long_name = "x".repeat(64);
    let message = write_error(writer.add_tensor(long_name, vec![1], GgmlType::F32, zeros(4)));
    assert!(message.contains("at most 63"), "{message}");
    writer
        .add_tensor("y".repeat(63), vec![1], GgmlType::F32, zeros(4))
        .unwrap();
}

#[test]
fn bad_versions_and_alignments_are_refused_when_writing() {
    for version in [0, 1, 4] {
        let message = write_error(GgufWriter::new(version).to_bytes());
        assert!(message.contains("version"), "{message}");
    }
    for bad in [
        Value::U32(3),
        Value::U32(0),
        Value::U64(64),
        Value::String("32".into()),
    ] {
        let mut writer = GgufWriter::new(3);
        writer.set_metadata("general.alignment", bad);
        let message = write_error(writer.to_bytes());
        assert!(message.contains("general.alignment"), "{message}");
    }
}

/// An array `levels` arrays deep, counting the outermost.
fn nested_array(levels: usize) -> Value {
    let mut nested = Array::U8(vec![1]);
    for _ in 1..levels {
        nested = Array::Array(vec![nested]);
    }
    Value::Array(nested)
}

#[test]
fn arrays_nested_deeper_than_the_reader_reads_are_refused() {
    let mut writer = GgufWriter::new(3);
    writer.set_metadata("deep", nested_array(4));
    let file = tl_gguf::GgufFile::from_bytes(writer.to_bytes().unwrap()).unwrap();
    assert_eq!(file.get("deep"), Some(&nested_array(4)));

    writer.set_metadata("deep", nested_array(5));
    let message = write_error(writer.to_bytes());
    assert!(message.contains("nested 5 deep"), "{message}");
}

#[test]
fn generator_writing_too_little_is_refused() {
    let mut writer = GgufWriter::new(3);
    let short = TensorData::generated(|out| out.write_all(&[0; 12]));
    writer
        .add_tensor("w", vec![4], GgmlType::F32, short)
        .unwrap();
    let message = write_error(writer.to_bytes());
    assert!(
        message.contains("wrote 12 bytes, the tensor holds 16"),
        "{message}"
    );
}

#[test]
fn generator_writing_too_much_fails_inside_the_generator() {
    let mut writer = GgufWriter::new(3);
    let long = TensorData::generated(|out| out.write_all(&[0; 20]));
    writer
        .add_tensor("w", vec![4], GgmlType::F32, long)
        .unwrap();
    match writer.to_bytes() {
        Err(error @ Error::WriteIo { .. }) => {
            let message = error.to_string();
            assert!(message.contains("tensor 'w'"), "{message}");
            assert!(message.contains("4 bytes more than the 16"), "{message}");
        }
        other => panic!("expected Error::WriteIo, got {other:?}"),
    }
}

#[test]
fn failed_write_to_path_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.gguf");
    let mut writer = GgufWriter::new(3);
    writer
        .add_tensor("ok", vec![8], GgmlType::F32, zeros(32))
        .unwrap()
        .add_tensor(
            "fails",
            vec![8],
            GgmlType::F32,
            TensorData::generated(|_| Err(io::Error::other("disk on fire"))),
        )
        .unwrap();
    let error = writer.write_to_path(&path).unwrap_err();
    assert!(error.to_string().contains("disk on fire"), "{error}");
    assert!(!path.exists());
    assert!(!dir.path().join("broken.gguf.tmp").exists());
}

#[test]
fn write_to_path_into_a_missing_directory_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/model.gguf");
    match GgufWriter::new(3).write_to_path(&path) {
        Err(error @ Error::Io { .. }) => {
            assert!(error.to_string().contains("model.gguf.tmp"), "{error}");
        }
        other => panic!("expected Error::Io, got {other:?}"),
    }
}

#[test]
fn write_to_path_replaces_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    std::fs::write(&path, b"old contents").unwrap();
    GgufWriter::new(3).write_to_path(&path).unwrap();
    assert!(tl_gguf::GgufFile::open(&path).is_ok());
}
