//! Causal grouped-query attention over the KV cache, computed the way llama.cpp's
//! CPU flash-attention does, because this is where a model's numerics are most
//! sensitive and our answers must match llama.cpp's token for token:
//!
//! - small batches (decode, short prompts: fewer than [`TILED_MIN_ROWS`] rows)
//!   follow `flash_attn_ext_f16_one_chunk`: the query is rounded to f16, each score
//!   is an f16·f16 dot product summed in f32, softmax is online, and the weighted
//!   sum of values is accumulated in an f16 vector (rounded at every step);
//! - large batches follow the tiled path (`tiled_attention`): f32 query,
//!   tiles of 64 positions, f32 accumulation.
//!
//! Each (row, head) is independent; rows and their key/value heads (tiles of
//! rows and heads on the tiled path) are split across threads, on the pool
//! the matmuls use (its workers spin between the ~200 calls of a decode step, so
//! work handed to another pool would compete with them for the cores).

use half::f16;

use crate::cpu::f16_vector;
use crate::cpu::kv_cache::KvCache;
use crate::cpu::parallel;
use crate::cpu::tiled_attention::{self, QueryRow};

/// Batches of at least this many rows take llama.cpp's tiled (f32) path.
pub const TILED_MIN_ROWS: usize = 64;

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
/// `batch_rows` query rows (see the module comment).
fn attend_heads(
    (queries, head_dim): (&[f32], usize),
    (keys, values, first): (&[f16], &[f16], usize),
    (scale, batch_rows): (f32, usize),
    out: &mut [f32],
) {
    if batch_rows >= TILED_MIN_ROWS {
        let heads = out
            .chunks_exact_mut(head_dim)
            .zip(queries.chunks_exact(head_dim));
        // No positions at all: every output is 0, as on the f16 path.
        let Some(position) = (keys.len() / head_dim).checked_sub(1) else {
            return out.fill(0.0);
        };
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
    } else {
        // llama.cpp's one-chunk path skips masked positions.
        let (keys, values) = (&keys[first * head_dim..], &values[first * head_dim..]);
        attend_heads_f16((queries, head_dim), (keys, values), scale, out);
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
    let chunk = SHARED_HEADS * head_dim;
    for (queries, out) in queries.chunks(chunk).zip(out.chunks_mut(chunk)) {
        let heads = queries.chunks_exact(head_dim);
        let outs = out.chunks_exact_mut(head_dim);
        match heads.len() {
            1 => shared_f16::<1>(heads, (keys, values), scale, outs),
            2 => shared_f16::<2>(heads, (keys, values), scale, outs),
            _ => shared_f16::<3>(heads, (keys, values), scale, outs),
        }
    }
}

/// llama.cpp's one-chunk path (f16 query, f16 running output) for `N` heads
/// over the same keys and values, walked once: each head's operations are
/// those of llama.cpp's loop for one head in the same order, only the key and
/// value conversions are shared.
fn shared_f16<'a, const N: usize>(
    queries: impl Iterator<Item = &'a [f32]>,
    (keys, values): (&[f16], &[f16]),
    scale: f32,
    outs: impl Iterator<Item = &'a mut [f32]>,
) {
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
    for ((out, accumulator), sum) in outs.zip(&accumulators).zip(sum) {
        let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
        for (o, a) in out.iter_mut().zip(accumulator) {
            *o = a.to_f32() * inverse;
        }
    }
}

/// One query head attending to every position of `keys` and `values` (f16,
/// `positions × head_dim`, contiguous), with the arithmetic llama.cpp uses for a
/// batch of `batch_rows` query rows (see the module comment). The language's
/// `attention` builtin calls this so a script's numbers equal the engine's.
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
    use crate::cpu::test_values::{pseudo_random, softmax_attention_f64 as reference};

    /// llama.cpp's loop as written, one head at a time, one pass over the
    /// positions.
    fn one_head(query: &[f32], keys: &[f16], values: &[f16], scale: f32) -> Vec<f32> {
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
        let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
        accumulator.iter().map(|a| a.to_f32() * inverse).collect()
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
}
