// Batched GEMVs on tensor cores (the decode of many streams, a short
// prompt's rows): y_s = W·x_s for up to MMA_SEQS sequences a launch, each
// sequence's numbers those of a lone GEMV (gemv_tiles in gemv.cu). The
// integer products of a block of 32 weights and 32 staged x values are exact
// whatever computes them, so they come from int8 mma.sync; each (row,
// sequence) sum then takes the CPU's f32 steps (ORDER_* in gemv.cu) in
// registers, because a thread holds the same entries of the MMA's output
// from block to block and walks the blocks in order.
//
// Two launches per product:
//   mma_stage_<name>       block s stages sequence s's x as Q8 blocks
//                          (stage_q8: normalised, any post-norm branch
//                          added) and copies them into a workspace laid out
//                          for the MMA's fragments (MmaWorkspace);
//   gemv_mma_<kind><name>  block i takes output rows 16i..16i+15 (and for
//                          SwiGLU or GeGLU their up rows) for every
//                          sequence: warp (span, w) the span's 16 rows of
//                          sequences 8w..8w+7, A being the weights (16 rows
//                          × 32 values) and B the staged x.
// Types: Q4_0 in whole blocks (ORDER_BLOCKS: one m16n8k32 gives a block's
// dot products for 16 rows and 8 sequences), Q4_1 and Q8_0 in lanes
// (ORDER_LANES: an m16n8k16 whose B holds two sequences' values block-
// diagonally, one column per 4-value lane, gives four of a block's eight
// lane sums for 16 rows and 2 sequences; a second gives the other four).

// Sequences a launch at most (the workspace's capacity).
#define MMA_SEQS 64
// Sequences a warp: one n8 tile (ORDER_BLOCKS), four pairs (ORDER_LANES).
#define MMA_WARP_SEQS 8
// Output rows a block: one m16 tile.
#define MMA_ROWS 16
// The ring in shared memory: MMA_STAGES stages of `stage_blocks` blocks of
// 32 values (at most MMA_STAGE_BLOCKS; the host's choice, see
// ops/gemv_mma.rs); the block's threads copy stage i + MMA_STAGES - 1 while
// its warps compute stage i.
#define MMA_STAGES 4
#define MMA_STAGE_BLOCKS 8

// The workspace for `padded` sequences (a multiple of MMA_WARP_SEQS) of
// `blocks` blocks of 32 values, per (block b, sequence s), entry
// e = b·padded + s:
//   q    32 bytes at 32e: word pair t (bytes 8t..8t+7) holds x's words t and
//        t + 4 (values 4t..4t+3 and 16+4t..16+4t+3), what thread t of a
//        fragment takes;
//   d    the block's f16-rounded scale (f32);
//   aux  Q4_0: the exact Σq (int bits); Q4_1: the f16-rounded d·Σq (Q8_1's s).
// `workspace_bytes` in ops/gemv_mma.rs: 40 bytes an entry.
struct MmaWorkspace {
    u8* q;
    float* d;
    float* aux;
};

__device__ __forceinline__ MmaWorkspace mma_workspace_at(u8* work, int blocks, int padded) {
    const u64 entries = (u64)blocks * padded;
    MmaWorkspace at = {work, (float*)(work + entries * 32), (float*)(work + entries * 36)};
    return at;
}

// Stages sequence blockIdx.y's x (normalised when norm_weight != 0, after
// adding any post-norm branch) into the workspace; blocks past `sequences`
// (the padding up to a whole warp's sequences) write zeros, which add
// nothing to any sum.
template <int T>
__device__ void mma_stage(const float* x, const float* norm_weight, float eps, int cols,
                          int sequences, u8* work, PreAdd pre) {
    extern __shared__ float4 shared[];
    __shared__ double scratch[32];
    const int s = blockIdx.y, padded = gridDim.y, blocks = cols / 32;
    const MmaWorkspace out = mma_workspace_at(work, blocks, padded);
    allow_next_kernel();
    // The workspace is read by the product before this one: written only
    // once that has finished.
    wait_for_previous_kernel();
    if (s >= sequences) {
        for (int i = threadIdx.x; i < blocks * 4; i += blockDim.x)
            *(uint2*)(out.q + ((u64)(i / 4) * padded + s) * 32 + 8 * (i % 4)) = make_uint2(0, 0);
        for (int b = threadIdx.x; b < blocks; b += blockDim.x)
            out.d[(u64)b * padded + s] = out.aux[(u64)b * padded + s] = 0.0f;
        return;
    }
    const StagedQ8 staged = stage_q8(x + (u64)s * cols, pre_add_of_sequence(pre, cols),
                                     norm_weight, eps, cols, shared, scratch);
    for (int i = threadIdx.x; i < blocks * 4; i += blockDim.x) {
        const int b = i / 4, t = i % 4;
        const u32* words = (const u32*)(staged.q + b * 32);
        *(uint2*)(out.q + ((u64)b * padded + s) * 32 + 8 * t) = make_uint2(words[t], words[t + 4]);
    }
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
        out.d[(u64)b * padded + s] = staged.d[b];
        out.aux[(u64)b * padded + s] =
            T == TYPE_Q4_0 ? __int_as_float(staged.sum[b]) : staged.s[b];
    }
}

// D = C + A·B, A 16×32 int8 (weights: unsigned nibbles, or Q8_0's signed
// values), B 32×8 signed int8, C and D int32; fragments as the PTX ISA lays
// them out (g = lane / 4, t = lane % 4): a0 A[g][4t..], a1 A[g+8][4t..],
// a2 A[g][16+4t..], a3 A[g+8][16+4t..]; b0 B[4t..][g], b1 B[16+4t..][g];
// c0 C[g][2t], c1 C[g][2t+1], c2 C[g+8][2t], c3 C[g+8][2t+1].
template <bool UNSIGNED_A>
__device__ __forceinline__ void mma_k32(int (&c)[4], u32 a0, u32 a1, u32 a2, u32 a3, u32 b0,
                                        u32 b1) {
    if (UNSIGNED_A)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// As mma_k32 for k = 16: a0 A[g][4t..], a1 A[g+8][4t..]; b0 B[4t..][g].
template <bool UNSIGNED_A>
__device__ __forceinline__ void mma_k16(int (&c)[4], u32 a0, u32 a1, u32 b0) {
    if (UNSIGNED_A)
        asm("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(b0));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
            "{%0,%1,%2,%3};"
            : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
            : "r"(a0), "r"(a1), "r"(b0));
}

// Bytes a row of weights takes in a stage: a block's quants (Q8_0's 32
// padded to 48, so that threads g and g + 4 of a fragment read different
// banks).
template <int T>
__device__ __forceinline__ constexpr int ring_row_bytes() {
    return T == TYPE_Q8_0 ? 48 : 16;
}

// Where one block's data lies in the ring: the quants of the block's rows
// (span by span, MMA_ROWS rows each, ring_row_bytes apart), their scale
// records (4 bytes each: Q4_1's d and m, or the aligned word holding the
// f16 d), then x of the padded sequences in the workspace's layout (q: 32
// bytes each, then d, then aux).
struct RingBlock {
    const u8* weights;
    const u32* scales;
    const u8* q;
    const float* d;
    const float* aux;
};

template <int T>
__device__ __forceinline__ int mma_block_bytes(int spans, int padded) {
    return spans * MMA_ROWS * (ring_row_bytes<T>() + 4) + padded * 40;
}

// Block `slot` of the ring (of stage slot / stage_blocks).
template <int T>
__device__ __forceinline__ RingBlock ring_block_at(const u8* ring, int slot, int spans,
                                                 int padded) {
    const u8* base = ring + slot * mma_block_bytes<T>(spans, padded);
    const u8* scales = base + spans * MMA_ROWS * ring_row_bytes<T>();
    const u8* q = scales + spans * MMA_ROWS * 4;
    RingBlock at = {base, (const u32*)scales, q, (const float*)(q + padded * 32),
                   (const float*)(q + padded * 36)};
    return at;
}

// A copy a thread makes of every block: 16 bytes, or the aligned 4-byte
// word holding a scale record (`small`), from `src + b·stride` (block b) to
// `offset` in the block's part of the ring. Weights and their scales are
// written by no kernel, so they may be copied before the wait for the
// staging (`weights`).
struct MmaCopy {
    const u8* src;
    u32 stride;
    int offset;
    bool small, weights;
};

// The most copies a thread makes of a block: 4·spans·padded threads for
// 16·spans·(2 or 3) + 2.5·padded copies: at most 3 a thread, the most at
// padded = 8 (checked for every batch in ops/gemv_mma.rs's tests).
#define MMA_COPIES 3

// What thread threadIdx.x copies of every block: the quants of the block's
// rows (rows past the end read the last row), their scale records, then
// x's values, d and aux. Returns how many.
template <int T>
__device__ __forceinline__ int mma_copies(const u8* qs, const u8* sc, const MmaWorkspace& x,
                                          int rows, int start, int blocks, int padded, int spans,
                                          MmaCopy (&copies)[MMA_COPIES]) {
    constexpr int CHUNKS = T == TYPE_Q8_0 ? 2 : 1;  // 16-byte chunks of a row's block
    constexpr int SCALE_BYTES = T == TYPE_Q4_1 ? 4 : 2;
    const int span_rows = spans * MMA_ROWS;
    const int weight_chunks = span_rows * CHUNKS, q_chunks = padded * 2;
    const int scale_chunks = padded / 4;  // of d, and of aux
    const int total = weight_chunks + span_rows + q_chunks + 2 * scale_chunks;
    const int scales_at = span_rows * ring_row_bytes<T>(), x_at = scales_at + span_rows * 4;
    int count = 0;
#pragma unroll
    for (int j = 0; j < MMA_COPIES; ++j) {
        int k = threadIdx.x + j * blockDim.x;
        if (k >= total) break;
        MmaCopy c;
        c.small = false;
        c.weights = k < weight_chunks + span_rows;
        if (c.weights) {
            const bool scale = k >= weight_chunks;
            const int ring_row = scale ? k - weight_chunks : k / CHUNKS;  // span · MMA_ROWS + row
            const int span = ring_row / MMA_ROWS;
            const int row = min(start + ring_row % MMA_ROWS, rows - 1);
            const u64 block0 = ((u64)span * rows + row) * blocks;
            if (scale) {
                c.src = sc + block0 * SCALE_BYTES;
                c.stride = SCALE_BYTES;
                c.offset = scales_at + 4 * ring_row;
                c.small = true;
            } else {
                c.src = qs + block0 * (16 * CHUNKS) + 16 * (k % CHUNKS);
                c.stride = 16 * CHUNKS;
                c.offset = ring_row * ring_row_bytes<T>() + 16 * (k % CHUNKS);
            }
        } else if ((k -= weight_chunks + span_rows) < q_chunks) {
            c.src = x.q + 16 * k;
            c.stride = padded * 32;
            c.offset = x_at + 16 * k;
        } else if ((k -= q_chunks) < scale_chunks) {
            c.src = (const u8*)(x.d + 4 * k);
            c.stride = padded * 4;
            c.offset = x_at + padded * 32 + 16 * k;
        } else {
            k -= scale_chunks;
            c.src = (const u8*)(x.aux + 4 * k);
            c.stride = padded * 4;
            c.offset = x_at + padded * 36 + 16 * k;
        }
        copies[j] = c;
        count = j + 1;
    }
    return count;
}

// Starts this thread's copies of the blocks of stage `stage` (the weights'
// and scales', x's, or both) into ring stage `stage % MMA_STAGES`.
template <int T>
__device__ __forceinline__ void mma_fetch(const MmaCopy (&copies)[MMA_COPIES], int count,
                                          int stage, int stage_blocks, int blocks, int spans,
                                          int padded, u8* ring, bool weights, bool x) {
    const int block_bytes = mma_block_bytes<T>(spans, padded);
    u8* base = ring + stage % MMA_STAGES * stage_blocks * block_bytes;
#pragma unroll
    for (int j = 0; j < MMA_COPIES; ++j) {
        if (j >= count) break;
        const MmaCopy& c = copies[j];
        if (c.weights ? !weights : !x) continue;
#pragma unroll
        for (int i = 0; i < MMA_STAGE_BLOCKS; ++i) {
            const int b = stage * stage_blocks + i;
            if (i >= stage_blocks || b >= blocks) break;
            u8* dst = base + i * block_bytes + c.offset;
            const u8* src = c.src + (u64)b * c.stride;
            // Q4_0's and Q8_0's 2-byte records: the aligned word holding
            // one (the scales carry 4 bytes of padding past the last); its
            // half is picked on use (mma_scale).
            if (c.small)
                copy_async<4>(dst, (const u8*)((u64)src & ~(u64)3));
            else
                copy_async<16>(dst, src);
        }
    }
}

// The scale record (Q4_1: d | m << 16; else d) of row `row` of the ring's
// block, whose records start at `record` in the scales (which half of the
// copied word a 2-byte record is).
template <int T>
__device__ __forceinline__ u32 mma_scale(const RingBlock& at, int row, u64 record) {
    const u32 word = at.scales[row];
    if (T == TYPE_Q4_1) return word;
    return (word >> (16 * (record & 1))) & 0xffff;
}

// A's word for lane group 4m + t of row `row` of the stage's span: Q4 nibble
// word t (values 4t..4t+3 low, 16+4t.. high), Q8_0 words t and t + 4.
template <int T>
__device__ __forceinline__ u32 lane_word(const RingBlock& at, int row, int t, int m) {
    const u32* words = (const u32*)(at.weights + row * ring_row_bytes<T>());
    if (T == TYPE_Q8_0) return words[t + 4 * m];
    return m ? (words[t] >> 4) & 0x0f0f0f0fu : words[t] & 0x0f0f0f0fu;
}

// The chains a thread keeps. ORDER_BLOCKS: the C entries, rows g and g + 8
// × sequences 2t and 2t + 1 of the warp's. ORDER_LANES: per sequence pair p
// (sequence 2p + t/2 of the warp's) and row r, lanes 4m + 2(t & 1) + e for
// m, e in {0, 1}, and Q4_1's Σ m·s chain.
template <int ORDER>
struct MmaChains {
    static constexpr int PAIRS = MMA_WARP_SEQS / 2;
    static constexpr int GROUPS = ORDER == ORDER_BLOCKS ? 1 : PAIRS;
    float acc[GROUPS][2][2][2];
    float mins[PAIRS][2];

    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int i = 0; i < GROUPS; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j / 4][j / 2 % 2][j % 2] = 0.0f;
#pragma unroll
        for (int p = 0; p < PAIRS; ++p) mins[p][0] = mins[p][1] = 0.0f;
    }
};

// One block's step of every chain of the warp's sequences s0.. (indices into
// the stage's padded sequences) for rows `row` and `row + 8` of the stage's
// weights, whose scale records are `scale`.
template <int T, int ORDER>
__device__ __forceinline__ void mma_step(const RingBlock& at, int row, uint2 scale, int s0, int g,
                                         int t, MmaChains<ORDER>& chains) {
    constexpr bool UNSIGNED_A = T != TYPE_Q8_0;
    const float dw[2] = {h2f((u16)(scale.x & 0xffff)), h2f((u16)(scale.y & 0xffff))};
    const u32 a[2][2] = {{lane_word<T>(at, row, t, 0), lane_word<T>(at, row + 8, t, 0)},
                         {lane_word<T>(at, row, t, 1), lane_word<T>(at, row + 8, t, 1)}};
    if (ORDER == ORDER_BLOCKS) {  // Q4_0: values q - 8, so C starts at -8·Σx
        const uint2 bx = *(const uint2*)(at.q + (s0 + g) * 32 + 8 * t);
        const float2 dx = *(const float2*)(at.d + s0 + 2 * t);
        const float2 sums = *(const float2*)(at.aux + s0 + 2 * t);
        const int first = FLOAT_BIAS - 8 * __float_as_int(sums.x);
        const int second = FLOAT_BIAS - 8 * __float_as_int(sums.y);
        int c[4] = {first, second, first, second};
        mma_k32<UNSIGNED_A>(c, a[0][0], a[0][1], a[1][0], a[1][1], bx.x, bx.y);
        const float f[4] = {__fmul_rn(dw[0], dx.x), __fmul_rn(dw[0], dx.y),
                            __fmul_rn(dw[1], dx.x), __fmul_rn(dw[1], dx.y)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float& acc = chains.acc[0][e >> 1][e & 1][0];
            acc = fmaf(f[e], unbiased(c[e]), acc);
        }
        return;
    }
#pragma unroll
    for (int p = 0; p < MmaChains<ORDER>::PAIRS; ++p) {
        const int pair = s0 + 2 * p;
        // Column g of B is lane group g % 4 of sequence g / 4 of the pair:
        // nonzero on the diagonal t == g % 4 only.
        uint2 bx = make_uint2(0, 0);
        if (t == g % 4) bx = *(const uint2*)(at.q + (pair + g / 4) * 32 + 8 * t);
        const int mine = pair + t / 2;  // this thread's C columns' sequence
        const float dx = at.d[mine];
        const float f[2] = {__fmul_rn(dw[0], dx), __fmul_rn(dw[1], dx)};
#pragma unroll
        for (int m = 0; m < 2; ++m) {
            int c[4] = {FLOAT_BIAS, FLOAT_BIAS, FLOAT_BIAS, FLOAT_BIAS};
            mma_k16<UNSIGNED_A>(c, a[m][0], a[m][1], m ? bx.y : bx.x);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float& acc = chains.acc[p][e >> 1][m][e & 1];
                acc = fmaf(f[e >> 1], unbiased(c[e]), acc);
            }
        }
        if (T == TYPE_Q4_1) {
            const float s = at.aux[mine];
            chains.mins[p][0] = fmaf(h2f((u16)(scale.x >> 16)), s, chains.mins[p][0]);
            chains.mins[p][1] = fmaf(h2f((u16)(scale.y >> 16)), s, chains.mins[p][1]);
        }
    }
}

// The finished sums into `out` ([sequence][row], the block's rows): under
// ORDER_LANES the lanes combined in hsum_float_8's order,
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), threads t and t ^ 1 holding lanes
// {0,1,4,5} and {2,3,6,7} of the same (row, sequence), then Q4_1's Σ m·s.
template <int T, int ORDER>
__device__ __forceinline__ void mma_sums(const MmaChains<ORDER>& chains, int s0, int g, int t,
                                         float (*out)[MMA_ROWS + 1]) {
    if (ORDER == ORDER_BLOCKS) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            out[s0 + 2 * t + (e & 1)][g + 8 * (e >> 1)] = chains.acc[0][e >> 1][e & 1][0];
        return;
    }
#pragma unroll
    for (int p = 0; p < MmaChains<ORDER>::PAIRS; ++p)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float(&l)[2][2] = chains.acc[p][r];
            const float near = __fadd_rn(l[0][0], l[1][0]), far = __fadd_rn(l[0][1], l[1][1]);
            float sum = __fadd_rn(__fadd_rn(near, __shfl_xor_sync(FULL_MASK, near, 1)),
                                  __fadd_rn(far, __shfl_xor_sync(FULL_MASK, far, 1)));
            if (T == TYPE_Q4_1) sum = __fadd_rn(sum, chains.mins[p][r]);
            if (r == (t & 1)) out[s0 + 2 * p + t / 2][g + 8 * r] = sum;
        }
}

// The epilogues, gemv_tiles' MODEs (MODE 2's norm is the staging's, so its
// product is MODE 0's): 0 y = sum, 1 y += sum, 3 the gated
// activation of the gate and up sums, 4 RoPE and the cache write (each
// sequence's position and caches from the tables).
//
// The block's threads copy each block of 32 values (its rows' weights, every
// sequence's x) into a ring of MMA_STAGES stages of `stage_blocks` blocks,
// MMA_STAGES - 1 stages ahead of the one its warps compute, so the copies' latency is hidden and
// each weight crosses from L2 once per block whatever the batch.
template <int T, int ORDER, int MODE>
__device__ void gemv_mma(const u8* qs, const u8* sc, u8* work, float* y, int rows, int cols,
                         int sequences, RopeStore rope, int y_stride, int stage_blocks) {
    constexpr int NR = MODE == 3 ? 2 : 1;
    extern __shared__ float4 ring4[];
    u8* ring = (u8*)ring4;
    __shared__ float out[NR][MMA_SEQS][MMA_ROWS + 1];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int g = lane / 4, t = lane % 4;
    const int padded = (sequences + MMA_WARP_SEQS - 1) / MMA_WARP_SEQS * MMA_WARP_SEQS;
    const int seq_warps = padded / MMA_WARP_SEQS;
    const int span = warp / seq_warps, s0 = warp % seq_warps * MMA_WARP_SEQS;
    const int blocks = cols / 32, start = blockIdx.x * MMA_ROWS;
    // Rows past the end read the last row and are not written.
    const u64 row0 = (u64)span * rows + min(start + g, rows - 1);
    const u64 row1 = (u64)span * rows + min(start + g + 8, rows - 1);
    const MmaWorkspace x = mma_workspace_at(work, blocks, padded);
    MmaChains<ORDER> chains;
    chains.clear();
    MmaCopy copies[MMA_COPIES];
    const int count = mma_copies<T>(qs, sc, x, rows, start, blocks, padded, NR, copies);
    const int stages = (blocks + stage_blocks - 1) / stage_blocks;
    // The first stages' weights are copied before the wait for the staging,
    // their x after it; each stage's copies are one group (the first also
    // holds the next stages' weights: waiting for it waits for them too).
#pragma unroll
    for (int st = 0; st < MMA_STAGES - 1; ++st)
        if (st < stages) mma_fetch<T>(copies, count, st, stage_blocks, blocks, NR, padded, ring, true, false);
    allow_next_kernel();
    wait_for_previous_kernel();
#pragma unroll
    for (int st = 0; st < MMA_STAGES - 1; ++st) {
        if (st < stages) mma_fetch<T>(copies, count, st, stage_blocks, blocks, NR, padded, ring, false, true);
        copy_commit();
    }
    const int row = span * MMA_ROWS + g;  // in the ring's rows
#pragma unroll 1
    for (int st = 0; st < stages; ++st) {
        // Stage st's copies are done (by every thread, after the barrier),
        // and every warp is past stage st - 1, whose part of the ring the
        // next copies fill.
        copy_groups_wait<MMA_STAGES - 2>();
        __syncthreads();
        if (st + MMA_STAGES - 1 < stages)
            mma_fetch<T>(copies, count, st + MMA_STAGES - 1, stage_blocks, blocks, NR, padded,
                         ring, true, true);
        copy_commit();
#pragma unroll
        for (int i = 0; i < MMA_STAGE_BLOCKS; ++i) {
            const int b = st * stage_blocks + i;
            if (i >= stage_blocks || b >= blocks) break;
            const RingBlock at =
                ring_block_at<T>(ring, st % MMA_STAGES * stage_blocks + i, NR, padded);
            const uint2 scale = make_uint2(mma_scale<T>(at, row, row0 * blocks + b),
                                           mma_scale<T>(at, row + 8, row1 * blocks + b));
            mma_step<T, ORDER>(at, row, scale, s0, g, t, chains);
        }
    }
    mma_sums<T, ORDER>(chains, s0, g, t, out[span]);
    __syncthreads();
    for (int k = threadIdx.x; k < sequences * MMA_ROWS; k += blockDim.x) {
        const int s = k / MMA_ROWS, i = k % MMA_ROWS, r = start + i;
        if (r >= rows) continue;
        float* ys = y + (u64)s * y_stride;
        const float sum = out[0][s][i];
        if (MODE == 4) {
            if (i % 2 == 0 && r + 1 < rows)
                rope_store_pair_with(rope, rope_pair_inputs_of(rope, r, s, true), ys, r, sum,
                                     out[0][s][i + 1]);
        } else if (MODE == 3) {
            ys[r] = gated((const u16*)rope.cos_sin, sum, out[NR - 1][s][i], r, rows);
        } else {
            ys[r] = MODE == 1 ? __fadd_rn(ys[r], sum) : sum;
        }
    }
}

// The kernels mma_stage_<name> and gemv_mma_<kind><name> (kind: "" plain,
// residual_, gated_, rope_), added per weight type by compile.rs for the
// types and orders above. A product launches at most MMA_SEQS sequences,
// the stage with one block per sequence (padded to whole warps) and the
// product with 32·(span count)·(padded / MMA_WARP_SEQS) threads.
#define GEMV_MMA_KERNEL(MODE, MODE_NAME, NAME, T, ORDER)                                      \
    extern "C" __global__ void __launch_bounds__(2 * MMA_SEQS / MMA_WARP_SEQS * WARP)         \
        gemv_mma_##MODE_NAME##NAME(const u8* qs, const u8* sc, u8* work, float* y, int rows,  \
                                   int cols, int sequences, const float2* cos_sin,            \
                                   const int* position, int q_width, int kv_width,            \
                                   int head_dim, int capacity, u16* const* k_tables,          \
                                   u16* const* v_tables, int y_stride, int stage_blocks) {    \
        RopeStore rope = {cos_sin, position, q_width,  kv_width, head_dim,                    \
                          capacity, 0,       0,        k_tables, v_tables};                   \
        gemv_mma<T, ORDER, MODE>(qs, sc, work, y, rows, cols, sequences, rope, y_stride,      \
                                 stage_blocks);                                               \
    }
#define GEMV_MMA_KERNELS(NAME, T, ORDER)                                                       \
    extern "C" __global__ void __launch_bounds__(GEMV_MAX_THREADS)                            \
        mma_stage_##NAME(const float* x, const float* norm_weight, float eps, int cols,       \
                         int sequences, u8* work, const float* branch,                        \
                         const float* branch_weight, float* x_out) {                          \
        PreAdd pre = {branch, branch_weight, x_out};                                          \
        mma_stage<T>(x, norm_weight, eps, cols, sequences, work, pre);                        \
    }                                                                                         \
    GEMV_MMA_KERNEL(0, , NAME, T, ORDER)                                                      \
    GEMV_MMA_KERNEL(1, residual_, NAME, T, ORDER)                                             \
    GEMV_MMA_KERNEL(3, gated_, NAME, T, ORDER)                                                \
    GEMV_MMA_KERNEL(4, rope_, NAME, T, ORDER)
