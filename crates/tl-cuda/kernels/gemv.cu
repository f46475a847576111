// Matrix × vector for one token (decode): y = W·x, one warp per row, the warp's
// lanes taking the row's blocks of 32 weights (16-value units for float types)
// in turn. Variants fold in the step before
// or after the product so a block's decode step needs fewer launches:
//   plain      y[r]  = W[r]·x
//   residual   y[r] += W[r]·x                     (attention output, MLP down)
//   norm       y[r]  = W[r]·rmsnorm(x)            (fused QKV, output head)
//   swiglu     y[r]  = silu(W[r]·n) · (W[r+half]·n), n = rmsnorm(x)  (gate|up)
//   norm_rope  norm, then RoPE on the query and key rows and the keys and
//              values written to the cache                       (fused QKV)
//
// Each block first stages x in shared memory (normalised when asked). For the
// quantized weight types x is staged as llama.cpp's Q8_0/Q8_1 blocks (int8
// values, f16-rounded scale, Q8_1's scaled sum, the integer sum), exactly as the CPU
// backend quantizes it, and rows are integer dot products (dp4a) whose f32
// sums follow the CPU backend's order (ORDER_LANES / ORDER_BLOCKS below), so
// the GPU computes the CPU's bits; it also reads a quarter of the activation
// bytes. Float weights (F32/F16/BF16) use f32 x and sum in their own order.
// Rows are a grid-stride loop, so a block stages x once for many rows.

// Blocks of 32 weights each lane has in flight per row: all their loads are
// issued before any is used, so a warp waits for memory about once per row.
#define GEMV_UNROLL 4
// The largest block the host launches (registers are budgeted for it).
#define GEMV_MAX_THREADS 512

// Stages x (normalised when norm_weight != 0) as f32 in shared memory.
__device__ void stage_f32(const float* x, const float* norm_weight, float eps, int cols,
                          float* xs, double* scratch) {
    const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = staged_input(x, norm_weight, scale, i);
    __syncthreads();
}

// x as Q8 blocks in shared memory: the int8 values, and per block of 32 the
// f16-rounded scale d, the f16-rounded d·Σq (Q8_1's s) and the exact Σq.
struct StagedQ8 {
    const i8* q;
    const float* d;
    const float* s;
    const int* sum;
};

// Quantizes values i0 + j·blockDim.x (j < STAGE_BATCH), held in v, into the
// staged Q8 blocks; a warp's lanes hold one block.
__device__ __forceinline__ void quantize_batch(const float* v, int i0, int cols, i8* xq,
                                               float* xd, float* xs, int* xsum) {
    const int lane = threadIdx.x % WARP;
#pragma unroll
    for (int j = 0; j < STAGE_BATCH; ++j) {
        const int i = i0 + j * blockDim.x;
        if (i - lane >= cols) break;  // whole warps leave together
        float d;
        const int q = quantize_q8_lane(v[j], &d);
        xq[i] = (i8)q;
        const int sum = warp_sum_int(q);
        if (lane == 0) {
            const int b = i / 32;
            xd[b] = h2f(f2h(d));
            xs[b] = h2f(f2h(d * (float)sum));
            xsum[b] = sum;
        }
    }
}

// Stages x as Q8 blocks, one warp per block (see quantize_q8_lane): thread t
// takes values t, t + blockDim, ..., which puts block b on warp b % warps with
// lane i holding value i. Layout in `shared`: q[cols] (16-byte aligned), then
// d, s and sum, cols/32 each. A normalised x that fits one batch per thread is
// read once (sum of squares and quantization from the same registers).
__device__ StagedQ8 stage_q8(const float* x, const float* norm_weight, float eps, int cols,
                             void* shared, double* scratch) {
    const int blocks = cols / 32;
    i8* xq = (i8*)shared;
    float* xd = (float*)(xq + cols);
    float* xs = xd + blocks;
    int* xsum = (int*)(xs + blocks);
    if (norm_weight && cols <= STAGE_BATCH * (int)blockDim.x) {
        float v[STAGE_BATCH], w[STAGE_BATCH];
        double squares = 0.0;
#pragma unroll
        for (int j = 0; j < STAGE_BATCH; ++j) {
            const int i = threadIdx.x + j * blockDim.x;
            v[j] = i < cols ? x[i] : 0.0f;
            w[j] = i < cols ? norm_weight[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < STAGE_BATCH; ++j) squares += (double)(v[j] * v[j]);
        const double total = block_sum_f64(squares, scratch);
        const float scale = 1.0f / sqrtf((float)(total / (double)cols) + eps);
#pragma unroll
        for (int j = 0; j < STAGE_BATCH; ++j) v[j] = (v[j] * scale) * w[j];
        quantize_batch(v, threadIdx.x, cols, xq, xd, xs, xsum);
    } else {
        const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
        for (int i0 = threadIdx.x; i0 < cols; i0 += STAGE_BATCH * blockDim.x) {
            float v[STAGE_BATCH];
#pragma unroll
            for (int j = 0; j < STAGE_BATCH; ++j) {
                const int i = i0 + j * blockDim.x;
                v[j] = i < cols ? staged_input(x, norm_weight, scale, i) : 0.0f;
            }
            quantize_batch(v, i0, cols, xq, xd, xs, xsum);
        }
    }
    __syncthreads();
    StagedQ8 staged = {xq, xd, xs, xsum};
    return staged;
}

// The bytes of one block of 32 weights: Q4 blocks are 16 bytes of quants, Q8_0
// blocks 32; the scale is one f16 d (Q4_0, Q8_0) or d and m (Q4_1).
template <int T>
struct WeightBlock {
    uint4 lo, hi;  // hi: Q8_0 only
    u32 scale;
};

template <int T>
__device__ __forceinline__ WeightBlock<T> load_block(const u8* qs, const u8* sc, u64 block) {
    WeightBlock<T> w;
    if (T == TYPE_Q8_0) {
        const uint4* p = (const uint4*)(qs + block * 32);
        w.lo = p[0];
        w.hi = p[1];
        w.scale = ((const u16*)sc)[block];
    } else {
        w.lo = *(const uint4*)(qs + block * 16);
        w.scale = T == TYPE_Q4_1 ? ((const u32*)sc)[block] : ((const u16*)sc)[block];
    }
    return w;
}

// How a row's f32 sum is ordered: the CPU backend's (llama.cpp's AVX2)
// rounding, so that both backends compute the same bits.
//   ORDER_LANES   (ggml_vec_dot_*_q8_*): 8 lanes, lane l holding the integer
//                 sum of the products of values 4l..4l+3 of a block; per
//                 block acc_l = fma(dw·da, lane_l, acc_l); then hsum_float_8
//                 (lane l plus lane l+4, then l plus l+2, then 0 plus 1) and,
//                 for Q4_1, plus Σ m·s (its own fma chain over the blocks).
//   ORDER_BLOCKS  (the repacked Q4_0 kernels, which llama.cpp and the CPU
//                 backend use for Q4_0 matrices of a multiple of 8 rows): per
//                 block acc = fma(the block's integer dot, dw·da, acc).
#define ORDER_LANES 0
#define ORDER_BLOCKS 1

// Floats one block adds to a row's chains: its lane sums (exact integers, as
// f32; one for ORDER_BLOCKS), dw·da and, for Q4_1, m.
template <int T, int ORDER>
struct Terms {
    static constexpr int CHAINS = ORDER == ORDER_BLOCKS ? 1 : 8;
    static constexpr int SCALE = CHAINS;      // index of dw·da
    static constexpr int MIN = CHAINS + 1;    // index of m (Q4_1)
    static constexpr int COUNT = CHAINS + 1 + (T == TYPE_Q4_1 ? 1 : 0);
};

// The integer sums of values 4l..4l+3 of one block against staged Q8 x block b.
// Byte j of a Q4 block holds value j in its low nibble and value j + 16 in its
// high one, so lanes 0-3 are low nibbles and lanes 4-7 high ones.
template <int T>
__device__ __forceinline__ void lane_sums(const WeightBlock<T>& w, const StagedQ8& x, int b,
                                          int* lanes) {
    const int4 lo = *(const int4*)(x.q + b * 32);
    const int4 hi = *(const int4*)(x.q + b * 32 + 16);
    const int xl[4] = {lo.x, lo.y, lo.z, lo.w}, xh[4] = {hi.x, hi.y, hi.z, hi.w};
    const u32 wl[4] = {w.lo.x, w.lo.y, w.lo.z, w.lo.w};
    if (T == TYPE_Q8_0) {
        const u32 wh[4] = {w.hi.x, w.hi.y, w.hi.z, w.hi.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            lanes[j] = __dp4a((int)wl[j], xl[j], 0);
            lanes[j + 4] = __dp4a((int)wh[j], xh[j], 0);
        }
        return;
    }
    const u32 m = 0x0f0f0f0fu;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 low = wl[j] & m, high = (wl[j] >> 4) & m;
        if (T == TYPE_Q4_0) {  // q - 8, as signed bytes
            low = __vsub4(low, 0x08080808u);
            high = __vsub4(high, 0x08080808u);
        }
        lanes[j] = __dp4a((int)low, xl[j], 0);
        lanes[j + 4] = __dp4a((int)high, xh[j], 0);
    }
}

// Writes block b's terms for the chains: term e of the block a group's lane
// `slot` holds goes to at[e·LPR + slot], so each chain's terms of a round lie
// side by side.
template <int T, int ORDER, int LPR>
__device__ __forceinline__ void store_terms(const WeightBlock<T>& w, const StagedQ8& x, int b,
                                            float* at) {
    typedef Terms<T, ORDER> K;
    int lanes[8];
    lane_sums<T>(w, x, b, lanes);
    if (ORDER == ORDER_BLOCKS) {
        int total = 0;
#pragma unroll
        for (int l = 0; l < 8; ++l) total += lanes[l];
        at[0] = (float)total;
    } else {
#pragma unroll
        for (int l = 0; l < 8; ++l) at[l * LPR] = (float)lanes[l];
    }
    at[K::SCALE * LPR] = __fmul_rn(h2f((u16)(w.scale & 0xffff)), x.d[b]);
    if (T == TYPE_Q4_1) at[K::MIN * LPR] = h2f((u16)(w.scale >> 16));
}

// The weights one lane loads at a time for NR rows: blocks base + u·LPR of
// each row, u < UNROLL (64 bytes of quants per lane and row, 32 per row of a
// pair, to bound registers; 128 for single Q4 rows on whole warps, so the
// MLP's down projection (176 blocks a row in TinyLlama) loads in one round,
// and on groups of 8 lanes, the quantized types' only width).
// LPR is the number of lanes sharing a row.
template <int T, int NR, int LPR>
struct RowChunk {
    static constexpr int UNROLL = (T == TYPE_Q8_0 ? GEMV_UNROLL / 2 : GEMV_UNROLL) / NR *
                                  (T != TYPE_Q8_0 && NR == 1 && LPR == WARP ? 2 : 1) *
                                  (LPR == 8 ? 2 : 1);
    WeightBlock<T> w[NR][UNROLL];
};

template <int T, int NR, int LPR>
__device__ __forceinline__ void load_chunk(const u8* qs, const u8* sc, const u64* rows,
                                           int blocks, int base, RowChunk<T, NR, LPR>& chunk) {
#pragma unroll
    for (int u = 0; u < RowChunk<T, NR, LPR>::UNROLL; ++u) {
        const int b = base + u * LPR;
#pragma unroll
        for (int r = 0; r < NR; ++r)
            if (b < blocks) chunk.w[r][u] = load_block<T>(qs, sc, rows[r] * blocks + b);
    }
}

// Floats of a warp's hand-off: its blocks' terms (Terms) per row of a pair,
// group and lane (`handoff_floats` in ops/gemv.rs).
template <int T, int ORDER, int NR>
__device__ __forceinline__ constexpr int handoff_floats() {
    return NR * WARP * Terms<T, ORDER>::COUNT;
}

// The chains of one group of LPR lanes (one output row, or a gate/up pair):
// lane c < CHAINS walks chain c of every row of the pair; Q4_1's Σ m·s
// chains are walked by lane 0 beside its own.
template <int NR>
struct Chains {
    float acc[NR];
    float min_terms[NR];
};

// Adds the blocks of one round of a chunk to the chains: lane `sub` of the
// group holds block first + sub (the u-th block of each of its rows in
// `chunk`); their terms go through the warp's hand-off in shared memory and
// the chain lanes add them in block order. Every lane of the warp calls this
// (it synchronises the warp).
template <int T, int ORDER, int NR, int LPR>
__device__ __forceinline__ void add_round(const RowChunk<T, NR, LPR>& chunk, int u,
                                          const StagedQ8& x, int blocks, int first,
                                          float* handoff, Chains<NR>& c) {
    typedef Terms<T, ORDER> K;
    const int lane = threadIdx.x % WARP, sub = lane % LPR;
    // This group's terms: [row of the pair][term][slot].
    float* group = handoff + (lane / LPR) * NR * K::COUNT * LPR;
    const int b = first + sub;
#pragma unroll
    for (int r = 0; r < NR; ++r)
        if (b < blocks)
            store_terms<T, ORDER, LPR>(chunk.w[r][u], x, b, group + r * K::COUNT * LPR + sub);
    __syncwarp();
    if (sub < K::CHAINS) {
#pragma unroll
        for (int r = 0; r < NR; ++r) {
            const float* terms = group + r * K::COUNT * LPR;
#pragma unroll
            for (int q = 0; q < LPR / 4; ++q) {
                const float4 lanes = *(const float4*)(terms + sub * LPR + 4 * q);
                const float4 scales = *(const float4*)(terms + K::SCALE * LPR + 4 * q);
                const float l4[4] = {lanes.x, lanes.y, lanes.z, lanes.w};
                const float s4[4] = {scales.x, scales.y, scales.z, scales.w};
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    if (first + 4 * q + i < blocks) c.acc[r] = fmaf(s4[i], l4[i], c.acc[r]);
            }
            if (T == TYPE_Q4_1 && sub == 0) {
#pragma unroll
                for (int j = 0; j < LPR; ++j)
                    if (first + j < blocks)
                        c.min_terms[r] = fmaf(terms[K::MIN * LPR + j], x.s[first + j], c.min_terms[r]);
            }
        }
    }
    __syncwarp();
}

// The chunk's blocks (first chunk block `start`, rounds of LPR blocks) added
// to the chains in order.
template <int T, int ORDER, int NR, int LPR>
__device__ __forceinline__ void add_chunk(const RowChunk<T, NR, LPR>& chunk, const StagedQ8& x,
                                          int blocks, int start, float* handoff, Chains<NR>& c) {
#pragma unroll
    for (int u = 0; u < RowChunk<T, NR, LPR>::UNROLL; ++u)
        add_round<T, ORDER, NR, LPR>(chunk, u, x, blocks, start + u * LPR, handoff, c);
}

// The row sums from the chains, on lane 0 of each group: hsum_float_8's
// order over lanes 0-7 (a butterfly over lanes 4, 2, 1 apart adds the same
// pairs), then Q4_1's Σ m·s. Every lane of the warp calls this.
template <int T, int ORDER, int NR>
__device__ __forceinline__ void finish_chains(const Chains<NR>& c, float* out) {
#pragma unroll
    for (int r = 0; r < NR; ++r) {
        float sum = c.acc[r];
        if (ORDER == ORDER_LANES) {
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 4));
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 2));
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 1));
        }
        if (T == TYPE_Q4_1) sum = __fadd_rn(sum, c.min_terms[r]);
        out[r] = sum;
    }
}

// Σ over NR quantized rows (rows[i]) against staged Q8 x in the CPU
// backend's order (ORDER), the LPR lanes of this lane's group loading blocks
// sub, sub + LPR, ...; `first` holds the lane's first chunk, loaded earlier
// (before staging, so the two waits overlap). `handoff` is the warp's
// (handoff_floats). Every lane of the warp must call this (the hand-off
// synchronises the warp); lanes of a row that does not exist pass valid =
// false. Lane 0 of each group gets the sums.
template <int T, int ORDER, int NR, int LPR>
__device__ __forceinline__ void rows_dot_q8(const u8* qs, const u8* sc, const u64* rows,
                                            int cols, const StagedQ8& x,
                                            const RowChunk<T, NR, LPR>& first, bool valid,
                                            float* handoff, float* out) {
    const int sub = threadIdx.x % LPR;
    const int total = cols / 32, blocks = valid ? total : 0;
    constexpr int STEP = RowChunk<T, NR, LPR>::UNROLL * LPR;
    Chains<NR> c;
#pragma unroll
    for (int r = 0; r < NR; ++r) c.acc[r] = c.min_terms[r] = 0.0f;
    add_chunk<T, ORDER, NR, LPR>(first, x, blocks, 0, handoff, c);
    // The bound is the same for the whole warp: the hand-off needs every lane.
    for (int start = STEP; start < total; start += STEP) {
        RowChunk<T, NR, LPR> chunk;
        load_chunk<T, NR, LPR>(qs, sc, rows, blocks, start + sub, chunk);
        add_chunk<T, ORDER, NR, LPR>(chunk, x, blocks, start, handoff, c);
    }
    finish_chains<T, ORDER, NR>(c, out);
}

// Σ over NR float rows against f32 x, lanes striding over 16-value units.
template <int T, int NR>
__device__ __forceinline__ void rows_dot_f(const u8* qs, const u64* rows, int cols,
                                           const float* xf, float* out) {
    const int lane = threadIdx.x % WARP;
#pragma unroll
    for (int r = 0; r < NR; ++r) {
        float acc = 0.0f;
        for (int u = lane; u < cols / 16; u += WARP) acc += unit_dot<T>(qs, 0, rows[r], cols, u, xf);
        out[r] = warp_sum(acc);
    }
}

// RoPE and the K/V cache write folded into the fused QKV projection (decode):
// rows [0, q_width) are queries, then keys, then values, each head's adjacent
// pairs rotated as rope_store_kv does (same arithmetic).
//
// In a batched launch (BATCHED below), sequence blockIdx.y has its position at
// position[blockIdx.y] and its caches in the tables (k_cache and v_cache are
// then unused).
struct RopeStore {
    const float2* cos_sin;  // [position][head_dim/2] (cos, sin)
    const int* position;
    int q_width, kv_width, head_dim, capacity;
    u16* k_cache;  // [kv_head][capacity][head_dim]
    u16* v_cache;
    u16* const* k_tables;  // batched: one key cache per sequence
    u16* const* v_tables;
};

// Rotates the pair of rows (r, r + 1) of the QKV output `y` in place (queries),
// or writes it to the cache (keys rotated, values as they are).
template <bool BATCHED>
__device__ void rope_store_pair(const RopeStore& rope, float* y, int r, float x0, float x1) {
    const int pos = BATCHED ? rope.position[blockIdx.y] : *rope.position;
    const int pairs = rope.head_dim / 2;
    const int within = r % rope.head_dim;
    u16* const k_cache = BATCHED ? rope.k_tables[blockIdx.y] : rope.k_cache;
    u16* const v_cache = BATCHED ? rope.v_tables[blockIdx.y] : rope.v_cache;
    if (r >= rope.q_width + rope.kv_width) {  // values
        const int v = r - rope.q_width - rope.kv_width;
        const u64 at = ((u64)(v / rope.head_dim) * rope.capacity + pos) * rope.head_dim + within;
        v_cache[at] = f2h(x0);
        v_cache[at + 1] = f2h(x1);
        return;
    }
    const float2 cs = rope.cos_sin[(u64)pos * pairs + within / 2];
    const float r0 = fmaf(x0, cs.x, -(x1 * cs.y)), r1 = fmaf(x0, cs.y, x1 * cs.x);
    if (r < rope.q_width) {
        y[r] = r0;
        y[r + 1] = r1;
    } else {
        const int k = r - rope.q_width;
        const u64 at = ((u64)(k / rope.head_dim) * rope.capacity + pos) * rope.head_dim + within;
        k_cache[at] = f2h(r0);
        k_cache[at + 1] = f2h(r1);
    }
}

// The weights of the next matrix to ask L2 for (bytes of quants and scales
// from the start of each).
struct NextWeights {
    const u8* quants;
    int quant_bytes;
    const u8* scales;
    int scale_bytes;
};

// MODE 0: plain, 1: residual, 2: norm, 3: norm + swiglu, 4: norm + RoPE + cache
// write. Each group of LPR lanes takes one output row at a time (for swiglu its
// gate and up rows together; float types use whole warps); a block's groups
// take consecutive rows, so with RoPE each pair of rows is in one block.
//
// BATCHED (the gemv_batched_* kernels): gridDim.y sequences decode at once; x
// and y of sequence blockIdx.y lie `cols` and `rows` values further on per
// sequence. Each sequence's numbers are exactly those of a launch for it
// alone, and the weights come from L2 after the first read.
//
// With `l2_prefetch` (see ops/mod.rs), before waiting for the previous kernel
// the norm weight and (RoPE) this position's cos/sin row are requested into L2:
// staging and the rotation read them right after the wait, and little else of
// theirs is in L2 by then (a token streams all the weights through it). At
// level 2 the grid also requests `next`, the first weights of the matrix the
// step multiplies by next, whose blocks can often start only when this
// kernel's leave their multiprocessors.
template <int T, int ORDER, int MODE, int LPR, bool BATCHED>
__device__ void gemv(const u8* qs, const u8* sc, const float* x, const float* norm_weight,
                     float eps, float* y, int rows, int cols, RopeStore rope, int l2_prefetch,
                     NextWeights next) {
    if (BATCHED) {
        x += (u64)blockIdx.y * cols;
        y += (u64)blockIdx.y * rows;
    }
    extern __shared__ float4 shared[];
    __shared__ double scratch[32];
    __shared__ float pair_rows[GEMV_MAX_THREADS / 8];
    const float* weight = MODE >= 2 ? norm_weight : 0;
    constexpr bool quantized = T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q8_0;
    const float* xf = (const float*)shared;
    constexpr int NR = MODE == 3 ? 2 : 1;
    constexpr int GROUPS = WARP / LPR;  // rows a warp takes at once
    const int group = threadIdx.x / LPR, sub = threadIdx.x % LPR;
    // The weight rows of output row r (for swiglu: gate and up).
    auto rows_of = [&](int r, u64* picked) {
        picked[0] = (u64)r;
        if (NR == 2) picked[NR - 1] = (u64)(r + rows);
    };
    // Each row's first weights are requested one row ahead: the first row's
    // before x is staged, the next row's before this row's products, so a warp
    // rarely waits for memory.
    const int per_block = blockDim.x / WARP * GROUPS;  // rows in flight per block
    const int first_base = blockIdx.x * per_block, stride = gridDim.x * per_block;
    RowChunk<T, NR, LPR> chunk;
    if (quantized && first_base + group < rows) {
        u64 picked[NR];
        rows_of(first_base + group, picked);
        load_chunk<T, NR, LPR>(qs, sc, picked, cols / 32, sub, chunk);
    }
    if (l2_prefetch >= 2 && (!BATCHED || blockIdx.y == 0)) {
        prefetch_share_l2(next.quants, next.quant_bytes);
        prefetch_share_l2(next.scales, next.scale_bytes);
    }
    if (l2_prefetch && MODE >= 2) {
        prefetch_l2(norm_weight, (u64)cols * 4);
        // The position comes from the host (copied before the step's kernels
        // run), so it may be read before the wait.
        if (MODE == 4) {
            const int pos = BATCHED ? rope.position[blockIdx.y] : *rope.position;
            prefetch_l2(rope.cos_sin + (u64)pos * (rope.head_dim / 2), (u64)rope.head_dim * 4);
        }
    }
    // Quantized GEMVs are bound by memory latency and gain from the next
    // kernel starting early; float GEMVs are busy enough that a waiting next
    // kernel beside them costs more than it saves (measured: F16 decode at
    // half speed), so they let it start only when they finish.
    if (quantized) allow_next_kernel();
    wait_for_previous_kernel();
    StagedQ8 xq;
    if (quantized)
        xq = stage_q8(x, weight, eps, cols, shared, scratch);
    else
        stage_f32(x, weight, eps, cols, (float*)shared, scratch);
    for (int base = first_base; base < rows; base += stride) {
        const int r = base + group;
        float dot[NR];
        u64 picked[NR];
        rows_of(r, picked);
        // The residual's old value is read before the products, so its
        // latency overlaps them instead of following them.
        const float prior = MODE == 1 && sub == 0 && r < rows ? y[r] : 0.0f;
        if constexpr (quantized) {
            RowChunk<T, NR, LPR> next;
            if (r + stride < rows) {
                u64 ahead[NR];
                rows_of(r + stride, ahead);
                load_chunk<T, NR, LPR>(qs, sc, ahead, cols / 32, sub, next);
            }
            // The warps' hand-offs follow the staged x (16-byte aligned).
            float* handoff = (float*)shared + (cols + cols / 32 * 12 + 15) / 16 * 4 +
                             threadIdx.x / WARP * handoff_floats<T, ORDER, NR>();
            rows_dot_q8<T, ORDER, NR, LPR>(qs, sc, picked, cols, xq, chunk, r < rows, handoff,
                                           dot);
            chunk = next;
        } else if (r < rows) {  // LPR is 32: r is the same in the whole warp
            rows_dot_f<T, NR>(qs, picked, cols, xf, dot);
        }
        if (MODE == 4) {
            // Whole blocks reach these barriers: the loop bound is per block.
            if (sub == 0) pair_rows[group] = r < rows ? dot[0] : 0.0f;
            __syncthreads();
            const int pair = threadIdx.x;
            if (pair < per_block / 2 && base + 2 * pair + 1 < rows)
                rope_store_pair<BATCHED>(rope, y, base + 2 * pair, pair_rows[2 * pair],
                                pair_rows[2 * pair + 1]);
            __syncthreads();
        } else if (sub == 0 && r < rows) {
            if (MODE == 3)
                y[r] = __fmul_rn(r < rows - rows % 8 ? silu(dot[0]) : silu_libm(dot[0]),
                                 dot[NR - 1]);
            else
                y[r] = MODE == 1 ? __fadd_rn(prior, dot[0]) : dot[0];
        }
    }
}

// The kernels gemv_<mode>_<type>_l<LPR>: float types with whole warps per row,
// quantized types with 8, 16 or 32 lanes per row (the host picks by row length);
// gemv_batched_<mode>_<type>_l<LPR> take per-sequence cache tables too.
#define GEMV_KERNEL(KIND, MODE, NAME, T, ORDER, LPR)                                         \
    extern "C" __global__ void __launch_bounds__(GEMV_MAX_THREADS)                          \
        gemv_##KIND##NAME##_l##LPR(const u8* qs, const u8* sc, const float* x,               \
                                   const float* norm_weight, float eps, float* y, int rows,  \
                                   int cols, const float2* cos_sin, const int* position,     \
                                   int q_width, int kv_width, int head_dim, int capacity,    \
                                   u16* k_cache, u16* v_cache, int l2_prefetch,              \
                                   const u8* next_qs, int next_qs_bytes, const u8* next_sc,  \
                                   int next_sc_bytes) {                                      \
        RopeStore rope = {cos_sin, position, q_width,  kv_width, head_dim,                   \
                          capacity, k_cache, v_cache, 0,        0};                          \
        NextWeights next = {next_qs, next_qs_bytes, next_sc, next_sc_bytes};                 \
        gemv<T, ORDER, MODE, LPR, false>(qs, sc, x, norm_weight, eps, y, rows, cols, rope,         \
                                  l2_prefetch, next);                                        \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(GEMV_MAX_THREADS)                          \
        gemv_batched_##KIND##NAME##_l##LPR(                                                  \
            const u8* qs, const u8* sc, const float* x, const float* norm_weight, float eps, \
            float* y, int rows, int cols, const float2* cos_sin, const int* position,        \
            int q_width, int kv_width, int head_dim, int capacity, u16* const* k_tables,     \
            u16* const* v_tables, int l2_prefetch, const u8* next_qs, int next_qs_bytes,     \
            const u8* next_sc, int next_sc_bytes) {                                          \
        RopeStore rope = {cos_sin, position, q_width, kv_width, head_dim,                    \
                          capacity, 0,       0,       k_tables, v_tables};                   \
        NextWeights next = {next_qs, next_qs_bytes, next_sc, next_sc_bytes};                 \
        gemv<T, ORDER, MODE, LPR, true>(qs, sc, x, norm_weight, eps, y, rows, cols, rope,          \
                                 l2_prefetch, next);                                         \
    }
#define GEMV_KERNELS(NAME, T, ORDER, LPR)             \
    GEMV_KERNEL(, 0, NAME, T, ORDER, LPR)             \
    GEMV_KERNEL(residual_, 1, NAME, T, ORDER, LPR)    \
    GEMV_KERNEL(norm_, 2, NAME, T, ORDER, LPR)        \
    GEMV_KERNEL(norm_swiglu_, 3, NAME, T, ORDER, LPR) \
    GEMV_KERNEL(norm_rope_, 4, NAME, T, ORDER, LPR)

// The instantiations are added per weight type by compile.rs: each type's GEMVs
// are one translation unit, and the units compile in parallel.
