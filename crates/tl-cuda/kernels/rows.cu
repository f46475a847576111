// Row-wise steps of a prefill batch and the lookups around the model: GEMM
// inputs in f16 (normalised and Q8-rounded as asked), SwiGLU (also straight
// into such an input), dequantization of
// a weight matrix into f16 (the GEMM's other input), embedding lookup, argmax.

// How GEMM inputs are rounded before f16 (`Rounding` in ops/rows.rs): not at
// all (float weights), as llama.cpp's Q8 blocks (the 32-value types) or as
// its Q8_K super-blocks (K-quants).
#define ROUND_NONE 0
#define ROUND_Q8 1
#define ROUND_Q8_K 2

// Values [8·lane, 8·lane + 8) of the 256 at `v`, as a warp's lanes hold them
// for quantize_q8_k_warp, written back as q·d in f16.
__device__ __forceinline__ void round_q8_k_to_f16(const float* v, u16* out) {
    int q[8], run_sum;
    const float d = quantize_q8_k_warp(v, q, &run_sum);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = f2h(__fmul_rn((float)q[j], d));
}

// The f16 input of a prefill GEMM: out[r] = x[r], or rmsnorm(x[r])·weight when
// `weight` is given, rounded to f16. With rounding ROUND_Q8 (ROUND_Q8_K) the
// values first go through llama.cpp's Q8 block (Q8_K super-block)
// quantization, as q·d, so the GEMM multiplies the activations the CPU
// backend's quantized matmul multiplies. One block per row.
extern "C" __global__ void rows_to_f16(const float* x, const float* weight, float eps,
                                       int rounding, u16* out, int cols) {
    __shared__ double scratch[32];
    const u64 row = blockIdx.x;
    const float* xr = x + row * (u64)cols;
    u16* o = out + row * (u64)cols;
    const float scale = weight ? rms_scale(xr, cols, eps, scratch) : 1.0f;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (rounding == ROUND_NONE) {
        for (int i = threadIdx.x; i < cols; i += blockDim.x)
            o[i] = f2h(staged_input(xr, weight, scale, i));
        return;
    }
    if (rounding == ROUND_Q8_K) {
        // One warp per super-block, lane l holding values 8l..8l+7.
        for (int b = warp; b < cols / 256; b += blockDim.x / WARP) {
            const int at = b * 256 + 8 * lane;
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = staged_input(xr, weight, scale, at + j);
            round_q8_k_to_f16(v, o + at);
        }
        return;
    }
    // One warp per Q8 block, lane i holding value i.
    for (int b = warp; b < cols / 32; b += blockDim.x / WARP) {
        const int i = b * 32 + lane;
        float d;
        const int q = quantize_q8_lane(staged_input(xr, weight, scale, i), &d);
        o[i] = f2h((float)q * h2f(f2h(d)));
    }
}

// gate_up is [rows][2·width] (gate then up); out[r][i] = silu(gate)·up.
// x[r][i] += bias[i] for rows r < rows (the query, key and value biases of a
// row of QKV outputs): one f32 add, as the CPU backend's.
extern "C" __global__ void add_row_bias(float* x, const float* bias, int rows, int width) {
    const u64 n = (u64)rows * width;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        x[i] += bias[i % width];
    }
}

extern "C" __global__ void swiglu(const float* gate_up, float* out, int rows, int width) {
    const u64 n = (u64)rows * width;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 r = i / width, c = i % width;
        const float g = gate_up[r * 2 * width + c], u = gate_up[r * 2 * width + width + c];
        out[i] = silu(g) * u;
    }
}

// swiglu then rows_to_f16 (no norm) in one pass, for the MLP's down projection
// in a prefill batch: out[r][i] = f16(silu(gate)·up) (GeGLU's gelu from
// `gelu_table` when it is given), or with rounding that
// value first rounded as rows_to_f16 does. The same operations as the two
// kernels, so the same bits, without writing and reading back the f32 values.
// A grid-stride loop over all values, as swiglu's (one block per row measured
// slower: each warp waited on its loads block after block); with ROUND_Q8 the
// width is a multiple of 32 and the stride of whole warps, so each warp holds
// one Q8 block, lane i value i; with ROUND_Q8_K (width a multiple of 256) the
// warps take super-blocks in turn, eight values a lane.
extern "C" __global__ void swiglu_to_f16(const float* gate_up, u16* out, int rows, int width,
                                         int rounding, const u16* gelu_table) {
    const u64 n = (u64)rows * width;
    if (rounding == ROUND_Q8_K) {
        const u64 warps = (u64)gridDim.x * blockDim.x / WARP;
        const int lane = threadIdx.x % WARP, per_row = width / 256;
        for (u64 b = (blockIdx.x * (u64)blockDim.x + threadIdx.x) / WARP; b < n / 256; b += warps) {
            const u64 r = b / per_row, c = (b % per_row) * 256 + 8 * lane;
            const float* g = gate_up + r * 2 * width + c;
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; ++j)
                v[j] = gelu_table ? __fmul_rn(gelu_tabulated(gelu_table, g[j]), g[width + j])
                                  : silu(g[j]) * g[width + j];
            round_q8_k_to_f16(v, out + r * width + c);
        }
        return;
    }
    const bool q8 = rounding == ROUND_Q8;
    // 32-bit division where the indices fit (a 64-bit one is a long routine).
    const bool narrow = n <= 0xffffffffull;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 r = narrow ? (u32)i / (u32)width : i / width;
        const u64 c = i - r * width;
        const float g = gate_up[r * 2 * width + c], u = gate_up[r * 2 * width + width + c];
        const float h = gelu_table ? __fmul_rn(gelu_tabulated(gelu_table, g), u) : silu(g) * u;
        if (!q8) {
            out[i] = f2h(h);
            continue;
        }
        float d;
        const int q = quantize_q8_lane(h, &d);
        out[i] = f2h((float)q * h2f(f2h(d)));
    }
}

// x[r] += rmsnorm(y[r])·weight for one row per block (an architecture's norm
// of a branch's output before it joins the residual): the scale as
// rows_to_f16's, then (y·scale)·weight and the add each rounded once, as the
// CPU backend's.
extern "C" __global__ void post_norm_add(float* x, const float* y, const float* weight, float eps,
                                         int cols) {
    __shared__ double scratch[32];
    allow_next_kernel();
    wait_for_previous_kernel();
    const u64 row = blockIdx.x;
    const float* yr = y + row * (u64)cols;
    float* xr = x + row * (u64)cols;
    const float scale = rms_scale(yr, cols, eps, scratch);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        xr[i] = __fadd_rn(xr[i], __fmul_rn(__fmul_rn(yr[i], scale), weight[i]));
}

// Dequantizes a whole [rows][cols] matrix into f16, one thread per value.
template <int T>
__device__ void dequantize_f16(const u8* qs, const u8* sc, u16* out, int rows, int cols) {
    const u64 n = (u64)rows * cols;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        out[i] = f2h(value_at<T>(qs, sc, i / cols, cols, (int)(i % cols)));
}

// out[t] = table[ids[t]]·scale in f32 (an architecture's embedding scale, 1
// for most); one block per token. An id outside the table
// (which the host never sends) writes zeros rather than reading out of bounds.
#define EMBED_VALUES 8

template <int T>
__device__ void embed(const u8* qs, const u8* sc, const u32* ids, int vocab, float* out,
                      int cols, float scale) {
    allow_next_kernel();
    wait_for_previous_kernel();
    const u32 id = ids[blockIdx.x];
    float* o = out + (u64)blockIdx.x * cols;
    // EMBED_VALUES columns a thread are read before any is stored: a store
    // might alias the weights, so reads after it would wait for the one before.
    for (int c0 = threadIdx.x; c0 < cols; c0 += EMBED_VALUES * blockDim.x) {
        float v[EMBED_VALUES];
#pragma unroll
        for (int u = 0; u < EMBED_VALUES; ++u) {
            const int c = c0 + u * blockDim.x;
            v[u] = c < cols && id < (u32)vocab ? value_at<T>(qs, sc, id, cols, c) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < EMBED_VALUES; ++u) {
            const int c = c0 + u * blockDim.x;
            if (c < cols) o[c] = id < (u32)vocab ? __fmul_rn(v[u], scale) : 0.0f;
        }
    }
}

#define ROW_KERNELS(NAME, T)                                                                 \
    extern "C" __global__ void dequantize_f16_##NAME(const u8* qs, const u8* sc, u16* out,   \
                                                      int rows, int cols) {                   \
        dequantize_f16<T>(qs, sc, out, rows, cols);                                          \
    }                                                                                        \
    extern "C" __global__ void embed_##NAME(const u8* qs, const u8* sc, const u32* ids,      \
                                             int vocab, float* out, int cols, float scale) {  \
        embed<T>(qs, sc, ids, vocab, out, cols, scale);                                      \
    }

ROW_KERNELS(f32, TYPE_F32)
ROW_KERNELS(f16, TYPE_F16)
ROW_KERNELS(bf16, TYPE_BF16)
ROW_KERNELS(q4_0, TYPE_Q4_0)
ROW_KERNELS(q4_1, TYPE_Q4_1)
ROW_KERNELS(q8_0, TYPE_Q8_0)
ROW_KERNELS(q5_0, TYPE_Q5_0)
ROW_KERNELS(q5_1, TYPE_Q5_1)
ROW_KERNELS(q2_k, TYPE_Q2_K)
ROW_KERNELS(q3_k, TYPE_Q3_K)
ROW_KERNELS(q4_k, TYPE_Q4_K)
ROW_KERNELS(q5_k, TYPE_Q5_K)
ROW_KERNELS(q6_k, TYPE_Q6_K)

// Whether (v, j) beats (value, index) for argmax: larger, or equal with a lower
// index; NaN never wins, and anything beats "nothing yet" (index == n) but NaN.
__device__ __forceinline__ bool argmax_better(float v, int j, float value, int index, int n) {
    return v > value || (v == value && j < index) || (index == n && v == v);
}

// Reduces (value, index) over the warp; every lane ends with the result.
// argmax_better is a total order (the largest value, then the lowest index),
// so the order of the reduction does not change the answer.
__device__ __forceinline__ void warp_argmax(float& value, int& index, int n) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(FULL_MASK, value, o);
        const int j = __shfl_xor_sync(FULL_MASK, index, o);
        if (argmax_better(v, j, value, index, n)) {
            value = v;
            index = j;
        }
    }
}

// Reduces (value, index) over the block; warp 0 ends with the result.
__device__ void block_argmax(float& value, int& index, int n) {
    __shared__ float best_value[32];
    __shared__ int best_index[32];
    warp_argmax(value, index, n);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (lane == 0) {
        best_value[warp] = value;
        best_index[warp] = index;
    }
    __syncthreads();
    if (warp == 0) {
        const bool held = lane < (int)(blockDim.x / WARP);
        value = held ? best_value[lane] : -__int_as_float(0x7f800000);
        index = held ? best_index[lane] : n;
        warp_argmax(value, index, n);
    }
}

// Values per thread that argmax loads before comparing any.
#define ARGMAX_LOADS 8

// The index of the largest of n values (the lowest index among equals, as the
// CPU sampler picks; NaN never wins), in one launch of several blocks: each
// block reduces its share, and the last block to finish reduces the blocks'
// results (in any order: the answer is the same, whatever the timing) and
// resets the counter for the next launch. scratch: [0] the counter (0 between
// launches), then gridDim.x values (as bits) and gridDim.x indices. Grid y
// runs as many rows at once: row y's values at x + y·n, its result and
// scratch at out + y·out_stride.
extern "C" __global__ void argmax(const float* x, int n, u32* out, int out_stride) {
    __shared__ bool last;
    allow_next_kernel();
    wait_for_previous_kernel();
    x += (u64)blockIdx.y * n;
    out += (u64)blockIdx.y * out_stride;
    u32* scratch = out + 1;
    float value = -__int_as_float(0x7f800000);
    int index = n;
    const int stride = gridDim.x * blockDim.x;
    for (int i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < n; i0 += ARGMAX_LOADS * stride) {
        float v[ARGMAX_LOADS];
#pragma unroll
        for (int u = 0; u < ARGMAX_LOADS; ++u) {
            const int i = i0 + u * stride;
            v[u] = i < n ? x[i] : -__int_as_float(0x7f800000);
        }
#pragma unroll
        for (int u = 0; u < ARGMAX_LOADS; ++u) {
            const int i = i0 + u * stride;
            if (i < n && argmax_better(v[u], i, value, index, n)) {
                value = v[u];
                index = i;
            }
        }
    }
    block_argmax(value, index, n);
    volatile u32* shared_results = scratch + 1;
    if (threadIdx.x == 0) {
        shared_results[blockIdx.x] = __float_as_uint(value);
        shared_results[gridDim.x + blockIdx.x] = (u32)index;
        __threadfence();
        last = atomicAdd(scratch, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || threadIdx.x >= WARP) return;
    __threadfence();
    // The last block's first warp: lane b takes block b's result, and so on.
    value = -__int_as_float(0x7f800000);
    index = n;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += WARP) {
        const float v = __uint_as_float(shared_results[b]);
        const int j = (int)shared_results[gridDim.x + b];
        if (argmax_better(v, j, value, index, n)) {
            value = v;
            index = j;
        }
    }
    warp_argmax(value, index, n);
    if (threadIdx.x == 0) {
        *out = index < n ? (u32)index : 0u;
        *(volatile u32*)scratch = 0;
    }
}

// Keeps the GPU busy for `ns` nanoseconds. A kernel profile queues it before
// each timed kernel, so the kernel is already queued when its start event is
// reached and the measured time holds no host launch latency.
extern "C" __global__ void profile_spin(long long ns) {
    u64 begin, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(begin));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while ((long long)(now - begin) < ns);
}
