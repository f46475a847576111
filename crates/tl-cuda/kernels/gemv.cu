// Matrix × vector for one token (decode): y = W·x, one warp per row, the warp's
// lanes striding over the row's 16-value units. Variants fold in the step before
// or after the product so a block's decode step needs fewer launches:
//   plain      y[r]  = W[r]·x
//   residual   y[r] += W[r]·x                     (attention output, MLP down)
//   norm       y[r]  = W[r]·rmsnorm(x)            (fused QKV, output head)
//   swiglu     y[r]  = silu(W[r]·n) · (W[r+half]·n), n = rmsnorm(x)  (gate|up)
//
// Each block first stages x in shared memory (normalised when asked). For the
// quantized weight types x is staged as llama.cpp's Q8_0/Q8_1 blocks (int8
// values, f16-rounded scale, and for Q8_1 the scaled sum), exactly as the CPU
// backend quantizes it, and rows are integer dot products (dp4a): the GPU then
// computes the CPU's numbers up to the order of float additions, and reads a
// quarter of the activation bytes. Float weights (F32/F16/BF16) use f32 x.
// Rows are a grid-stride loop, so a block stages x once for many rows.

#define GEMV_WARPS 8

// Stages x (normalised when norm_weight != 0) as f32 in shared memory.
__device__ void stage_f32(const float* x, const float* norm_weight, float eps, int cols,
                          float* xs, double* scratch) {
    const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = staged_input(x, norm_weight, scale, i);
    __syncthreads();
}

// Stages x as Q8 blocks: xq[cols] int8, xd[cols/32] the f16-rounded scale d,
// xsum[cols/32] the f16-rounded d·Σq (Q8_1's s). d = amax/127 and the values
// are rounded half-to-even after multiplying by 127/amax, as llama.cpp's AVX2
// quantize_row_q8_0/q8_1 (and our CPU backend) do.
__device__ void stage_q8(const float* x, const float* norm_weight, float eps, int cols, i8* xq,
                         float* xd, float* xsum, double* scratch) {
    const float scale = norm_weight ? rms_scale(x, cols, eps, scratch) : 1.0f;
    for (int b = threadIdx.x; b < cols / 32; b += blockDim.x) {
        float v[32];
        int q[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = staged_input(x, norm_weight, scale, b * 32 + i);
        const float d = quantize_q8_block(v, q);
        int sum = 0;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            xq[b * 32 + i] = (i8)q[i];
            sum += q[i];
        }
        xd[b] = h2f(f2h(d));
        xsum[b] = h2f(f2h(d * (float)sum));
    }
    __syncthreads();
}

// Σ over one 16-value unit of a quantized row against Q8 x.
template <int T>
__device__ __forceinline__ float unit_dot_q8(const u8* qs, const u8* sc, u64 row, int cols,
                                             int unit, const i8* xq, const float* xd,
                                             const float* xsum) {
    const int block = unit >> 1, half = unit & 1;
    const u64 bi = row * (u64)(cols / 32) + block;
    if (T == TYPE_Q8_0) {
        const int4 w = *(const int4*)(qs + row * (u64)cols + (u64)unit * 16);
        const int* xv = (const int*)(xq + unit * 16);
        int sumi = __dp4a(w.x, xv[0], 0);
        sumi = __dp4a(w.y, xv[1], sumi);
        sumi = __dp4a(w.z, xv[2], sumi);
        sumi = __dp4a(w.w, xv[3], sumi);
        return h2f(((const u16*)sc)[bi]) * xd[block] * (float)sumi;
    } else {
        const uint2 w = *(const uint2*)(qs + row * (u64)(cols / 2) + (u64)unit * 8);
        const int* lo = (const int*)(xq + block * 32 + half * 8);
        const int* hi = (const int*)(xq + block * 32 + 16 + half * 8);
        int sumi = __dp4a((int)(w.x & 0x0f0f0f0fu), lo[0], 0);
        sumi = __dp4a((int)(w.y & 0x0f0f0f0fu), lo[1], sumi);
        sumi = __dp4a((int)((w.x >> 4) & 0x0f0f0f0fu), hi[0], sumi);
        sumi = __dp4a((int)((w.y >> 4) & 0x0f0f0f0fu), hi[1], sumi);
        if (T == TYPE_Q4_0) {
            int xs = __dp4a(0x01010101, lo[0], 0);
            xs = __dp4a(0x01010101, lo[1], xs);
            xs = __dp4a(0x01010101, hi[0], xs);
            xs = __dp4a(0x01010101, hi[1], xs);
            return h2f(((const u16*)sc)[bi]) * xd[block] * (float)(sumi - 8 * xs);
        } else {
            const float d = h2f(((const u16*)sc)[2 * bi]), m = h2f(((const u16*)sc)[2 * bi + 1]);
            return d * xd[block] * (float)sumi + (half == 0 ? m * xsum[block] : 0.0f);
        }
    }
}

template <int T>
__device__ __forceinline__ float row_dot(const u8* qs, const u8* sc, u64 row, int cols,
                                         const float* xf, const i8* xq, const float* xd,
                                         const float* xsum) {
    const int lane = threadIdx.x % WARP;
    const int units = cols / 16;
    float acc = 0.0f;
    for (int u = lane; u < units; u += WARP) {
        if (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q8_0)
            acc += unit_dot_q8<T>(qs, sc, row, cols, u, xq, xd, xsum);
        else
            acc += unit_dot<T>(qs, sc, row, cols, u, xf);
    }
    return warp_sum(acc);
}

// MODE 0: plain, 1: residual, 2: norm, 3: norm + swiglu.
template <int T, int MODE>
__device__ void gemv(const u8* qs, const u8* sc, const float* x, const float* norm_weight,
                     float eps, float* y, int rows, int cols) {
    extern __shared__ float4 shared[];
    __shared__ double scratch[32];
    const float* weight = MODE >= 2 ? norm_weight : 0;
    const bool quantized = T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q8_0;
    float* xf = (float*)shared;
    float* xd = (float*)shared;
    float* xsum = xd + cols / 32;
    i8* xq = (i8*)(xsum + cols / 32);
    if (quantized)
        stage_q8(x, weight, eps, cols, xq, xd, xsum, scratch);
    else
        stage_f32(x, weight, eps, cols, xf, scratch);
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    for (int r = blockIdx.x * GEMV_WARPS + warp; r < rows; r += gridDim.x * GEMV_WARPS) {
        const float dot = row_dot<T>(qs, sc, (u64)r, cols, xf, xq, xd, xsum);
        if (MODE == 3) {
            const float up = row_dot<T>(qs, sc, (u64)(r + rows), cols, xf, xq, xd, xsum);
            if (lane == 0) y[r] = silu(dot) * up;
        } else if (lane == 0) {
            y[r] = MODE == 1 ? y[r] + dot : dot;
        }
    }
}
#define GEMV_KERNELS(NAME, T)                                                               \
    extern "C" __global__ void gemv_##NAME(const u8* qs, const u8* sc, const float* x,       \
                                            float* y, int rows, int cols) {                  \
        gemv<T, 0>(qs, sc, x, 0, 0.0f, y, rows, cols);                                      \
    }                                                                                       \
    extern "C" __global__ void gemv_residual_##NAME(const u8* qs, const u8* sc,             \
                                                     const float* x, float* y, int rows,     \
                                                     int cols) {                             \
        gemv<T, 1>(qs, sc, x, 0, 0.0f, y, rows, cols);                                      \
    }                                                                                       \
    extern "C" __global__ void gemv_norm_##NAME(const u8* qs, const u8* sc, const float* x,  \
                                                 const float* norm_weight, float eps,        \
                                                 float* y, int rows, int cols) {             \
        gemv<T, 2>(qs, sc, x, norm_weight, eps, y, rows, cols);                             \
    }                                                                                       \
    extern "C" __global__ void gemv_norm_swiglu_##NAME(                                     \
        const u8* qs, const u8* sc, const float* x, const float* norm_weight, float eps,     \
        float* y, int rows, int cols) {                                                      \
        gemv<T, 3>(qs, sc, x, norm_weight, eps, y, rows, cols);                             \
    }

GEMV_KERNELS(f32, TYPE_F32)
GEMV_KERNELS(f16, TYPE_F16)
GEMV_KERNELS(bf16, TYPE_BF16)
GEMV_KERNELS(q4_0, TYPE_Q4_0)
GEMV_KERNELS(q4_1, TYPE_Q4_1)
GEMV_KERNELS(q8_0, TYPE_Q8_0)
