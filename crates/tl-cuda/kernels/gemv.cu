// Matrix × vector for one token (decode): y = W·x. Quantized rows are taken in
// tiles whose blocks are computed in parallel and summed in the CPU's order
// (gemv_tiles below); float rows by whole warps, the lanes taking 16-value
// units in turn. Variants fold in the step before
// or after the product so a block's decode step needs fewer launches:
//   plain      y[r]  = W[r]·x
//   residual   y[r] += W[r]·x                     (attention output, MLP down)
//   norm       y[r]  = W[r]·rmsnorm(x)            (fused QKV, output head)
//   gated      y[r]  = act(W[r]·n) · (W[r+half]·n), n = rmsnorm(x)   (gate|up)
//              act: SwiGLU's silu, or GeGLU's GELU from a table that the
//              host passes in the cos_sin argument (unused by this variant)
//   norm_rope  norm, then RoPE on the query and key rows and the keys and
//              values written to the cache                       (fused QKV)
//
// Each block first stages x in shared memory (normalised when asked). For the
// quantized weight types x is staged as llama.cpp's Q8_0/Q8_1 blocks (int8
// values, f16-rounded scale, Q8_1's scaled sum, the integer sum), or for
// K-quants its Q8_K super-blocks (int8 values, f32 scale per 256, sums per 16),
// exactly as the CPU backend quantizes it, and rows are integer dot products
// (dp4a) whose f32 sums follow the CPU backend's order (ORDER_* below), so the
// GPU computes the CPU's bits; it also reads a quarter of the activation
// bytes. Float weights (F32/F16/BF16) use f32 x and sum in their own order,
// their rows a grid-stride loop, so a block stages x once for many rows.

// The largest block the host launches (registers are budgeted for it).
#define GEMV_MAX_THREADS 512
// GEMV_CLOCKS=1 (set through TL_CUDA_KERNEL_DEFINES, a measurement aid):
// thread 0 of block 0 and of a middle block prints each tile GEMV's phase
// clocks: "clk MODE rows cols tile block" then the cycles waiting for the
// previous kernel, staging x, computing the terms, at the barrier, and
// walking with the epilogue. Thread 0 of block 1 prints the staging's own
// phases ("sclk"): K-quants normed in one pass (reading x and the sum of
// squares, then the quantization) or in rounds (the scale, then the rounds);
// Q8 blocks held in registers (x with any post-norm branch added, the norm,
// the quantization), and of those x's loads ("lclk": x, then the branch and
// its weight, then the branch's sum of squares).
#ifndef GEMV_CLOCKS
#define GEMV_CLOCKS 0
#endif

// A post-norm branch to add to x before staging it (pre_add below): when
// `branch` is given, x_out = x + rmsnorm(branch)·weight first, and x_out is
// what the product reads. Every block computes the same values (and
// writes them, or block 0 alone when they stay in registers), so x_out
// needs no other synchronisation; x and branch are left as they are, so
// the residual stream moves from x to x_out.
struct PreAdd {
    const float* branch;
    const float* weight;
    float* out;
};

// x + rmsnorm(branch)·weight into pre.out (the CPU backend's post-norm and
// residual add, each product and the sum rounded once), visible to this
// block on return; x itself when there is no branch. The stagings that hold
// x in registers add it there instead (load_x_quarters).
__device__ const float* pre_add(const float* x, const PreAdd& pre, int cols, float eps,
                                double* scratch) {
    if (!pre.branch) return x;
    const float scale = rms_scale(pre.branch, cols, eps, scratch);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        pre.out[i] = __fadd_rn(x[i], __fmul_rn(__fmul_rn(pre.branch[i], scale), pre.weight[i]));
    __syncthreads();
    return pre.out;
}

// The PreAdd of sequence blockIdx.y of a batched launch.
__device__ __forceinline__ PreAdd pre_add_of_sequence(PreAdd pre, int cols) {
    if (pre.branch) {
        pre.branch += (u64)blockIdx.y * cols;
        pre.out += (u64)blockIdx.y * cols;
    }
    return pre;
}

// Stages x (normalised when norm_weight != 0) as f32 in shared memory.
__device__ void stage_f32(const float* x, const float* norm_weight, float eps, int cols,
                          float* xs, double* scratch) {
    const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = staged_input(x, norm_weight, scale, i);
    __syncthreads();
}

// Component j of v (j known when unrolled, so no local memory).
__device__ __forceinline__ float component(const float4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// x as Q8 blocks in shared memory: the int8 values, and per block of 32 the
// f16-rounded scale d, the f16-rounded d·Σq (Q8_1's s) and the exact Σq.
struct StagedQ8 {
    i8* q;
    float* d;
    float* s;
    int* sum;
};

// Values [8k, 8k + 8) of v (zeros past `count` quarters), as two float4 loads
// when v is 16-byte aligned.
__device__ __forceinline__ void load_quarter(const float* v, int k, int count, float* out) {
    if (k >= count) {
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = 0.0f;
    } else if (((u64)v & 15) == 0) {
        const float4 a = ((const float4*)v)[2 * k], b = ((const float4*)v)[2 * k + 1];
        const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = f[j];
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = v[8 * k + j];
    }
}

// 1 / sqrt(mean(x²) + eps) of the cols values the block's threads hold, R
// quarters each (zeros past the end): rms_scale's arithmetic.
template <int R>
__device__ __forceinline__ float rms_scale_of_quarters(const float (&v)[R][8], int cols, float eps,
                                                       double* scratch) {
    const int quarters = cols / 8;
    double squares = 0.0;
    // The quarters there are only: the zeros past the end add nothing, and
    // their conversions to f64 (a sixteenth-rate instruction) took longer
    // than the rest of the sum.
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (threadIdx.x + r * blockDim.x < quarters)
#pragma unroll
            for (int j = 0; j < 8; ++j) squares += (double)(v[r][j] * v[r][j]);
    const double total = block_sum_f64(squares, scratch, warps_holding(quarters));
    return 1.0f / sqrtf((float)(total / (double)cols) + eps);
}

// A thread's R quarters of x (threadIdx.x + r·blockDim.x; zeros past the
// end), or of x + rmsnorm(branch)·weight when `pre` has a branch: computed
// as pre_add does, in registers, the loads of x, branch and weight issued
// together, and written to pre.out by the sequence's block 0 alone.
template <int R>
__device__ __forceinline__ void load_x_quarters(const float* x, const PreAdd& pre, float eps,
                                                int cols, double* scratch, float (&v)[R][8]) {
    const int quarters = cols / 8;
#if GEMV_CLOCKS
    const long long l0 = clock64();
#endif
#pragma unroll
    for (int r = 0; r < R; ++r) load_quarter(x, threadIdx.x + r * blockDim.x, quarters, v[r]);
#if GEMV_CLOCKS
    const long long l1 = clock64() + (v[0][0] != v[0][0]);
    if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0 && !pre.branch)
        printf("lclk %d load %lld\n", cols, l1 - l0);
#endif
    if (!pre.branch) return;
    float branch[R][8], weight[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        load_quarter(pre.branch, threadIdx.x + r * blockDim.x, quarters, branch[r]);
        load_quarter(pre.weight, threadIdx.x + r * blockDim.x, quarters, weight[r]);
    }
#if GEMV_CLOCKS
    const long long l2 = clock64() + (branch[0][0] != branch[0][0]) + (weight[0][0] != weight[0][0]);
#endif
    const float scale = rms_scale_of_quarters<R>(branch, cols, eps, scratch);
#if GEMV_CLOCKS
    if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0)
        printf("lclk %d load %lld branch %lld sum %lld\n", cols, l1 - l0, l2 - l1,
               clock64() + (scale != scale) - l2);
#endif
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int k = threadIdx.x + r * blockDim.x;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            v[r][j] = __fadd_rn(v[r][j], __fmul_rn(__fmul_rn(branch[r][j], scale), weight[r][j]));
        if (blockIdx.x == 0 && k < quarters) {
#pragma unroll
            for (int j = 0; j < 8; ++j) pre.out[8 * k + j] = v[r][j];
        }
    }
}

// Where the staged blocks lie in `shared`: q[cols] (16-byte aligned), then d,
// s and sum, cols/32 each.
__device__ __forceinline__ StagedQ8 staged_q8_at(void* shared, int cols) {
    const int blocks = cols / 32;
    i8* q = (i8*)shared;
    float* d = (float*)(q + cols);
    StagedQ8 staged = {q, d, d + blocks, (int*)(d + 2 * blocks)};
    return staged;
}

// llama.cpp's Q8 quantization (as quantize_q8_lane) of quarter k of a block
// of 32 values, held in v: four neighbouring lanes hold a block's quarters,
// so its amax and Σq take two shuffles each. Every lane of the warp calls
// this (a quarter past `count` is computed and not stored).
__device__ __forceinline__ void quantize_quarter(const float* v, int k, int count,
                                                 const StagedQ8& staged) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j]));
    amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, 2));
    const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float d = amax / 127.0f;
    int q[8], sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        q[j] = __float2int_rn(v[j] * inverse);
        sum += q[j];
    }
    sum += __shfl_xor_sync(FULL_MASK, sum, 1);
    sum += __shfl_xor_sync(FULL_MASK, sum, 2);
    if (k >= count) return;
    u32 packed[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
        packed[h] = (u32)(q[4 * h] & 0xff) | (u32)(q[4 * h + 1] & 0xff) << 8 |
                    (u32)(q[4 * h + 2] & 0xff) << 16 | (u32)(q[4 * h + 3] & 0xff) << 24;
    *(uint2*)(staged.q + 8 * k) = make_uint2(packed[0], packed[1]);
    if (k % 4 == 0) {
        const int b = k / 4;
        staged.d[b] = h2f(f2h(d));
        staged.s[b] = h2f(f2h(d * (float)sum));
        staged.sum[b] = sum;
    }
}

// Quarters each thread holds when x fits in registers.
#define STAGE_QUARTERS 2

// Stages x (normalised when norm_weight != 0) as Q8 blocks: thread t takes
// quarters t, t + blockDim, ... of the blocks (8 consecutive values each), so
// a block's four quarters are on four neighbouring lanes. When x fits in
// STAGE_QUARTERS quarters a thread, it is read once, all its loads before any
// use (the sum of squares and the quantization from the same registers).
__device__ StagedQ8 stage_q8(const float* x, const PreAdd& pre, const float* norm_weight,
                             float eps, int cols, void* shared, double* scratch) {
    const StagedQ8 staged = staged_q8_at(shared, cols);
    const int quarters = cols / 8;
    if (quarters <= STAGE_QUARTERS * (int)blockDim.x) {
#if GEMV_CLOCKS
        const long long c0 = clock64();
#endif
        float v[STAGE_QUARTERS][8];
        load_x_quarters<STAGE_QUARTERS>(x, pre, eps, cols, scratch, v);
#if GEMV_CLOCKS
        const long long c1 = clock64() + (v[0][0] != v[0][0]);
#endif
        float scale = 1.0f;
        if (norm_weight) {
            float w[STAGE_QUARTERS][8];
#pragma unroll
            for (int r = 0; r < STAGE_QUARTERS; ++r)
                load_quarter(norm_weight, threadIdx.x + r * blockDim.x, quarters, w[r]);
            scale = rms_scale_of_quarters<STAGE_QUARTERS>(v, cols, eps, scratch);
#pragma unroll
            for (int r = 0; r < STAGE_QUARTERS; ++r)
#pragma unroll
                for (int j = 0; j < 8; ++j) v[r][j] = (v[r][j] * scale) * w[r][j];
        }
#if GEMV_CLOCKS
        const long long c2 = clock64() + (scale != scale);
#endif
        // Whole warps past the end skip the quantization (its shuffles need
        // every lane of a warp that does it).
        const int warp_first = threadIdx.x - threadIdx.x % WARP;
#pragma unroll
        for (int r = 0; r < STAGE_QUARTERS; ++r)
            if (warp_first + r * (int)blockDim.x < quarters)  // the same across a warp
                quantize_quarter(v[r], threadIdx.x + r * blockDim.x, quarters, staged);
#if GEMV_CLOCKS
        const long long c3 = clock64() + (staged.d[0] != staged.d[0]);
        if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0)
            printf("sclk q8 %d x %lld norm %lld quantize %lld\n", cols, c1 - c0, c2 - c1, c3 - c2);
#endif
    } else {
        x = pre_add(x, pre, cols, eps, scratch);
        const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
        // Whole warps go round, for the shuffles.
        const int lane = threadIdx.x % WARP;
        for (int k = threadIdx.x; k - lane < quarters; k += blockDim.x) {
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j)
                v[j] = k < quarters ? staged_input(x, norm_weight, scale, 8 * k + j) : 0.0f;
            quantize_quarter(v, k, quarters, staged);
        }
    }
    __syncthreads();
    return staged;
}

// x as Q8_K super-blocks in shared memory: the int8 values, and per
// super-block its f32 scale d, per 16 values the sum of their quants.
struct StagedQ8K {
    i8* q;
    float* d;
    int* sum16;
};

// Where the staged super-blocks lie in `shared`: q[cols] (16-byte aligned),
// then d (cols/256) and sum16 (cols/16).
__device__ __forceinline__ StagedQ8K staged_q8_k_at(void* shared, int cols) {
    i8* q = (i8*)shared;
    float* d = (float*)(q + cols);
    StagedQ8K staged = {q, d, (int*)(d + cols / 256)};
    return staged;
}

// Super-blocks a warp of stage_q8_k loads before quantizing any.
#define STAGE_K_ROUNDS 4

// Quantizes super-block b (lane l holding values 8l..8l+7 in v) into `staged`.
__device__ __forceinline__ void stage_super_block(const float* v, int b, const StagedQ8K& staged) {
    const int lane = threadIdx.x % WARP, at = b * 256 + 8 * lane;
    int q[8], run_sum;
    const float d = quantize_q8_k_warp(v, q, &run_sum);
    *(uint2*)(staged.q + at) = pack8(q);
    if (lane == 0) staged.d[b] = d;
    if (lane % 2 == 0) staged.sum16[b * 16 + lane / 2] = run_sum;
}

// Stages x (normalised when norm_weight != 0) as Q8_K super-blocks, one warp
// per super-block in turn (quantize_q8_k_warp), each warp's next
// STAGE_K_ROUNDS super-blocks read before any is quantized.
__device__ StagedQ8K stage_q8_k(const float* x, const PreAdd& pre, const float* norm_weight,
                                float eps, int cols, void* shared, double* scratch) {
    const StagedQ8K staged = staged_q8_k_at(shared, cols);
#if GEMV_CLOCKS
    const long long c0 = clock64();
#endif
    x = pre_add(x, pre, cols, eps, scratch);
    const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
#if GEMV_CLOCKS
    const long long c1 = clock64() + (scale != scale);
#endif
    const int lane = threadIdx.x % WARP, warps = blockDim.x / WARP, blocks = cols / 256;
    for (int b0 = threadIdx.x / WARP; b0 < blocks; b0 += STAGE_K_ROUNDS * warps) {
        float v[STAGE_K_ROUNDS][8];
#pragma unroll
        for (int r = 0; r < STAGE_K_ROUNDS; ++r) {
            const int b = b0 + r * warps;
            load_quarter(x, (b * 256 + 8 * lane) / 8, b < blocks ? cols / 8 : 0, v[r]);
            if (norm_weight && b < blocks) {
                float w[8];
                load_quarter(norm_weight, (b * 256 + 8 * lane) / 8, cols / 8, w);
#pragma unroll
                for (int j = 0; j < 8; ++j) v[r][j] = (v[r][j] * scale) * w[j];
            }
        }
#pragma unroll
        for (int r = 0; r < STAGE_K_ROUNDS; ++r)
            if (b0 + r * warps < blocks) stage_super_block(v[r], b0 + r * warps, staged);
    }
#if GEMV_CLOCKS
    const long long c2 = clock64() + (staged.d[0] != staged.d[0]);
    if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0)
        printf("sclk rounds %d scale %lld rounds %lld\n", cols, c1 - c0, c2 - c1);
#endif
    __syncthreads();
    return staged;
}

// The norm weights of the values a thread stages in stage_q8_k_early (values
// 8·lane..8·lane + 7 of super-block `warp`), loaded before the wait for the
// previous kernel, so that staging waits for x alone.
struct EarlyNorm {
    float w[8];
};

// Whether a normed K-quant product of rows of `cols` values stages x with
// stage_q8_k_early: at most one super-block a warp.
__device__ __forceinline__ bool stages_early(int cols) {
    return cols / 256 <= (int)(blockDim.x / WARP);
}

__device__ __forceinline__ void load_early_norm(const float* norm_weight, int cols,
                                                EarlyNorm& e) {
    const int b = threadIdx.x / WARP, at = b * 256 + 8 * (threadIdx.x % WARP);
    load_quarter(norm_weight, at / 8, b < cols / 256 ? cols / 8 : 0, e.w);
}

// stage_q8_k normalised, for x of at most one super-block a warp, the norm
// weights in registers: x is read once, its squares summed (in f64, as
// rms_scale) from the same registers.
__device__ StagedQ8K stage_q8_k_early(const float* x, const PreAdd& pre, const EarlyNorm& e,
                                      float eps, int cols, void* shared, double* scratch) {
    const StagedQ8K staged = staged_q8_k_at(shared, cols);
    const int lane = threadIdx.x % WARP, b = threadIdx.x / WARP;
    const bool active = b < cols / 256;
#if GEMV_CLOCKS
    const long long c0 = clock64();
#endif
    float quarter[1][8];  // quarter threadIdx.x: values 8·lane.. of super-block b
    load_x_quarters<1>(x, pre, eps, cols, scratch, quarter);
    float* v = quarter[0];
    const float scale = rms_scale_of_quarters<1>(quarter, cols, eps, scratch);
#if GEMV_CLOCKS
    const long long c2 = clock64() + (scale != scale);
#endif
    if (active) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = (v[j] * scale) * e.w[j];
        stage_super_block(v, b, staged);
    }
#if GEMV_CLOCKS
    const long long c3 = clock64() + (staged.d[0] != staged.d[0]);
    if (blockIdx.x == 1 && blockIdx.y == 0 && threadIdx.x == 0)
        printf("sclk one-pass %d read-and-sum %lld quantize %lld\n", cols, c2 - c0, c3 - c2);
#endif
    __syncthreads();
    return staged;
}

// x staged for weights of type T: Q8_K super-blocks for K-quants (from the
// early norm weights when `early`), else Q8 blocks.
template <int T>
__device__ __forceinline__ auto stage_x(const float* x, const PreAdd& pre, const float* norm_weight,
                                        float eps, int cols, void* shared, double* scratch,
                                        const EarlyNorm& norm, bool early) {
    if constexpr (is_k_quant(T))
        return early ? stage_q8_k_early(x, pre, norm, eps, cols, shared, scratch)
                     : stage_q8_k(x, pre, norm_weight, eps, cols, shared, scratch);
    else
        return stage_q8(x, pre, norm_weight, eps, cols, shared, scratch);
}

// How a row's f32 sum is ordered: the CPU backend's (llama.cpp's AVX2)
// rounding, so that both backends compute the same bits.
//   ORDER_LANES   (ggml_vec_dot_*_q8_*): 8 chains, chain l taking the integer
//                 sum of the products of values 4l..4l+3 of each block; per
//                 block acc_l = fma(dw·da, sum_l, acc_l); then hsum_float_8
//                 ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) and, for Q4_1, plus
//                 Σ m·s (its own fma chain over the blocks).
//   ORDER_BLOCKS  (the repacked Q4_0 kernels, which llama.cpp and the CPU
//                 backend use for Q4_0 matrices of a multiple of 8 rows): per
//                 block acc = fma(the block's integer dot, dw·da, acc).
// K-quants (cpu/kquants/dot.rs): each super-block gives the exact integer
// sums S_p = Σ scale·Σ w·a and M_p = Σ min·Σ a of its four groups of 64
// values, then
//   ORDER_SUPER_BLOCKS  (ggml's tiled kernels): r = d·ΣS, for types with
//                 minimums r = fma(-dmin, ΣM, r), and acc = fma(r, da, acc);
//   ORDER_K_GROUPS  (the repacked Q4_K gemm, Q4_K matrices of a multiple of
//                 8 rows): for each group acc = fma(S_p, d·da, acc) and
//                 acc_min = fma(M_p, dmin·da, acc_min); the row is acc - acc_min;
//   ORDER_K_GEMV  (the repacked Q4_K gemv, for rows llama.cpp runs alone):
//                 per super-block acc = fma(ΣS, d·da, acc) and
//                 acc_min = fma(ΣM, dmin·da, acc_min); the row is acc - acc_min;
//   ORDER_K_LANES  (ggml_vec_dot_*_q8_K, for rows llama.cpp runs alone):
//                 8 chains, chain l taking lane l of each super-block (bytes
//                 4l..4l+3 of each 32-value chunk, k_group_lanes), per
//                 super-block acc_l = fma(d·da, L_l, acc_l) (Q2_K first
//                 acc_l = fma(-da·dmin, M_l, acc_l)), then hsum_float_8; Q4_K
//                 adds ((m0 + m2) + (m1 + m3)) of four chains m_j = fma(-da·dmin,
//                 M of group j, m_j), Q5_K one chain fma(-da·dmin, ΣM, ·).
#define ORDER_LANES 0
#define ORDER_BLOCKS 1
#define ORDER_SUPER_BLOCKS 2
#define ORDER_K_GROUPS 3
#define ORDER_K_GEMV 4
#define ORDER_K_LANES 5


// Quantized GEMVs work on tiles of consecutive output rows (for swiglu, their
// gate and up rows), in two phases:
//   produce  the block's threads split the tile's blocks of 32 weights (row
//            after row, so consecutive threads read consecutive bytes); each
//            computes its blocks' integer dot products with the staged x,
//            split as the order needs (8 lane sums, or 1 block sum), and
//            stores them as f32 (exact: integers below 2^22) beside the
//            block's dw·da (and m for Q4_1) in shared memory;
//   walk     after a barrier, one thread per chain (8 a row for ORDER_LANES,
//            1 for ORDER_BLOCKS) adds its terms in block order, one fma each,
//            and the chains are combined as the CPU combines them.
// Only the walk is serial, at one fma and half a shared load per block.
//
// Shared memory after the staged x holds, for each row of the tile (gate rows
// first, then up rows), Planes::COUNT planes of `plane_stride(blocks)` floats,
// plane p holding term p of every block of the row; rows lie `row_floats`
// apart.

// One block of 32 weights as read: Q4 and Q5 blocks are 16 bytes of nibbles,
// Q8_0 blocks 32; the scale is one f16 d (Q4_0, Q5_0, Q8_0) or d and m (Q4_1,
// Q5_1); Q5's fifth bits come with it.
template <int T>
struct WeightBlock {
    uint4 lo, hi;  // hi: Q8_0 only
    u32 scale;
    u32 fifths;  // Q5 only: bit j for value j
};

template <int T>
__device__ __forceinline__ WeightBlock<T> load_block(const u8* qs, const u8* sc, u64 block) {
    WeightBlock<T> w;
    if (T == TYPE_Q8_0) {
        const uint4* p = (const uint4*)(qs + block * 32);
        w.lo = p[0];
        w.hi = p[1];
        w.scale = ((const u16*)sc)[block];
    } else if (is_five_bit(T)) {
        w.lo = *(const uint4*)(qs + block * 16);
        const uint2 header = ((const uint2*)sc)[block];
        w.scale = header.x;
        w.fifths = header.y;
    } else {
        w.lo = *(const uint4*)(qs + block * 16);
        w.scale = T == TYPE_Q4_1 ? ((const u32*)sc)[block] : ((const u16*)sc)[block];
    }
    return w;
}

// Bits 0..3 of n moved to bit 0 of bytes 0..3 (four values' fifth bits).
__device__ __forceinline__ u32 spread_bits(u32 n) {
    return (n & 1) | ((n & 2) << 7) | ((n & 4) << 14) | ((n & 8) << 21);
}

// The integer sums of the products of values 4l..4l+3 (l < 8) of weight block
// w and staged x block b. Byte j of a Q4 block holds value j in its low
// nibble and value j + 16 in its high one, so lanes 0-3 are low nibbles and
// lanes 4-7 high ones (Q5 adds each value's fifth bit as bit 4); Q4_0's
// values stand for q - 8 and Q5_0's for q - 16, so each of their lane sums
// starts from -8 (-16) times its x values' sum (a dp4a with -8s or -16s).
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
    const bool centre = T == TYPE_Q4_0 || T == TYPE_Q5_0;
    const int bias = T == TYPE_Q5_0 ? (int)0xf0f0f0f0u : (int)0xf8f8f8f8u;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int low_bias = centre ? __dp4a(bias, xl[j], 0) : 0;
        const int high_bias = centre ? __dp4a(bias, xh[j], 0) : 0;
        u32 low = wl[j] & m, high = (wl[j] >> 4) & m;
        if (is_five_bit(T)) {
            low |= spread_bits(w.fifths >> (4 * j)) << 4;
            high |= spread_bits(w.fifths >> (16 + 4 * j)) << 4;
        }
        lanes[j] = __dp4a((int)low, xl[j], low_bias);
        lanes[j + 4] = __dp4a((int)high, xh[j], high_bias);
    }
}

// The integer dot product of Q4_0 block w (values q - 8) and staged x block
// b: the nibbles' products, less 8 times the sum of x's values.
template <int T>
__device__ __forceinline__ int block_dot_q4_0(const WeightBlock<T>& w, const StagedQ8& x, int b) {
    const int4 lo = *(const int4*)(x.q + b * 32);
    const int4 hi = *(const int4*)(x.q + b * 32 + 16);
    const int xl[4] = {lo.x, lo.y, lo.z, lo.w}, xh[4] = {hi.x, hi.y, hi.z, hi.w};
    const u32 wl[4] = {w.lo.x, w.lo.y, w.lo.z, w.lo.w};
    const u32 m = 0x0f0f0f0fu;
    int dot = -8 * x.sum[b];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        dot = __dp4a((int)(wl[j] & m), xl[j], dot);
        dot = __dp4a((int)((wl[j] >> 4) & m), xh[j], dot);
    }
    return dot;
}

// The bits of 1.5·2^23: an integer i (|i| < 2^22) added to them reads as
// the f32 1.5·2^23 + i exactly, so unbiased() gives i (two full-rate
// instructions instead of a quarter-rate I2F). The tensor-core GEMVs start
// their MMAs from these bits.
#define FLOAT_BIAS 0x4b400000

__device__ __forceinline__ float unbiased(int biased) {
    return __fsub_rn(__int_as_float(biased), 12582912.0f);
}

// An integer as f32, exactly (|i| < 2^22).
__device__ __forceinline__ float exact_float(int i) { return unbiased(FLOAT_BIAS + i); }

// The planes of one row of a tile. K-quant rows: S_0..S_3 (int bits), d,
// and for types with minimums M_0..M_3 (int bits) and dmin, one walker;
// under ORDER_K_LANES the 8 lanes L_l, d, 8 minimum terms (Q2_K's lanes,
// Q4_K's and Q5_K's groups in the first 4) and dmin, a walker per lane.
template <int T, int ORDER>
struct Planes {
    static constexpr int CHAINS = ORDER == ORDER_LANES || ORDER == ORDER_K_LANES ? 8 : 1;
    static constexpr int SCALE = CHAINS;    // dw·da
    static constexpr int MIN = CHAINS + 1;  // m (Q4_1, Q5_1)
    static constexpr int K_SUMS = ORDER == ORDER_K_LANES ? 8 : 4;
    // Minimum terms: one per lane for Q2_K's lanes, else one per group.
    static constexpr int K_MIN_TERMS = ORDER == ORDER_K_LANES && T == TYPE_Q2_K ? 8 : 4;
    static constexpr int K_D = K_SUMS, K_MINS = K_SUMS + 1, K_DMIN = K_MINS + K_MIN_TERMS;
    static constexpr int COUNT = is_k_quant(T)
                                     ? (k_has_mins(T) ? K_SUMS + K_MIN_TERMS + 2 : K_SUMS + 1)
                                     : CHAINS + 1 + (has_min(T) ? 1 : 0);
};

// Floats per plane (`plane_stride` in ops/gemv_tile.rs): the blocks, rounded up to
// whole 16-byte units and to an odd number of them, so that walkers of
// consecutive planes read different banks.
__device__ __forceinline__ int plane_stride(int blocks) {
    const int units = (blocks + 3) / 4;
    return (units % 2 == 0 ? units + 1 : units) * 4;
}

// Floats per row of a tile (`row_floats` in ops/gemv_tile.rs): its planes,
// plus 16 bytes when they are an even number of 16-byte units, so that
// walkers of neighbouring rows (ORDER_BLOCKS) read different banks too.
template <int T, int ORDER>
__device__ __forceinline__ int row_floats(int blocks) {
    const int floats = Planes<T, ORDER>::COUNT * plane_stride(blocks);
    return (floats / 4) % 2 == 0 ? floats + 4 : floats;
}

// Where a tile's planes start: after the staged x (`staged_bytes` in
// ops/gemv.rs), 16-byte aligned.
template <int T>
__device__ __forceinline__ float* tile_planes(void* shared, int cols) {
    const int staged = is_k_quant(T) ? cols + cols / 256 * 4 + cols / 16 * 4 : cols + cols / 32 * 12;
    return (float*)shared + (staged + 15) / 16 * 4;
}

// A thread's blocks of a tile, loaded before any is used: items k, k + step,
// ... of the tile's NR·tile·blocks, item k being block k % blocks of the
// tile's row q = k / blocks (gate rows first, then up rows: span q / tile).
template <int T>
struct BlockBatch {
    static constexpr int UNROLL = T == TYPE_Q8_0 ? 4 : 8;
    WeightBlock<T> w[UNROLL];
};

// K-quants: items are groups of 64 values (item k of a row being group k % 4
// of super-block k / 4), kept as loaded until used. A thread keeps UNROLL
// groups requested: each is unpacked, its slot requested again UNROLL items
// on, and only then computed (produce_and_reload), so large matrices are not
// bound by one memory latency per group; UNROLL per type keeps the bytes in
// about 50 registers.
template <int T>
struct GroupBatch {
    static constexpr int UNROLL = T == TYPE_Q2_K || T == TYPE_Q4_K ? 4 : T == TYPE_Q6_K ? 1 : 2;
    KGroupBytes<T> w[UNROLL];
};

template <int T>
using TileBatch = typename conditional<is_k_quant(T), GroupBatch<T>, BlockBatch<T>>::type;

// Where item k of a tile is: its tile row q (span q / tile) and block b.
struct ItemAt {
    int q, b;
};

__device__ __forceinline__ ItemAt item_at(int k, int blocks) {
    const int q = (unsigned)k / (unsigned)blocks;
    ItemAt at = {q, k - q * blocks};
    return at;
}

// `at` moved on by `step` items (given as item_at(step)): no division.
__device__ __forceinline__ void advance(ItemAt& at, ItemAt step, int blocks) {
    at.q += step.q;
    at.b += step.b;
    if (at.b >= blocks) {
        at.b -= blocks;
        ++at.q;
    }
}

template <int T, int NR>
__device__ __forceinline__ void load_batch(const u8* qs, const u8* sc, int rows, int blocks,
                                           int start, int tile, int first, int step,
                                           BlockBatch<T>& batch) {
    const int valid = min(tile, rows - start);  // rows of the tile that exist
    const ItemAt stepped = item_at(step, blocks);
    ItemAt at = item_at(first, blocks);
#pragma unroll
    for (int u = 0; u < BlockBatch<T>::UNROLL; ++u, advance(at, stepped, blocks)) {
        if (at.q >= NR * tile) break;
        const int s = at.q >= tile, i = at.q - s * tile;  // span, row
        if (i < valid)
            batch.w[u] = load_block<T>(qs, sc, ((u64)s * rows + start + i) * blocks + at.b);
    }
}

// Computes the batch's terms and stores them in the planes.
template <int T, int ORDER, int NR>
__device__ __forceinline__ void produce_batch(const BlockBatch<T>& batch, const StagedQ8& x,
                                              int rows, int blocks, int start, int tile, int first,
                                              int step, float* planes) {
    typedef Planes<T, ORDER> P;
    const int stride = plane_stride(blocks), valid = min(tile, rows - start);
    const int row_size = row_floats<T, ORDER>(blocks);
    const ItemAt stepped = item_at(step, blocks);
    ItemAt at = item_at(first, blocks);
#pragma unroll
    for (int u = 0; u < BlockBatch<T>::UNROLL; ++u, advance(at, stepped, blocks)) {
        if (at.q >= NR * tile) break;
        const int s = at.q >= tile, i = at.q - s * tile, b = at.b;  // span, row, block
        if (i >= valid) continue;
        const WeightBlock<T>& w = batch.w[u];
        float* term = planes + at.q * row_size + b;
        if (ORDER == ORDER_BLOCKS) {  // Q4_0 only
            term[0] = exact_float(block_dot_q4_0(w, x, b));
        } else {
            int lanes[8];
            lane_sums<T>(w, x, b, lanes);
#pragma unroll
            for (int l = 0; l < 8; ++l) term[l * stride] = exact_float(lanes[l]);
        }
        term[P::SCALE * stride] = __fmul_rn(h2f((u16)(w.scale & 0xffff)), x.d[b]);
        if (has_min(T)) term[P::MIN * stride] = h2f((u16)(w.scale >> 16));
    }
}

// A thread's K-quant groups, items numbered as in load_batch with four items
// (the super-block's groups) per block.
template <int T, int NR>
__device__ __forceinline__ void load_batch(const u8* qs, const u8* sc, int rows, int blocks,
                                           int start, int tile, int first, int step,
                                           GroupBatch<T>& batch) {
    const int valid = min(tile, rows - start);
    const ItemAt stepped = item_at(step, 4 * blocks);
    ItemAt at = item_at(first, 4 * blocks);
#pragma unroll
    for (int u = 0; u < GroupBatch<T>::UNROLL; ++u, advance(at, stepped, 4 * blocks)) {
        if (at.q >= NR * tile) break;
        const int s = at.q >= tile, i = at.q - s * tile;  // span, row
        if (i < valid)
            batch.w[u] = load_k_group_bytes<T>(qs, sc,
                                               ((u64)s * rows + start + i) * blocks + at.b / 4,
                                               at.b % 4);
    }
}

// ORDER_K_LANES terms of group p: the four threads of a quad hold the four
// groups of one super-block (items are numbered so), and add their lane
// parts across the quad (exact integers); thread p then stores lanes 2p and
// 2p + 1, those of its own chunks, less Q6_K's chunk offsets, and its chunks'
// minimum terms (Q2_K) or its group's (Q4_K, Q5_K).
template <int T, typename P>
__device__ __forceinline__ void k_lanes_terms(const KGroup& g, const i8* a, const int* sums16,
                                              int p, int stride, float* term) {
    u32 lanes[8], chunk_mins[2], chunk_offsets[2];
    k_group_lanes<T>(g, a, sums16, lanes, chunk_mins, chunk_offsets);
    const unsigned quad = 0xfu << (threadIdx.x % WARP & ~3u);
#pragma unroll
    for (int l = 0; l < 8; ++l) {
        lanes[l] += __shfl_xor_sync(quad, lanes[l], 1);
        lanes[l] += __shfl_xor_sync(quad, lanes[l], 2);
    }
#pragma unroll
    for (int l = 0; l < 8; ++l) {
        if (l / 2 != p) continue;
        term[l * stride] = __int_as_float((int)(lanes[l] - chunk_offsets[l % 2]));
        if (T == TYPE_Q2_K) term[(P::K_MINS + l) * stride] = __int_as_float((int)chunk_mins[l % 2]);
    }
    if (T == TYPE_Q4_K || T == TYPE_Q5_K)
        term[(P::K_MINS + p) * stride] = __int_as_float((int)(chunk_mins[0] + chunk_mins[1]));
}

// Computes group g's integer sums (item `at`, of super-block column b and
// group p) and stores them, and the factors from group 0, in the planes.
template <int T, int ORDER>
__device__ __forceinline__ void produce_group(const KGroup& g, const StagedQ8K& x, ItemAt at,
                                              int row_size, int stride, float* planes) {
    typedef Planes<T, ORDER> P;
    const int b = at.b / 4, p = at.b % 4;  // super-block, group
    const i8* a = x.q + b * 256 + 64 * p;
    const int* sums16 = x.sum16 + b * 16 + 4 * p;
    float* term = planes + at.q * row_size + b;
    if constexpr (ORDER == ORDER_K_LANES) {
        k_lanes_terms<T, P>(g, a, sums16, p, stride, term);
    } else {
        int scaled, mins;
        k_group_sums<T>(g, a, sums16, &scaled, &mins);
        term[p * stride] = __int_as_float(scaled);
        if (k_has_mins(T)) term[(P::K_MINS + p) * stride] = __int_as_float(mins);
    }
    if (p == 0) {
        term[P::K_D * stride] = g.d;
        if (k_has_mins(T)) term[P::K_DMIN * stride] = g.dmin;
    }
}

// Computes the batch's groups (items first, first + step, ...) one by one,
// each slot requested again for the item UNROLL·step on before its group is
// computed, so that UNROLL loads stay in flight.
template <int T, int ORDER, int NR>
__device__ __forceinline__ void produce_and_reload(GroupBatch<T>& batch, const u8* qs,
                                                   const u8* sc, const StagedQ8K& x, int rows,
                                                   int blocks, int start, int tile, int first,
                                                   int step, float* planes) {
    constexpr int UNROLL = GroupBatch<T>::UNROLL;
    const int stride = plane_stride(blocks), valid = min(tile, rows - start);
    const int row_size = row_floats<T, ORDER>(blocks);
    const ItemAt stepped = item_at(step, 4 * blocks);
    ItemAt at = item_at(first, 4 * blocks), next = item_at(first + UNROLL * step, 4 * blocks);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        if (at.q >= NR * tile) break;
        const int i = at.q - (at.q >= tile) * tile;  // row of the span
        const KGroup g = unpack_k_group<T>(batch.w[u], at.b % 4);
        const int s = next.q >= tile, next_i = next.q - s * tile;
        if (next.q < NR * tile && next_i < valid)
            batch.w[u] = load_k_group_bytes<T>(
                qs, sc, ((u64)s * rows + start + next_i) * blocks + next.b / 4, next.b % 4);
        if (i < valid) produce_group<T, ORDER>(g, x, at, row_size, stride, planes);
        advance(at, stepped, 4 * blocks);
        advance(next, stepped, 4 * blocks);
    }
}

// The walk of one chain of each of the NR spans' row `i` (chain c; Q4_1's
// Σ m·s chains walked beside it, by every chain thread alike), then the row sums combined in
// hsum_float_8's order over the 8 chain threads (consecutive lanes); every
// lane of the warp calls this, and lane c = 0 of each row gets the sums.
template <int T, int ORDER, int NR>
__device__ __forceinline__ void walk_row(const float* planes, const StagedQ8& x, int blocks,
                                         int tile, int i, int c, float* out) {
    typedef Planes<T, ORDER> P;
    const int stride = plane_stride(blocks), row_size = row_floats<T, ORDER>(blocks);
    float acc[NR], min_terms[NR];
#pragma unroll
    for (int s = 0; s < NR; ++s) acc[s] = min_terms[s] = 0.0f;
    // Eight blocks at a time, their terms read before any is added, so the
    // chain waits for shared memory once per eight blocks.
    for (int b0 = 0; b0 < blocks; b0 += 8) {
        float4 terms[NR][2], scales[NR][2], mins[NR][2];
#pragma unroll
        for (int s = 0; s < NR; ++s) {
            const float* row = planes + (s * tile + i) * row_size + b0;
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                if (b0 + 4 * q >= blocks) break;  // past the plane's padding
                terms[s][q] = *(const float4*)(row + c * stride + 4 * q);
                scales[s][q] = *(const float4*)(row + P::SCALE * stride + 4 * q);
                if (has_min(T)) mins[s][q] = *(const float4*)(row + P::MIN * stride + 4 * q);
            }
        }
#pragma unroll
        for (int s = 0; s < NR; ++s) {
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const float t4[4] = {terms[s][q].x, terms[s][q].y, terms[s][q].z, terms[s][q].w};
                const float s4[4] = {scales[s][q].x, scales[s][q].y, scales[s][q].z,
                                     scales[s][q].w};
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (b0 + 4 * q + j < blocks) acc[s] = fmaf(s4[j], t4[j], acc[s]);
                if (has_min(T)) {  // every chain thread, so none waits on lane 0
                    const float m4[4] = {mins[s][q].x, mins[s][q].y, mins[s][q].z,
                                         mins[s][q].w};
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (b0 + 4 * q + j < blocks)
                            min_terms[s] = fmaf(m4[j], x.s[b0 + 4 * q + j], min_terms[s]);
                }
            }
        }
    }
#pragma unroll
    for (int s = 0; s < NR; ++s) {
        float sum = acc[s];
        if (ORDER == ORDER_LANES) {
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 4));
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 2));
            sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 1));
        }
        if (has_min(T)) sum = __fadd_rn(sum, min_terms[s]);
        out[s] = sum;
    }
}

// The ORDER_K_LANES walk of the NR spans' row `i`: chain c (one of 8
// neighbouring threads) takes lane c, then the chains are combined in
// hsum_float_8's order and the minimums' chains added (ORDER_* above).
template <int T, int ORDER, int NR>
__device__ __forceinline__ void walk_k_lanes(const float* planes, const StagedQ8K& x, int blocks,
                                             int tile, int i, int c, float* out) {
    typedef Planes<T, ORDER> P;
    const int stride = plane_stride(blocks), row_size = row_floats<T, ORDER>(blocks);
    float acc[NR], min_acc[NR];
#pragma unroll
    for (int s = 0; s < NR; ++s) acc[s] = min_acc[s] = 0.0f;
    for (int b = 0; b < blocks; ++b) {
        const float da = x.d[b];
#pragma unroll
        for (int s = 0; s < NR; ++s) {
            const float* term = planes + (s * tile + i) * row_size + b;
            const float d = __fmul_rn(da, term[P::K_D * stride]);
            const float dmin = k_has_mins(T) ? __fmul_rn(-da, term[P::K_DMIN * stride]) : 0.0f;
            const int* mins = (const int*)term + P::K_MINS * stride;
            if (T == TYPE_Q2_K) acc[s] = fmaf(dmin, __int2float_rn(mins[c * stride]), acc[s]);
            acc[s] = fmaf(d, __int2float_rn(__float_as_int(term[c * stride])), acc[s]);
            if (T == TYPE_Q4_K)
                min_acc[s] = fmaf(dmin, __int2float_rn(mins[(c % 4) * stride]), min_acc[s]);
            if (T == TYPE_Q5_K) {
                const u32 m = (u32)mins[0] + (u32)mins[stride] + (u32)mins[2 * stride] +
                              (u32)mins[3 * stride];
                min_acc[s] = fmaf(dmin, __int2float_rn((int)m), min_acc[s]);
            }
        }
    }
#pragma unroll
    for (int s = 0; s < NR; ++s) {
        float sum = acc[s];
        sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 4));
        sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 2));
        sum = __fadd_rn(sum, __shfl_xor_sync(FULL_MASK, sum, 1));
        if (T == TYPE_Q4_K) {
            float m = __fadd_rn(min_acc[s], __shfl_xor_sync(FULL_MASK, min_acc[s], 2));
            m = __fadd_rn(m, __shfl_xor_sync(FULL_MASK, m, 1));
            sum = __fadd_rn(sum, m);
        }
        if (T == TYPE_Q5_K) sum = __fadd_rn(sum, min_acc[s]);
        out[s] = sum;
    }
}

// Whether a tile's ORDER_K_LANES rows are walked by one thread each
// (walk_k_lanes_row) rather than a thread per chain: when a thread per chain
// would take the tile's rows in more than one pass (the output head's tiles);
// with one pass the 8 chain threads of a row are quicker.
template <int ORDER>
__device__ __forceinline__ bool walks_rows(int tile) {
    return ORDER == ORDER_K_LANES && tile * 8 > (int)blockDim.x;
}

// walk_k_lanes by one thread per row: its 8 lane chains (and Q4_K's four
// minimum chains) side by side, each plane read four super-blocks at a time,
// then combined as the shuffles there combine them: the same steps in the
// same order, so the same bits. A row's factors are read once instead of by
// each of its 8 chain threads, and every row of a large tile is walked in one
// pass (walks_rows).
template <int T, int ORDER, int NR>
__device__ __forceinline__ void walk_k_lanes_row(const float* planes, const StagedQ8K& x,
                                                 int blocks, int tile, int i, float* out) {
    typedef Planes<T, ORDER> P;
    const int stride = plane_stride(blocks), row_size = row_floats<T, ORDER>(blocks);
    constexpr int MIN_CHAINS = T == TYPE_Q4_K ? 4 : 1;
    float acc[NR][8], min_acc[NR][MIN_CHAINS];
#pragma unroll
    for (int s = 0; s < NR; ++s) {
#pragma unroll
        for (int l = 0; l < 8; ++l) acc[s][l] = 0.0f;
#pragma unroll
        for (int m = 0; m < MIN_CHAINS; ++m) min_acc[s][m] = 0.0f;
    }
    // Reads past the last super-block stay in shared memory (see walk_row).
    for (int b0 = 0; b0 < blocks; b0 += 4) {
        const float4 da4 = *(const float4*)(x.d + b0);
#pragma unroll
        for (int s = 0; s < NR; ++s) {
            const float* row = planes + (s * tile + i) * row_size + b0;
            float4 lanes[8], mins[P::K_MIN_TERMS], ds, dmins;
#pragma unroll
            for (int l = 0; l < 8; ++l) lanes[l] = *(const float4*)(row + l * stride);
            ds = *(const float4*)(row + P::K_D * stride);
            if (k_has_mins(T)) {
                dmins = *(const float4*)(row + P::K_DMIN * stride);
#pragma unroll
                for (int m = 0; m < P::K_MIN_TERMS; ++m)
                    mins[m] = *(const float4*)(row + (P::K_MINS + m) * stride);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (b0 + j >= blocks) break;
                const float da = component(da4, j);
                const float d = __fmul_rn(da, component(ds, j));
                const float dmin = k_has_mins(T) ? __fmul_rn(-da, component(dmins, j)) : 0.0f;
#pragma unroll
                for (int l = 0; l < 8; ++l) {
                    if (T == TYPE_Q2_K)
                        acc[s][l] = fmaf(dmin, __int2float_rn(__float_as_int(component(mins[l], j))),
                                         acc[s][l]);
                    acc[s][l] =
                        fmaf(d, __int2float_rn(__float_as_int(component(lanes[l], j))), acc[s][l]);
                }
                if (T == TYPE_Q4_K) {
#pragma unroll
                    for (int m = 0; m < 4; ++m)
                        min_acc[s][m] = fmaf(
                            dmin, __int2float_rn(__float_as_int(component(mins[m], j))), min_acc[s][m]);
                }
                if (T == TYPE_Q5_K) {
                    u32 total = 0;
#pragma unroll
                    for (int m = 0; m < 4; ++m) total += (u32)__float_as_int(component(mins[m], j));
                    min_acc[s][0] = fmaf(dmin, __int2float_rn((int)total), min_acc[s][0]);
                }
            }
        }
    }
#pragma unroll
    for (int s = 0; s < NR; ++s) {
        const float* a = acc[s];
        float sum = __fadd_rn(__fadd_rn(__fadd_rn(a[0], a[4]), __fadd_rn(a[2], a[6])),
                              __fadd_rn(__fadd_rn(a[1], a[5]), __fadd_rn(a[3], a[7])));
        if (T == TYPE_Q4_K) {
            const float* m = min_acc[s];
            sum = __fadd_rn(sum, __fadd_rn(__fadd_rn(m[0], m[2]), __fadd_rn(m[1], m[3])));
        }
        if (T == TYPE_Q5_K) sum = __fadd_rn(sum, min_acc[s][0]);
        out[s] = sum;
    }
}

// One super-block's step of a K-quant row's walk (ORDER_* above): its four
// group sums `scaled` and minimum sums `mins`, its d and dmin, and x's da.
template <int T, int ORDER>
__device__ __forceinline__ void k_super_block_step(const int* scaled, const int* mins, float d,
                                                   float dmin, float da, float& acc,
                                                   float& acc_min) {
    if (ORDER == ORDER_K_GROUPS) {
        const float scale = __fmul_rn(d, da), min_scale = __fmul_rn(dmin, da);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            acc = fmaf(__int2float_rn(scaled[p]), scale, acc);
            acc_min = fmaf(__int2float_rn(mins[p]), min_scale, acc_min);
        }
    } else if (ORDER == ORDER_K_GEMV) {
        const u32 total = (u32)scaled[0] + (u32)scaled[1] + (u32)scaled[2] + (u32)scaled[3];
        const u32 m = (u32)mins[0] + (u32)mins[1] + (u32)mins[2] + (u32)mins[3];
        acc = fmaf(__int2float_rn((int)total), __fmul_rn(d, da), acc);
        acc_min = fmaf(__int2float_rn((int)m), __fmul_rn(dmin, da), acc_min);
    } else {
        // The sums' totals wrap as the CPU's i32 sums do.
        const u32 total = (u32)scaled[0] + (u32)scaled[1] + (u32)scaled[2] + (u32)scaled[3];
        float r = __fmul_rn(d, __int2float_rn((int)total));
        if (k_has_mins(T)) {
            const u32 m = (u32)mins[0] + (u32)mins[1] + (u32)mins[2] + (u32)mins[3];
            r = fmaf(-dmin, __int2float_rn((int)m), r);
        }
        acc = fmaf(r, da, acc);
    }
}

// The walk of the NR spans' row `i` of K-quant weights, super-block after
// super-block with the CPU backend's f32 steps (cpu/kquants/dot.rs `step`
// and `finish`; ORDER_* above). One thread per row (c is always 0).
template <int T, int ORDER, int NR>
__device__ __forceinline__ void walk_row(const float* planes, const StagedQ8K& x, int blocks,
                                         int tile, int i, int c, float* out) {
    typedef Planes<T, ORDER> P;
    const int stride = plane_stride(blocks), row_size = row_floats<T, ORDER>(blocks);
    if constexpr (ORDER == ORDER_K_LANES) {
        if (walks_rows<ORDER>(tile))
            walk_k_lanes_row<T, ORDER, NR>(planes, x, blocks, tile, i, out);
        else
            walk_k_lanes<T, ORDER, NR>(planes, x, blocks, tile, i, c, out);
        return;
    }
    float acc[NR], acc_min[NR];
#pragma unroll
    for (int s = 0; s < NR; ++s) acc[s] = acc_min[s] = 0.0f;
    // Each plane is read four super-blocks at a time: walkers of neighbouring
    // rows then read different banks (row_floats), and the chain does not
    // wait on shared memory once a super-block. Planes are padded to whole
    // float4s (plane_stride), and x.d is followed by sum16, so the reads past
    // the last super-block stay in the block's shared memory; their values
    // are not used.
    for (int b0 = 0; b0 < blocks; b0 += 4) {
        const float4 da4 = *(const float4*)(x.d + b0);
#pragma unroll
        for (int s = 0; s < NR; ++s) {
            const float* row = planes + (s * tile + i) * row_size + b0;
            float4 sums[4], min_sums[4], ds, dmins;
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                sums[p] = *(const float4*)(row + p * stride);
                if (k_has_mins(T)) min_sums[p] = *(const float4*)(row + (P::K_MINS + p) * stride);
            }
            ds = *(const float4*)(row + P::K_D * stride);
            if (k_has_mins(T)) dmins = *(const float4*)(row + P::K_DMIN * stride);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (b0 + j >= blocks) break;
                const float da = component(da4, j), d = component(ds, j);
                const float dmin = k_has_mins(T) ? component(dmins, j) : 0.0f;
                int scaled[4], mins[4] = {0, 0, 0, 0};
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    scaled[p] = __float_as_int(component(sums[p], j));
                    if (k_has_mins(T)) mins[p] = __float_as_int(component(min_sums[p], j));
                }
                k_super_block_step<T, ORDER>(scaled, mins, d, dmin, da, acc[s], acc_min[s]);
            }
        }
    }
#pragma unroll
    for (int s = 0; s < NR; ++s) {
        const bool two_chains = ORDER == ORDER_K_GROUPS || ORDER == ORDER_K_GEMV;
        out[s] = two_chains ? __fsub_rn(acc[s], acc_min[s]) : acc[s];
    }
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

// What the rotation and cache write of the pair of rows (r, r + 1) read
// besides the rows: the position, its cos/sin for the pair and the caches.
// None of it is written by an earlier kernel, so a tile loads it before its
// wait and the serial tail does not wait on memory.
struct PairInputs {
    int pos;
    float2 cs;
    u16* k_cache;
    u16* v_cache;
};

// Those of sequence `seq` of a batched launch (else of the one sequence).
__device__ __forceinline__ PairInputs rope_pair_inputs_of(const RopeStore& rope, int r, int seq,
                                                          bool batched) {
    PairInputs in;
    in.pos = batched ? rope.position[seq] : *rope.position;
    in.cs = rope.cos_sin[(u64)in.pos * (rope.head_dim / 2) + r % rope.head_dim / 2];
    in.k_cache = batched ? rope.k_tables[seq] : rope.k_cache;
    in.v_cache = batched ? rope.v_tables[seq] : rope.v_cache;
    return in;
}

template <bool BATCHED>
__device__ __forceinline__ PairInputs rope_pair_inputs(const RopeStore& rope, int r) {
    return rope_pair_inputs_of(rope, r, blockIdx.y, BATCHED);
}

// Rotates the pair of rows (r, r + 1) of the QKV output `y` in place (queries),
// or writes it to the cache (keys rotated, values as they are).
__device__ __forceinline__ void rope_store_pair_with(const RopeStore& rope, const PairInputs& in,
                                                     float* y, int r, float x0, float x1) {
    const int within = r % rope.head_dim;
    if (r >= rope.q_width + rope.kv_width) {  // values
        const int v = r - rope.q_width - rope.kv_width;
        const u64 at = ((u64)(v / rope.head_dim) * rope.capacity + in.pos) * rope.head_dim + within;
        in.v_cache[at] = f2h(x0);
        in.v_cache[at + 1] = f2h(x1);
        return;
    }
    const float2 cs = in.cs;
    const float r0 = fmaf(x0, cs.x, -(x1 * cs.y)), r1 = fmaf(x0, cs.y, x1 * cs.x);
    if (r < rope.q_width) {
        y[r] = r0;
        y[r + 1] = r1;
    } else {
        const int k = r - rope.q_width;
        const u64 at = ((u64)(k / rope.head_dim) * rope.capacity + in.pos) * rope.head_dim + within;
        in.k_cache[at] = f2h(r0);
        in.k_cache[at + 1] = f2h(r1);
    }
}

template <bool BATCHED>
__device__ void rope_store_pair(const RopeStore& rope, float* y, int r, float x0, float x1) {
    rope_store_pair_with(rope, rope_pair_inputs<BATCHED>(rope, r), y, r, x0, x1);
}

// The weights of the next matrix to ask L2 for (bytes of quants and scales
// from the start of each).
struct NextWeights {
    const u8* quants;
    int quant_bytes;
    const u8* scales;
    int scale_bytes;
};

// Before waiting for the previous kernel: the `l2_prefetch` requests (see
// ops/mod.rs). Staging reads the norm weights (the post-norm branch's and
// x's) right after the wait, and RoPE this position's cos/sin row, and
// little else of theirs is cached by then (a token streams all the weights
// through L2): they are asked into this multiprocessor's L1 first, before
// the stream of `next`'s requests that would queue ahead of them. At level 2
// the grid also asks L2 for `next`, the first weights of the matrix the step
// multiplies by next, whose blocks can often start only when this kernel's
// leave their multiprocessors.
template <int MODE, bool BATCHED>
__device__ __forceinline__ void prefetch_inputs(const float* norm_weight, const PreAdd& pre,
                                                int cols, const RopeStore& rope, int l2_prefetch,
                                                const NextWeights& next) {
    if (l2_prefetch && MODE >= 2) {
        prefetch_l1(norm_weight, (u64)cols * 4);
        if (pre.branch) prefetch_l1(pre.weight, (u64)cols * 4);
        // The position comes from the host (copied before the step's kernels
        // run), so it may be read before the wait.
        if (MODE == 4) {
            const int pos = BATCHED ? rope.position[blockIdx.y] : *rope.position;
            prefetch_l1(rope.cos_sin + (u64)pos * (rope.head_dim / 2), (u64)rope.head_dim * 4);
        }
    }
    if (l2_prefetch >= 2 && (!BATCHED || blockIdx.y == 0)) {
        prefetch_share_l2(next.quants, next.quant_bytes);
        prefetch_share_l2(next.scales, next.scale_bytes);
    }
}

// MODE 0: plain, 1: residual, 2: norm, 3: norm + gated activation, 4: norm +
// RoPE + cache write.
//
// BATCHED (the gemv_batched_* kernels): gridDim.y sequences decode at once; x
// and y of sequence blockIdx.y lie `cols` and `rows` values further on per
// sequence. Each sequence's numbers are exactly those of a launch for it
// alone, and the weights come from L2 after the first read.

// Float weights: each warp takes one output row at a time (for swiglu its gate
// and up rows together); a block's warps take consecutive rows, so with RoPE
// each pair of rows is in one block. Float GEMVs are busy enough that a
// waiting next kernel beside them costs more than it saves (measured: F16
// decode at half speed), so they let it start only when they finish.
template <int T, int MODE, bool BATCHED>
__device__ void gemv_rows(const u8* qs, const float* x, const float* norm_weight, float eps,
                          float* y, int rows, int cols, RopeStore rope, int l2_prefetch,
                          NextWeights next, int y_stride, PreAdd pre) {
    if (BATCHED) {
        x += (u64)blockIdx.y * cols;
        y += (u64)blockIdx.y * y_stride;
        pre = pre_add_of_sequence(pre, cols);
    }
    extern __shared__ float4 shared[];
    __shared__ double scratch[32];
    __shared__ float pair_rows[GEMV_MAX_THREADS / WARP];
    constexpr int NR = MODE == 3 ? 2 : 1;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int per_block = blockDim.x / WARP;  // rows in flight per block
    const int first_base = blockIdx.x * per_block, stride = gridDim.x * per_block;
    prefetch_inputs<MODE, BATCHED>(norm_weight, pre, cols, rope, l2_prefetch, next);
    wait_for_previous_kernel();
    x = pre_add(x, pre, cols, eps, scratch);
    stage_f32(x, MODE >= 2 ? norm_weight : 0, eps, cols, (float*)shared, scratch);
    for (int base = first_base; base < rows; base += stride) {
        const int r = base + warp;
        float dot[NR];
        u64 picked[NR];
        picked[0] = (u64)r;
        if (NR == 2) picked[NR - 1] = (u64)(r + rows);
        const float prior = MODE == 1 && lane == 0 && r < rows ? y[r] : 0.0f;
        if (r < rows) rows_dot_f<T, NR>(qs, picked, cols, (const float*)shared, dot);
        if (MODE == 4) {
            // Whole blocks reach these barriers: the loop bound is per block.
            if (lane == 0) pair_rows[warp] = r < rows ? dot[0] : 0.0f;
            __syncthreads();
            const int pair = threadIdx.x;
            if (pair < per_block / 2 && base + 2 * pair + 1 < rows)
                rope_store_pair<BATCHED>(rope, y, base + 2 * pair, pair_rows[2 * pair],
                                         pair_rows[2 * pair + 1]);
            __syncthreads();
        } else if (lane == 0 && r < rows) {
            if (MODE == 3)
                y[r] = gated((const u16*)rope.cos_sin, dot[0], dot[NR - 1], r, rows);
            else
                y[r] = MODE == 1 ? __fadd_rn(prior, dot[0]) : dot[0];
        }
    }
}

// Quantized weights: block blockIdx.x takes tile blockIdx.x, of `tile` rows
// (even, so each RoPE pair is in one tile). Each thread's first blocks are
// loaded before x is staged, so the two waits overlap; quantized GEMVs are
// bound by memory latency and gain from the next kernel starting early.
template <int T, int ORDER, int MODE, bool BATCHED>
__device__ void gemv_tiles(const u8* qs, const u8* sc, const float* x, const float* norm_weight,
                           float eps, float* y, int rows, int cols, RopeStore rope,
                           int l2_prefetch, NextWeights next, int tile, int y_stride,
                           PreAdd pre) {
    if (BATCHED) {
        x += (u64)blockIdx.y * cols;
        y += (u64)blockIdx.y * y_stride;
        pre = pre_add_of_sequence(pre, cols);
    }
    extern __shared__ float4 shared[];
    __shared__ double scratch[32];
    constexpr int NR = MODE == 3 ? 2 : 1;
    // Threads walking each row (walk_row).
    const int walkers = walks_rows<ORDER>(tile) ? 1 : Planes<T, ORDER>::CHAINS;
    constexpr int STEP = TileBatch<T>::UNROLL;
    // Items: blocks of 32 weights, or the four 64-value groups of a K-quant
    // super-block.
    constexpr int ITEMS_PER_BLOCK = is_k_quant(T) ? 4 : 1;
    const int blocks = cols / block_values(T), start = blockIdx.x * tile;
    const int items = NR * tile * blocks * ITEMS_PER_BLOCK;
#if GEMV_CLOCKS
    const long long clkw = clock64();
#endif
    EarlyNorm early_norm;
    const bool early = is_k_quant(T) && MODE >= 2 && stages_early(cols);
    if (early) load_early_norm(norm_weight, cols, early_norm);
    TileBatch<T> batch;  // the thread's next blocks
    load_batch<T, NR>(qs, sc, rows, blocks, start, tile, threadIdx.x, blockDim.x, batch);
    prefetch_inputs<MODE, BATCHED>(norm_weight, pre, cols, rope, l2_prefetch, next);
    // What the first pass's epilogue reads, loaded now so that the tail does
    // not wait on memory: RoPE's inputs now, the residual after the wait.
    const int first_i = min((int)threadIdx.x / walkers, tile - 1);
    const int first_r = min(start + first_i, rows - 1);
    PairInputs first_pair;
    if (MODE == 4) first_pair = rope_pair_inputs<BATCHED>(rope, first_r & ~1);
    allow_next_kernel();
    wait_for_previous_kernel();
    const float first_prior = MODE == 1 ? y[first_r] : 0.0f;
#if GEMV_CLOCKS
    const long long clk0 = clock64();
#endif
    const auto xq = stage_x<T>(x, pre, MODE >= 2 ? norm_weight : 0, eps, cols, shared, scratch,
                               early_norm, early);
#if GEMV_CLOCKS
    const long long clk1 = clock64();
#endif
    float* planes = tile_planes<T>(shared, cols);
    for (int k0 = threadIdx.x; k0 < items; k0 += STEP * blockDim.x) {
        if constexpr (is_k_quant(T)) {
            produce_and_reload<T, ORDER, NR>(batch, qs, sc, xq, rows, blocks, start, tile, k0,
                                             blockDim.x, planes);
        } else {
            // Each batch is requested before the one before it is used.
            TileBatch<T> next_batch;
            const int k1 = k0 + STEP * blockDim.x;
            if (k1 < items)
                load_batch<T, NR>(qs, sc, rows, blocks, start, tile, k1, blockDim.x, next_batch);
            produce_batch<T, ORDER, NR>(batch, xq, rows, blocks, start, tile, k0, blockDim.x,
                                        planes);
            batch = next_batch;
        }
    }
#if GEMV_CLOCKS
    const long long clk2 = clock64();
#endif
    __syncthreads();
#if GEMV_CLOCKS
    const long long clk3 = clock64();
#endif
    // The walkers: in each pass over the tile's rows, thread t walks chain
    // t % walkers of the pass's row t / walkers (whole warps, for the
    // shuffles; threads past the tile's rows walk its last row and drop the
    // sums).
    const int c = threadIdx.x % walkers, per_pass = blockDim.x / walkers;
    for (int pass = 0; pass < tile; pass += per_pass) {
        if ((int)threadIdx.x >= ((tile - pass) * walkers + WARP - 1) / WARP * WARP) break;
        const int i = min(pass + (int)threadIdx.x / walkers, tile - 1), r = start + i;
        float sum[NR];
        walk_row<T, ORDER, NR>(planes, xq, blocks, tile, i, c, sum);
        const bool owner = c == 0 && pass + (int)threadIdx.x / walkers < tile && r < rows;
        if (MODE == 4) {
            // Rows r (even) and r + 1 are neighbouring walkers.
            const float odd = __shfl_down_sync(FULL_MASK, sum[0], walkers);
            if (owner && i % 2 == 0 && r + 1 < rows) {
                if (pass == 0)
                    rope_store_pair_with(rope, first_pair, y, r, sum[0], odd);
                else
                    rope_store_pair<BATCHED>(rope, y, r, sum[0], odd);
            }
        } else if (owner) {
            if (MODE == 3)
                y[r] = gated((const u16*)rope.cos_sin, sum[0], sum[NR - 1], r, rows);
            else
                y[r] = MODE == 1 ? __fadd_rn(pass == 0 ? first_prior : y[r], sum[0]) : sum[0];
        }
    }
#if GEMV_CLOCKS
    if ((blockIdx.x == 0 || blockIdx.x == gridDim.x / 2) && threadIdx.x == 0 && !BATCHED)
        printf("clk %d %d %d %d %d %lld %lld %lld %lld %lld\n", MODE, rows, cols, tile, blockIdx.x,
               clk0 - clkw, clk1 - clk0, clk2 - clk1, clk3 - clk2, clock64() - clk3);
#endif
}

template <int T, int ORDER, int MODE, bool BATCHED>
__device__ __forceinline__ void gemv_any(const u8* qs, const u8* sc, const float* x,
                                         const float* norm_weight, float eps, float* y, int rows,
                                         int cols, RopeStore rope, int l2_prefetch,
                                         NextWeights next, int tile, int y_stride, PreAdd pre) {
    if constexpr (T == TYPE_F32 || T == TYPE_F16 || T == TYPE_BF16)
        gemv_rows<T, MODE, BATCHED>(qs, x, norm_weight, eps, y, rows, cols, rope, l2_prefetch,
                                    next, y_stride, pre);
    else
        gemv_tiles<T, ORDER, MODE, BATCHED>(qs, sc, x, norm_weight, eps, y, rows, cols, rope,
                                            l2_prefetch, next, tile, y_stride, pre);
}

// The kernels gemv_<mode><name> (names per unit, see compile.rs: float types
// end in _l32, a warp per row; quantized types take tiles), each taking a
// PreAdd (branch, branch_weight, x_out; null branch for none) last;
// gemv_batched_<mode><name> take per-sequence cache tables too, and write
// sequence s's rows at y + s·y_stride (a part of a wider output may be
// written). Every kernel takes the same parameters, so the host passes one
// list; `tile` (rows per tile) is the quantized kernels'.
#define GEMV_KERNEL(KIND, MODE, NAME, T, ORDER)                                              \
    extern "C" __global__ void __launch_bounds__(GEMV_MAX_THREADS)                          \
        gemv_##KIND##NAME(const u8* qs, const u8* sc, const float* x,                        \
                          const float* norm_weight, float eps, float* y, int rows, int cols, \
                          const float2* cos_sin, const int* position, int q_width,           \
                          int kv_width, int head_dim, int capacity, u16* k_cache,            \
                          u16* v_cache, int l2_prefetch, const u8* next_qs,                  \
                          int next_qs_bytes, const u8* next_sc, int next_sc_bytes, int tile, \
                          int y_stride, const float* branch, const float* branch_weight,     \
                          float* x_out) {                                                    \
        RopeStore rope = {cos_sin, position, q_width,  kv_width, head_dim,                   \
                          capacity, k_cache, v_cache, 0,        0};                          \
        NextWeights next = {next_qs, next_qs_bytes, next_sc, next_sc_bytes};                 \
        PreAdd pre = {branch, branch_weight, x_out};                                         \
        gemv_any<T, ORDER, MODE, false>(qs, sc, x, norm_weight, eps, y, rows, cols, rope,    \
                                        l2_prefetch, next, tile, y_stride, pre);             \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(GEMV_MAX_THREADS)                          \
        gemv_batched_##KIND##NAME(                                                           \
            const u8* qs, const u8* sc, const float* x, const float* norm_weight, float eps, \
            float* y, int rows, int cols, const float2* cos_sin, const int* position,        \
            int q_width, int kv_width, int head_dim, int capacity, u16* const* k_tables,     \
            u16* const* v_tables, int l2_prefetch, const u8* next_qs, int next_qs_bytes,     \
            const u8* next_sc, int next_sc_bytes, int tile, int y_stride,                    \
            const float* branch, const float* branch_weight, float* x_out) {                 \
        RopeStore rope = {cos_sin, position, q_width, kv_width, head_dim,                    \
                          capacity, 0,       0,       k_tables, v_tables};                   \
        NextWeights next = {next_qs, next_qs_bytes, next_sc, next_sc_bytes};                 \
        PreAdd pre = {branch, branch_weight, x_out};                                         \
        gemv_any<T, ORDER, MODE, true>(qs, sc, x, norm_weight, eps, y, rows, cols, rope,     \
                                       l2_prefetch, next, tile, y_stride, pre);              \
    }
#define GEMV_KERNELS(NAME, T, ORDER)             \
    GEMV_KERNEL(, 0, NAME, T, ORDER)             \
    GEMV_KERNEL(residual_, 1, NAME, T, ORDER)    \
    GEMV_KERNEL(norm_, 2, NAME, T, ORDER)        \
    GEMV_KERNEL(norm_gated_, 3, NAME, T, ORDER)  \
    GEMV_KERNEL(norm_rope_, 4, NAME, T, ORDER)

// The instantiations are added per weight type by compile.rs: each type's GEMVs
// are one translation unit, and the units compile in parallel.
