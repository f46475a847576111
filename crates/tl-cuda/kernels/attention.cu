// RoPE with the K/V write into the cache, and causal grouped-query attention over
// the f16 cache, with the CPU backend's (llama.cpp's) arithmetic: batches of
// fewer than 64 rows (decode, short prompts) use an f16 query and an f16 running
// output rounded at every position; larger batches use f32 throughout. The
// models are sensitive enough that the two differ by about 2% in the logits, so
// the GPU follows the same rule. The cache of one layer is
// [kv_head][capacity][head_dim] f16, the CPU backend's layout.

#define MAX_HEAD_DIM 256
#define ATTN_WARPS 4

// The most query and key heads of one row rope_store_kv normalises.
#define ROPE_MAX_HEADS 512

// qkv is [rows][q_width + 2·kv_width] (the fused QKV projection's output). For
// row r: normalises each query and key head when q_norm/k_norm are given
// (RMS over the head, squares summed in f64, times the head weight, as
// the CPU backend does), rotates the queries in place and writes the rotated
// keys and the values into the cache. Pairs are adjacent elements (GGML's
// normal layout) or, with `halves`, elements half a head apart (NeoX).
// cos_sin is [position][head_dim/2] of (cos, sin). One block per row: first a
// warp per head finds the heads' norm scales, then a thread per pair.
//
// Row r is at position *start + r in k_cache/v_cache, or, when `positions` is
// given (a batched decode step: row r is sequence r's next token), at
// positions[r] in the caches k_tables[r]/v_tables[r].
extern "C" __global__ void rope_store_kv(float* qkv, int heads, int kv_heads, int head_dim,
                                         const float2* cos_sin, const int* start,
                                         u16* k_cache, u16* v_cache, int capacity,
                                         const float* q_norm, const float* k_norm, float eps,
                                         int halves, float query_scale, const int* positions,
                                         u16* const* k_tables, u16* const* v_tables) {
    __shared__ float scales[ROPE_MAX_HEADS];
    allow_next_kernel();
    wait_for_previous_kernel();
    const int row = blockIdx.x;
    const int pos = positions ? positions[row] : *start + row;
    u16* const kc = positions ? k_tables[row] : k_cache;
    u16* const vc = positions ? v_tables[row] : v_cache;
    const int pairs = head_dim / 2;
    const int q_width = heads * head_dim, kv_width = kv_heads * head_dim;
    float* q = qkv + (u64)row * (q_width + 2 * kv_width);
    float* k = q + q_width;
    const float* v = k + kv_width;
    const float2* table = cos_sin + (u64)pos * pairs;
    const bool norm = q_norm != 0;
    if (norm) {
        const int lane = threadIdx.x % WARP;
        for (int head = threadIdx.x / WARP; head < heads + kv_heads; head += blockDim.x / WARP) {
            const float* in = head < heads ? q + head * head_dim : k + (head - heads) * head_dim;
            double squares = 0.0;
            for (int i = lane; i < head_dim; i += WARP) squares += (double)(in[i] * in[i]);
            squares = warp_sum_f64(squares);
            if (lane == 0) scales[head] = 1.0f / sqrtf((float)(squares / (double)head_dim) + eps);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < (heads + kv_heads) * pairs; i += blockDim.x) {
        const int head = i / pairs, pair = i % pairs;
        const int a = halves ? pair : 2 * pair, b = halves ? pair + pairs : 2 * pair + 1;
        const bool query = head < heads;
        const int kh = head - heads;
        float* p = query ? q + head * head_dim : k + kh * head_dim;
        float x0 = p[a], x1 = p[b];
        if (norm) {
            const float* w = query ? q_norm : k_norm;
            x0 = (x0 * scales[head]) * w[a];
            x1 = (x1 * scales[head]) * w[b];
        }
        const float2 cs = table[pair];
        const float r0 = fmaf(x0, cs.x, -(x1 * cs.y)), r1 = fmaf(x0, cs.y, x1 * cs.x);
        if (query) {
            p[a] = __fmul_rn(r0, query_scale);
            p[b] = __fmul_rn(r1, query_scale);
        } else {
            const u64 at = ((u64)kh * capacity + pos) * head_dim;
            kc[at + a] = f2h(r0);
            kc[at + b] = f2h(r1);
            const float* pv = v + kh * head_dim + 2 * pair;
            vc[at + 2 * pair] = f2h(pv[0]);
            vc[at + 2 * pair + 1] = f2h(pv[1]);
        }
    }
}

// Warps per block of rope_store_kv_per_head (one head each).
#define ROPE_WARPS 4

// One head `p` (head_dim values) on one warp, as rope_store_kv computes it:
// normalised when `w` is given (RMS over the head, squares summed in f64
// with lanes taking elements lane, lane + 32, ..., times the head weight),
// then each pair rotated by `table`; store(a, b, r0, r1) takes pair (a, b).
// Each pass reads all its inputs before using any, so the warp waits for
// memory once a pass, not once a value (a head of 256 took eight L2 round
// trips in turn). Each lane reads only the elements of its own pairs after
// the sum, so a store may overwrite p.
template <typename Store>
__device__ __forceinline__ void norm_rope_head(const float* p, const float* w, float eps,
                                               int head_dim, int halves, const float2* table,
                                               Store store) {
    constexpr int PER_LANE = MAX_HEAD_DIM / WARP, PAIRS_PER_LANE = PER_LANE / 2;
    const int lane = threadIdx.x % WARP;
    float scale = 1.0f;
    if (w) {
        float v[PER_LANE];
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            const int i = lane + j * WARP;
            v[j] = i < head_dim ? p[i] : 0.0f;
        }
        double squares = 0.0;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j)
            if (lane + j * WARP < head_dim) squares += (double)(v[j] * v[j]);
        squares = warp_sum_f64(squares);
        scale = 1.0f / sqrtf((float)(squares / (double)head_dim) + eps);
    }
    const int pairs = head_dim / 2;
    float x0[PAIRS_PER_LANE], x1[PAIRS_PER_LANE], w0[PAIRS_PER_LANE], w1[PAIRS_PER_LANE];
    float2 cs[PAIRS_PER_LANE];
#pragma unroll
    for (int j = 0; j < PAIRS_PER_LANE; ++j) {
        const int pair = lane + j * WARP;
        if (pair >= pairs) break;
        const int a = halves ? pair : 2 * pair, b = halves ? pair + pairs : 2 * pair + 1;
        x0[j] = p[a];
        x1[j] = p[b];
        if (w) {
            w0[j] = w[a];
            w1[j] = w[b];
        }
        cs[j] = table[pair];
    }
#pragma unroll
    for (int j = 0; j < PAIRS_PER_LANE; ++j) {
        const int pair = lane + j * WARP;
        if (pair >= pairs) break;
        const int a = halves ? pair : 2 * pair, b = halves ? pair + pairs : 2 * pair + 1;
        float r0 = x0[j], r1 = x1[j];
        if (w) {
            r0 = (r0 * scale) * w0[j];
            r1 = (r1 * scale) * w1[j];
        }
        store(a, b, fmaf(r0, cs[j].x, -(r1 * cs[j].y)), fmaf(r0, cs[j].y, r1 * cs[j].x));
    }
}

// One head of values (head_dim floats) into the f16 cache at `out`, on one
// warp: every load before any store (the compiler cannot move loads past the
// stores), so the warp waits for memory once.
__device__ __forceinline__ void store_head_f16(const float* v, u16* out, int head_dim) {
    float value[MAX_HEAD_DIM / WARP];
#pragma unroll
    for (int j = 0; j < MAX_HEAD_DIM / WARP; ++j) {
        const int i = threadIdx.x % WARP + j * WARP;
        value[j] = i < head_dim ? v[i] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < MAX_HEAD_DIM / WARP; ++j) {
        const int i = threadIdx.x % WARP + j * WARP;
        if (i < head_dim) out[i] = f2h(value[j]);
    }
}

// rope_store_kv with a warp per head of a row (blockIdx.x the row, ROPE_WARPS
// heads a block along y) instead of a block per row: for decode steps, whose
// one row's heads then run side by side instead of in turn (prompts, with
// hundreds of rows, keep rope_store_kv's fuller blocks). The same arithmetic
// (each head's squares summed by one warp, lanes taking elements lane, lane +
// 32, ...), so the same bits.
extern "C" __global__ void __launch_bounds__(ROPE_WARPS * WARP)
    rope_store_kv_per_head(float* qkv, int heads, int kv_heads, int head_dim,
                           const float2* cos_sin, const int* start, u16* k_cache,
                           u16* v_cache, int capacity, const float* q_norm,
                           const float* k_norm, float eps, int halves, float query_scale,
                           const int* positions, u16* const* k_tables, u16* const* v_tables) {
    allow_next_kernel();
    wait_for_previous_kernel();
    const int head = blockIdx.y * ROPE_WARPS + threadIdx.x / WARP;
    if (head >= heads + kv_heads) return;
    const int row = blockIdx.x;
    const int pos = positions ? positions[row] : *start + row;
    const int q_width = heads * head_dim, kv_width = kv_heads * head_dim;
    const bool query = head < heads;
    const int kh = head - heads;
    float* q = qkv + (u64)row * (q_width + 2 * kv_width);
    float* p = query ? q + head * head_dim : q + q_width + kh * head_dim;
    const float2* table = cos_sin + (u64)pos * (head_dim / 2);
    if (query) {
        norm_rope_head(p, q_norm, eps, head_dim, halves, table, [&](int a, int b, float r0, float r1) {
            p[a] = __fmul_rn(r0, query_scale);
            p[b] = __fmul_rn(r1, query_scale);
        });
        return;
    }
    u16* const kc = positions ? k_tables[row] : k_cache;
    u16* const vc = positions ? v_tables[row] : v_cache;
    const u64 at = ((u64)kh * capacity + pos) * head_dim;
    const float* v = q + q_width + kv_width + kh * head_dim;
    norm_rope_head(p, k_norm, eps, head_dim, halves, table, [&](int a, int b, float r0, float r1) {
        kc[at + a] = f2h(r0);
        kc[at + b] = f2h(r1);
    });
    store_head_f16(v, vc + at, head_dim);
}

// Query heads one f16-accumulator block serves at most: the host's `group`
// argument, a divisor of heads / kv_heads, is up to this.
#define MAX_GROUP 16
// Threads of an f16-accumulator block at most (group · head_dim chain
// threads up to 512, a warp of sums and three producer warps): 20 warps,
// five a scheduler, leave the compiler 96 registers a thread
// (F16_MAX_THREADS in ops/attention.rs).
#define F16_MAX_THREADS 640
// Halves after each key row in shared memory: rows of an odd number of
// 16-byte units put the 16-byte reads of 8 consecutive rows in 8 different
// bank groups, so a lane per row reads without conflicts.
#define KEY_PAD 8

// ATTN_CLOCKS=1 (set through TL_CUDA_KERNEL_DEFINES, a measurement aid):
// block 0 and a middle block of an f16-accumulator launch print "aclk",
// the positions walked and cycles: the first fill, the walk over the later
// tiles, the end (output or chunk combine), and producer 0's cycles summed
// over its fills: the keys' wait (tiles scored a lane a position), the
// scores, the maxima, the factors and the values' wait.
#ifndef ATTN_CLOCKS
#define ATTN_CLOCKS 0
#endif

// Positions whose values and factors the chain reads at once, before their
// steps (reading the next group during a group's steps, or groups of 8,
// measured slower; the figures are in the history of docs/perf.md, 7b5df7a).
// Settable through TL_CUDA_KERNEL_DEFINES. The bits are the same either way.
#ifndef CHAIN_UNROLL
#define CHAIN_UNROLL 16
#endif

// Σ q·k over head_dim f16 pairs of one key (`k`, in shared memory) for the
// calling thread, summed as ggml_vec_dot_f16 does on AVX2: accumulator L
// (0..31) keeps the running FMA of elements L, L+32, ..., then the 32
// combine in the CPU's order: L + (L+16), then +8, +4, then pairs (0+1,
// 2+3) and the two pairs. `q` (in shared memory) is read by every lane of
// the warp alike.
template <int PER_LANE>
__device__ __forceinline__ float dot_f16_like_cpu(const float* q, const u16* k) {
    float acc[WARP];
#pragma unroll
    for (int a = 0; a < WARP; ++a) acc[a] = 0.0f;
    // One element of each accumulator at a time: the 32 accumulators stay
    // the only registers the dot holds across its steps.
#pragma unroll 1
    for (int j = 0; j < PER_LANE; ++j) {
#pragma unroll
        for (int g = 0; g < WARP; g += 8) {
            const uint4 raw = *(const uint4*)(k + j * WARP + g);
            const float4 q0 = *(const float4*)(q + j * WARP + g);
            const float4 q1 = *(const float4*)(q + j * WARP + g + 4);
            const float qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
            const u32 pairs[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const u16 half = (u16)(e % 2 ? pairs[e / 2] >> 16 : pairs[e / 2] & 0xffff);
                acc[g + e] = fmaf(qs[e], h2f(half), acc[g + e]);
            }
        }
    }
#pragma unroll
    for (int a = 0; a < 16; ++a) acc[a] += acc[a + 16];
#pragma unroll
    for (int a = 0; a < 8; ++a) acc[a] += acc[a + 8];
#pragma unroll
    for (int a = 0; a < 4; ++a) acc[a] += acc[a + 4];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Positions whose scores one warp computes at a time (warp_scores), their
// loads in flight together.
#define SCORE_POSITIONS 4

// dot_f16_like_cpu for `n` (up to SCORE_POSITIONS) consecutive keys (in
// global memory) on a whole warp: lane L keeps accumulator L over elements
// L, L+32, ..., then the lanes combine in the same order by shuffles (+16,
// +8, +4, then pairs (+1) and the two pairs (+2)): the same bits as
// dot_f16_like_cpu (fill_tile says which it takes). dots[p] is valid in
// every lane.
template <int PER_LANE>
__device__ __forceinline__ void warp_dots_f16_like_cpu(const float* q, const u16* k, int n,
                                                       float* dots) {
    const int lane = threadIdx.x % WARP;
    float acc[SCORE_POSITIONS];
#pragma unroll
    for (int p = 0; p < SCORE_POSITIONS; ++p) acc[p] = 0.0f;
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        const float qj = q[j * WARP + lane];
#pragma unroll
        for (int p = 0; p < SCORE_POSITIONS; ++p)
            if (p < n) acc[p] = fmaf(qj, h2f(k[p * PER_LANE * WARP + j * WARP + lane]), acc[p]);
    }
#pragma unroll
    for (int p = 0; p < SCORE_POSITIONS; ++p) {
        float a = acc[p];
        a += __shfl_down_sync(FULL_MASK, a, 16);
        a += __shfl_down_sync(FULL_MASK, a, 8);
        a += __shfl_down_sync(FULL_MASK, a, 4);
        a += __shfl_down_sync(FULL_MASK, a, 1);
        a += __shfl_down_sync(FULL_MASK, a, 2);
        dots[p] = __shfl_sync(FULL_MASK, a, 0);
    }
}

// The dynamic shared memory of an f16-accumulator block of `group` query
// heads of `head_dim`, tiles of `tile` positions (f16_shared_bytes in
// ops/attention.rs sizes it the same way).
struct TileLayout {
    u16* values;       // [2][tile][head_dim]: the tile being walked and the one being filled
    u16* keys;         // [tile][head_dim + KEY_PAD]: the keys of the tile being filled
                       // (a block of several heads; one head's scores read them from memory)
    float* queries;    // [group][head_dim]: the queries, rounded to f16
    float* old_scale;  // [2][group][tile]: the factor the running output is scaled by first
    float* weight;     // [2][group][tile]: the value's weight
    float* scores;     // [group][tile]
    float* chunk_max;  // [group][chunks]: each chunk of 32 positions' max score
    int tile, group, chunks;
};

__device__ __forceinline__ TileLayout tile_layout(int tile, int group, int head_dim) {
    extern __shared__ uint4 f16_tile_shared[];
    TileLayout l;
    l.tile = tile;
    l.group = group;
    l.chunks = (tile + WARP - 1) / WARP;
    l.values = (u16*)f16_tile_shared;
    l.keys = l.values + 2 * tile * head_dim;
    l.queries = (float*)(l.keys + (group > 1 ? tile * (head_dim + KEY_PAD) : 0));
    l.old_scale = l.queries + group * head_dim;
    l.weight = l.old_scale + 2 * group * tile;
    l.scores = l.weight + 2 * group * tile;
    l.chunk_max = l.scores + group * tile;
    return l;
}

// Shared state of one f16-accumulator block besides its dynamic shared memory.
struct F16AccumulatorState {
    unsigned long long exp2_table[32];  // EXP2_32ND, for the factors' expf
    // Each head's largest score before the tile filled into buffer b (the
    // fill of buffer b writes that of buffer b ^ 1).
    float running[2][MAX_GROUP];
    float sum[MAX_GROUP];
    int last;  // whether this block combines its row's chunks
#if ATTN_CLOCKS
    long long fill_clocks[5];  // producer 0's, summed over its fills
#endif
};

// Adds the cycles since `since` to phase `phase` of producer 0's fill clocks.
__device__ __forceinline__ void fill_clock(F16AccumulatorState& st, int p, int phase, long long& since) {
#if ATTN_CLOCKS
    if (p == 0) {
        const long long now = clock64();
        st.fill_clocks[phase] += now - since;
        since = now;
    }
#endif
}

// One filled tile buffer of one head, as the chain reads it.
struct TileBuffer {
    const u16* values;
    const float* old_scale;
    const float* weight;
};

__device__ __forceinline__ TileBuffer tile_buffer(const TileLayout& l, int b, int head, int head_dim) {
    const int at = (b * l.group + head) * l.tile;
    return {l.values + b * l.tile * head_dim, l.old_scale + at, l.weight + at};
}

// One position of the CPU's running output: on a new maximum the output is
// first rescaled (scale != 1), then output = f16(output + value·weight).
__device__ __forceinline__ float accumulate_value(float acc, float value, float scale, float weight) {
    if (scale != 1.0f) acc = h2f(f2h(acc * scale));
    return h2f(f2h(fmaf(value, weight, acc)));
}

// The running output element `dim` over a tile's `count` positions in order.
// The values and factors of CHAIN_UNROLL positions are read before their steps,
// so each step waits only on the previous step's arithmetic, not on shared
// memory: the chain is the kernel's critical path.
__device__ __forceinline__ float accumulate_tile(const TileBuffer& t, int count, int head_dim,
                                                 int dim, float acc) {
    int i = 0;
    for (; i + CHAIN_UNROLL <= count; i += CHAIN_UNROLL) {
        float value[CHAIN_UNROLL], scale[CHAIN_UNROLL], weight[CHAIN_UNROLL];
#pragma unroll
        for (int u = 0; u < CHAIN_UNROLL; ++u) {
            value[u] = h2f(t.values[(i + u) * head_dim + dim]);
            scale[u] = t.old_scale[i + u];
            weight[u] = t.weight[i + u];
        }
        // A new maximum is rare past the first positions: groups without one
        // take a chain of one multiply-add and its rounding per position (the
        // rescale, even predicated off, would sit on the chain).
        bool rescale = false;
#pragma unroll
        for (int u = 0; u < CHAIN_UNROLL; ++u) rescale |= scale[u] != 1.0f;
        if (rescale) {
#pragma unroll
            for (int u = 0; u < CHAIN_UNROLL; ++u) acc = accumulate_value(acc, value[u], scale[u], weight[u]);
        } else {
#pragma unroll
            for (int u = 0; u < CHAIN_UNROLL; ++u) acc = h2f(f2h(fmaf(value[u], weight[u], acc)));
        }
    }
    for (; i < count; ++i)
        acc = accumulate_value(acc, h2f(t.values[i * head_dim + dim]), t.old_scale[i], t.weight[i]);
    return acc;
}

// The softmax denominator's recurrence over a tile, `sum·scale + weight` per
// position in order, its factors read ahead as in accumulate_tile.
__device__ __forceinline__ float accumulate_weights(const TileBuffer& t, int count, float sum) {
    int i = 0;
    for (; i + CHAIN_UNROLL <= count; i += CHAIN_UNROLL) {
        float scale[CHAIN_UNROLL], weight[CHAIN_UNROLL];
#pragma unroll
        for (int u = 0; u < CHAIN_UNROLL; ++u) {
            scale[u] = t.old_scale[i + u];
            weight[u] = t.weight[i + u];
        }
#pragma unroll
        for (int u = 0; u < CHAIN_UNROLL; ++u) sum = fmaf(sum, scale[u], weight[u]);
    }
    for (; i < count; ++i) sum = fmaf(sum, t.old_scale[i], t.weight[i]);
    return sum;
}

// The running output element `dim` over a partial tile (the last one, and all
// of a context shorter than a tile): a plain loop; accumulate_tile's groups
// measured no faster there (about 36 cycles a position either way).
__device__ __forceinline__ float accumulate_plain(const TileBuffer& t, int count, int head_dim,
                                                  int dim, float acc) {
    for (int i = 0; i < count; ++i)
        acc = accumulate_value(acc, h2f(t.values[i * head_dim + dim]), t.old_scale[i], t.weight[i]);
    return acc;
}

// A barrier among the `producers` threads (whole warps) that fill tiles, so
// that they can step through a tile while the chain's warps walk the other.
__device__ __forceinline__ void producer_barrier(int producers) {
    asm volatile("bar.sync 1, %0;" ::"r"(producers) : "memory");
}

// Starts the copies of a tile's `count` rows of `row` halves from `src` into
// shared memory rows `stride` halves apart (p of `producers` threads).
__device__ __forceinline__ void copy_tile_rows(const u16* src, int count, int row, int stride,
                                               u16* dst, int p, int producers) {
    const int pieces = row / 8;  // 16 bytes each
    for (int i = p; i < count * pieces; i += producers)
        copy_async<16>(dst + (i / pieces) * stride + i % pieces * 8, src + (u64)i * 8);
}

// The scores of a tile, `count` positions of `l.group` heads, on
// `producers` threads: a warp takes SCORE_POSITIONS positions of one head,
// reading the keys from memory.
template <int PER_LANE>
__device__ __forceinline__ void warp_scores(const u16* keys, int count, float scale,
                                            const TileLayout& l, int p, int producers) {
    const int head_dim = PER_LANE * WARP;
    const int warp = p / WARP, lane = p % WARP, warps = producers / WARP;
    const int groups = (count + SCORE_POSITIONS - 1) / SCORE_POSITIONS;
    for (int item = warp; item < l.group * groups; item += warps) {
        const int head = item % l.group, i = item / l.group * SCORE_POSITIONS;
        float dots[SCORE_POSITIONS];
        warp_dots_f16_like_cpu<PER_LANE>(l.queries + head * head_dim, keys + (u64)i * head_dim,
                                         min(SCORE_POSITIONS, count - i), dots);
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < SCORE_POSITIONS; ++j)
                if (i + j < count) l.scores[head * l.tile + i + j] = dots[j] * scale;
        }
    }
}

// The scores of a tile, `count` positions of `l.group` heads, on
// `producers` threads, from its keys in shared memory (their copies waited
// for here): a warp takes 32 positions of one head, a lane one position.
template <int PER_LANE>
__device__ __forceinline__ void lane_scores(int count, float scale, const TileLayout& l,
                                            F16AccumulatorState& st, int p, int producers,
                                            long long& since) {
    const int head_dim = PER_LANE * WARP;
    const int warp = p / WARP, lane = p % WARP, warps = producers / WARP;
    copy_groups_wait<1>();  // the keys
    producer_barrier(producers);
    fill_clock(st, p, 0, since);
    const int chunks = (count + WARP - 1) / WARP;
    for (int item = warp; item < l.group * chunks; item += warps) {
        const int head = item % l.group, i = item / l.group * WARP + lane;
        if (i < count)
            l.scores[head * l.tile + i] =
                dot_f16_like_cpu<PER_LANE>(l.queries + head * head_dim,
                                           l.keys + i * (head_dim + KEY_PAD)) *
                scale;
    }
}

// Fills buffer `b` with the tile of `count` positions from `base` for the
// block's `l.group` query heads: its values, and each head's factors of every
// position (old_scale, weight). The `producers` threads (whole warps) that
// call it share the work: `p` is the caller's index among them.
//
// Both ways to a score give the same bits. A lane per position takes the
// fewest instructions (no shuffles), but each dot is one lane's long
// sequence: it pays where every warp has whole chunks of 32 positions to
// score (many heads, or few producer warps); a warp per position, sooner
// done, takes tiles of few positions a warp (a lone head's first tile on
// the whole block, a short context). A block of one head keeps the warps:
// its shared memory then holds no keys, as small as its neighbours' in the
// step, whose carveout it would otherwise change.
template <int PER_LANE>
__device__ void fill_tile(const u16* keys, const u16* values, int base, int count, float scale,
                          const TileLayout& l, F16AccumulatorState& st, int b, int p,
                          int producers) {
    const int head_dim = PER_LANE * WARP;
    const int warp = p / WARP, lane = p % WARP, warps = producers / WARP;
    const int group = l.group, chunks = (count + WARP - 1) / WARP;
    const float minus_infinity = -__int_as_float(0x7f800000);
    long long since = ATTN_CLOCKS ? clock64() : 0;
    const bool by_lanes = group > 1 && count >= 2 * WARP && group * chunks >= warps;
    // The values' copies go after the keys' reads: the scores wait for the
    // keys first, and copies queued ahead of them would delay those.
    u16* values_buffer = l.values + b * l.tile * head_dim;
    if (by_lanes) {
        copy_tile_rows(keys + (u64)base * head_dim, count, head_dim, head_dim + KEY_PAD, l.keys,
                       p, producers);
        copy_commit();
        copy_tile_rows(values + (u64)base * head_dim, count, head_dim, head_dim, values_buffer, p,
                       producers);
        copy_commit();
        lane_scores<PER_LANE>(count, scale, l, st, p, producers, since);
    } else {
        warp_scores<PER_LANE>(keys + (u64)base * head_dim, count, scale, l, p, producers);
        copy_tile_rows(values + (u64)base * head_dim, count, head_dim, head_dim, values_buffer, p,
                       producers);
    }
    producer_barrier(producers);
    fill_clock(st, p, 1, since);
    // Each chunk of 32 positions' inclusive max by shuffles: the exclusive
    // one goes to old_scale for now, the chunk's to chunk_max.
    for (int item = warp; item < group * chunks; item += warps) {
        const int head = item % group, c = item / group, i = c * WARP + lane;
        float inclusive = i < count ? l.scores[head * l.tile + i] : minus_infinity;
#pragma unroll
        for (int o = 1; o < WARP; o <<= 1) {
            const float other = __shfl_up_sync(FULL_MASK, inclusive, o);
            if (lane >= o) inclusive = fmaxf(inclusive, other);
        }
        const float exclusive = __shfl_up_sync(FULL_MASK, inclusive, 1);
        if (i < count) l.old_scale[(b * group + head) * l.tile + i] = lane == 0 ? minus_infinity : exclusive;
        if (lane == WARP - 1) l.chunk_max[head * l.chunks + c] = inclusive;
    }
    producer_barrier(producers);
    fill_clock(st, p, 2, since);
    // The maximum before position i: the running one, the earlier chunks'
    // and the exclusive one within its chunk (fmaxf skips NaN scores, as the
    // CPU's `score > max` does, so the order of the maxima does not matter).
    for (int k = p; k < group * count; k += producers) {
        const int head = k / count, i = k % count;
        float* old_scale = l.old_scale + (b * group + head) * l.tile;
        float* weight = l.weight + (b * group + head) * l.tile;
        const float* chunk_max = l.chunk_max + head * l.chunks;
        float before = fmaxf(st.running[b][head], old_scale[i]);
        for (int c = 0; c < i / WARP; ++c) before = fmaxf(before, chunk_max[c]);
        const float score = l.scores[head * l.tile + i];
        if (score > before) {
            old_scale[i] = expf_libm_with(st.exp2_table, before - score);
            weight[i] = 1.0f;
        } else {
            old_scale[i] = 1.0f;
            weight[i] = expf_libm_with(st.exp2_table, score - before);
        }
    }
    // Each head's running maximum past the tile, for the next fill.
    if (p < group) {
        float running = st.running[b][p];
        for (int c = 0; c < chunks; ++c) running = fmaxf(running, l.chunk_max[p * l.chunks + c]);
        st.running[b ^ 1][p] = running;
    }
    fill_clock(st, p, 3, since);
    copy_values_wait();
    fill_clock(st, p, 4, since);
}

// Positions per chunk of a lone decode row's canonical split (the CPU
// backend's KV_CHUNK).
#define KV_CHUNK 256

// Where the chunks of a split row leave their partial results: per (sequence,
// head), `slots` of [max score, sum of weights, head_dim output values],
// and a count of the chunks done (0 between launches; a block of several
// heads counts on its first head's).
struct ChunkSplit {
    float* partials;
    unsigned* arrivals;
    int slots;
};

// The block's place in an f16-accumulator grid, whose x is
// [slot][row][head group] (chunk slots slowest; a group is `group`
// consecutive query heads of one key/value head, from `head`), and the
// positions it walks, [lo, hi). A lone row (one of its sequence's) whose
// context ends past KV_CHUNK positions is split into the chunks of KV_CHUNK
// absolute positions its window touches: slot i walks the i-th (`chunks` of
// them) and the last block to finish combines them in chunk order
// (combine_chunks), the order the CPU backend uses. Any other row walks all
// it sees on slot 0 (chunks = 0).
struct BlockSpan {
    int row, head, slot, group;
    int lo, hi;
    int chunks;
};

__device__ __forceinline__ BlockSpan block_span(const int* start, int heads, int window,
                                                int chunk_slots, int group) {
    BlockSpan s;
    const int groups = heads / group, rows_groups = gridDim.x / chunk_slots;
    s.group = group;
    s.slot = blockIdx.x / rows_groups;
    s.row = blockIdx.x % rows_groups / groups;
    s.head = blockIdx.x % groups * group;
    const int position = *start + s.row;
    const int first = window > 0 ? max(0, position + 1 - window) : 0;
    s.lo = first;
    s.hi = position + 1;
    s.chunks = 0;
    if (rows_groups == groups && position + 1 > KV_CHUNK) {
        const int chunk = first / KV_CHUNK + s.slot;
        s.chunks = position / KV_CHUNK - first / KV_CHUNK + 1;
        s.lo = max(first, chunk * KV_CHUNK);
        s.hi = min(position + 1, (chunk + 1) * KV_CHUNK);
    }
    return s;
}

// Whether the block has nothing to walk: a slot past its row's chunks, or
// past slot 0 for a row that is not split.
__device__ __forceinline__ bool span_idle(const BlockSpan& s) { return s.slot >= max(s.chunks, 1); }

// Output element `dim` of a split row from its chunks' partial results
// (`partials` at its first slot), combined in chunk order as the CPU backend
// does: m = max(M, M_c), then fma(output, e^(M−m), output_c·e^(M_c−m)) and
// the same for the sums (llama.cpp's line as GCC contracts it), and
// output / sum.
// The output starts at −0, so a lone chunk's comes through as it is. The
// partials were written by other blocks: read from L2.
__device__ __forceinline__ float combine_chunks(const float* partials, int chunks, int head_dim,
                                                int dim, const unsigned long long* exp2_table) {
    float max = -__int_as_float(0x7f800000), sum = 0.0f, out = -0.0f;
    for (int c = 0; c < chunks; ++c) {
        const float* p = partials + (u64)c * (head_dim + 2);
        const float chunk_max = __ldcg(p), chunk_sum = __ldcg(p + 1);
        if (chunk_sum == 0.0f) continue;
        const float joint = fmaxf(max, chunk_max);
        const float old_scale = expf_libm_with(exp2_table, __fsub_rn(max, joint));
        const float new_scale = expf_libm_with(exp2_table, __fsub_rn(chunk_max, joint));
        out = __fmaf_rn(out, old_scale, __fmul_rn(__ldcg(p + 2 + dim), new_scale));
        sum = __fmaf_rn(sum, old_scale, __fmul_rn(chunk_sum, new_scale));
        max = joint;
    }
    const float inverse = sum == 0.0f ? 0.0f : 1.0f / sum;
    return out * inverse;
}

// The end of a split row's chunk: each head's partial result (the chain
// threads' f16 output elements `acc`, and the head's running maximum `max`
// and sum) to its slot, then, in the block that finishes last, the combined
// outputs to `out` (the group's heads' elements).
__device__ __forceinline__ void finish_chunk(const BlockSpan& s, int head_dim, float acc,
                                             const float* max, ChunkSplit split, float* out,
                                             F16AccumulatorState& st) {
    const int chains = s.group * head_dim, head = threadIdx.x / head_dim;
    const int dim = threadIdx.x % head_dim, sum_head = threadIdx.x - chains;
    auto partials = [&](int h) { return split.partials + (u64)(s.head + h) * split.slots * (head_dim + 2); };
    if (threadIdx.x < chains) {
        partials(head)[(u64)s.slot * (head_dim + 2) + 2 + dim] = acc;
    } else if (sum_head < s.group) {
        float* partial = partials(sum_head) + (u64)s.slot * (head_dim + 2);
        partial[0] = max[sum_head];
        partial[1] = st.sum[sum_head];
    }
    // Visible to the block that combines before it counts this one.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) st.last = atomicAdd(split.arrivals + s.head, 1u) == (unsigned)(s.chunks - 1);
    __syncthreads();
    if (!st.last) return;
    __threadfence();
    if (threadIdx.x == 0) split.arrivals[s.head] = 0;
    if (threadIdx.x < chains)
        out[threadIdx.x] = combine_chunks(partials(head), s.chunks, head_dim, dim, st.exp2_table);
}

// One (row, head group) of attention_f16_accumulator; PER_LANE = head_dim / 32.
//
// The CPU walks the positions in order: on a new maximum it rescales the f16
// running output by exp(old max − score), else it weights the value by
// exp(score − max); then output = f16(output + value·weight). Which branch a
// position takes, and its factors, depend only on the running maximum of the
// scores before it, a prefix max computed here in parallel. What stays
// sequential is each output element's own chain of f16 roundings, so each of
// the first group · head_dim threads walks the positions for one element of
// one head, reading factors from shared memory; the next warp's first
// `group` lanes run the heads' sums of weights, the same recurrence. The
// remaining warps (the producers) fill the next tile's buffer meanwhile:
// keys, values, scores, prefix max and factors, for every head of the group,
// which share their key/value head's tiles. The queries are in shared memory
// already.
template <int PER_LANE>
__device__ void attend_f16_accumulator(const u16* k_cache, const u16* v_cache, const BlockSpan& s,
                                       int heads, int kv_heads, int capacity, float scale,
                                       const TileLayout& l, float* out, ChunkSplit split,
                                       F16AccumulatorState& st) {
    const int head_dim = PER_LANE * WARP;
    // With a window, the positions before it are skipped, as the CPU's
    // one-chunk path skips masked ones: the walk starts at s.lo.
    const int visible = s.hi - s.lo;
    const int kv_head = s.head / (heads / kv_heads);
    const u16* keys = k_cache + ((u64)kv_head * capacity + s.lo) * head_dim;
    const u16* values = v_cache + ((u64)kv_head * capacity + s.lo) * head_dim;
    const int chains = s.group * head_dim;
    const int first_producer = chains + WARP;
    const int producers = blockDim.x - first_producer;
    const int p = threadIdx.x - first_producer;  // the index among producers, if >= 0
    const int head = threadIdx.x / head_dim, dim = threadIdx.x % head_dim;  // a chain thread's
    const int sum_head = threadIdx.x - chains;                              // a sum lane's
    const int tile = l.tile, tiles = (visible + tile - 1) / tile;
#if ATTN_CLOCKS
    if (threadIdx.x < 5) st.fill_clocks[threadIdx.x] = 0;
    __syncthreads();
    const long long a0 = clock64();
#endif
    // The chain has nothing to walk before the first tile: every thread fills
    // it, the producers alone the later ones.
    fill_tile<PER_LANE>(keys, values, 0, min(tile, visible), scale, l, st, 0, threadIdx.x,
                        blockDim.x);
    __syncthreads();
#if ATTN_CLOCKS
    const long long a1 = clock64();
#endif
    float acc = 0.0f;  // an f16 value, held as f32
    float sum = 0.0f;
    for (int k = 0; k < tiles; ++k) {
        const int b = k & 1, count = min(tile, visible - k * tile);
        if (threadIdx.x < chains) {
            const TileBuffer buffer = tile_buffer(l, b, head, head_dim);
            acc = count == tile ? accumulate_tile(buffer, count, head_dim, dim, acc)
                                : accumulate_plain(buffer, count, head_dim, dim, acc);
        } else if (sum_head < s.group) {
            sum = accumulate_weights(tile_buffer(l, b, sum_head, head_dim), count, sum);
        } else if (p >= 0 && k + 1 < tiles) {
            const int next = (k + 1) * tile;
            fill_tile<PER_LANE>(keys, values, next, min(tile, visible - next), scale, l, st, b ^ 1,
                                p, producers);
        }
        __syncthreads();
    }
    if (sum_head >= 0 && sum_head < s.group) st.sum[sum_head] = sum;
    __syncthreads();
#if ATTN_CLOCKS
    const long long a2 = clock64();
#endif
    // The heads' largest scores: the running maxima past the last tile.
    const float* max = st.running[tiles & 1];
    // One chunk's partial result, combined alone, is the plain output: the
    // same bits, so only rows of several chunks take the detour.
    if (s.chunks > 1) {
        finish_chunk(s, head_dim, acc, max, split, out + (u64)s.head * head_dim, st);
    } else if (threadIdx.x < chains) {
        const float inverse = st.sum[head] == 0.0f ? 0.0f : 1.0f / st.sum[head];
        out[((u64)s.row * heads + s.head) * head_dim + threadIdx.x] = acc * inverse;
    }
#if ATTN_CLOCKS
    if ((blockIdx.x == 0 || blockIdx.x == gridDim.x / 2) && blockIdx.y == 0 && threadIdx.x == 0) {
        const long long* f = st.fill_clocks;
        printf("aclk %d group %d first-fill %lld walk %lld end %lld fills: keys %lld scores %lld "
               "maxima %lld factors %lld values %lld\n",
               visible, s.group, a1 - a0, a2 - a1, clock64() - a2, f[0], f[1], f[2], f[3], f[4]);
    }
#endif
}

// attend_f16_accumulator for a head size known only at run time.
__device__ __forceinline__ void attend_f16_accumulator_any(
    const u16* k_cache, const u16* v_cache, const BlockSpan& s, int heads, int kv_heads,
    int head_dim, int capacity, float scale, const TileLayout& l, float* out, ChunkSplit split,
    F16AccumulatorState& st) {
#define ATTEND_F16(N)                                                                          \
    case N:                                                                                    \
        attend_f16_accumulator<N>(k_cache, v_cache, s, heads, kv_heads, capacity, scale, l,    \
                                  out, split, st);                                             \
        break;
    switch (head_dim / WARP) {
        ATTEND_F16(1)
        ATTEND_F16(2)
        ATTEND_F16(3)
        ATTEND_F16(4)
        ATTEND_F16(5)
        ATTEND_F16(6)
        ATTEND_F16(7)
        ATTEND_F16(8)
    }
#undef ATTEND_F16
}

// The block's query heads (rows of q are q_stride apart), rounded to f16,
// into shared memory.
__device__ __forceinline__ void load_queries(const float* q, int q_stride, const BlockSpan& s,
                                             int head_dim, const TileLayout& l) {
    const float* qr = q + (u64)s.row * q_stride + (u64)s.head * head_dim;
    for (int i = threadIdx.x; i < s.group * head_dim; i += blockDim.x) l.queries[i] = h2f(f2h(qr[i]));
}

// Tiles of keys and values a block asks L2 for before the wait
// (prefetch_first_tiles); settable through TL_CUDA_KERNEL_DEFINES, 0 for
// none (a measurement aid).
#ifndef ATTN_PREFETCH_TILES
#define ATTN_PREFETCH_TILES 2
#endif

// Asks L2 for the keys and values of the first tiles the block walks (from
// s.lo), the first reads after the wait: older positions were written by
// earlier steps and are mostly out of L2 by now. The blocks of a key/value
// head read the same positions, so each asks for its share of the lines:
// fewer requests ahead of the block's own reads.
__device__ __forceinline__ void prefetch_first_tiles(const u16* k_cache, const u16* v_cache,
                                                     const BlockSpan& s, int heads, int kv_heads,
                                                     int head_dim, int capacity, int tile) {
    const int per_kv_head = heads / kv_heads, sharers = per_kv_head / s.group;
    const int member = s.head % per_kv_head / s.group;
    const int positions = min(ATTN_PREFETCH_TILES * tile, s.hi - s.lo);
    const u64 bytes = (u64)positions * head_dim * 2;
    const u64 share = ((bytes + sharers - 1) / sharers + 127) & ~(u64)127;
    const u64 begin = share * member;
    if (begin >= bytes) return;
    const u64 first = ((u64)(s.head / per_kv_head) * capacity + s.lo) * head_dim;
    prefetch_l2((const u8*)(k_cache + first) + begin, min(share, bytes - begin));
    prefetch_l2((const u8*)(v_cache + first) + begin, min(share, bytes - begin));
}

// The split state of sequence `sequence`'s rows (ChunkSplit), from the
// launch's `partials` and `arrivals` for every sequence.
__device__ __forceinline__ ChunkSplit sequence_split(float* partials, unsigned* arrivals,
                                                     int chunk_slots, int heads, int head_dim,
                                                     u64 sequence) {
    return {partials ? partials + sequence * heads * chunk_slots * (head_dim + 2) : partials,
            arrivals ? arrivals + sequence * heads : arrivals, chunk_slots};
}

// A row split into more chunks than the launch has slots has no block to
// combine it: NaN marks its output (the host sizes the slots, so this is a
// bug, not a result).
__device__ __forceinline__ bool too_few_slots(const BlockSpan& s, int chunk_slots, float* out,
                                              int heads, int head_dim) {
    if (s.chunks <= chunk_slots) return false;
    if (s.slot == 0 && threadIdx.x < s.group * head_dim)
        out[((u64)s.row * heads + s.head) * head_dim + threadIdx.x] = __int_as_float(0x7fc00000);
    return true;
}

// The f16-accumulator kernels' start: false for a block with nothing to
// walk; else it asks L2 for its first tiles, loads the expf table and clears
// the running maxima, then waits for the previous kernel.
__device__ __forceinline__ bool begin_f16_block(const BlockSpan& s, int chunk_slots, float* out,
                                                int heads, int kv_heads, int head_dim,
                                                int capacity, int tile, const u16* k_cache,
                                                const u16* v_cache, int l2_prefetch,
                                                F16AccumulatorState& st) {
    if (span_idle(s) || too_few_slots(s, chunk_slots, out, heads, head_dim)) return false;
    if (l2_prefetch)
        prefetch_first_tiles(k_cache, v_cache, s, heads, kv_heads, head_dim, capacity, tile);
    if (threadIdx.x < WARP) st.exp2_table[threadIdx.x] = EXP2_32ND[threadIdx.x];
    if (threadIdx.x < s.group) st.running[0][threadIdx.x] = -__int_as_float(0x7f800000);
    allow_next_kernel();
    wait_for_previous_kernel();
    return true;
}

// Attention for fewer than 64 rows, as llama.cpp's CPU flash attention
// (one_chunk) computes it: the query rounded to f16, each score an f16 dot in
// f32, online softmax over the positions in order with the running output kept
// in f16 (rounded after every rescale and every multiply-add). One block per
// (chunk slot, row, group of `group` query heads of one key/value head), its
// tiles `tile` positions; see attend_f16_accumulator for how it is spread and
// BlockSpan for the chunks of a lone row's long context.
extern "C" __global__ void __launch_bounds__(F16_MAX_THREADS) attention_f16_accumulator(
    const float* q, int q_stride, const u16* k_cache, const u16* v_cache, const int* start,
    int heads, int kv_heads, int head_dim, int capacity, float scale, int window, float* out,
    int l2_prefetch, float* partials, unsigned* arrivals, int chunk_slots, int group, int tile) {
    __shared__ F16AccumulatorState st;
    // `start` comes from the host (copied before the step's kernels run), so
    // it may be read before the wait.
    const BlockSpan s = block_span(start, heads, window, chunk_slots, group);
    if (!begin_f16_block(s, chunk_slots, out, heads, kv_heads, head_dim, capacity, tile, k_cache,
                         v_cache, l2_prefetch, st))
        return;
    const TileLayout l = tile_layout(tile, group, head_dim);
    load_queries(q, q_stride, s, head_dim, l);
    __syncthreads();
    const ChunkSplit split = sequence_split(partials, arrivals, chunk_slots, heads, head_dim, 0);
    attend_f16_accumulator_any(k_cache, v_cache, s, heads, kv_heads, head_dim, capacity, scale, l,
                               out, split, st);
}

// attention_f16_accumulator for a lone decode step (one row at *start) whose
// queries and keys still need their per-head norms and RoPE
// (rope_store_kv's arithmetic, so the same bits): the block's first `group`
// warps prepare its query heads in shared memory, the next its key head and
// the next its values, written into the caches (every block of a key/value
// head writes the same bytes, before any of its reads) — one launch instead
// of two on the step's critical path.
extern "C" __global__ void __launch_bounds__(F16_MAX_THREADS) attention_f16_accumulator_rope(
    const float* qkv, int q_stride, u16* k_cache, u16* v_cache, const int* start, int heads,
    int kv_heads, int head_dim, int capacity, float scale, int window, float* out,
    int l2_prefetch, float* partials, unsigned* arrivals, int chunk_slots, int group, int tile,
    const float2* cos_sin, const float* q_norm, const float* k_norm, float eps, int halves,
    float query_scale) {
    __shared__ F16AccumulatorState st;
    const BlockSpan s = block_span(start, heads, window, chunk_slots, group);
    // The rotation's inputs are constants, read right after the wait.
    if (l2_prefetch) {
        prefetch_l1(cos_sin + (u64)*start * (head_dim / 2), (u64)head_dim * 4);
        if (q_norm) prefetch_l1(q_norm, (u64)head_dim * 4);
        if (k_norm) prefetch_l1(k_norm, (u64)head_dim * 4);
    }
    if (!begin_f16_block(s, chunk_slots, out, heads, kv_heads, head_dim, capacity, tile, k_cache,
                         v_cache, l2_prefetch, st))
        return;
    const TileLayout l = tile_layout(tile, group, head_dim);
    const int kv_head = s.head / (heads / kv_heads);
    const int pos = *start, warp = threadIdx.x / WARP;
    const int q_width = heads * head_dim, kv_width = kv_heads * head_dim;
    const float2* table = cos_sin + (u64)pos * (head_dim / 2);
    const u64 at = ((u64)kv_head * capacity + pos) * head_dim;
    if (warp < group) {
        float* query = l.queries + warp * head_dim;
        norm_rope_head(qkv + (s.head + warp) * head_dim, q_norm, eps, head_dim, halves, table,
                       [&](int a, int b, float r0, float r1) {
                           query[a] = h2f(f2h(__fmul_rn(r0, query_scale)));
                           query[b] = h2f(f2h(__fmul_rn(r1, query_scale)));
                       });
    } else if (warp == group) {
        norm_rope_head(qkv + q_width + kv_head * head_dim, k_norm, eps, head_dim, halves, table,
                       [&](int a, int b, float r0, float r1) {
                           k_cache[at + a] = f2h(r0);
                           k_cache[at + b] = f2h(r1);
                       });
    } else if (warp == group + 1) {
        store_head_f16(qkv + q_width + kv_width + kv_head * head_dim, v_cache + at, head_dim);
    }
    // The keys and values are read back through L2 (cp.async.cg): the writes
    // must be there, not only in this multiprocessor's view, before the
    // barrier.
    if (warp == group || warp == group + 1) __threadfence();
    __syncthreads();
    const ChunkSplit split = sequence_split(partials, arrivals, chunk_slots, heads, head_dim, 0);
    attend_f16_accumulator_any(k_cache, v_cache, s, heads, kv_heads, head_dim, capacity, scale, l,
                               out, split, st);
}

// attention_f16_accumulator for a decode step of several sequences at once:
// gridDim.y sequences, each with gridDim.x / (heads / group · chunk_slots)
// rows of q and out (after the previous sequences'), its start at
// start[blockIdx.y], its caches in the tables and its split state after the
// previous sequences'.
extern "C" __global__ void __launch_bounds__(F16_MAX_THREADS) attention_f16_accumulator_batched(
    const float* q, int q_stride, const u16* const* k_tables, const u16* const* v_tables,
    const int* start, int heads, int kv_heads, int head_dim, int capacity, float scale,
    int window, float* out, int l2_prefetch, float* partials, unsigned* arrivals,
    int chunk_slots, int group, int tile) {
    __shared__ F16AccumulatorState st;
    // The tables, like the starts, come from the host.
    const u64 b = blockIdx.y, rows = gridDim.x / chunk_slots / (heads / group);
    start += b;
    q += b * rows * q_stride;
    out += b * rows * heads * head_dim;
    const BlockSpan s = block_span(start, heads, window, chunk_slots, group);
    const u16* k_cache = k_tables[b];
    const u16* v_cache = v_tables[b];
    if (!begin_f16_block(s, chunk_slots, out, heads, kv_heads, head_dim, capacity, tile, k_cache,
                         v_cache, l2_prefetch, st))
        return;
    const TileLayout l = tile_layout(tile, group, head_dim);
    load_queries(q, q_stride, s, head_dim, l);
    __syncthreads();
    const ChunkSplit split = sequence_split(partials, arrivals, chunk_slots, heads, head_dim, b);
    attend_f16_accumulator_any(k_cache, v_cache, s, heads, kv_heads, head_dim, capacity, scale, l,
                               out, split, st);
}

// Attention for 64 rows or more, in f32 (llama.cpp's tiled CPU path): one warp
// per (row, head); row r sits at position *start + r and sees
// positions 0..=that. Lanes take 32 keys at a time (each lane one whole dot
// product), then the chunk's weights are broadcast to accumulate the values,
// each lane owning head_dim/32 output dims. q rows are `q_stride` floats apart
// (the fused QKV buffer); out is [row][heads·head_dim].
extern "C" __global__ void attention_prefill(const float* q, int q_stride, const u16* k_cache,
                                             const u16* v_cache, const int* start, int rows,
                                             int heads, int kv_heads, int head_dim,
                                             int capacity, float scale, int window, float* out) {
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int item = blockIdx.x * ATTN_WARPS + warp;
    if (item >= rows * heads) return;
    const int row = item / heads, head = item % heads;
    const int visible = *start + row + 1;
    const int first = window > 0 ? max(0, visible - window) : 0;
    const int per_lane = head_dim / WARP;
    const int kv_head = head / (heads / kv_heads);
    const u16* keys = k_cache + (u64)kv_head * capacity * head_dim;
    const u16* values = v_cache + (u64)kv_head * capacity * head_dim;
    __shared__ float q_shared[ATTN_WARPS][MAX_HEAD_DIM];
    const float* qr = q + (u64)row * q_stride + head * head_dim;
    for (int d = lane; d < head_dim; d += WARP) q_shared[warp][d] = qr[d];
    __syncwarp();
    float m = -__int_as_float(0x7f800000), sum = 0.0f;
    float acc[MAX_HEAD_DIM / WARP];
    for (int j = 0; j < per_lane; ++j) acc[j] = 0.0f;
    for (int base = first; base < visible; base += WARP) {
        const int p = base + lane;
        float score = -__int_as_float(0x7f800000);
        if (p < visible) {
            const u16* kp = keys + (u64)p * head_dim;
            float dot = 0.0f;
            for (int d = 0; d < head_dim; d += 2) {
                const u32 pair = *(const u32*)(kp + d);
                dot += q_shared[warp][d] * h2f((u16)(pair & 0xffff)) +
                       q_shared[warp][d + 1] * h2f((u16)(pair >> 16));
            }
            score = dot * scale;
        }
        const float chunk_max = warp_max(score);
        const float new_max = fmaxf(m, chunk_max);
        const float old = expf(m - new_max);
        const float w = p < visible ? expf(score - new_max) : 0.0f;
        sum = sum * old + warp_sum(w);
        for (int j = 0; j < per_lane; ++j) acc[j] *= old;
        const int count = min(WARP, visible - base);
        for (int i = 0; i < count; ++i) {
            const float wi = __shfl_sync(FULL_MASK, w, i);
            const u16* vp = values + (u64)(base + i) * head_dim;
            for (int j = 0; j < per_lane; ++j) acc[j] += wi * h2f(vp[lane + j * WARP]);
        }
        m = new_max;
    }
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    float* o = out + (u64)row * heads * head_dim + head * head_dim;
    for (int j = 0; j < per_lane; ++j) o[lane + j * WARP] = acc[j] * inverse;
}
