//! RoPE with the K/V cache write, and attention over the cache.

use crate::buffer::{Buffer, Span};
use crate::error::{CudaError, Result};
use crate::gpu::{Arg, Gpu, DEFAULT_SHARED_LIMIT};
use crate::ops::{blocks_for, int, l2_prefetch_level};

/// Warps per block of the attention kernels (`ATTN_WARPS` in attention.cu).
const WARPS: usize = 4;
/// Threads per block of an f16-accumulator launch of one head a block with
/// few blocks: one per output element of the largest head, a warp for the
/// sum of weights, and at least one warp more that fills the next tile
/// (keys, values, scores, factors).
const F16_ACCUMULATOR_THREADS: u32 = 512;
const _: () = assert!(F16_ACCUMULATOR_THREADS as usize >= MAX_HEAD_DIM + 64);
/// Threads per block of a launch of one head a block with many blocks for
/// heads of up to 128 values: they then run two to a multiprocessor, each
/// with fewer producers.
const SPLIT_THREADS: u32 = 320;
/// Chain threads (query heads × head size) a block of several heads holds
/// at most.
const F16_GROUP_CHAINS: usize = 512;
/// Producer threads of a block of several heads.
const F16_GROUP_PRODUCERS: usize = 96;
/// The most query heads a block serves (`MAX_GROUP` in attention.cu).
const F16_MAX_GROUP: usize = 16;
/// The most threads an f16-accumulator block has (`F16_MAX_THREADS`, the
/// kernels' launch bound, which must match).
const F16_MAX_THREADS: usize = F16_GROUP_CHAINS + 32 + F16_GROUP_PRODUCERS;
const _: () = assert!(F16_ACCUMULATOR_THREADS as usize <= F16_MAX_THREADS);

/// The largest head the kernels hold in registers (`MAX_HEAD_DIM`).
pub const MAX_HEAD_DIM: usize = 256;

/// Positions per tile of the f16-accumulator kernels (see attention.cu): a
/// short context (tg128 and a chat's first turns) is then filled by the
/// whole block in one go, however large the heads; smaller heads keep 32
/// KiB of values a tile pair (256 positions for heads of 32).
const F16_TILE_POSITIONS: usize = 128;
/// The most positions a tile takes.
const F16_TILE_MOST_POSITIONS: usize = 256;
/// The f16-accumulator kernels' static shared memory, with room to spare
/// (the expf table, the heads' maxima and sums: under 0.5 KiB).
const F16_TILE_STATIC_SHARED: usize = 1024;
/// Halves after each key row in shared memory (`KEY_PAD`).
const KEY_PAD: usize = 8;

/// Dynamic shared memory of an f16-accumulator block of `group` query heads
/// of `head_dim` with tiles of `tile` positions, laid out as `tile_layout`
/// in attention.cu: two tiles' f16 values, one tile's keys in padded rows
/// (blocks of several heads), the f32 queries, two tiles' factors, the
/// scores and each chunk of 32 positions' maximum.
fn f16_shared_bytes(head_dim: usize, group: usize, tile: usize) -> usize {
    let values = 2 * tile * head_dim * 2;
    let keys = if group > 1 {
        tile * (head_dim + KEY_PAD) * 2
    } else {
        0
    };
    let floats = group * head_dim + 5 * group * tile + group * tile.div_ceil(32);
    values + keys + 4 * floats
}

/// The tile (positions) of an f16-accumulator block and its dynamic shared
/// memory: F16_TILE_POSITIONS (more for small heads), halved until the
/// block fits in `shared_limit` bytes.
fn f16_tile(head_dim: usize, group: usize, shared_limit: usize) -> (usize, u32) {
    let mut tile = F16_TILE_POSITIONS
        .max(8192 / head_dim.max(1))
        .min(F16_TILE_MOST_POSITIONS);
    while tile > 1
        && f16_shared_bytes(head_dim, group, tile) + F16_TILE_STATIC_SHARED > shared_limit
    {
        tile /= 2;
    }
    (tile, f16_shared_bytes(head_dim, group, tile) as u32)
}

/// Query heads per block of an f16-accumulator launch whose one-head blocks
/// would number `blocks`: the most heads of one key/value head that fit
/// F16_GROUP_CHAINS chain threads and still leave a block for every
/// multiprocessor, so that the key/value head's tiles are copied and
/// scored once for them all; one where no group does (a lone short decode
/// step, whose heads then run side by side). A larger group would leave
/// multiprocessors idle while each block's few producer warps, filling
/// tiles for all its heads, fall behind its chains.
fn f16_group(h: &Heads, blocks: usize, multiprocessors: usize) -> usize {
    let per_kv_head = h.heads / h.kv_heads;
    (1..=per_kv_head.min(F16_MAX_GROUP))
        .filter(|g| {
            per_kv_head.is_multiple_of(*g)
                && g * h.head_dim <= F16_GROUP_CHAINS
                && blocks / g >= multiprocessors
        })
        .max()
        .unwrap_or(1)
}

/// How an f16-accumulator launch spreads its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct F16Launch {
    /// Blocks along x: slots × rows × heads / group.
    blocks: u32,
    /// Threads a block: group × head_dim chain threads, a warp of sums, the
    /// rest producers.
    threads: u32,
    /// Bytes of dynamic shared memory a block ([`f16_shared_bytes`]).
    shared: u32,
    /// Query heads a block serves.
    group: usize,
    /// Positions a tile.
    tile: usize,
}

impl F16Launch {
    /// The launch of `rows` rows of each of `sequences` sequences over
    /// `slots` chunk slots on a GPU of `multiprocessors` and `shared_limit`
    /// bytes of shared memory a block.
    fn new(
        h: &Heads,
        slots: usize,
        rows: usize,
        sequences: usize,
        multiprocessors: usize,
        shared_limit: usize,
    ) -> Self {
        let single = slots * rows * h.heads;
        // A split row's chunks fill at least half its slots (a power of two).
        let working = slots.div_ceil(2) * rows * h.heads * sequences;
        let group = f16_group(h, working, multiprocessors);
        let threads = if group > 1 {
            (group * h.head_dim + 32 + F16_GROUP_PRODUCERS).max(SPLIT_THREADS as usize) as u32
        } else if (slots > 1 || single * sequences > multiprocessors)
            && h.head_dim + 2 * 32 + 64 <= SPLIT_THREADS as usize
        {
            SPLIT_THREADS
        } else {
            F16_ACCUMULATOR_THREADS
        };
        let (tile, shared) = f16_tile(h.head_dim, group, shared_limit);
        F16Launch {
            blocks: (single / group) as u32,
            threads,
            shared,
            group,
            tile,
        }
    }

    /// The kernels' last two launch arguments: group and tile.
    fn args(&self) -> [Arg; 2] {
        [Arg::I32(self.group as i32), Arg::I32(self.tile as i32)]
    }
}

/// The attention geometry of a model.
#[derive(Debug, Clone, Copy)]
pub struct Heads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl Heads {
    /// Errors unless the kernels support this geometry.
    pub fn check(&self) -> Result<()> {
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(32) || self.head_dim > MAX_HEAD_DIM {
            return Err(CudaError::Unsupported(format!(
                "the CUDA attention kernels need a head size that is a multiple of 32 up to {MAX_HEAD_DIM}; this model has {}",
                self.head_dim
            )));
        }
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(CudaError::Unsupported(format!(
                "{} query heads do not divide into {} key/value heads",
                self.heads, self.kv_heads
            )));
        }
        Ok(())
    }

    pub(crate) fn q_width(&self) -> usize {
        self.heads * self.head_dim
    }

    pub(crate) fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Values one layer's key (or value) cache holds for `capacity` positions.
    pub fn cache_len(&self, capacity: usize) -> usize {
        self.kv_width() * capacity
    }

    /// The usual factor on a score, `1/√head_dim` (what [`AttentionBatch`]
    /// callers pass unless their architecture scales the queries instead).
    pub fn score_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// One layer's key and value caches, `[kv_head][capacity][head_dim]` f16.
/// For a batched decode step, `tables` holds the address of each sequence's
/// key and value cache of this layer (all of `capacity` positions), and
/// `keys`/`values` are the first sequence's.
#[derive(Debug, Clone, Copy)]
pub struct LayerCache<'a> {
    pub keys: Span<'a, u16>,
    pub values: Span<'a, u16>,
    pub capacity: usize,
    pub tables: Option<CacheTables<'a>>,
}

/// Per-sequence cache addresses of one layer (see [`LayerCache`]).
#[derive(Debug, Clone, Copy)]
pub struct CacheTables<'a> {
    pub keys: Span<'a, u64>,
    pub values: Span<'a, u64>,
}

impl LayerCache<'_> {
    /// The key and value tables as kernel arguments, after checking they hold
    /// `sequences` entries.
    pub(crate) fn table_args(&self, sequences: usize) -> Result<[Arg; 2]> {
        let Some(t) = self.tables else {
            return Err(CudaError::Unsupported(
                "a batched step needs a table of each sequence's cache".into(),
            ));
        };
        t.keys.require(sequences, "key cache table")?;
        t.values.require(sequences, "value cache table")?;
        Ok([t.keys.into(), t.values.into()])
    }
}

impl LayerCache<'_> {
    pub(crate) fn check(&self, h: &Heads) -> Result<()> {
        self.keys.require(h.cache_len(self.capacity), "key cache")?;
        self.values
            .require(h.cache_len(self.capacity), "value cache")
    }
}

/// One attention call over the cache: `rows` query rows of `queries` (row r at
/// position `*start + r`, rows `query_stride` floats apart, head h at h ×
/// head_dim), written to `out` as `[row][heads × head_dim]`.
#[derive(Debug, Clone, Copy)]
pub struct AttentionBatch<'a> {
    pub heads: Heads,
    /// The factor on every score `q·k`.
    pub scale: f32,
    /// With `Some(w)`, row r sees only the last `w` positions up to its own
    /// (a sliding-window layer).
    pub window: Option<usize>,
    pub queries: Span<'a, f32>,
    pub query_stride: usize,
    pub rows: usize,
    pub cache: LayerCache<'a>,
    pub start: Span<'a, i32>,
    pub out: Span<'a, f32>,
}

/// How [`rope_store_kv`] makes queries and keys ready for attention.
#[derive(Debug, Clone, Copy)]
pub struct Rotation<'a> {
    /// (cos, sin) pairs `[position][head_dim/2]` for positions `0..capacity`
    /// at least.
    pub cos_sin: Span<'a, f32>,
    /// Pairs are elements half a head apart (GGML's NeoX style) rather than
    /// adjacent.
    pub halves: bool,
    /// Per-head RMS norms applied before the rotation.
    pub qk_norm: Option<QkNorm<'a>>,
    /// The factor on the rotated queries (1 unless the architecture scales
    /// queries rather than scores).
    pub query_scale: f32,
}

/// The RMS norm weights of every query head and every key head (`head_dim`
/// values each) and the norm's epsilon.
#[derive(Debug, Clone, Copy)]
pub struct QkNorm<'a> {
    pub query: Span<'a, f32>,
    pub key: Span<'a, f32>,
    pub eps: f32,
}

/// Prepares the queries of `rows` rows of `qkv` in place (normalised when
/// `rotation` says so, then rotated) and writes the keys (the same) and the
/// values at positions `*start + r` of the cache. `*start + rows` must not
/// exceed the cache capacity (the caller keeps `start` in range).
pub fn rope_store_kv(
    gpu: &Gpu,
    h: Heads,
    qkv: Span<'_, f32>,
    rows: usize,
    rotation: Rotation<'_>,
    start: Span<'_, i32>,
    cache: LayerCache<'_>,
) -> Result<()> {
    start.require(1, "start position")?;
    let mut args = rope_args(h, qkv, rows, rotation, start, cache)?;
    args.extend([Arg::Ptr(0), Arg::Ptr(0), Arg::Ptr(0)]);
    // SAFETY: matches rope_store_kv's signature; qkv holds `rows` rows, the
    // table and caches hold `capacity` positions, and the caller guarantees
    // *start + rows <= capacity (the host checks room before every pass).
    unsafe { launch_rope(gpu, h, rows, &args) }
}

/// [`rope_store_kv`] for a batched decode step: row `r` is sequence r's next
/// token, at `positions[r]` of the caches in `cache.tables`.
pub fn rope_store_kv_batched(
    gpu: &Gpu,
    h: Heads,
    qkv: Span<'_, f32>,
    rows: usize,
    rotation: Rotation<'_>,
    positions: Span<'_, i32>,
    cache: LayerCache<'_>,
) -> Result<()> {
    positions.require(rows, "positions")?;
    let tables = cache.table_args(rows)?;
    let mut args = rope_args(h, qkv, rows, rotation, positions, cache)?;
    args.push(positions.into());
    args.extend(tables);
    // SAFETY: as rope_store_kv; the tables hold `rows` caches of `capacity`
    // positions each and the caller keeps every position below it.
    unsafe { launch_rope(gpu, h, rows, &args) }
}

/// rope_store_kv's arguments up to `halves`, after checking the spans.
fn rope_args(
    h: Heads,
    qkv: Span<'_, f32>,
    rows: usize,
    rotation: Rotation<'_>,
    start: Span<'_, i32>,
    cache: LayerCache<'_>,
) -> Result<Vec<Arg>> {
    h.check()?;
    cache.check(&h)?;
    qkv.require(rows * (h.q_width() + 2 * h.kv_width()), "qkv")?;
    rotation
        .cos_sin
        .require(cache.capacity * h.head_dim, "rope table")?;
    let mut args = vec![
        qkv.into(),
        Arg::I32(int(h.heads, "heads")?),
        Arg::I32(int(h.kv_heads, "kv heads")?),
        Arg::I32(int(h.head_dim, "head dim")?),
        rotation.cos_sin.into(),
        start.into(),
        cache.keys.into(),
        cache.values.into(),
        Arg::I32(int(cache.capacity, "capacity")?),
    ];
    args.extend(rotation_args(h, rotation)?);
    Ok(args)
}

/// The kernels' rotation arguments after the caches: the per-head norms
/// (query, key, eps; null without), `halves` and the query scale.
fn rotation_args(h: Heads, rotation: Rotation<'_>) -> Result<Vec<Arg>> {
    let mut args = Vec::with_capacity(5);
    match rotation.qk_norm {
        Some(_) if h.heads + h.kv_heads > ROPE_MAX_HEADS => {
            return Err(CudaError::Unsupported(format!(
                "per-head norms of {} query and key heads (the kernel takes up to {ROPE_MAX_HEADS})",
                h.heads + h.kv_heads
            )))
        }
        Some(norm) => {
            norm.query.require(h.head_dim, "query norm")?;
            norm.key.require(h.head_dim, "key norm")?;
            args.extend([norm.query.into(), norm.key.into(), Arg::F32(norm.eps)]);
        }
        None => args.extend([Arg::Ptr(0), Arg::Ptr(0), Arg::F32(0.0)]),
    }
    args.push(Arg::I32(rotation.halves as i32));
    args.push(Arg::F32(rotation.query_scale));
    Ok(args)
}

/// Threads of rope_store_kv.
const ROPE_THREADS: u32 = 256;
/// The most query and key heads of a row it normalises (`ROPE_MAX_HEADS`).
const ROPE_MAX_HEADS: usize = 512;
/// Heads (a warp each) per block of rope_store_kv_per_head (`ROPE_WARPS`).
const ROPE_HEADS_PER_BLOCK: usize = 4;
/// Rows below which a launch takes a warp per head rather than a block per
/// row (measured on an H100: a decode step's rotation 8.4 → 5.4 µs, a 0.6B
/// model's decode (16 heads of 128, q/k norms) 1.03–1.07×; at 512 rows the per-row blocks were faster).
const PER_HEAD_MAX_ROWS: usize = 64;

/// # Safety
/// `args` must be rope_store_kv's full argument list, checked as its callers do.
/// Both kernels take the same arguments and compute the same bits.
unsafe fn launch_rope(gpu: &Gpu, h: Heads, rows: usize, args: &[Arg]) -> Result<()> {
    let rows_grid = int(rows, "rows")? as u32;
    // SAFETY: the caller passes a checked argument list; the kernels wait for
    // the previous one before touching memory.
    unsafe {
        if rows < PER_HEAD_MAX_ROWS {
            let grid = (
                rows_grid,
                blocks_for(h.heads + h.kv_heads, ROPE_HEADS_PER_BLOCK),
            );
            let threads = (ROPE_HEADS_PER_BLOCK * 32) as u32;
            gpu.launch_dependent("rope_store_kv_per_head", grid, threads, 0, args)
        } else {
            gpu.launch_dependent("rope_store_kv", (rows_grid, 1), ROPE_THREADS, 0, args)
        }
    }
}

/// Positions per chunk of the canonical split of a lone decode row's context
/// (`KV_CHUNK` in attention.cu, the CPU backend's `KV_CHUNK`): a row that is
/// its sequence's only one in a call, at a position past the first chunk,
/// is computed chunk by chunk (each on its own block) and the chunks'
/// results are combined in order.
pub const KV_CHUNK: usize = 256;

/// The chunk slots a launch needs for lone rows at positions up to
/// `position` in a layer of `window` (None: the whole context): one below
/// [`KV_CHUNK`], else the most chunks such a row touches, rounded up to a
/// power of two so that a recorded decode step stays valid for a range of
/// positions (slots past a row's chunks exit at once).
pub fn chunk_slots(position: usize, window: Option<usize>) -> usize {
    if position < KV_CHUNK {
        return 1;
    }
    let whole = (position / KV_CHUNK + 1).next_power_of_two();
    // A window of w positions touches at most (w − 1)/KV_CHUNK + 2 chunks.
    window.map_or(whole, |w| {
        whole.min((w.saturating_sub(1) / KV_CHUNK + 2).next_power_of_two())
    })
}

/// Where split rows leave their chunks' partial results: per sequence and
/// head, a slot of [max score, sum of weights, head_dim values] per chunk,
/// and a count of the chunks done (the kernels leave it at zero).
pub struct SplitBuffers {
    partials: Buffer<f32>,
    arrivals: Buffer<u32>,
    heads: Heads,
    sequences: usize,
    slots: usize,
}

impl SplitBuffers {
    /// Room for `sequences` sequences' rows of `heads`, split into up to
    /// `slots` chunks.
    pub fn new(gpu: &Gpu, heads: Heads, sequences: usize, slots: usize) -> Result<Self> {
        let partials = sequences * heads.heads * slots * (heads.head_dim + 2);
        Ok(SplitBuffers {
            partials: Buffer::zeros(gpu, partials.max(1))?,
            arrivals: Buffer::zeros(gpu, (sequences * heads.heads).max(1))?,
            heads,
            sequences,
            slots,
        })
    }

    /// The most chunk slots a launch may use.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The view a launch of `slots` chunk slots takes (None for one slot:
    /// no row is split).
    pub fn view(&self, slots: usize) -> Result<Option<KvSplit<'_>>> {
        if slots <= 1 {
            return Ok(None);
        }
        if slots > self.slots {
            return Err(CudaError::Unsupported(format!(
                "attention needs {slots} chunk slots; its buffers hold {}",
                self.slots
            )));
        }
        Ok(Some(KvSplit {
            partials: self.partials.all(),
            arrivals: self.arrivals.all(),
            slots,
            sequences: self.sequences,
            heads: self.heads.heads,
        }))
    }
}

/// One launch's split state (see [`SplitBuffers::view`]).
#[derive(Debug, Clone, Copy)]
pub struct KvSplit<'a> {
    partials: Span<'a, f32>,
    arrivals: Span<'a, u32>,
    slots: usize,
    sequences: usize,
    heads: usize,
}

/// The split arguments of an f16-accumulator launch (partials, arrivals,
/// slots) after checking they hold `sequences` sequences of `h`, and the
/// slot count; null pointers and one slot without a split.
fn split_args(
    split: Option<KvSplit<'_>>,
    h: &Heads,
    sequences: usize,
) -> Result<([Arg; 3], usize)> {
    let Some(split) = split else {
        return Ok(([Arg::Ptr(0), Arg::Ptr(0), Arg::I32(1)], 1));
    };
    if split.sequences < sequences || split.heads != h.heads {
        return Err(CudaError::Unsupported(format!(
            "split attention buffers for {} sequences of {} heads, not {sequences} of {}",
            split.sequences, split.heads, h.heads
        )));
    }
    let slots = split.slots;
    split.partials.require(
        sequences * h.heads * slots * (h.head_dim + 2),
        "split partials",
    )?;
    split
        .arrivals
        .require(sequences * h.heads, "split counts")?;
    let args = [
        split.partials.into(),
        split.arrivals.into(),
        Arg::I32(int(slots, "chunk slots")?),
    ];
    Ok((args, slots))
}

/// Causal attention with llama.cpp's small-batch CPU arithmetic (f16 query,
/// f16 running output; see attention.cu). The CPU backend uses it below
/// [`TILED_MIN_ROWS`] rows, and so does the GPU. A lone row at a position
/// of `KV_CHUNK` or more needs `split` with at least
/// [`chunk_slots`]`(position, window)` slots (its output is NaN otherwise).
pub fn attention_f16_accumulator(
    gpu: &Gpu,
    batch: &AttentionBatch<'_>,
    split: Option<KvSplit<'_>>,
) -> Result<()> {
    if batch.rows == 0 {
        return Ok(());
    }
    let mut args = batch_args(batch)?;
    args.remove(ROWS_ARG); // one block per (row, head) needs no row count
    args.push(Arg::I32(l2_prefetch_level(gpu)));
    let launch = push_split(gpu, &mut args, split, batch, 1)?;
    // SAFETY: matches attention_f16_accumulator's signature; queries and output
    // are checked for `rows` rows, the split buffers for the slots, and
    // positions read stay below *start + rows <= capacity (the host checks
    // room before every pass). The kernel waits for the previous one before
    // its first dependent access.
    unsafe {
        gpu.launch_dependent(
            "attention_f16_accumulator",
            (launch.blocks, 1),
            launch.threads,
            launch.shared,
            &args,
        )
    }
}

/// Appends the split arguments of a launch of `batch` for `sequences`
/// sequences, then its group and tile, and returns how it is launched. Only
/// lone rows are split: more slots than one with several rows is a caller's
/// mistake.
fn push_split(
    gpu: &Gpu,
    args: &mut Vec<Arg>,
    split: Option<KvSplit<'_>>,
    batch: &AttentionBatch<'_>,
    sequences: usize,
) -> Result<F16Launch> {
    let (split, slots) = split_args(split, &batch.heads, sequences)?;
    if slots > 1 && batch.rows != 1 {
        return Err(CudaError::Unsupported(format!(
            "only a lone row is split into chunks, not {} rows",
            batch.rows
        )));
    }
    int(
        slots * batch.rows * batch.heads.heads,
        "slots × rows × heads",
    )?;
    let launch = F16Launch::new(
        &batch.heads,
        slots,
        batch.rows,
        sequences,
        gpu.info().multiprocessors,
        gpu.info().shared_per_block_optin.max(DEFAULT_SHARED_LIMIT),
    );
    args.extend(split);
    args.extend(launch.args());
    Ok(launch)
}

/// [`rope_store_kv`] and then [`attention_f16_accumulator`] in one launch, for
/// a lone decode step (one row; its queries, keys and values not yet
/// rotated or stored): the same bits as the two calls, one kernel fewer on
/// the step's critical path. The queries in `batch.queries` are left as
/// they were.
pub fn attention_f16_accumulator_rope(
    gpu: &Gpu,
    batch: &AttentionBatch<'_>,
    rotation: Rotation<'_>,
    split: Option<KvSplit<'_>>,
) -> Result<()> {
    if batch.rows != 1 || batch.cache.tables.is_some() {
        return Err(CudaError::Unsupported(format!(
            "attention with RoPE in one launch takes one row of one sequence, not {} rows",
            batch.rows
        )));
    }
    let h = batch.heads;
    batch
        .queries
        .require(h.q_width() + 2 * h.kv_width(), "qkv")?;
    let mut args = batch_args(batch)?;
    args.remove(ROWS_ARG);
    args.push(Arg::I32(l2_prefetch_level(gpu)));
    let launch = push_split(gpu, &mut args, split, batch, 1)?;
    rotation
        .cos_sin
        .require(batch.cache.capacity * h.head_dim, "rope table")?;
    args.push(rotation.cos_sin.into());
    args.extend(rotation_args(h, rotation)?);
    // SAFETY: matches attention_f16_accumulator_rope's signature; the qkv row
    // and output are checked, the tables and caches hold `capacity`
    // positions, and the caller keeps *start below it (the host checks room
    // before every pass). The kernel waits for the previous one first.
    unsafe {
        gpu.launch_dependent(
            "attention_f16_accumulator_rope",
            (launch.blocks, 1),
            launch.threads,
            launch.shared,
            &args,
        )
    }
}

/// [`attention_f16_accumulator`] for `sequences` sequences at once (decode of
/// several sequences): sequence s has `rows` query and output rows after the
/// previous sequences', its start at `start[s]` and its caches in
/// `cache.tables`. Each sequence's numbers equal those of a call for it alone.
pub fn attention_f16_accumulator_batched(
    gpu: &Gpu,
    batch: &AttentionBatch<'_>,
    sequences: usize,
    split: Option<KvSplit<'_>>,
) -> Result<()> {
    if batch.rows == 0 || sequences == 0 {
        return Ok(());
    }
    let [keys, values] = batch.cache.table_args(sequences)?;
    let mut args = batch_args(batch)?;
    args.remove(ROWS_ARG);
    // The tables take the places of the single caches (arguments 2 and 3).
    args[2] = keys;
    args[3] = values;
    args.push(Arg::I32(l2_prefetch_level(gpu)));
    let all_rows = batch.rows * sequences;
    batch.queries.require(
        (all_rows - 1) * batch.query_stride + batch.heads.q_width(),
        "queries",
    )?;
    batch
        .out
        .require(all_rows * batch.heads.q_width(), "attention output")?;
    batch.start.require(sequences, "start positions")?;
    let launch = push_split(gpu, &mut args, split, batch, sequences)?;
    let sequences = int(sequences, "sequences")? as u32;
    // SAFETY: matches attention_f16_accumulator_batched's signature; queries,
    // output and starts are checked for every sequence's rows, the split
    // buffers for every sequence's slots and the tables for every sequence,
    // each entry the address of a cache of `capacity` positions (the caller
    // builds them from live caches); positions read
    // stay below start + rows <= capacity (the host checks room before every
    // pass). The kernel waits for the previous one before its first dependent
    // access.
    unsafe {
        gpu.launch_dependent(
            "attention_f16_accumulator_batched",
            (launch.blocks, sequences),
            launch.threads,
            launch.shared,
            &args,
        )
    }
}

/// Batches of at least this many rows use the prompt path ([`attention_prefill`]),
/// as llama.cpp's CPU code (and our CPU backend) switches to its tiled f32 path.
pub const TILED_MIN_ROWS: usize = 64;

/// Query rows per block of the tensor-core kernel (`FLASH_ROWS`).
const FLASH_ROWS: usize = 64;

/// Whether [`attention_flash`] runs on this GPU for heads of `head_dim`: it
/// needs tensor-core mma (compute capability 8.0 or later) and is built for
/// heads of 64 and 128 values.
pub fn flash_supported(gpu: &Gpu, head_dim: usize) -> bool {
    gpu.info().compute_capability.0 >= 8 && matches!(head_dim, 64 | 128)
}

/// Causal attention for a prompt batch: [`attention_flash`] where the GPU and
/// head size allow, else [`attention_f32`].
pub fn attention_prefill(gpu: &Gpu, batch: &AttentionBatch<'_>) -> Result<()> {
    if flash_supported(gpu, batch.heads.head_dim) {
        attention_flash(gpu, batch)
    } else {
        attention_f32(gpu, batch)
    }
}

/// Where `batch_args` puts the row count and the head size.
const ROWS_ARG: usize = 5;
const HEAD_DIM_ARG: usize = 8;

/// Checks the spans of a batch attention call and builds the kernels' common
/// argument list: q, q_stride, keys, values, start, rows, heads, kv_heads,
/// head_dim, capacity, scale, window (0: none), out.
fn batch_args(batch: &AttentionBatch<'_>) -> Result<Vec<Arg>> {
    let AttentionBatch {
        heads: h,
        scale,
        window,
        queries: q,
        query_stride: q_stride,
        rows,
        cache,
        start,
        out,
    } = *batch;
    h.check()?;
    cache.check(&h)?;
    q.require((rows - 1) * q_stride + h.q_width(), "queries")?;
    out.require(rows * h.q_width(), "attention output")?;
    start.require(1, "start position")?;
    Ok(vec![
        q.into(),
        Arg::I32(int(q_stride, "query stride")?),
        cache.keys.into(),
        cache.values.into(),
        start.into(),
        Arg::I32(int(rows, "rows")?),
        Arg::I32(int(h.heads, "heads")?),
        Arg::I32(int(h.kv_heads, "kv heads")?),
        Arg::I32(int(h.head_dim, "head dim")?),
        Arg::I32(int(cache.capacity, "capacity")?),
        Arg::F32(scale),
        Arg::I32(int(window.unwrap_or(0), "attention window")?),
        out.into(),
    ])
}

/// Causal attention in f32 throughout (the CPU's tiled path's precision).
pub fn attention_f32(gpu: &Gpu, batch: &AttentionBatch<'_>) -> Result<()> {
    if batch.rows == 0 {
        return Ok(());
    }
    let args = batch_args(batch)?;
    let (rows, heads) = (batch.rows, batch.heads.heads);
    // SAFETY: matches attention_prefill's signature; queries and output are
    // checked for `rows` rows, and positions read stay below *start + rows <=
    // capacity (the host checks room before every pass).
    unsafe {
        gpu.launch(
            "attention_prefill",
            (blocks_for(rows * heads, WARPS), 1),
            (WARPS * 32) as u32,
            0,
            &args,
        )
    }
}

/// The same attention on tensor cores (flash_attention.cu): queries and
/// softmax weights rounded to f16, scores, softmax and output in f32. Errors
/// where [`flash_supported`] is false.
pub fn attention_flash(gpu: &Gpu, batch: &AttentionBatch<'_>) -> Result<()> {
    flash(gpu, batch, None)
}

/// [`attention_flash`] with its output rounded to f16 into `out` instead of
/// `batch.out` (left untouched): the bits [`crate::ops::rows::to_f16`] (no norm,
/// no Q8) would give, written as the next GEMM's input without an f32 pass
/// in between (for float attention-output weights).
pub fn attention_flash_to_f16(
    gpu: &Gpu,
    batch: &AttentionBatch<'_>,
    out: Span<'_, u16>,
) -> Result<()> {
    out.require(batch.rows * batch.heads.q_width(), "f16 attention output")?;
    flash(gpu, batch, Some(out))
}

/// [`attention_flash`], writing f16 to `out_f16` when given.
fn flash(gpu: &Gpu, batch: &AttentionBatch<'_>, out_f16: Option<Span<'_, u16>>) -> Result<()> {
    let h = batch.heads;
    if !flash_supported(gpu, h.head_dim) {
        return Err(CudaError::Unsupported(format!(
            "tensor-core attention needs compute capability 8.0+ and heads of 64 or 128 values (this is {}.{} with {})",
            gpu.info().compute_capability.0,
            gpu.info().compute_capability.1,
            h.head_dim
        )));
    }
    if batch.rows == 0 {
        return Ok(());
    }
    let mut args = batch_args(batch)?;
    args.remove(HEAD_DIM_ARG); // the kernel is specialised for its head size
    args.push(out_f16.map_or(Arg::Ptr(0), Arg::from));
    let kernel = format!("attention_flash_{}", h.head_dim);
    // SAFETY: matches attention_flash_<D>'s signature (D = head_dim, so the
    // head-size argument is left out); queries and both outputs are checked
    // for `rows` rows (the f16 one by the caller), and the kernel reads cache
    // positions below *start + rows <= capacity (the host checks room before
    // every pass).
    unsafe {
        gpu.launch(
            &kernel,
            (
                blocks_for(batch.rows, FLASH_ROWS),
                int(h.heads, "heads")? as u32,
            ),
            128,
            0,
            &args,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_hold_a_short_context_and_shrink_to_the_cards_shared_memory() {
        let tile = |head_dim: usize, group: usize, limit: usize| f16_tile(head_dim, group, limit).0;
        // An H100's 227 KiB: 128 positions for heads of 64 to 256, alone or
        // eight heads of 64 a block.
        for head_dim in [64, 128, 256] {
            assert_eq!(tile(head_dim, 1, 227 * 1024), 128, "head {head_dim}");
        }
        assert_eq!(tile(64, 8, 227 * 1024), 128);
        // Heads of 32 keep 32 KiB of values: 256 positions.
        assert_eq!(tile(32, 1, 227 * 1024), 256);
        // A card of 99 KiB (sm_86, sm_89) halves heads of 256, and a block
        // of two heads of 128, which holds a tile's keys too.
        assert_eq!(tile(128, 1, 99 * 1024), 128);
        assert_eq!(tile(256, 1, 99 * 1024), 64);
        assert_eq!(tile(128, 2, 99 * 1024), 64);
        // Without opting in (48 KiB), heads of 256 get 32 positions.
        assert_eq!(tile(256, 1, DEFAULT_SHARED_LIMIT), 32);
        for (head_dim, group, limit) in [(64, 8, 99 * 1024), (256, 2, DEFAULT_SHARED_LIMIT)] {
            let (tile, bytes) = f16_tile(head_dim, group, limit);
            assert!(tile >= 16 && bytes as usize + F16_TILE_STATIC_SHARED <= limit);
        }
    }

    #[test]
    fn blocks_serve_a_key_value_heads_queries_once_the_gpu_is_full() {
        let launch = |heads, kv_heads, head_dim, slots, rows, sequences| {
            let h = Heads {
                heads,
                kv_heads,
                head_dim,
            };
            F16Launch::new(&h, slots, rows, sequences, 132, 227 * 1024)
        };
        // A lone short decode step keeps a block per head.
        let lone = launch(32, 4, 64, 1, 1, 1);
        assert_eq!((lone.group, lone.blocks, lone.threads), (1, 32, 512));
        // Past the multiprocessors, TinyLlama's query heads of a key/value
        // head share blocks, as many as leave a block a multiprocessor: two
        // at depth 4096 (32 slots, 17 of them busy), two at 16 sequences
        // and eight at 64.
        let long = launch(32, 4, 64, 32, 1, 1);
        assert_eq!((long.group, long.blocks, long.threads), (2, 512, 320));
        let sixteen = launch(32, 4, 64, 1, 1, 16);
        assert_eq!((sixteen.group, sixteen.blocks), (2, 16));
        let many = launch(32, 4, 64, 1, 1, 64);
        assert_eq!((many.group, many.blocks, many.threads), (8, 4, 640));
        // SmolLM2 (9 on 3), Qwen3-0.6B (16 of 128 on 8), Llama-8B (32 of 128
        // on 8) and Gemma 3 (4 of 256 on 1) with 48 prompt rows; Gemma's
        // pairs would leave multiprocessors idle.
        for (heads, kv_heads, head_dim, group) in [
            (9, 3, 64, 3),
            (16, 8, 128, 2),
            (32, 8, 128, 4),
            (4, 1, 256, 1),
        ] {
            let l = launch(heads, kv_heads, head_dim, 1, 48, 1);
            assert_eq!(l.group, group, "{heads} heads on {kv_heads}");
            assert_eq!(l.blocks as usize, 48 * heads / group);
            assert!(l.threads as usize <= F16_MAX_THREADS);
            assert!(l.threads as usize >= group * head_dim + 64);
        }
        // SmolLM2's 32-token prompt: 288 one-head blocks, 96 in threes.
        assert_eq!(launch(9, 3, 64, 1, 32, 1).group, 1);
    }

    /// The host's constants are the kernels' `#define`s.
    #[test]
    fn the_constants_match_the_kernels() {
        let source = include_str!("../../kernels/attention.cu");
        let define = |name: &str| crate::ops::kernel_define(source, "attention.cu", name);
        assert_eq!(define("F16_MAX_THREADS"), F16_MAX_THREADS);
        assert_eq!(define("MAX_GROUP"), F16_MAX_GROUP);
        assert_eq!(define("KEY_PAD"), KEY_PAD);
        assert_eq!(define("KV_CHUNK"), KV_CHUNK);
        assert_eq!(define("MAX_HEAD_DIM"), MAX_HEAD_DIM);
    }
}
