// Causal grouped-query attention for a prompt batch on tensor cores (sm_80+), in
// the FlashAttention style: a block takes 64 query rows of one head (16 per warp),
// walks the cache in tiles of 64 positions staged in shared memory (each tile
// read into registers while the one before it is computed), and keeps a
// running softmax, so scores never go to memory. Q·Kᵀ and P·V are
// mma.m16n8k16 products with f16 inputs and f32 accumulation: the query and the
// softmax weights are rounded to f16 (keys and values are f16 in the cache
// already); scores, the softmax and the output stay f32. Layouts as in
// attention.cu: qkv rows `q_stride` floats apart, cache [kv_head][capacity][D].

#define FLASH_ROWS 64      // query rows per block
#define FLASH_KEYS 64      // cache positions per tile
#define FLASH_WARPS 4
#define FLASH_PAD 8        // halves of padding per staged row (no bank conflicts)

#if __CUDA_ARCH__ >= 800

// c += a·b for one 16×8×16 tile: a is 16×16 f16 (row-major fragment), b 16×8 f16
// (column fragment), c 16×8 f32. Fragment ownership: lane = 4·g + t holds
// a: rows g, g+8 × cols 2t, 2t+1, 2t+8, 2t+9; b: rows 2t, 2t+1, 2t+8, 2t+9 × col g;
// c: rows g, g+8 × cols 2t, 2t+1.
__device__ __forceinline__ void mma_f16(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f16 in one register, `lo` in the low half (the lower column index).
__device__ __forceinline__ u32 pack_f16(float lo, float hi) {
    return (u32)f2h(lo) | ((u32)f2h(hi) << 16);
}

__device__ __forceinline__ u32 pack_halves(u16 lo, u16 hi) {
    return (u32)lo | ((u32)hi << 16);
}

template <int D>
__device__ void flash_attention(const float* q, int q_stride, const u16* k_cache,
                                const u16* v_cache, const int* start, int rows, int heads,
                                int kv_heads, int capacity, float scale, int window,
                                float* out, u16* out_f16) {
    __shared__ __align__(16) u16 ks[FLASH_KEYS][D + FLASH_PAD];
    __shared__ __align__(16) u16 vs[FLASH_KEYS][D + FLASH_PAD];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int g = lane >> 2, t = lane & 3;
    const int head = blockIdx.y, kv_head = head / (heads / kv_heads);
    const int first = *start;
    const int row0 = blockIdx.x * FLASH_ROWS + warp * 16;  // this warp's first row
    const u16* keys = k_cache + (u64)kv_head * capacity * D;
    const u16* values = v_cache + (u64)kv_head * capacity * D;

    // The warp's 16 query rows as A fragments, one per 16 dimensions.
    u32 qa[D / 16][4];
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // rows g and g + 8
            const int row = row0 + g + 8 * half;
            float2 lo = make_float2(0.0f, 0.0f), hi = lo;
            if (row < rows) {
                const float* qr = q + (u64)row * q_stride + head * D + k * 16 + 2 * t;
                lo = *(const float2*)qr;
                hi = *(const float2*)(qr + 8);
            }
            qa[k][half] = pack_f16(lo.x, lo.y);
            qa[k][2 + half] = pack_f16(hi.x, hi.y);
        }
    }

    float o[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    const float neg_inf = -__int_as_float(0x7f800000);
    float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f};
    // Query positions of this thread's two rows.
    const int qpos[2] = {first + row0 + g, first + row0 + g + 8};
    const int block_rows = min(rows - blockIdx.x * FLASH_ROWS, FLASH_ROWS);
    const int visible = first + blockIdx.x * FLASH_ROWS + block_rows;  // keys the block needs
    // With a window, tiles wholly before the block's first row's window are
    // skipped; keys before each row's own window are masked below.
    const int first_key = window > 0 ? max(0, first + blockIdx.x * FLASH_ROWS + 1 - window) : 0;
    const int kv_start = first_key / FLASH_KEYS * FLASH_KEYS;

    // Each thread's share of a tile's keys and values (16 bytes each), read
    // from memory one tile ahead: tile i + 1's loads are in flight while tile
    // i is computed, instead of every tile waiting for its own.
    constexpr int PER_THREAD = FLASH_KEYS * D / 8 / (FLASH_WARPS * WARP);
    uint4 k_next[PER_THREAD], v_next[PER_THREAD];
    auto load_tile = [&](int kv0) {
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) {
            const int i = threadIdx.x + j * FLASH_WARPS * WARP;
            const int p = i / (D / 8), c = (i % (D / 8)) * 8;
            k_next[j] = v_next[j] = make_uint4(0, 0, 0, 0);
            if (kv0 + p < visible) {
                k_next[j] = *(const uint4*)(keys + (u64)(kv0 + p) * D + c);
                v_next[j] = *(const uint4*)(values + (u64)(kv0 + p) * D + c);
            }
        }
    };
    load_tile(kv_start);
    for (int kv0 = kv_start; kv0 < visible; kv0 += FLASH_KEYS) {
        __syncthreads();  // the previous tile is no longer read
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) {
            const int i = threadIdx.x + j * FLASH_WARPS * WARP;
            const int p = i / (D / 8), c = (i % (D / 8)) * 8;
            *(uint4*)&ks[p][c] = k_next[j];
            *(uint4*)&vs[p][c] = v_next[j];
        }
        __syncthreads();
        if (kv0 + FLASH_KEYS < visible) load_tile(kv0 + FLASH_KEYS);

        // Scores for 64 keys: 8 column tiles of 8 keys.
        float s[FLASH_KEYS / 8][4];
#pragma unroll
        for (int n = 0; n < FLASH_KEYS / 8; ++n) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int k = 0; k < D / 16; ++k) {
                const u32 b0 = *(const u32*)&ks[n * 8 + g][k * 16 + 2 * t];
                const u32 b1 = *(const u32*)&ks[n * 8 + g][k * 16 + 8 + 2 * t];
                mma_f16(s[n], qa[k], b0, b1);
            }
        }
        // Scale, causal mask, and the running max of each of the two rows.
        float tile_max[2] = {neg_inf, neg_inf};
#pragma unroll
        for (int n = 0; n < FLASH_KEYS / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = kv0 + n * 8 + 2 * t + (e & 1);
                const int r = e >> 1;
                const bool seen = key <= qpos[r] && (window <= 0 || key > qpos[r] - window);
                s[n][e] = seen ? s[n][e] * scale : neg_inf;
                tile_max[r] = fmaxf(tile_max[r], s[n][e]);
            }
        }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(FULL_MASK, tile_max[r], 1));
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(FULL_MASK, tile_max[r], 2));
            const float m_new = fmaxf(m[r], tile_max[r]);
            // A row with nothing visible yet keeps m = -inf; its weights stay 0.
            alpha[r] = m_new == neg_inf ? 1.0f : expf(m[r] - m_new);
            m[r] = m_new;
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        // Weights, their row sums, and P·V 16 keys at a time.
#pragma unroll
        for (int n = 0; n < FLASH_KEYS / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = e >> 1;
                const float w = s[n][e] == neg_inf ? 0.0f : expf(s[n][e] - m[r]);
                s[n][e] = w;
                l[r] += w;
            }
        }
#pragma unroll
        for (int k = 0; k < FLASH_KEYS / 16; ++k) {
            u32 pa[4];
            pa[0] = pack_f16(s[2 * k][0], s[2 * k][1]);
            pa[1] = pack_f16(s[2 * k][2], s[2 * k][3]);
            pa[2] = pack_f16(s[2 * k + 1][0], s[2 * k + 1][1]);
            pa[3] = pack_f16(s[2 * k + 1][2], s[2 * k + 1][3]);
            const int key = k * 16 + 2 * t;
#pragma unroll
            for (int n = 0; n < D / 8; ++n) {
                const int d = n * 8 + g;
                const u32 b0 = pack_halves(vs[key][d], vs[key + 1][d]);
                const u32 b1 = pack_halves(vs[key + 8][d], vs[key + 9][d]);
                mma_f16(o[n], pa, b0, b1);
            }
        }
    }

    // Each lane summed its own columns; the row's four lanes add up.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(FULL_MASK, l[r], 1);
        l[r] += __shfl_xor_sync(FULL_MASK, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + g + 8 * r;
        if (row >= rows) continue;
        const float inverse = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        const u64 at = (u64)row * heads * D + head * D;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
            const float v0 = o[n][2 * r] * inverse, v1 = o[n][2 * r + 1] * inverse;
            if (out_f16)  // the next GEMM's f16 input, as rows_to_f16 would round it
                *(u32*)(out_f16 + at + n * 8 + 2 * t) = pack_f16(v0, v1);
            else
                *(float2*)(out + at + n * 8 + 2 * t) = make_float2(v0, v1);
        }
    }
}

#define FLASH_KERNEL(D)                                                                     \
    extern "C" __global__ void __launch_bounds__(FLASH_WARPS * WARP)                         \
        attention_flash_##D(const float* q, int q_stride, const u16* k_cache,                \
                            const u16* v_cache, const int* start, int rows, int heads,       \
                            int kv_heads, int capacity, float scale, int window, float* out, \
                            u16* out_f16) {                                                  \
        flash_attention<D>(q, q_stride, k_cache, v_cache, start, rows, heads, kv_heads,     \
                           capacity, scale, window, out, out_f16);                           \
    }
FLASH_KERNEL(64)
FLASH_KERNEL(128)

#endif
