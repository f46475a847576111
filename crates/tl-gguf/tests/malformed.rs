//! Hardening of the reader against untrusted files: every truncation and thousands
//! of seeded random corruptions must give `Ok` or `Err`, never a panic or a huge
//! allocation, and each kind of damage must give an error naming the field and the
//! byte offset where it is.

mod common;

use common::{expect_malformed, small_valid_file, RawGguf, SplitMix64};
use tl_gguf::{Error, GgufFile};

/// Type ids used in the hand-built files.
const F32: u32 = 0;
const Q4_0: u32 = 2;
/// Offsets of the fixed header fields.
const TENSOR_COUNT_AT: u64 = 8;
const METADATA_COUNT_AT: u64 = 16;

fn open(raw: &RawGguf) -> Result<GgufFile, Error> {
    GgufFile::from_bytes(raw.bytes.clone())
}

/// Asserts a `Malformed` error at `offset` about `field` whose reason contains
/// `reason`, and that its Display text names both the byte and the field.
fn assert_malformed(raw: &RawGguf, offset: u64, field: &str, reason: &str) {
    let result = open(raw);
    let message = match &result {
        Err(error) => error.to_string(),
        Ok(_) => String::new(),
    };
    let (found_offset, found_field, found_reason) = expect_malformed(result);
    assert_eq!(
        (found_offset, found_field.as_str()),
        (offset, field),
        "{message}"
    );
    assert!(found_reason.contains(reason), "{message}");
    assert!(message.contains(&format!("byte {offset}")), "{message}");
    assert!(message.contains(field), "{message}");
}

// --- Truncation and random corruption -------------------------------------------

#[test]
fn every_prefix_of_a_valid_file_is_an_error() {
    let bytes = small_valid_file();
    let file = GgufFile::from_bytes(bytes.clone()).expect("the full file is valid");
    let last = file.tensors().last().expect("the test file has tensors");
    assert_eq!(
        file.data_offset() + last.offset + last.size_bytes,
        file.file_size(),
        "the test file must end with tensor data for every prefix to be invalid"
    );
    for len in 0..bytes.len() {
        let result = GgufFile::from_bytes(bytes[..len].to_vec());
        assert!(result.is_err(), "prefix of {len} bytes was accepted");
    }
}

/// Uses everything an opened file offers, so corrupt-but-accepted files are
/// checked not to panic later either.
fn exercise(file: &GgufFile) {
    for (key, value) in file.metadata() {
        let _ = format!("{key} = {value} ({})", value.type_description());
        let _ = file.get_string_array(key);
        let _ = file.get_u64(key);
    }
    for info in file.tensors() {
        let data = file.data_of(info);
        assert_eq!(data.len() as u64, info.size_bytes);
        let _ = (info.shape(), info.element_count());
    }
}

#[test]
fn seeded_random_byte_flips_never_panic() {
    let original = small_valid_file();
    let header_len = GgufFile::from_bytes(original.clone())
        .unwrap()
        .data_offset();
    let mut rng = SplitMix64::new(0x6767_7566);
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..5000 {
        let mut bytes = original.clone();
        for _ in 0..=rng.below(3) {
            // Mostly the header: flips in tensor data are always accepted.
            let span = if rng.below(8) == 0 {
                bytes.len() as u64
            } else {
                header_len
            };
            let at = rng.below(span) as usize;
            bytes[at] ^= 1 + rng.below(255) as u8;
        }
        match GgufFile::from_bytes(bytes) {
            Ok(file) => {
                exercise(&file);
                accepted += 1;
            }
            Err(error) => {
                let _ = error.to_string();
                rejected += 1;
            }
        }
    }
    assert!(
        accepted > 0 && rejected > 0,
        "{accepted} accepted, {rejected} rejected"
    );
}

#[test]
fn seeded_random_headers_never_panic() {
    // A valid prefix cut at a random point and continued with random bytes, which
    // reaches parser states byte flips rarely do (huge lengths, odd types).
    let original = small_valid_file();
    let mut rng = SplitMix64::new(42);
    for _ in 0..3000 {
        let cut = rng.below(original.len() as u64) as usize;
        let mut bytes = original[..cut].to_vec();
        let extra = rng.below(64);
        bytes.extend((0..extra).map(|_| match rng.below(4) {
            0 => 0,
            1 => 0xff,
            _ => rng.next_u64() as u8,
        }));
        if let Ok(file) = GgufFile::from_bytes(bytes) {
            exercise(&file);
        }
    }
}

// --- The fixed header -------------------------------------------------------------

#[test]
fn a_text_file_is_not_gguf() {
    let result = GgufFile::from_bytes(b"hello, this is a text file\n".to_vec());
    match result {
        Err(error @ Error::NotGguf { .. }) => {
            assert!(error.to_string().contains("not a GGUF file"), "{error}");
            assert!(matches!(error, Error::NotGguf { found } if found == b"hell"));
        }
        other => panic!("expected NotGguf, got {other:?}"),
    }
}

#[test]
fn a_file_shorter_than_the_magic_is_truncated_or_not_gguf() {
    assert!(matches!(
        GgufFile::from_bytes(b"hi".to_vec()),
        Err(Error::NotGguf { .. })
    ));
    let (offset, field, _) = expect_malformed(GgufFile::from_bytes(b"GG".to_vec()));
    assert_eq!((offset, field.as_str()), (0, "magic"));
}

#[test]
fn versions_1_and_4_are_unsupported() {
    for version in [1, 4] {
        match open(&RawGguf::header(version, 0, 0)) {
            Err(error @ Error::UnsupportedVersion(_)) => {
                assert!(error.to_string().contains(&format!("version {version}")));
            }
            other => panic!("version {version}: expected UnsupportedVersion, got {other:?}"),
        }
    }
}

#[test]
fn a_big_endian_file_is_named_as_such() {
    let raw = RawGguf::header(3u32.swap_bytes(), 0, 0);
    let message = open(&raw).unwrap_err().to_string();
    assert!(message.contains("big-endian"), "{message}");
}

#[test]
fn huge_counts_are_rejected_before_allocating() {
    for count in [u64::MAX, 1 << 40, 1000] {
        let raw = RawGguf::header(3, 0, count);
        assert_malformed(&raw, METADATA_COUNT_AT, "metadata_kv_count", "declares");
        let raw = RawGguf::header(3, count, 0);
        assert_malformed(&raw, TENSOR_COUNT_AT, "tensor_count", "declares");
    }
}

// --- Memory the header takes ----------------------------------------------------------
//
// Counts that fit the file can still cost many times its size in memory; the
// reader charges each entry its in-memory size before allocating it and refuses
// more than twice the file's size plus 64 MiB.

/// A header declaring `tensors` descriptors and `keys` metadata pairs, followed
/// by `filler` zero bytes (enough that the counts pass the size check).
fn declared(tensors: u64, keys: u64, filler: usize) -> RawGguf {
    let mut raw = RawGguf::header(3, tensors, keys);
    raw.raw(&vec![0; filler]);
    raw
}

#[test]
fn millions_of_metadata_pairs_are_refused_for_their_memory() {
    // 2M pairs fill 26 MB of file at 13 bytes each, but take about 200 each.
    let raw = declared(0, 2_000_000, 26_000_000);
    assert_malformed(&raw, METADATA_COUNT_AT, "metadata_kv_count", "of memory");
}

#[test]
fn hundreds_of_thousands_of_tensors_are_refused_for_their_memory() {
    // 500k descriptors of at least 32 bytes; each takes about 270 in memory.
    let raw = declared(500_000, 0, 16_000_000);
    assert_malformed(&raw, TENSOR_COUNT_AT, "tensor_count", "of memory");
}

#[test]
fn millions_of_nested_empty_arrays_are_refused_for_their_memory() {
    // 4M empty arrays of 12 bytes each (48 MB) would be 4M `Array`s.
    let count = 4_000_000u64;
    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("nested").u32(9).u32(9);
    let count_at = raw.pos();
    raw.u64(count);
    for _ in 0..count {
        raw.u32(0).u64(0);
    }
    assert_malformed(&raw, count_at, "metadata 'nested'", "of memory");
}

#[test]
fn millions_of_empty_strings_cost_a_few_bytes_each() {
    let count = 4_000_000u64;
    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("tokens").u32(9).u32(8).u64(count);
    raw.raw(&vec![0; 8 * count as usize]);
    let file = open(&raw).expect("4M empty strings fit the budget");
    let tokens = file.get_string_array("tokens").unwrap().unwrap();
    assert_eq!(tokens.len(), count as usize);
    assert_eq!(tokens.get(3_999_999), Some(""));
}

// --- Metadata -----------------------------------------------------------------------

#[test]
fn huge_array_count_is_rejected_before_allocating() {
    for (element_type, count) in [(4u32, u64::MAX), (8, u64::MAX / 4), (9, 1 << 40), (0, 10)] {
        let mut raw = RawGguf::header(3, 0, 1);
        raw.string("arr").u32(9).u32(element_type);
        let count_at = raw.pos();
        raw.u64(count).raw(&[0; 8]);
        assert_malformed(&raw, count_at, "metadata 'arr'", "cannot fit");
    }
}

#[test]
fn string_length_past_the_end() {
    let mut raw = RawGguf::header(3, 0, 1);
    raw.u64(1000).raw(&[b'a'; 40]);
    assert_malformed(&raw, 24, "metadata[0].key", "runs past the end");

    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("k").u32(8);
    let value_at = raw.pos();
    raw.u64(u64::MAX).raw(b"abc");
    assert_malformed(
        &raw,
        value_at,
        "metadata 'k'",
        "string of 18446744073709551615 bytes",
    );
}

#[test]
fn unknown_value_types() {
    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("k");
    let type_at = raw.pos();
    raw.u32(13).u32(0);
    assert_malformed(&raw, type_at, "metadata 'k'", "unknown value type 13");

    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("arr").u32(9);
    let element_type_at = raw.pos();
    raw.u32(0xdead).u64(0);
    assert_malformed(
        &raw,
        element_type_at,
        "metadata 'arr'",
        "unknown value type 57005",
    );
}

#[test]
fn bad_bool_and_bad_utf8() {
    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("b").u32(7);
    let bool_at = raw.pos();
    raw.raw(&[2]);
    assert_malformed(&raw, bool_at, "metadata 'b'", "bool byte is 2");

    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("s").u32(8);
    let string_at = raw.pos();
    raw.u64(2).raw(&[0xc3, 0x28]);
    assert_malformed(&raw, string_at, "metadata 's'", "not UTF-8");
}

#[test]
fn arrays_nested_too_deeply() {
    let mut raw = RawGguf::header(3, 0, 1);
    raw.string("deep").u32(9);
    let mut depth_exceeded_at = 0;
    for level in 0..6 {
        if level == 4 {
            depth_exceeded_at = raw.pos();
        }
        raw.u32(9).u64(1);
    }
    raw.u32(0).u64(0);
    assert_malformed(
        &raw,
        depth_exceeded_at,
        "metadata 'deep'",
        "nested too deeply",
    );
}

#[test]
fn duplicate_key() {
    let mut raw = RawGguf::header(3, 0, 2);
    raw.kv_u32("general.block_count", 1);
    let second_at = raw.pos();
    raw.kv_u32("general.block_count", 2);
    assert_malformed(
        &raw,
        second_at,
        "metadata 'general.block_count'",
        "key appears twice",
    );
}

#[test]
fn alignment_must_be_a_power_of_two() {
    for bad in [3, 0, 48] {
        let mut raw = RawGguf::header(3, 0, 1);
        raw.kv_u32("general.alignment", bad);
        assert_malformed(&raw, 24, "metadata 'general.alignment'", "power of two");
    }
    let mut raw = RawGguf::header(3, 0, 2);
    raw.kv_u32("a", 1);
    let key_at = raw.pos();
    raw.kv_string("general.alignment", "32");
    assert_malformed(&raw, key_at, "metadata 'general.alignment'", "power of two");
}

#[test]
fn custom_alignment_places_the_data_section() {
    let mut raw = RawGguf::header(3, 1, 1);
    raw.kv_u32("general.alignment", 64)
        .tensor_info("t", &[8], F32, 0)
        .pad(64)
        .data(32);
    let file = open(&raw).unwrap();
    assert_eq!((file.alignment(), file.data_offset() % 64), (64, 0));
    assert_eq!(
        file.tensor_data("t").unwrap(),
        &raw.bytes[raw.bytes.len() - 32..]
    );
}

// --- Tensor descriptors -----------------------------------------------------------

#[test]
fn unsupported_tensor_types_are_named() {
    for (type_id, type_name) in [(16, "IQ2_XXS"), (4, "Q4_2 (removed)"), (999, "unknown")] {
        let mut raw = RawGguf::header(3, 1, 0);
        raw.string("blk.0.attn_q.weight").u32(1).u64(256);
        let type_at = raw.pos();
        raw.u32(type_id).u64(0);
        let error = open(&raw).unwrap_err();
        let message = error.to_string();
        match error {
            Error::UnsupportedTensorType {
                tensor,
                offset,
                type_id: found_id,
                type_name: found_name,
            } => {
                assert_eq!(tensor, "blk.0.attn_q.weight");
                assert_eq!(
                    (offset, found_id, found_name),
                    (type_at, type_id, type_name)
                );
            }
            other => panic!("expected UnsupportedTensorType, got {other:?}"),
        }
        assert!(message.contains(type_name), "{message}");
        assert!(message.contains(&format!("id {type_id}")), "{message}");
        assert!(message.contains(&format!("byte {type_at}")), "{message}");
    }
}

#[test]
fn n_dims_must_be_1_to_4() {
    for n_dims in [0, 5, u32::MAX] {
        let mut raw = RawGguf::header(3, 1, 0);
        raw.string("t");
        let n_dims_at = raw.pos();
        raw.u32(n_dims).raw(&[1; 64]);
        let reason = format!("{n_dims} dimensions");
        assert_malformed(&raw, n_dims_at, "tensor 't' n_dims", &reason);
    }
}

#[test]
fn dims_whose_product_overflows() {
    let mut raw = RawGguf::header(3, 1, 0);
    raw.string("t");
    let dims_at = raw.pos();
    raw.u32(3)
        .u64(1 << 32)
        .u64(1 << 32)
        .u64(1 << 32)
        .u32(F32)
        .u64(0);
    assert_malformed(&raw, dims_at, "tensor 't' dims", "overflow");
}

#[test]
fn a_dim_beyond_i64_is_rejected() {
    // A zero dimension keeps the size at 0, so only the per-dim check catches this.
    let mut raw = RawGguf::header(3, 1, 0);
    raw.string("t").u32(2).u64(0);
    let dim_at = raw.pos();
    raw.u64(u64::MAX).u32(F32).u64(0);
    assert_malformed(&raw, dim_at, "tensor 't' dims[1]", "exceeds i64::MAX");
}

#[test]
fn row_not_a_multiple_of_the_block_size() {
    let mut raw = RawGguf::header(3, 1, 0);
    raw.string("t");
    let dims_at = raw.pos();
    raw.u32(2).u64(33).u64(2).u32(Q4_0).u64(0);
    assert_malformed(
        &raw,
        dims_at,
        "tensor 't' dims",
        "not a multiple of the Q4_0 block size 32",
    );
}

#[test]
fn duplicate_tensor_name() {
    let mut raw = RawGguf::header(3, 2, 0);
    raw.tensor_info("w", &[8], F32, 0);
    let second_at = raw.pos();
    raw.tensor_info("w", &[8], F32, 32).pad(32).data(64);
    assert_malformed(&raw, second_at, "tensor_info[1].name", "'w' appears twice");
}

// --- Tensor extents ---------------------------------------------------------------

/// A file with tensor `a` (F32 [8] at 0) and tensor `b` (F32 `b_dims` at
/// `b_offset`), `data_len` bytes of data, and the offset of `b`'s offset field.
fn two_tensors(b_dims: &[u64], b_offset: u64, data_len: usize) -> (RawGguf, u64) {
    let mut raw = RawGguf::header(3, 2, 0);
    raw.tensor_info("a", &[8], F32, 0);
    raw.string("b").u32(b_dims.len() as u32);
    for &d in b_dims {
        raw.u64(d);
    }
    raw.u32(F32);
    let b_offset_at = raw.pos();
    raw.u64(b_offset).pad(32).data(data_len);
    (raw, b_offset_at)
}

#[test]
fn misaligned_tensor_offset() {
    let (raw, b_offset_at) = two_tensors(&[8], 36, 96);
    assert_malformed(
        &raw,
        b_offset_at,
        "tensor 'b' offset",
        "not a multiple of the alignment 32",
    );
}

#[test]
fn data_past_the_end_of_the_file() {
    let (raw, b_offset_at) = two_tensors(&[8], 32, 63);
    assert_malformed(
        &raw,
        b_offset_at,
        "tensor 'b' offset",
        "runs past the end of the file",
    );
    // The largest aligned offset: start + size overflows.
    let (raw, b_offset_at) = two_tensors(&[8], u64::MAX - 31, 64);
    assert_malformed(
        &raw,
        b_offset_at,
        "tensor 'b' offset",
        "runs past the end of the file",
    );
}

#[test]
fn overlapping_tensors() {
    let (raw, b_offset_at) = two_tensors(&[16], 0, 64);
    assert_malformed(
        &raw,
        b_offset_at,
        "tensor 'b' offset",
        "overlaps tensor 'a'",
    );
    // `a` (32 bytes at 0) runs into `b` starting at 0 too, listed later in the file.
    let mut raw = RawGguf::header(3, 2, 0);
    raw.tensor_info("a", &[16], F32, 32)
        .tensor_info("b", &[16], F32, 64);
    let (offset, field, reason) = expect_malformed(open(raw.pad(32).data(128)));
    assert_eq!(field, "tensor 'b' offset", "at byte {offset}: {reason}");
    assert!(reason.contains("overlaps tensor 'a'"), "{reason}");
}

#[test]
fn zero_sized_tensor_at_a_shared_offset_is_accepted_in_either_order() {
    for names in [["empty", "full"], ["full", "empty"]] {
        let mut raw = RawGguf::header(3, 2, 0);
        for name in names {
            let dims: &[u64] = if name == "empty" { &[0] } else { &[8] };
            raw.tensor_info(name, dims, F32, 0);
        }
        let file = open(raw.pad(32).data(32)).unwrap();
        assert!(file.tensor_data("empty").unwrap().is_empty());
    }
}

#[test]
fn vocab_only_file_without_trailing_padding_is_valid() {
    // gguf-py writes tokenizer-only files that end right after the metadata.
    let mut raw = RawGguf::header(3, 0, 1);
    raw.kv_string("tokenizer.ggml.model", "gpt2");
    assert_ne!(raw.pos() % 32, 0);
    let file = open(&raw).unwrap();
    assert_eq!(file.get_str("tokenizer.ggml.model").unwrap(), Some("gpt2"));
}

// --- Files on disk ----------------------------------------------------------------

#[test]
fn open_reads_a_file_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.gguf");
    std::fs::write(&path, small_valid_file()).unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    let owned = GgufFile::from_bytes(small_valid_file()).unwrap();
    assert_eq!(mapped.metadata(), owned.metadata());
    assert_eq!(mapped.tensors(), owned.tensors());
    for info in mapped.tensors() {
        assert_eq!(mapped.data_of(info), owned.data_of(info));
    }
}

#[test]
fn open_rejects_a_text_file_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "just some notes\n").unwrap();
    assert!(matches!(GgufFile::open(&path), Err(Error::NotGguf { .. })));
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-model.gguf");
    match GgufFile::open(&path) {
        Err(error @ Error::Io { .. }) => {
            assert!(
                error.to_string().contains(&*path.to_string_lossy()),
                "{error}"
            );
        }
        other => panic!("expected Error::Io, got {other:?}"),
    }
}
