// Shared helpers for every kernel. NVRTC ships no system headers, so this file is
// self-contained: f16/bf16 conversions go through inline PTX, integer types are
// spelled out, and nothing is #included.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define WARP 32
#define FULL_MASK 0xffffffffu

// std::conditional (no standard headers here).
template <bool B, typename A, typename C>
struct conditional {
    typedef A type;
};
template <typename A, typename C>
struct conditional<false, A, C> {
    typedef C type;
};

// Programmatic dependent launch (sm_90+). A kernel the host launches as a
// dependent may start while the kernel before it in the stream still runs: it
// may read what nothing earlier writes (weights) at once, but must call
// wait_for_previous_kernel() before touching anything else. Every kernel the
// host launches that way calls it; elsewhere it returns at once. A kernel calls
// allow_next_kernel() to let the next one start early.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_kernel() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Asks L2 for the 128-byte lines of [p, p + bytes), the block's threads taking
// them in turn, without waiting for them. Only a hint: L2 is coherent, so it is
// safe before wait_for_previous_kernel() even for memory the previous kernel
// still writes. Kernels use it there for what they read first after the wait
// that is likely not in L2 (weights, older cache positions), so that read hits
// L2 instead of waiting on device memory.
__device__ __forceinline__ void prefetch_l2(const void* p, u64 bytes) {
    const u64 end = (u64)p + bytes;
    for (u64 line = ((u64)p & ~(u64)127) + (u64)threadIdx.x * 128; line < end;
         line += (u64)blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
}

// Asks this multiprocessor's L1 for [p, p + bytes), a line per thread: for
// small read-only inputs the block reads right after the wait.
__device__ __forceinline__ void prefetch_l1(const void* p, u64 bytes) {
    const u64 end = (u64)p + bytes;
    for (u64 line = ((u64)p & ~(u64)127) + (u64)threadIdx.x * 128; line < end;
         line += (u64)blockDim.x * 128)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
}

// prefetch_l2 of [p, p + bytes) shared among the grid's blocks (along x), each
// taking one slice of whole lines.
__device__ __forceinline__ void prefetch_share_l2(const void* p, int bytes) {
    const u64 slice = (((u64)bytes + gridDim.x - 1) / gridDim.x + 127) & ~(u64)127;
    const u64 begin = slice * blockIdx.x;
    if (begin < (u64)bytes) prefetch_l2((const u8*)p + begin, min(slice, (u64)bytes - begin));
}

// A copy of BYTES (4, 8 or 16) from global to shared memory that does not
// wait for the data (sm_80+; a plain copy before), 16 bytes through L2 only:
// copy_values_wait() waits for this thread's, copy_groups_wait<N>() for all
// but its last N committed groups.
template <int BYTES>
__device__ __forceinline__ void copy_async(void* shared, const void* global) {
#if __CUDA_ARCH__ >= 800
    u32 address;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(address) : "l"(shared));
    if (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(address), "l"(global) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(address), "l"(global),
                     "n"(BYTES) : "memory");
#else
    for (int i = 0; i < BYTES / 4; ++i) ((u32*)shared)[i] = ((const u32*)global)[i];
#endif
}

__device__ __forceinline__ void copy_values_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Closes this thread's group of copies issued since the last.
__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void copy_groups_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float bf2f(u16 b) {
    return __uint_as_float(((u32)b) << 16);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024) when
// only its first `warps` warps hold values other than +0 (which add nothing
// to a sum that is not -0): only they reduce. Every thread gets the result.
// `scratch` holds 32 doubles.
__device__ __forceinline__ double block_sum_f64(double v, double* scratch, int warps) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (warp < warps) v = warp_sum_f64(v);
    __syncthreads();
    if (lane == 0 && warp < warps) scratch[warp] = v;
    __syncthreads();
    // In warp order, eight partial sums read before any is added, so the
    // chain waits for shared memory once per eight warps.
    double total = 0.0;
    for (int w0 = 0; w0 < warps; w0 += 8) {
        double part[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) part[j] = w0 + j < warps ? scratch[w0 + j] : 0.0;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (w0 + j < warps) total += part[j];
    }
    return total;
}

__device__ __forceinline__ double block_sum_f64(double v, double* scratch) {
    return block_sum_f64(v, scratch, blockDim.x / WARP);
}

// Warps of the block that hold any of `n` items taken one a thread in turn.
__device__ __forceinline__ int warps_holding(int n) {
    return min((int)blockDim.x / WARP, (n + WARP - 1) / WARP);
}

// Values of x each thread loads before using any, in the block-wide passes
// over a vector: they wait for memory once per batch rather than once per value.
#define STAGE_BATCH 8

// 1 / sqrt(mean(x²) + eps), with the squares summed in f64 as the CPU backend
// (and llama.cpp's CPU code) does; each thread's loads are batched.
__device__ float rms_scale(const float* x, int n, float eps, double* scratch) {
    double s = 0.0;
    for (int i0 = threadIdx.x; i0 < n; i0 += STAGE_BATCH * blockDim.x) {
        float v[STAGE_BATCH];
#pragma unroll
        for (int j = 0; j < STAGE_BATCH; ++j) {
            const int i = i0 + j * blockDim.x;
            v[j] = i < n ? x[i] : 0.0f;
        }
        // Only the values there are: the conversions to f64 are a
        // sixteenth-rate instruction.
#pragma unroll
        for (int j = 0; j < STAGE_BATCH; ++j)
            if (i0 + j * blockDim.x < n) s += (double)(v[j] * v[j]);
    }
    const double total = block_sum_f64(s, scratch, warps_holding(n));
    return 1.0f / sqrtf((float)(total / (double)n) + eps);
}

// rmsnorm(x)·weight when `weight` is given, else x; value i.
__device__ __forceinline__ float staged_input(const float* x, const float* weight, float scale,
                                              int i) {
    return weight ? (x[i] * scale) * weight[i] : x[i];
}

// llama.cpp's Q8 quantization of one block of 32 values (AVX2
// quantize_row_q8_0/q8_1, and our CPU backend), spread over a warp: lane i
// holds value i. d = amax/127 and the values are rounded half to even after
// multiplying by 127/amax. Returns this lane's q; *d gets d unrounded.
__device__ __forceinline__ int quantize_q8_lane(float v, float* d) {
    const float amax = warp_max(fabsf(v));
    const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    *d = amax / 127.0f;
    return __float2int_rn(v * inverse);
}

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// e^x as the CPU backend's SiLU computes it (`model::vector_exp`, llama.cpp's
// ggml_v_expf: a power of two times a degree-5 polynomial, every operation
// rounded as written), so both backends round alike.
__device__ __forceinline__ float exp_vector(float x) {
    const float shift = __uint_as_float(0x4b400000u);
    const float ln2_high = __uint_as_float(0x3f317200u), ln2_low = __uint_as_float(0x35bfbe8eu);
    const float z = fmaf(x, __uint_as_float(0x3fb8aa3bu), shift);
    const float n = __fsub_rn(z, shift);
    const float b = fmaf(-n, ln2_low, fmaf(-n, ln2_high, x));
    const u32 e = __float_as_uint(z) << 23;
    const float k = __uint_as_float(e + __float_as_uint(1.0f));
    const float u = __fmul_rn(b, b);
    const float p0 = __uint_as_float(0x3c072010u), p1 = __uint_as_float(0x3d2b9f17u);
    const float p2 = __uint_as_float(0x3e2aaf33u), p3 = __uint_as_float(0x3efffedbu);
    const float p4 = __uint_as_float(0x3f7ffff6u);
    const float j = fmaf(fmaf(fmaf(p0, b, p1), u, fmaf(p2, b, p3)), u, __fmul_rn(p4, b));
    if (fabsf(n) <= 126.0f || n != n) return fmaf(k, j, k);
    // Outside the exponent's range: two factors, or their square.
    const u32 g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = __uint_as_float(g + 0x7f000000u), s2 = __uint_as_float(e - g);
    if (fabsf(n) > 192.0f) return __fmul_rn(s1, s1);
    return __fmul_rn(fmaf(s2, j, s2), s1);
}

// 2^(i/32) for expf_libm: the bits of 2^(i/32) rounded to nearest, minus
// i << 47 (so that adding k << 47 for k = 32·j + i scales it by 2^j).
// Generated with Python's decimal module at 60 digits.
__device__ const unsigned long long EXP2_32ND[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL,
    0x3fef9301d0125b51ULL, 0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL,
    0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL, 0x3fef06fe0a31b715ULL,
    0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL,
    0x3feea47eb03a5585ULL, 0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL,
    0x3feea11473eb0187ULL, 0x3feea589994cce13ULL, 0x3feeace5422aa0dbULL,
    0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL,
    0x3fef3720dcef9069ULL, 0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL,
    0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL,
};

// e^x as glibc's expf computes it on x86-64 CPUs with FMA (the one the CPU
// backend's softmax calls): x·32/ln2 rounded to an integer k = 32·j + i,
// e^x = 2^j · 2^(i/32) · 2^(r/32) with a cubic for the last factor, in f64,
// rounded to f32 once. The algorithm and the cubic's coefficients are those
// of Arm's optimized-routines (MIT), which glibc uses; compared on every f32
// below 88.7 with glibc 2.36's expf: no difference.
//
// `table` is EXP2_32ND or a copy of it in shared memory: the only memory
// access, and a global one is a round trip to L2 on a kernel's critical path.
__device__ __forceinline__ float expf_libm_with(const unsigned long long* table, float x) {
    if (x != x) return x;
    if (x < -0x1.9fe368p6f) return 0.0f;                           // below the smallest subnormal
    if (x > 0x1.62e42ep6f) return __int_as_float(0x7f800000);  // past the largest f32
    const double inv_ln2_32 = 0x1.71547652b82fep+0 * 32, shift = 0x1.8p+52;
    const double c0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32, c1 = 0x1.ebfce50fac4f3p-3 / 32 / 32,
                 c2 = 0x1.62e42ff0c52d6p-1 / 32;
    const double xd = (double)x;
    double kd = __fma_rn(inv_ln2_32, xd, shift);
    const u64 k = (u64)__double_as_longlong(kd);
    kd = __dsub_rn(kd, shift);
    const double r = __fma_rn(inv_ln2_32, xd, -kd);
    const double s = __longlong_as_double((long long)(table[k % 32] + (k << 47)));
    const double y = __fma_rn(__fma_rn(c0, r, c1), __dmul_rn(r, r), __fma_rn(c2, r, 1.0));
    return __double2float_rn(__dmul_rn(y, s));
}

__device__ __forceinline__ float expf_libm(float x) { return expf_libm_with(EXP2_32ND, x); }

// x·sigmoid(x) as the CPU backend computes it: x / (1 + e^(0 - x)).
__device__ __forceinline__ float silu(float g) {
    return __fdiv_rn(g, __fadd_rn(1.0f, exp_vector(__fsub_rn(0.0f, g))));
}

// silu for the last (width mod 8) values of a row, which the CPU backend's
// vector loop leaves to libm's expf.
__device__ __forceinline__ float silu_libm(float g) {
    return __fdiv_rn(g, __fadd_rn(1.0f, expf_libm(-g)));
}

// GELU (tanh approximation) as ggml's CPU backend computes it: its f16 value
// at the input rounded to f16, from `table` (65536 entries indexed by the
// f16 bits, built on the host), 0 at or below −10 and the input at or above 10.
__device__ __forceinline__ float gelu_tabulated(const u16* table, float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return h2f(table[f2h(x)]);
}

// The gated activation act(gate)·up of MLP value `i` of a row of `width`:
// GeGLU from `gelu_table` when it is given, else SwiGLU (libm's expf for the
// last width mod 8 values, as the CPU's vector loop leaves them).
__device__ __forceinline__ float gated(const u16* gelu_table, float gate, float up, int i, int width) {
    if (gelu_table) return __fmul_rn(gelu_tabulated(gelu_table, gate), up);
    return __fmul_rn(i < width - width % 8 ? silu(gate) : silu_libm(gate), up);
}

// ---- Weight layouts on the device -------------------------------------------
// Quantized matrices are uploaded with their GGUF blocks split into two arrays:
// the quants of each row back to back (`qs`) and a header record per block
// (`sc`: its scales), so every quant load is an aligned 8- or 16-byte vector.
// The bits are the GGUF bits; nothing is re-quantized.
//   Q4_0: qs 16 bytes per block (value j in the low nibble of byte j, value j+16
//         in the high nibble), sc: one f16 `d` per block; x = (q - 8) * d.
//   Q4_1: as Q4_0, sc: f16 `d` then f16 `m` per block; x = q * d + m.
//   Q8_0: qs 32 signed bytes per block, sc: one f16 `d`; x = q * d.
//   Q5_0, Q5_1 and the K-quants: see quants.cuh.
//   F16 / BF16 / F32: qs is the plain row-major matrix, sc unused.
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_BF16 2
#define TYPE_Q4_0 3
#define TYPE_Q4_1 4
#define TYPE_Q8_0 5
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q2_K 8
#define TYPE_Q3_K 9
#define TYPE_Q4_K 10
#define TYPE_Q5_K 11
#define TYPE_Q6_K 12

// One "unit" is 16 values of one row; `unit_dot` returns Σ w·x over them and
// `unit_values` writes them out. For Q4 a unit is half a block's bytes: bytes
// h*8..h*8+7 hold values h*8+i (low nibbles) and 16+h*8+i (high nibbles).
template <int T>
__device__ __forceinline__ float unit_dot(const u8* qs, const u8* sc, u64 row, int cols,
                                          int unit, const float* x) {
    if (T == TYPE_Q4_0 || T == TYPE_Q4_1) {
        const int block = unit >> 1, half = unit & 1;
        const uint2 q = *(const uint2*)(qs + row * (u64)(cols / 2) + (u64)unit * 8);
        const float* xl = x + block * 32 + half * 8;
        const float* xh = xl + 16;
        float dot = 0.0f, xsum = 0.0f;
        const u32 words[2] = {q.x, q.y};
#pragma unroll
        for (int w = 0; w < 2; ++w) {
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const u32 byte = (words[w] >> (8 * b)) & 0xff;
                const float lo = xl[w * 4 + b], hi = xh[w * 4 + b];
                dot += (float)(byte & 0xf) * lo + (float)(byte >> 4) * hi;
                xsum += lo + hi;
            }
        }
        const u64 bi = row * (u64)(cols / 32) + block;
        if (T == TYPE_Q4_0) {
            const float d = h2f(((const u16*)sc)[bi]);
            return d * (dot - 8.0f * xsum);
        } else {
            const float d = h2f(((const u16*)sc)[2 * bi]);
            const float m = h2f(((const u16*)sc)[2 * bi + 1]);
            return d * dot + m * xsum;
        }
    } else if (T == TYPE_Q8_0) {
        const uint4 q = *(const uint4*)(qs + row * (u64)cols + (u64)unit * 16);
        const float* xs = x + unit * 16;
        const u32 words[4] = {q.x, q.y, q.z, q.w};
        float dot = 0.0f;
#pragma unroll
        for (int w = 0; w < 4; ++w) {
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int v = (int)(i8)((words[w] >> (8 * b)) & 0xff);
                dot += (float)v * xs[w * 4 + b];
            }
        }
        const u64 bi = row * (u64)(cols / 32) + (unit >> 1);
        return h2f(((const u16*)sc)[bi]) * dot;
    } else if (T == TYPE_F16 || T == TYPE_BF16) {
        const uint4* p = (const uint4*)(qs + (row * (u64)cols + (u64)unit * 16) * 2);
        const float* xs = x + unit * 16;
        float dot = 0.0f;
#pragma unroll
        for (int v = 0; v < 2; ++v) {
            const uint4 q = p[v];
            const u32 words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int w = 0; w < 4; ++w) {
                const u16 a = (u16)(words[w] & 0xffff), b = (u16)(words[w] >> 16);
                const float fa = T == TYPE_F16 ? h2f(a) : bf2f(a);
                const float fb = T == TYPE_F16 ? h2f(b) : bf2f(b);
                dot += fa * xs[v * 8 + w * 2] + fb * xs[v * 8 + w * 2 + 1];
            }
        }
        return dot;
    } else {  // F32
        const float4* p = (const float4*)(qs + (row * (u64)cols + (u64)unit * 16) * 4);
        const float* xs = x + unit * 16;
        float dot = 0.0f;
#pragma unroll
        for (int v = 0; v < 4; ++v) {
            const float4 w = p[v];
            dot += w.x * xs[v * 4] + w.y * xs[v * 4 + 1] + w.z * xs[v * 4 + 2] + w.w * xs[v * 4 + 3];
        }
        return dot;
    }
}
