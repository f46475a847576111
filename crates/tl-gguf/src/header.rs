//! Parsing and validating everything in a GGUF file before the tensor data: the
//! fixed header, the metadata, the tensor descriptors and the data section's layout.
//!
//! Validation order matters: counts are checked against the bytes left before
//! anything is allocated, sizes use checked arithmetic, and every tensor's extent is
//! checked to lie inside the file, aligned, and not to overlap another. Every error
//! names the field and the byte offset where it starts.

use std::collections::HashMap;

use crate::cursor::{heap_bytes, Cursor};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::reader::{DEFAULT_ALIGNMENT, MAGIC};
use crate::tensor_info::{data_size, TensorInfo, MAX_DIMS};
use crate::value::Value;

/// What the bytes before the data section say.
pub(crate) struct Header {
    pub(crate) version: u32,
    pub(crate) metadata: Vec<(String, Value)>,
    /// Each key's place in `metadata`.
    pub(crate) metadata_index: HashMap<String, usize>,
    pub(crate) tensors: Vec<TensorInfo>,
    /// Each name's place in `tensors`.
    pub(crate) tensor_index: HashMap<String, usize>,
    pub(crate) alignment: u64,
    pub(crate) data_offset: u64,
}

/// Smallest encoded size of one key/value pair (empty key, u8 value), used to bound
/// the declared count by the file size before allocating.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoded size of one tensor info (empty name, one dim).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// Parses and validates the header of a whole GGUF file held in `bytes`.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header> {
    check_magic(bytes)?;
    let mut cur = Cursor::new(bytes);
    cur.take(MAGIC.len() as u64, "magic")?;
    let version = cur.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(Error::UnsupportedVersion(version));
    }
    let tensor_count = DeclaredCount::read(&mut cur, "tensor_count")?;
    let metadata_count = DeclaredCount::read(&mut cur, "metadata_kv_count")?;
    let (entries, metadata_index) = parse_metadata(&mut cur, metadata_count)?;
    let alignment = alignment_of(&entries)?;
    let (raw_tensors, tensor_index) = parse_tensor_infos(&mut cur, tensor_count)?;
    let data_offset = cur
        .position()
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| cur.malformed(cur.position(), "data section", "offset overflows"))?;
    let tensors = validate_extents(raw_tensors, data_offset, alignment, bytes.len() as u64)?;
    Ok(Header {
        version,
        metadata: entries.into_iter().map(|e| (e.key, e.value)).collect(),
        metadata_index,
        tensors,
        tensor_index,
        alignment,
        data_offset,
    })
}

/// A file shorter than the magic that starts like it is a truncated GGUF file;
/// anything else without the magic is some other kind of file.
fn check_magic(bytes: &[u8]) -> Result<()> {
    let head = &bytes[..bytes.len().min(MAGIC.len())];
    if head == MAGIC {
        return Ok(());
    }
    if MAGIC.starts_with(head) {
        return Err(Error::Malformed {
            offset: 0,
            field: "magic".to_string(),
            reason: format!("the file ends after {} bytes", bytes.len()),
        });
    }
    Err(Error::NotGguf {
        found: head.to_vec(),
    })
}

/// A count read from the header, remembered with its offset so that a count too
/// large for the file is reported where it was read, not where it was checked.
struct DeclaredCount {
    value: u64,
    offset: u64,
    field: &'static str,
}

impl DeclaredCount {
    fn read(cur: &mut Cursor, field: &'static str) -> Result<Self> {
        let offset = cur.position();
        let value = cur.u64(field)?;
        Ok(Self {
            value,
            offset,
            field,
        })
    }

    /// The count as a `usize`, once it is known that `count` entries of at least
    /// `min_each` bytes fit in what is left of the file (which bounds allocations).
    fn checked(&self, cur: &Cursor, min_each: u64) -> Result<usize> {
        let fits = self
            .value
            .checked_mul(min_each)
            .is_some_and(|needed| needed <= cur.remaining());
        if !fits {
            return Err(cur.malformed(
                self.offset,
                self.field,
                format!(
                    "declares {} entries, more than the {} bytes left can hold",
                    self.value,
                    cur.remaining()
                ),
            ));
        }
        // Bounded by the file length, which is a usize.
        Ok(self.value as usize)
    }
}

/// One metadata pair with the offset of its key, for errors about its value.
struct MetadataEntry {
    key: String,
    value: Value,
    offset: u64,
}

/// Memory one entry of a name index takes: the slot (a hash table keeps up to
/// twice the slots it holds) and the control byte.
const INDEX_ENTRY_BYTES: u64 = 2 * (size_of::<(String, usize)>() as u64 + 1);

/// The metadata pairs and each key's place among them.
fn parse_metadata(
    cur: &mut Cursor,
    count: DeclaredCount,
) -> Result<(Vec<MetadataEntry>, HashMap<String, usize>)> {
    let n = count.checked(cur, MIN_KV_BYTES)?;
    // Each entry is in the list as it is read, then as the file's `(key, value)`
    // pair, and its key a second time in the index.
    let entry_bytes = (size_of::<MetadataEntry>() + size_of::<(String, Value)>()) as u64;
    cur.charge(
        (n as u64).saturating_mul(entry_bytes + INDEX_ENTRY_BYTES),
        count.offset,
        count.field,
    )?;
    let mut entries = Vec::with_capacity(n);
    let mut index = HashMap::with_capacity(n);
    for i in 0..n {
        let offset = cur.position();
        let key = cur.string(&format!("metadata[{i}].key"))?;
        let field = format!("metadata '{key}'");
        cur.charge(heap_bytes(key.len() as u64), offset, &field)?;
        if index.insert(key.clone(), i).is_some() {
            return Err(cur.malformed(offset, &field, "key appears twice"));
        }
        let ty = cur.value_type(&field)?;
        let value = cur.value(ty, &field)?;
        entries.push(MetadataEntry { key, value, offset });
    }
    Ok((entries, index))
}

fn alignment_of(entries: &[MetadataEntry]) -> Result<u64> {
    let Some(entry) = entries.iter().find(|e| e.key == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    match entry.value.as_u64() {
        Some(a) if a.is_power_of_two() => Ok(a),
        _ => Err(Error::Malformed {
            offset: entry.offset,
            field: "metadata 'general.alignment'".to_string(),
            reason: format!("must be a power of two, found {}", entry.value),
        }),
    }
}

/// A tensor info as read, before its extent is checked against the file.
struct RawTensorInfo {
    info: TensorInfo,
    /// Where the tensor's `offset` field is, for errors about its extent.
    offset_field_at: u64,
}

/// The tensor descriptors and each name's place among them.
fn parse_tensor_infos(
    cur: &mut Cursor,
    count: DeclaredCount,
) -> Result<(Vec<RawTensorInfo>, HashMap<String, usize>)> {
    let n = count.checked(cur, MIN_TENSOR_INFO_BYTES)?;
    // Each descriptor is read raw, then kept; the overlap check sorts references
    // to them; the dimensions and the name's copy in the index are on the heap.
    let info_bytes = (size_of::<RawTensorInfo>() + size_of::<TensorInfo>() + size_of::<usize>())
        as u64
        + heap_bytes((MAX_DIMS * size_of::<u64>()) as u64);
    cur.charge(
        (n as u64).saturating_mul(info_bytes + INDEX_ENTRY_BYTES),
        count.offset,
        count.field,
    )?;
    let mut tensors = Vec::with_capacity(n);
    let mut index = HashMap::with_capacity(n);
    for i in 0..n {
        let name_at = cur.position();
        let field = format!("tensor_info[{i}].name");
        let name = cur.string(&field)?;
        cur.charge(heap_bytes(name.len() as u64), name_at, &field)?;
        if index.insert(name.clone(), i).is_some() {
            let reason = format!("tensor name '{name}' appears twice");
            return Err(cur.malformed(name_at, &field, reason));
        }
        tensors.push(parse_tensor_info_after_name(cur, name)?);
    }
    Ok((tensors, index))
}

fn parse_tensor_info_after_name(cur: &mut Cursor, name: String) -> Result<RawTensorInfo> {
    let field = format!("tensor '{name}'");
    let dims_at = cur.position();
    let dims = parse_dims(cur, &field)?;
    let type_at = cur.position();
    let type_id = cur.u32(&format!("{field} type"))?;
    let ggml_type =
        GgmlType::from_id(type_id).map_err(|type_name| Error::UnsupportedTensorType {
            tensor: name.clone(),
            offset: type_at,
            type_id,
            type_name,
        })?;
    let offset_field_at = cur.position();
    let offset = cur.u64(&format!("{field} offset"))?;
    let size_bytes = data_size(&dims, ggml_type)
        .map_err(|reason| cur.malformed(dims_at, &format!("{field} dims"), reason))?;
    Ok(RawTensorInfo {
        info: TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            size_bytes,
        },
        offset_field_at,
    })
}

/// `n_dims` then the dimensions, each error naming the dimension it is about.
/// GGML stores dimensions as `int64_t`, so larger values are rejected even where a
/// zero dimension would keep the size small.
fn parse_dims(cur: &mut Cursor, field: &str) -> Result<Vec<u64>> {
    let n_dims_at = cur.position();
    let n_dims_field = format!("{field} n_dims");
    let n_dims = cur.u32(&n_dims_field)?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        let reason = format!("{n_dims} dimensions (expected 1 to {MAX_DIMS})");
        return Err(cur.malformed(n_dims_at, &n_dims_field, reason));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let dim_at = cur.position();
        let dim_field = format!("{field} dims[{d}]");
        let dim = cur.u64(&dim_field)?;
        if dim > i64::MAX as u64 {
            return Err(cur.malformed(dim_at, &dim_field, format!("{dim} exceeds i64::MAX")));
        }
        dims.push(dim);
    }
    Ok(dims)
}

fn validate_extents(
    raw: Vec<RawTensorInfo>,
    data_offset: u64,
    alignment: u64,
    file_len: u64,
) -> Result<Vec<TensorInfo>> {
    for t in &raw {
        check_extent(t, data_offset, alignment, file_len)?;
    }
    check_no_overlap(&raw)?;
    Ok(raw.into_iter().map(|t| t.info).collect())
}

fn check_extent(t: &RawTensorInfo, data_offset: u64, alignment: u64, file_len: u64) -> Result<()> {
    let malformed = |reason: String| Error::Malformed {
        offset: t.offset_field_at,
        field: format!("tensor '{}' offset", t.info.name),
        reason,
    };
    if !t.info.offset.is_multiple_of(alignment) {
        let reason = format!(
            "{} is not a multiple of the alignment {alignment}",
            t.info.offset
        );
        return Err(malformed(reason));
    }
    let end = data_offset
        .checked_add(t.info.offset)
        .and_then(|start| start.checked_add(t.info.size_bytes));
    if end.is_none_or(|end| end > file_len) {
        return Err(malformed(format!(
            "data of {} bytes at data offset {} runs past the end of the file ({file_len} bytes, data section at {data_offset})",
            t.info.size_bytes, t.info.offset
        )));
    }
    Ok(())
}

/// Tensors sorted by start overlap exactly when one ends after the next starts.
/// Ties sort the shorter first so the verdict does not depend on file order.
fn check_no_overlap(raw: &[RawTensorInfo]) -> Result<()> {
    let mut order: Vec<&RawTensorInfo> = raw.iter().collect();
    order.sort_by_key(|t| (t.info.offset, t.info.size_bytes));
    for pair in order.windows(2) {
        let (a, b) = (&pair[0].info, &pair[1].info);
        // Extents were checked not to overflow, so this add is exact.
        if a.offset + a.size_bytes > b.offset {
            return Err(Error::Malformed {
                offset: pair[1].offset_field_at,
                field: format!("tensor '{}' offset", b.name),
                reason: format!(
                    "data at {} overlaps tensor '{}' ({} bytes at {})",
                    b.offset, a.name, a.size_bytes, a.offset
                ),
            });
        }
    }
    Ok(())
}
