//! Causal grouped-query attention over the KV cache, computed the way llama.cpp's
//! CPU flash-attention does, because this is where a model's numerics are most
//! sensitive and our answers must match llama.cpp's token for token:
//!
//! - small batches (decode, short prompts: fewer than [`TILED_MIN_ROWS`] rows)
//!   follow `flash_attn_ext_f16_one_chunk`: the query is rounded to f16, each score
//!   is an f16·f16 dot product summed in f32, softmax is online, and the weighted
//!   sum of values is accumulated in an f16 vector (rounded at every step);
//! - a lone decode row (a batch of one) with more than [`KV_CHUNK`] cached
//!   positions up to its own takes the canonical split-KV order: the
//!   positions it sees are cut into chunks of [`KV_CHUNK`] absolute
//!   positions, each chunk walked as above short of the final division, and
//!   the chunks combined in chunk order ([`ChunkSum`]). llama.cpp splits such
//!   a row across its threads, so its order depends on their number; ours is
//!   one order for every thread count, batch and backend;
//! - large batches follow the tiled path (`tiled_attention`): f32 query,
//!   tiles of 64 positions, f32 accumulation.
//!
//! Each (row, head) is independent; rows and their key/value heads (tiles of
//! rows and heads on the tiled path, heads and chunks for a lone decode row)
//! are split across threads, on the pool the matmuls use (its workers spin
//! between the ~200 calls of a decode step, so work handed to another pool
//! would compete with them for the cores).

use std::ops::Range;

use half::f16;

use crate::cpu::f16_vector;
use crate::cpu::kv_cache::KvCache;
use crate::cpu::parallel;
use crate::cpu::tiled_attention::{self, QueryRow};

/// Batches of at least this many rows take llama.cpp's tiled (f32) path.
pub const TILED_MIN_ROWS: usize = 64;

/// The canonical split-KV order of a lone decode row (a batch of one) at
/// position `KV_CHUNK` or later, whatever its window: chunk `c` holds the
/// absolute positions `[KV_CHUNK·c, KV_CHUNK·(c + 1))` the row sees (chunks
/// it sees none of are left out), each chunk is llama.cpp's one-chunk walk
/// short of the division, and the chunks are combined in increasing order
/// ([`ChunkSum`]). The order depends on neither the thread count nor the
/// batch, and the GPU backend walks the same chunks, in parallel, to the
/// same bits. llama.cpp's CPU splits such a row across its threads, so its
/// order depends on their number; this is its order and arithmetic with
/// chunk size 256 (⌈n_kv/threads⌉ for its 256-padded cache view: 2 threads
/// to position 511, 3 to 767, 4 to 1023), where its logits are ours.
pub const KV_CHUNK: usize = 256;

/// The attention geometry of one layer of a model.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// The factor on every score `q·k`.
    pub scale: f32,
    /// The positions a token sees, itself included, when the layer attends
    /// over a sliding window.
    pub window: Option<usize>,
}

impl AttentionShape {
    /// The first position the token at `position` sees.
    fn first_visible(&self, position: usize) -> usize {
        self.window
            .map_or(0, |window| (position + 1).saturating_sub(window))
    }
}

/// Attention for `rows` new tokens starting at `start`, whose keys and values are
/// already in `cache` for `layer`. `queries` and `out` are `[row][head][head_dim]`.
pub fn attend(
    shape: AttentionShape,
    cache: &KvCache,
    layer: usize,
    start: usize,
    queries: &[f32],
    out: &mut [f32],
) {
    let row_width = shape.heads * shape.head_dim;
    let rows = queries.len() / row_width;
    if rows >= TILED_MIN_ROWS {
        return attend_tiled_rows(shape, (cache, layer, start), queries, out);
    }
    if walks_in_chunks(rows, start) && spreads_chunks(shape.kv_heads, start) {
        let place = RowPlace {
            cache,
            layer,
            position: start,
        };
        return attend_row_in_chunks(shape, place, queries, out);
    }
    // One job per row and key/value head, so a lone decode row's heads run
    // on every thread too.
    let width = shape.heads / shape.kv_heads * shape.head_dim;
    let items = out
        .chunks_exact_mut(width)
        .zip(queries.chunks_exact(width))
        .enumerate();
    parallel::for_each(items, rayon::current_num_threads(), |(i, (out, query))| {
        let (row, kv_head) = (i / shape.kv_heads, i % shape.kv_heads);
        // Causal: the token at `start + row` sees positions up to itself.
        let place = RowPlace {
            cache,
            layer,
            position: start + row,
        };
        attend_group(shape, (place, kv_head), rows, query, out);
    });
}

/// [`attend`] on llama.cpp's tiled path: the work is cut by head and by
/// tile of query rows, so each tile of keys and values is widened once for
/// the rows of a tile (the rows' numbers do not depend on the grouping).
fn attend_tiled_rows(
    shape: AttentionShape,
    (cache, layer, start): (&KvCache, usize, usize),
    queries: &[f32],
    out: &mut [f32],
) {
    let dim = shape.head_dim;
    let rows = queries.len() / (shape.heads * dim);
    let row_tiles = rows.div_ceil(tiled_attention::TILE);
    // `[row][head]` pieces of the output and the queries, sorted into one
    // group per (head, tile of rows).
    let mut groups: Vec<Vec<QueryRow<'_>>> =
        (0..shape.heads * row_tiles).map(|_| Vec::new()).collect();
    let pieces = out.chunks_exact_mut(dim).zip(queries.chunks_exact(dim));
    for (i, (out, query)) in pieces.enumerate() {
        let (row, head) = (i / shape.heads, i % shape.heads);
        let position = start + row;
        groups[head * row_tiles + row / tiled_attention::TILE].push(QueryRow {
            query,
            first: shape.first_visible(position),
            position,
            out,
        });
    }
    let scale = shape.scale;
    let group = shape.heads / shape.kv_heads;
    let items = groups.iter_mut().enumerate();
    parallel::for_each(items, rayon::current_num_threads(), |(g, rows)| {
        let kv_head = g / row_tiles / group;
        let visible = rows.last().map_or(0, |row| row.position + 1);
        let keys = cache.keys(layer, kv_head, visible);
        let values = cache.values(layer, kv_head, visible);
        tiled_attention::attend_tiled(rows, keys, values, scale);
    });
}

/// Whether a lone row at `position` with `kv_heads` key/value heads takes
/// a job per head and chunk and a second pass to combine them, rather than
/// a job per head: when the heads leave threads idle, or leave them uneven
/// over a context long enough (four chunks) to pay for the second pass.
fn spreads_chunks(kv_heads: usize, position: usize) -> bool {
    let threads = rayon::current_num_threads();
    kv_heads < threads || (!kv_heads.is_multiple_of(threads) && position >= 4 * KV_CHUNK)
}

/// [`attend`] for a lone decode row in the canonical split-KV order
/// ([`KV_CHUNK`]) where [`spreads_chunks`]: one job per key/value head and
/// chunk, so every thread has work, then each head's chunks combined in
/// chunk order (so the bits do not depend on which thread took which).
fn attend_row_in_chunks(
    shape: AttentionShape,
    place: RowPlace<'_>,
    query: &[f32],
    out: &mut [f32],
) {
    let dim = shape.head_dim;
    let group = shape.heads / shape.kv_heads;
    let width = group * dim;
    let spans: Vec<Range<usize>> =
        kv_chunks(shape.first_visible(place.position), place.position).collect();
    if spans.is_empty() {
        // A window of no positions (which no model has) sees nothing.
        return out.fill(0.0);
    }
    // `[kv_head][chunk][head]` results of each chunk before combining.
    let mut partials = vec![0.0f32; shape.kv_heads * spans.len() * width];
    let mut states = vec![Running::EMPTY; shape.kv_heads * spans.len() * group];
    let threads = rayon::current_num_threads();
    let jobs = partials
        .chunks_exact_mut(width)
        .zip(states.chunks_exact_mut(group))
        .enumerate();
    parallel::for_each(jobs, threads, |(i, (partial, states))| {
        let (kv_head, span) = (i / spans.len(), &spans[i % spans.len()]);
        let keys = place.cache.keys(place.layer, kv_head, span.end);
        let values = place.cache.values(place.layer, kv_head, span.end);
        let (keys, values) = (&keys[span.start * dim..], &values[span.start * dim..]);
        let query = &query[kv_head * width..(kv_head + 1) * width];
        chain_heads_f16((query, dim), (keys, values), shape.scale, states, partial);
    });
    let heads = out
        .chunks_exact_mut(width)
        .zip(partials.chunks_exact(spans.len() * width))
        .zip(states.chunks_exact(spans.len() * group));
    parallel::for_each(heads, threads, |((out, partials), states)| {
        let mut sum = ChunkSum::new(out, dim);
        for (partial, states) in partials.chunks_exact(width).zip(states.chunks_exact(group)) {
            sum.add(partial, states);
        }
        sum.finish();
    });
}

/// Where one query row sits: its sequence's cache, the layer, its position.
#[derive(Clone, Copy)]
pub struct RowPlace<'a> {
    pub cache: &'a KvCache,
    pub layer: usize,
    pub position: usize,
}

/// Every head of one query row (`[head][head_dim]`) against the positions up to
/// and including its own, with the arithmetic of a batch of `batch_rows` rows.
pub fn attend_row(
    shape: AttentionShape,
    place: RowPlace<'_>,
    batch_rows: usize,
    query: &[f32],
    out: &mut [f32],
) {
    let width = shape.heads / shape.kv_heads * shape.head_dim;
    let groups = out.chunks_exact_mut(width).zip(query.chunks_exact(width));
    for (kv_head, (out, query)) in groups.enumerate() {
        attend_group(shape, (place, kv_head), batch_rows, query, out);
    }
}

/// The query heads of one row that share key/value head `kv_head`
/// (`query` and `out` are `[head][head_dim]` for those heads), as
/// [`attend_row`] computes them.
fn attend_group(
    shape: AttentionShape,
    (place, kv_head): (RowPlace<'_>, usize),
    batch_rows: usize,
    query: &[f32],
    out: &mut [f32],
) {
    let visible = place.position + 1;
    let keys = place.cache.keys(place.layer, kv_head, visible);
    let values = place.cache.values(place.layer, kv_head, visible);
    let first = shape.first_visible(place.position);
    attend_heads(
        (query, shape.head_dim),
        (keys, values, first),
        (shape.scale, batch_rows),
        out,
    );
}

/// The query heads of `queries` (`[head][head_dim]`), which share `keys` and
/// `values` from position `first` on (earlier ones are outside a window),
/// into `out` alike, with the arithmetic llama.cpp uses for a batch of
/// `batch_rows` query rows (see the module comment), or the canonical
/// split-KV order where that applies. `keys` and `values` start at
/// position 0 and end at the row's own.
fn attend_heads(
    (queries, head_dim): (&[f32], usize),
    (keys, values, first): (&[f16], &[f16], usize),
    (scale, batch_rows): (f32, usize),
    out: &mut [f32],
) {
    // No positions at all: every output is 0, on every path.
    let Some(position) = (keys.len() / head_dim).checked_sub(1) else {
        return out.fill(0.0);
    };
    if batch_rows >= TILED_MIN_ROWS {
        let heads = out
            .chunks_exact_mut(head_dim)
            .zip(queries.chunks_exact(head_dim));
        for (out, query) in heads {
            // The tiles stay where they are (from position 0), the
            // positions before `first` masked inside them.
            let mut row = [QueryRow {
                query,
                first,
                position,
                out,
            }];
            tiled_attention::attend_tiled(&mut row, keys, values, scale);
        }
    } else if walks_in_chunks(batch_rows, position) {
        attend_heads_in_chunks((queries, head_dim), (keys, values, first), scale, out);
    } else {
        // llama.cpp's one-chunk path skips masked positions.
        let (keys, values) = (&keys[first * head_dim..], &values[first * head_dim..]);
        attend_heads_f16((queries, head_dim), (keys, values), scale, out);
    }
}

/// [`attend_heads`] in the canonical split-KV order ([`KV_CHUNK`]), one
/// chunk after another, each added to the output as soon as it is walked.
fn attend_heads_in_chunks(
    (queries, head_dim): (&[f32], usize),
    (keys, values, first): (&[f16], &[f16], usize),
    scale: f32,
    out: &mut [f32],
) {
    let position = keys.len() / head_dim - 1;
    let mut partial = vec![0.0; queries.len()];
    let mut states = vec![Running::EMPTY; queries.len() / head_dim];
    let mut sum = ChunkSum::new(out, head_dim);
    for span in kv_chunks(first, position) {
        let range = span.start * head_dim..span.end * head_dim;
        let (keys, values) = (&keys[range.clone()], &values[range]);
        let heads = (queries, head_dim);
        chain_heads_f16(heads, (keys, values), scale, &mut states, &mut partial);
        sum.add(&partial, &states);
    }
    sum.finish();
}

/// Whether a row at `position` of a batch of `batch_rows` rows walks its
/// positions in the canonical split-KV order ([`KV_CHUNK`]): a lone decode
/// row whose cache holds more than a chunk, counting from position 0.
fn walks_in_chunks(batch_rows: usize, position: usize) -> bool {
    batch_rows == 1 && position >= KV_CHUNK
}

/// The spans of absolute positions, in chunk order, that a row at
/// `position` seeing from `first` on walks in the canonical split-KV order:
/// the chunks `[KV_CHUNK·c, KV_CHUNK·(c + 1))` cut to `first..=position`,
/// those with no position left out.
fn kv_chunks(first: usize, position: usize) -> impl Iterator<Item = Range<usize>> {
    (first / KV_CHUNK..position / KV_CHUNK + 1)
        .map(move |c| (c * KV_CHUNK).max(first)..((c + 1) * KV_CHUNK).min(position + 1))
}

/// One head's online softmax after some positions, before the division: the
/// largest score so far and the sum of every weight relative to it.
#[derive(Debug, Clone, Copy)]
struct Running {
    max: f32,
    sum: f32,
}

impl Running {
    /// No position yet.
    const EMPTY: Running = Running {
        max: f32::NEG_INFINITY,
        sum: 0.0,
    };
}

/// The heads' outputs (`[head][head_dim]`, in place) normalised: each
/// accumulator divided by its head's sum, as llama.cpp's one-chunk path ends.
fn normalise(states: &[Running], head_dim: usize, out: &mut [f32]) {
    for (out, state) in out.chunks_exact_mut(head_dim).zip(states) {
        let inverse = if state.sum == 0.0 {
            0.0
        } else {
            1.0 / state.sum
        };
        for o in out {
            *o *= inverse;
        }
    }
}

/// The canonical split-KV combination of the heads of one row: each chunk's
/// running state and accumulator (llama.cpp's one-chunk walk over the
/// chunk, widened to f32), added in chunk order to the heads' output
/// (`[head][head_dim]`, written in place), then normalised: llama.cpp's
/// `reduce_partials`, whose `O*a + O_c*b` GCC compiles to fma(O, a, O_c*b)
/// (so the GPU does the same).
struct ChunkSum<'a> {
    out: &'a mut [f32],
    head_dim: usize,
    states: Vec<Running>,
}

impl<'a> ChunkSum<'a> {
    /// Nothing added yet: the output −0 (so that a lone chunk's elements
    /// come through as they are, −0 included), every head's state empty.
    fn new(out: &'a mut [f32], head_dim: usize) -> Self {
        out.fill(-0.0);
        let states = vec![Running::EMPTY; out.len() / head_dim];
        ChunkSum {
            out,
            head_dim,
            states,
        }
    }

    /// Adds the next chunk's accumulators (`[head][head_dim]`) and states.
    fn add(&mut self, partial: &[f32], chunk_states: &[Running]) {
        let heads = self
            .out
            .chunks_exact_mut(self.head_dim)
            .zip(&mut self.states)
            .zip(partial.chunks_exact(self.head_dim).zip(chunk_states));
        for ((out, state), (partial, chunk)) in heads {
            if chunk.sum == 0.0 {
                continue;
            }
            let max = state.max.max(chunk.max);
            let old_scale = (state.max - max).exp();
            let new_scale = (chunk.max - max).exp();
            for (o, p) in out.iter_mut().zip(partial) {
                // GCC contracts llama.cpp's `O*a + O_c*b` into fma(O, a, O_c*b).
                *o = o.mul_add(old_scale, p * new_scale);
            }
            state.sum = state.sum.mul_add(old_scale, chunk.sum * new_scale);
            state.max = max;
        }
    }

    /// Divides each head's output by its sum.
    fn finish(self) {
        normalise(&self.states, self.head_dim, self.out);
    }
}

/// The query heads that share one key/value head run together on the f16
/// path, this many at a time: each key and value is converted once for all
/// of them (their accumulators and the key fill AVX2's 16 registers).
const SHARED_HEADS: usize = 3;

/// llama.cpp's one-chunk path (f16 query, f16 running output) for the heads
/// of `queries` and `out` (`[head][head_dim]`), which all attend to the same
/// keys and values.
fn attend_heads_f16(
    (queries, head_dim): (&[f32], usize),
    (keys, values): (&[f16], &[f16]),
    scale: f32,
    out: &mut [f32],
) {
    let mut states = vec![Running::EMPTY; queries.len() / head_dim];
    chain_heads_f16((queries, head_dim), (keys, values), scale, &mut states, out);
    normalise(&states, head_dim, out);
}

/// llama.cpp's one-chunk walk for the heads of `queries` over the same keys
/// and values, stopping short of the division: each head's running state
/// into `states`, its f16 accumulator (widened) into `out` (`[head][head_dim]`).
fn chain_heads_f16(
    (queries, head_dim): (&[f32], usize),
    (keys, values): (&[f16], &[f16]),
    scale: f32,
    states: &mut [Running],
    out: &mut [f32],
) {
    let shared = SHARED_HEADS * head_dim;
    let runs = queries
        .chunks(shared)
        .zip(out.chunks_mut(shared))
        .zip(states.chunks_mut(SHARED_HEADS));
    for ((queries, out), states) in runs {
        let heads = queries.chunks_exact(head_dim);
        let outs = out.chunks_exact_mut(head_dim);
        match heads.len() {
            1 => states.copy_from_slice(&shared_f16::<1>(heads, (keys, values), scale, outs)),
            2 => states.copy_from_slice(&shared_f16::<2>(heads, (keys, values), scale, outs)),
            _ => states.copy_from_slice(&shared_f16::<3>(heads, (keys, values), scale, outs)),
        }
    }
}

/// llama.cpp's one-chunk walk (f16 query, f16 running output) for `N` heads
/// over the same keys and values, walked once: each head's operations are
/// those of llama.cpp's loop for one head in the same order, only the key and
/// value conversions are shared. Each head's accumulator, widened, goes to
/// its `outs` slice; its running state is returned.
fn shared_f16<'a, const N: usize>(
    queries: impl Iterator<Item = &'a [f32]>,
    (keys, values): (&[f16], &[f16]),
    scale: f32,
    outs: impl Iterator<Item = &'a mut [f32]>,
) -> [Running; N] {
    // The query rounded to f16 and widened back (exactly), so the dot
    // products convert only the keys.
    let mut widened: [Vec<f32>; N] = std::array::from_fn(|_| Vec::new());
    for (widened, query) in widened.iter_mut().zip(queries) {
        widened.extend(query.iter().map(|&q| f16::from_f32(q).to_f32()));
    }
    let dim = widened[0].len();
    let mut accumulators: [Vec<f16>; N] = std::array::from_fn(|_| vec![f16::ZERO; dim]);
    let (mut max, mut sum) = ([f32::NEG_INFINITY; N], [0.0f32; N]);
    for (key, value) in keys.chunks_exact(dim).zip(values.chunks_exact(dim)) {
        let scores = f16_vector::dots::<N>(key, widened.each_ref().map(|w| w.as_slice()));
        let (mut old_scales, mut weights) = ([1.0f32; N], [1.0f32; N]);
        for h in 0..N {
            let score = scores[h] * scale;
            if score > max[h] {
                old_scales[h] = (max[h] - score).exp();
                max[h] = score;
                f16_vector::scale(&mut accumulators[h], old_scales[h]);
            } else {
                weights[h] = (score - max[h]).exp();
            }
        }
        let accs = accumulators.each_mut().map(|acc| acc.as_mut_slice());
        f16_vector::multiply_adds(accs, value, weights);
        for h in 0..N {
            // GCC contracts llama.cpp's `S = S*ms + vs` into one fused multiply-add.
            sum[h] = sum[h].mul_add(old_scales[h], weights[h]);
        }
    }
    for (out, accumulator) in outs.zip(&accumulators) {
        for (o, a) in out.iter_mut().zip(accumulator) {
            *o = a.to_f32();
        }
    }
    std::array::from_fn(|h| Running {
        max: max[h],
        sum: sum[h],
    })
}

/// One query head attending to every position of `keys` and `values` (f16,
/// `positions × head_dim`, contiguous, from position 0 to the row's own),
/// with the arithmetic llama.cpp uses for a batch of `batch_rows` query rows,
/// or the canonical split-KV order where that applies (see the module
/// comment). The language's `attention` builtin calls this so a script's
/// numbers equal the engine's.
pub fn attend_head(
    query: &[f32],
    keys: &[f16],
    values: &[f16],
    scale: f32,
    batch_rows: usize,
    out: &mut [f32],
) {
    attend_heads(
        (query, query.len()),
        (keys, values, 0),
        (scale, batch_rows),
        out,
    );
}

#[cfg(test)]
#[path = "attention_bench.rs"]
mod bench;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::test_values::{
        pseudo_random, pseudo_random_f16, softmax_attention_f64 as reference,
    };
    use crate::model::arch::Activation;
    use crate::model::config::ModelConfig;
    use crate::model::rope::RopeStyle;

    /// llama.cpp's loop as written, one head at a time, one pass over the
    /// positions.
    fn one_head(query: &[f32], keys: &[f16], values: &[f16], scale: f32) -> Vec<f32> {
        let (_, sum, accumulator) = one_head_undivided(query, keys, values, scale);
        let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
        accumulator.iter().map(|a| a * inverse).collect()
    }

    /// [`one_head`] short of the division: the largest score, the sum of
    /// the weights and the accumulator (widened).
    fn one_head_undivided(
        query: &[f32],
        keys: &[f16],
        values: &[f16],
        scale: f32,
    ) -> (f32, f32, Vec<f32>) {
        let dim = query.len();
        let query: Vec<f16> = query.iter().map(|&q| f16::from_f32(q)).collect();
        let mut accumulator = vec![f16::ZERO; dim];
        let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
        for (key, value) in keys.chunks_exact(dim).zip(values.chunks_exact(dim)) {
            let score = f16_vector::dot(key, &query) * scale;
            let (mut old_scale, mut weight) = (1.0f32, 1.0f32);
            if score > max {
                old_scale = (max - score).exp();
                max = score;
                f16_vector::scale(&mut accumulator, old_scale);
            } else {
                weight = (score - max).exp();
            }
            f16_vector::multiply_add(&mut accumulator, value, weight);
            sum = sum.mul_add(old_scale, weight);
        }
        (max, sum, accumulator.iter().map(|a| a.to_f32()).collect())
    }

    /// The canonical split-KV order written out for one head: `keys` and
    /// `values` from position 0 to the row's own, seen from `first` on, in
    /// chunks of 256 absolute positions, each [`one_head_undivided`],
    /// combined in chunk order, fma(O, a, O_c·b).
    fn split_kv_head(
        query: &[f32],
        (keys, values, first): (&[f16], &[f16], usize),
        scale: f32,
    ) -> Vec<f32> {
        let dim = query.len();
        let end = keys.len() / dim;
        let (mut max, mut sum, mut total) = (f32::NEG_INFINITY, 0.0f32, vec![-0.0f32; dim]);
        for chunk in first / 256..end.div_ceil(256) {
            let (from, to) = ((chunk * 256).max(first), ((chunk + 1) * 256).min(end));
            let range = from * dim..to * dim;
            let (chunk_max, chunk_sum, accumulator) =
                one_head_undivided(query, &keys[range.clone()], &values[range], scale);
            if chunk_sum == 0.0 {
                continue;
            }
            let new_max = max.max(chunk_max);
            let (old_scale, new_scale) = ((max - new_max).exp(), (chunk_max - new_max).exp());
            for (t, a) in total.iter_mut().zip(&accumulator) {
                *t = t.mul_add(old_scale, a * new_scale);
            }
            sum = sum.mul_add(old_scale, chunk_sum * new_scale);
            max = new_max;
        }
        let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
        total.iter().map(|t| t * inverse).collect()
    }

    /// `positions` keys and values of one head, f16, `[position][dim]`:
    /// keys that grow along the positions, so the chunks' maxima differ.
    fn growing_keys_and_values(dim: usize, positions: usize, seed: u32) -> (Vec<f16>, Vec<f16>) {
        let keys = pseudo_random(dim * positions, seed)
            .iter()
            .enumerate()
            .map(|(i, &x)| f16::from_f32(x * (1.0 + (i / dim) as f32 / 256.0)))
            .collect();
        let values = pseudo_random_f16(dim * positions, seed + 1, 1.0);
        (keys, values)
    }

    fn assert_same_bits(got: &[f32], expected: &[f32], what: &str) {
        assert_eq!(got.len(), expected.len(), "{what}");
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            assert_eq!(g.to_bits(), e.to_bits(), "{what}, element {i}: {g} vs {e}");
        }
    }

    #[test]
    fn heads_sharing_keys_give_the_bits_of_one_head_at_a_time() {
        // Groups of 3 (SmolLM2), 8 (TinyLlama: chunks of 3, 3, 2) and 2 heads.
        for (group, dim, positions) in [(3, 64, 1), (3, 64, 300), (8, 64, 45), (2, 128, 70)] {
            let queries = pseudo_random(group * dim, 11);
            // Scores that grow along the positions, so maxima keep moving.
            let keys: Vec<f16> = pseudo_random(dim * positions, 12)
                .iter()
                .enumerate()
                .map(|(i, &x)| f16::from_f32(x * (1.0 + (i / dim) as f32 / 32.0)))
                .collect();
            let values: Vec<f16> = pseudo_random(dim * positions, 13)
                .iter()
                .map(|&x| f16::from_f32(x))
                .collect();
            let mut out = vec![f32::NAN; group * dim];
            attend_heads_f16((&queries, dim), (&keys, &values), 0.125, &mut out);
            for (h, out) in out.chunks_exact(dim).enumerate() {
                let query = &queries[h * dim..(h + 1) * dim];
                let expected = one_head(query, &keys, &values, 0.125);
                for (i, (o, e)) in out.iter().zip(&expected).enumerate() {
                    assert_eq!(
                        o.to_bits(),
                        e.to_bits(),
                        "group {group}, head {h}, {positions} positions, element {i}: {o} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn both_paths_match_an_f64_softmax() {
        let dim = 64;
        for positions in [0, 1, 7, 64, 65, 200] {
            let query = pseudo_random(dim, 1);
            let keys: Vec<f16> = pseudo_random(dim * positions, 2)
                .iter()
                .map(|&x| f16::from_f32(x * 3.0))
                .collect();
            let values: Vec<f16> = pseudo_random(dim * positions, 3)
                .iter()
                .map(|&x| f16::from_f32(x))
                .collect();
            let as_f32 = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
            let expected = reference(&query, &as_f32(&keys), &as_f32(&values), 0.125);
            for tiled in [false, true] {
                let mut out = vec![f32::NAN; dim];
                let batch_rows = if tiled { TILED_MIN_ROWS } else { 1 };
                attend_head(&query, &keys, &values, 0.125, batch_rows, &mut out);
                for (o, e) in out.iter().zip(&expected) {
                    assert!(
                        (*o as f64 - e).abs() < 3e-3,
                        "tiled {tiled}, {positions} positions: {o} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn split_kv_decode_matches_an_f64_softmax() {
        let dim = 64;
        for positions in [257, 300, 513, 1000] {
            let query = pseudo_random(dim, 1);
            let keys = pseudo_random_f16(dim * positions, 2, 3.0);
            let values = pseudo_random_f16(dim * positions, 3, 1.0);
            let as_f32 = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
            let expected = reference(&query, &as_f32(&keys), &as_f32(&values), 0.125);
            let mut out = vec![f32::NAN; dim];
            attend_head(&query, &keys, &values, 0.125, 1, &mut out);
            for (o, e) in out.iter().zip(&expected) {
                assert!(
                    (*o as f64 - e).abs() < 3e-3,
                    "{positions} positions: {o} vs {e}"
                );
            }
        }
    }

    #[test]
    fn split_kv_decode_gives_the_bits_of_its_chunks_combined_in_order() {
        // (position, window): the first chunk boundaries, several chunks,
        // and windows that start mid-chunk and span two or three chunks.
        let mut unlike_the_chain = 0;
        let rows = [
            (256, None),
            (257, None),
            (511, None),
            (512, None),
            (700, None),
            (1000, None),
            (600, Some(200)),
            (1000, Some(400)),
        ];
        for (group, dim) in [
            (1, 64),
            (3, 64),
            (8, 64),
            (3, 128),
            (8, 128),
            (1, 256),
            (3, 256),
        ] {
            for (position, window) in rows {
                let shape = AttentionShape {
                    heads: group,
                    kv_heads: 1,
                    head_dim: dim,
                    scale: 1.0 / (dim as f32).sqrt(),
                    window,
                };
                let first = shape.first_visible(position);
                let queries = pseudo_random(group * dim, 21);
                let (keys, values) = growing_keys_and_values(dim, position + 1, 22);
                let mut out = vec![f32::NAN; group * dim];
                attend_heads(
                    (&queries, dim),
                    (&keys, &values, first),
                    (shape.scale, 1),
                    &mut out,
                );
                for (h, (out, query)) in out
                    .chunks_exact(dim)
                    .zip(queries.chunks_exact(dim))
                    .enumerate()
                {
                    let expected = split_kv_head(query, (&keys, &values, first), shape.scale);
                    let what = format!(
                        "{group} heads of {dim}, position {position}, first {first}, head {h}"
                    );
                    assert_same_bits(out, &expected, &what);
                    let (seen_keys, seen_values) = (&keys[first * dim..], &values[first * dim..]);
                    let chain = one_head(query, seen_keys, seen_values, shape.scale);
                    let differ = |(o, c): (&f32, &f32)| o.to_bits() != c.to_bits();
                    unlike_the_chain += out.iter().zip(&chain).filter(|&p| differ(p)).count();
                }
            }
        }
        // The order is not the single chain's: these inputs tell them apart.
        assert!(
            unlike_the_chain > 0,
            "no output differs from the single chain"
        );
    }

    /// A one-layer cache of `positions` pseudo-random keys and values.
    fn filled_cache(kv_heads: usize, head_dim: usize, positions: usize) -> KvCache {
        let config = ModelConfig {
            architecture: "llama".into(),
            block_count: 1,
            embedding_length: kv_heads * head_dim,
            feed_forward_length: 1,
            head_count: kv_heads,
            head_count_kv: kv_heads,
            head_dim,
            rope_dimension_count: head_dim,
            rope_freq_base: 10_000.0,
            rms_norm_eps: 1e-5,
            context_length: positions,
            vocab_size: 1,
            rope_style: RopeStyle::Adjacent,
            qk_norm: false,
            qkv_bias: false,
            activation: Activation::Silu,
            post_norms: false,
            embedding_scale: 1.0,
            query_scale: 1.0,
            score_scale: 1.0,
            sliding_window: None,
        };
        let mut cache = KvCache::new(&config, positions).expect("a small cache");
        let width = kv_heads * head_dim;
        let keys = pseudo_random(width * positions, 31);
        let values = pseudo_random(width * positions, 32);
        let rows = keys.chunks_exact(width).zip(values.chunks_exact(width));
        for (position, (keys, values)) in rows.enumerate() {
            let keys: Vec<f32> = keys.iter().map(|k| k * 3.0).collect();
            cache.store(0, position, &keys, values);
        }
        cache.commit(positions);
        cache
    }

    #[test]
    fn split_kv_decode_does_not_depend_on_the_thread_count() {
        // TinyLlama's grouping: 4 key/value heads of 64, 8 query heads each.
        let (kv_heads, dim) = (4, 64);
        let cache = filled_cache(kv_heads, dim, 1001);
        for (position, window) in [(300, None), (1000, None), (1000, Some(333))] {
            let shape = AttentionShape {
                heads: 8 * kv_heads,
                kv_heads,
                head_dim: dim,
                scale: 0.125,
                window,
            };
            let query = pseudo_random(shape.heads * dim, 33);
            let on_threads = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a thread pool");
                let mut out = vec![f32::NAN; query.len()];
                pool.install(|| attend(shape, &cache, 0, position, &query, &mut out));
                out
            };
            // A batch's row, one sequence at a time.
            let mut batched = vec![f32::NAN; query.len()];
            let place = RowPlace {
                cache: &cache,
                layer: 0,
                position,
            };
            attend_row(shape, place, 1, &query, &mut batched);
            // One job per key/value head (1 and 3 threads), per chunk (8).
            for threads in [1, 3, 8] {
                let what = format!("position {position}, window {window:?}, {threads} threads");
                assert_same_bits(&on_threads(threads), &batched, &what);
            }
        }
    }

    #[test]
    fn prompt_rows_past_a_chunk_keep_the_single_chain() {
        let dim = 64;
        for (positions, batch_rows) in [(300, 2), (700, 5), (1000, TILED_MIN_ROWS - 1)] {
            let query = pseudo_random(dim, 41);
            let (keys, values) = growing_keys_and_values(dim, positions, 42);
            let mut out = vec![f32::NAN; dim];
            attend_head(&query, &keys, &values, 0.125, batch_rows, &mut out);
            let expected = one_head(&query, &keys, &values, 0.125);
            let what = format!("{positions} positions, a batch of {batch_rows}");
            assert_same_bits(&out, &expected, &what);
        }
    }

    #[test]
    fn decode_rows_in_one_chunk_give_the_single_chain_bits() {
        let dim = 64;
        // Within the first chunk (no split at all), then windows that lie
        // inside one later chunk: one chunk combined is the plain chain.
        for (position, window) in [
            (0, None),
            (255, None),
            (400, Some(101)),
            (767, Some(256)),
            (900, Some(1)),
        ] {
            let shape = AttentionShape {
                heads: 3,
                kv_heads: 1,
                head_dim: dim,
                scale: 0.125,
                window,
            };
            let first = shape.first_visible(position);
            let queries = pseudo_random(3 * dim, 51);
            let (keys, values) = growing_keys_and_values(dim, position + 1, 52);
            let mut out = vec![f32::NAN; 3 * dim];
            attend_heads(
                (&queries, dim),
                (&keys, &values, first),
                (0.125, 1),
                &mut out,
            );
            let (seen_keys, seen_values) = (&keys[first * dim..], &values[first * dim..]);
            for (h, (out, query)) in out
                .chunks_exact(dim)
                .zip(queries.chunks_exact(dim))
                .enumerate()
            {
                let expected = one_head(query, seen_keys, seen_values, 0.125);
                let what = format!("position {position}, first {first}, head {h}");
                assert_same_bits(out, &expected, &what);
            }
        }
    }

    #[test]
    fn a_lone_chunk_keeps_the_chains_negative_zeros() {
        // The first position seen scores highest by far and has value +0;
        // the others' values are the smallest negative f16, so each of their
        // steps rounds the f16 output to −0. Combined alone, the chunk must
        // keep that sign.
        let dim = 64;
        let (position, first) = (400, 300);
        let queries = pseudo_random(dim, 53);
        let mut keys = vec![f16::ZERO; dim * (position + 1)];
        for (k, q) in keys[first * dim..(first + 1) * dim]
            .iter_mut()
            .zip(&queries)
        {
            *k = f16::from_f32(q * 8.0);
        }
        let mut values = vec![-f16::from_bits(1); dim * (position + 1)];
        values[first * dim..(first + 1) * dim].fill(f16::ZERO);
        let mut out = vec![f32::NAN; dim];
        attend_heads(
            (&queries, dim),
            (&keys, &values, first),
            (0.125, 1),
            &mut out,
        );
        let expected = one_head(
            &queries,
            &keys[first * dim..],
            &values[first * dim..],
            0.125,
        );
        assert!(expected.iter().all(|e| e.to_bits() == (-0.0f32).to_bits()));
        assert_same_bits(&out, &expected, "a window inside one chunk");
    }
}
