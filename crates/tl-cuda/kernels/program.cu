// The steps a program's own forward pass takes one at a time (the language's
// rms_norm, rope, silu, + and *, transpose, and its KV cache reads and
// writes), each with the CPU backend's arithmetic, so a program on the GPU
// computes what the same program computes on the CPU. The model's own passes
// fuse these into their GEMVs; the device functions they share (rms_scale,
// staged_input, silu) keep both on the same bits.

// out[r] = rmsnorm(x[r])·weight, rows of `cols` values. One block per row.
extern "C" __global__ void rms_norm_rows(const float* x, const float* weight, float eps,
                                         float* out, int cols) {
    __shared__ double scratch[32];
    const u64 row = blockIdx.x;
    const float* xr = x + row * (u64)cols;
    float* o = out + row * (u64)cols;
    const float scale = rms_scale(xr, cols, eps, scratch);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = staged_input(xr, weight, scale, i);
}

// Rotates x[rows][heads][head_dim] in place: row r by the angles of
// cos_sin[r][pair] (the host's table for each row's position), pairs adjacent
// or (halves != 0) half a head apart, as rope_store_kv rotates.
extern "C" __global__ void rope_rows(float* x, const float2* cos_sin, int rows, int heads,
                                     int head_dim, int halves) {
    const int pairs = head_dim / 2;
    const u64 n = (u64)rows * heads * pairs;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 row = i / ((u64)heads * pairs);
        const int pair = (int)(i % pairs);
        float* head = x + (i / pairs) * head_dim;
        const int a = halves ? pair : 2 * pair, b = halves ? pair + pairs : 2 * pair + 1;
        const float x0 = head[a], x1 = head[b];
        const float2 cs = cos_sin[row * pairs + pair];
        head[a] = fmaf(x0, cs.x, -(x1 * cs.y));
        head[b] = fmaf(x0, cs.y, x1 * cs.x);
    }
}

// out[i] = a[i] + b[i] (op 0) or a[i]·b[i] (op 1), for i < n.
extern "C" __global__ void elementwise_f32(const float* a, const float* b, float* out, u64 n,
                                           int op) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        out[i] = op == 0 ? __fadd_rn(a[i], b[i]) : __fmul_rn(a[i], b[i]);
}

// out[i] = silu(x[i]), the first `vectorised` values as the CPU's vector loop
// computes them, the rest as its libm tail.
extern "C" __global__ void silu_f32(const float* x, float* out, u64 n, u64 vectorised) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        out[i] = i < vectorised ? silu(x[i]) : silu_libm(x[i]);
}

// x is [outer][a][mid][b][inner]; out is [outer][b][mid][a][inner] (two axes
// swapped). One thread per value.
#define SWAP_AXES(NAME, T)                                                                   \
    extern "C" __global__ void NAME(const T* x, T* out, u64 outer, u64 a, u64 mid, u64 b,    \
                                    u64 inner) {                                             \
        const u64 n = outer * a * mid * b * inner;                                           \
        for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;                      \
             i += (u64)gridDim.x * blockDim.x) {                                             \
            u64 rest = i;                                                                    \
            const u64 in = rest % inner; rest /= inner;                                      \
            const u64 ib = rest % b; rest /= b;                                              \
            const u64 im = rest % mid; rest /= mid;                                          \
            const u64 ia = rest % a; rest /= a;                                              \
            out[(((rest * b + ib) * mid + im) * a + ia) * inner + in] = x[i];                \
        }                                                                                    \
    }
SWAP_AXES(swap_axes_32, u32)
SWAP_AXES(swap_axes_16, u16)

// Writes rows [rows][kv_heads][head_dim] of f32 keys (or values) into an f16
// cache layer [kv_head][capacity][head_dim] at positions start + r, rounded
// to nearest even as the model's own cache writes are.
extern "C" __global__ void store_kv_rows(const float* rows_in, u16* cache, int rows, int kv_heads,
                                         int head_dim, int capacity, int start) {
    const u64 n = (u64)rows * kv_heads * head_dim;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 d = i % head_dim, h = (i / head_dim) % kv_heads, r = i / ((u64)head_dim * kv_heads);
        cache[(h * capacity + start + r) * head_dim + d] = f2h(rows_in[i]);
    }
}

// dst[o][j] = src[o][j] for j < dst_len: the first dst_len values of each of
// `outer` runs of src_len (a cache layer's first positions, head by head).
extern "C" __global__ void narrow_16(const u16* src, u16* dst, u64 outer, u64 src_len,
                                     u64 dst_len) {
    const u64 n = outer * dst_len;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        dst[i] = src[(i / dst_len) * src_len + i % dst_len];
}
