// Matrix × vector for one token (decode): y = W·x, one warp per row, the warp's
// lanes striding over the row's 16-value units. Variants fold in the step before
// or after the product so a block's decode step needs fewer launches:
//   plain      y[r]  = W[r]·x
//   residual   y[r] += W[r]·x                     (attention output, MLP down)
//   norm       y[r]  = W[r]·rmsnorm(x)            (fused QKV, output head)
//   swiglu     y[r]  = silu(W[r]·n) · (W[r+half]·n), n = rmsnorm(x)  (gate|up)
// With a norm, each block normalises x into shared memory first (x is the
// residual stream, a few KB); the rows are then a grid-stride loop so a large
// matrix does not normalise x once per row group.

#define GEMV_WARPS 8

template <int T>
__device__ __forceinline__ float row_dot(const u8* qs, const u8* sc, u64 row, int cols,
                                         const float* x) {
    const int lane = threadIdx.x % WARP;
    const int units = cols / 16;
    float acc = 0.0f;
    for (int u = lane; u < units; u += WARP) acc += unit_dot<T>(qs, sc, row, cols, u, x);
    return warp_sum(acc);
}

// Writes rmsnorm(x) * weight into shared `xs` (cols values); returns xs.
__device__ __forceinline__ const float* normalise_to_shared(const float* x, const float* weight,
                                                            int cols, float eps, float* xs,
                                                            double* scratch) {
    const float scale = rms_scale(x, cols, eps, scratch);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = (x[i] * scale) * weight[i];
    __syncthreads();
    return xs;
}

// MODE 0: plain, 1: residual, 2: norm, 3: norm + swiglu.
template <int T, int MODE>
__device__ void gemv(const u8* qs, const u8* sc, const float* x, const float* norm_weight,
                     float eps, float* y, int rows, int cols) {
    extern __shared__ float shared_x[];
    __shared__ double scratch[32];
    const float* xin = x;
    if (MODE >= 2) xin = normalise_to_shared(x, norm_weight, cols, eps, shared_x, scratch);
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    for (int r = blockIdx.x * GEMV_WARPS + warp; r < rows; r += gridDim.x * GEMV_WARPS) {
        const float dot = row_dot<T>(qs, sc, (u64)r, cols, xin);
        if (MODE == 3) {
            const float up = row_dot<T>(qs, sc, (u64)(r + rows), cols, xin);
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
