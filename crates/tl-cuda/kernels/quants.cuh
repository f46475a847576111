// GGUF quantized blocks as the kernels read them: the device layout of the
// types not described in prelude.cuh, one value dequantized with the CPU
// backend's rounding (value_at: embedding lookups and the f16 copies prompt
// GEMMs multiply), a K-quant super-block's groups of 64 values unpacked for
// integer dot products, and llama.cpp's Q8_K quantization of activations.
//
// Device layout (matrix.rs `block_split`; qs: the quants of each block back to
// back, sc: one header record per block):
//   Q5_0  qs 16 bytes of nibbles as Q4_0; sc 8 bytes: f16 d, 2 bytes of 0, then
//         the u32 of fifth bits (bit j for value j); x = (q - 16)·d.
//   Q5_1  as Q5_0, sc: f16 d, f16 m, u32 fifth bits; x = q·d + m.
//   Q2_K  qs 64 bytes: value 128j + 32k + i is bits 2k..2k+1 of byte 32j + i;
//         sc 20: 16 bytes of (scale | min << 4) per 16 values, f16 d, f16 dmin;
//         x = d·scale·q - dmin·min.
//   Q3_K  qs 96: 32 bytes of high bits (bit 4j + k of byte i), then 64 as
//         Q2_K's; sc 16: 12 bytes of 6-bit scales (stored + 32), f16 d, 2 of 0;
//         x = d·scale·(q - 4), q the 2 low bits plus 4 for a high bit.
//   Q4_K  qs 128: value 64j + i is the low nibble of byte 32j + i, 64j + 32 + i
//         its high nibble; sc 16: f16 d, f16 dmin, 12 bytes of 6-bit scales and
//         minimums, one each per 32 values; x = d·scale·q - dmin·min.
//   Q5_K  qs 160: 32 bytes of fifth bits (bit 2j + h of byte i for value
//         64j + 32h + i), then 128 as Q4_K's; sc as Q4_K.
//   Q6_K  qs 192: 128 bytes of low nibbles (value 128j + 32k + i: byte
//         64j + 32(k % 2) + i, the high nibble for k >= 2), 64 of high bit pairs
//         (bits 2k..2k+1 of byte 32j + i); sc 20: 16 signed scales per 16
//         values, f16 d, 2 bytes of 0; x = d·scale·(q - 32).

__host__ __device__ constexpr bool is_k_quant(int t) { return t >= TYPE_Q2_K; }

// Types with a minimum: a second f16 per block (Q4_1, Q5_1, met by Q8_1's
// scaled sums) or per-sub-block minimums under dmin (K-quants).
__host__ __device__ constexpr bool has_min(int t) { return t == TYPE_Q4_1 || t == TYPE_Q5_1; }
__host__ __device__ constexpr bool k_has_mins(int t) {
    return t == TYPE_Q2_K || t == TYPE_Q4_K || t == TYPE_Q5_K;
}

__host__ __device__ constexpr bool is_five_bit(int t) { return t == TYPE_Q5_0 || t == TYPE_Q5_1; }

// Values of a block, and bytes of its quants and of its header record.
__host__ __device__ constexpr int block_values(int t) { return is_k_quant(t) ? 256 : 32; }
__host__ __device__ constexpr int quant_bytes(int t) {
    return t == TYPE_Q8_0 ? 32
         : t == TYPE_Q2_K ? 64
         : t == TYPE_Q3_K ? 96
         : t == TYPE_Q4_K ? 128
         : t == TYPE_Q5_K ? 160
         : t == TYPE_Q6_K ? 192
                          : 16;
}
__host__ __device__ constexpr int header_bytes(int t) {
    return t == TYPE_Q4_0 || t == TYPE_Q8_0 ? 2
         : t == TYPE_Q4_1                   ? 4
         : is_five_bit(t)                   ? 8
         : t == TYPE_Q2_K || t == TYPE_Q6_K ? 20
                                            : 16;
}

// Subtracted from a K-quant's stored quants (Q3_K 4, Q6_K 32).
__host__ __device__ constexpr int k_offset(int t) {
    return t == TYPE_Q3_K ? 4 : t == TYPE_Q6_K ? 32 : 0;
}

// ggml's `nearest_int`: round half to even through the f32 bits of
// v + 1.5·2^23, as the CPU backend's Q8_K quantizer does (every input,
// NaN included, gives its result).
__device__ __forceinline__ int nearest_int(float v) {
    return (__float_as_int(__fadd_rn(v, 12582912.0f)) & 0x007fffff) - 0x00400000;
}

// The 6-bit scale and minimum of sub-block j (32 values) of Q4_K and Q5_K,
// from the 12 scale bytes s (`get_scale_min_k4`).
__device__ __forceinline__ void scale_min_k4(const u8* s, int j, int* scale, int* min) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// The signed 6-bit scale of Q3_K's run r of 16 values, from its 12 scale
// bytes s: run 4p + t takes the nibble p / 2 of byte 4(p % 2) + t and bits
// 2p..2p+1 of byte 8 + t.
__device__ __forceinline__ int scale_q3_k(const u8* s, int r) {
    const int p = r >> 2, t = r & 3;
    const int low = (s[(p & 1) * 4 + t] >> ((p >> 1) * 4)) & 0xf;
    const int high = (s[8 + t] >> (2 * p)) & 3;
    return (low | high << 4) - 32;
}

// Value v (< 256) of K-quant super-block `block` as the CPU backend
// dequantizes it (candle's `to_float`, ggml's `dequantize_row_*`): the scale
// products rounded as written, no fused multiply-add.
template <int T>
__device__ float k_value_at(const u8* qs, const u8* sc, u64 block, int v) {
    const u8* q = qs + block * quant_bytes(T);
    const u8* h = sc + block * header_bytes(T);
    const u16* h16 = (const u16*)h;
    const int j = v >> 7, k = (v >> 5) & 3, i = v & 31;  // 128j + 32k + i
    if (T == TYPE_Q2_K) {
        const int s = h[v >> 4], quant = (q[32 * j + i] >> (2 * k)) & 3;
        const float dl = __fmul_rn(h2f(h16[8]), (float)(s & 0xf));
        const float ml = __fmul_rn(h2f(h16[9]), (float)(s >> 4));
        return __fsub_rn(__fmul_rn(dl, (float)quant), ml);
    } else if (T == TYPE_Q3_K) {
        const int low = (q[32 + 32 * j + i] >> (2 * k)) & 3;
        const int quant = low - ((q[i] >> (4 * j + k)) & 1 ? 0 : 4);
        const float dl = __fmul_rn(h2f(h16[6]), (float)scale_q3_k(h, v >> 4));
        return __fmul_rn(dl, (float)quant);
    } else if (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const int pair = v >> 6, high = (v >> 5) & 1;  // 64·pair + 32·high + i
        const int nibbles = T == TYPE_Q5_K ? 32 : 0;
        const u8 byte = q[nibbles + 32 * pair + i];
        int quant = high ? byte >> 4 : byte & 0xf;
        if (T == TYPE_Q5_K) quant |= ((q[i] >> (2 * pair + high)) & 1) << 4;
        int scale, min;
        scale_min_k4(h + 4, 2 * pair + high, &scale, &min);
        const float d1 = __fmul_rn(h2f(h16[0]), (float)scale);
        const float m1 = __fmul_rn(h2f(h16[1]), (float)min);
        return __fsub_rn(__fmul_rn(d1, (float)quant), m1);
    } else {  // Q6_K
        const u8 low = q[64 * j + 32 * (k & 1) + i];
        const int nibble = k >= 2 ? low >> 4 : low & 0xf;
        const int quant = (nibble | ((q[128 + 32 * j + i] >> (2 * k)) & 3) << 4) - 32;
        const float dl = __fmul_rn(h2f(h16[8]), (float)(i8)h[v >> 4]);
        return __fmul_rn(dl, (float)quant);
    }
}

// The value at (row, col) of a matrix, dequantized as the CPU backend does.
template <int T>
__device__ __forceinline__ float value_at(const u8* qs, const u8* sc, u64 row, int cols, int col) {
    if (T == TYPE_Q4_0 || T == TYPE_Q4_1) {
        const int block = col / 32, j = col % 32;
        const u8 byte = qs[row * (u64)(cols / 2) + (u64)block * 16 + (j % 16)];
        const int q = j < 16 ? (byte & 0xf) : (byte >> 4);
        const u64 bi = row * (u64)(cols / 32) + block;
        if (T == TYPE_Q4_0) return (float)(q - 8) * h2f(((const u16*)sc)[bi]);
        // Rounded twice, as the CPU backend's dequantization (no fused multiply-add).
        return __fadd_rn(__fmul_rn((float)q, h2f(((const u16*)sc)[2 * bi])),
                         h2f(((const u16*)sc)[2 * bi + 1]));
    } else if (is_five_bit(T)) {
        const int j = col % 32;
        const u64 bi = row * (u64)(cols / 32) + col / 32;
        const u8 byte = qs[bi * 16 + (j % 16)];
        const u32 fifths = ((const u32*)sc)[2 * bi + 1];
        const int q = (j < 16 ? (byte & 0xf) : (byte >> 4)) | (int)((fifths >> j) & 1) << 4;
        const u16* h = (const u16*)sc + 4 * bi;
        if (T == TYPE_Q5_0) return (float)(q - 16) * h2f(h[0]);
        return __fadd_rn(__fmul_rn((float)q, h2f(h[0])), h2f(h[1]));
    } else if (is_k_quant(T)) {
        return k_value_at<T>(qs, sc, row * (u64)(cols / 256) + col / 256, col % 256);
    } else if (T == TYPE_Q8_0) {
        const int q = (int)(i8)qs[row * (u64)cols + col];
        return (float)q * h2f(((const u16*)sc)[row * (u64)(cols / 32) + col / 32]);
    } else if (T == TYPE_F16) {
        return h2f(((const u16*)qs)[row * (u64)cols + col]);
    } else if (T == TYPE_BF16) {
        return bf2f(((const u16*)qs)[row * (u64)cols + col]);
    } else {
        return ((const float*)qs)[row * (u64)cols + col];
    }
}

// One group of 64 values of a K-quant super-block (group p holds values
// 64p..64p+63, runs 4p..4p+3 of 16), unpacked: the stored unsigned quants in
// value order, four to a word (value 4w + b in byte b of q[w]), and each run's
// scale and minimum (0 without minimums); d and dmin are the super-block's.
struct KGroup {
    u32 q[16];
    int scale[4], min[4];
    float d, dmin;
};

// The scales and minimums of Q4_K/Q5_K group p: sub-blocks 2p (runs 0, 1)
// and 2p + 1 (runs 2, 3), from the 6-bit packing in words h1..h3 of the
// header (`k4_scales` in the CPU backend).
__device__ __forceinline__ void k4_group_scales(const u32* h, int p, KGroup& g) {
    const u32 low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    // Sub-blocks 0..3 lie in the first words, 4..7 in the second; selected,
    // not indexed by the run-time p, so that they stay in registers.
    const bool second = p >= 2;
    const u32 scales = second ? (h[3] & low4) | (((h[1] >> 6) & low2) << 4) : h[1] & low6;
    const u32 mins = second ? ((h[3] >> 4) & low4) | (((h[2] >> 6) & low2) << 4) : h[2] & low6;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int sub = 2 * p + (t >> 1);
        g.scale[t] = (scales >> (8 * (sub & 3))) & 0xff;
        g.min[t] = (mins >> (8 * (sub & 3))) & 0xff;
    }
}

// Word p (0..3) of h, by selects: indexing by the run-time p would put h,
// and the group's loaded words with it, in local memory.
__device__ __forceinline__ u32 word_of_group(const u32* h, int p) {
    return p == 0 ? h[0] : p == 1 ? h[1] : p == 2 ? h[2] : h[3];
}

// The bytes group p of a K-quant super-block is computed from, as loaded:
// its quant words (16 bytes a vector, in the order unpack_k_group reads
// them) and the super-block's header words. Kept packed, a group takes 12
// (Q4_K) to 29 (Q6_K) registers, so that a thread can have several in
// flight; unpacked it takes 26.
__host__ __device__ constexpr int k_group_vectors(int t) {
    return t == TYPE_Q2_K || t == TYPE_Q4_K ? 2 : t == TYPE_Q6_K ? 6 : 4;
}

template <int T>
struct KGroupBytes {
    uint4 q[k_group_vectors(T)];
    u32 h[header_bytes(T) / 4];
};

// The vectors of group p of super-block `block` (the layouts above): the
// low bits of its 128-value half, then the high bits where the type has them.
template <int T>
__device__ __forceinline__ KGroupBytes<T> load_k_group_bytes(const u8* qs, const u8* sc, u64 block,
                                                             int p) {
    KGroupBytes<T> g;
    const uint4* q = (const uint4*)(qs + block * quant_bytes(T));
    const u32* h = (const u32*)(sc + block * header_bytes(T));
#pragma unroll
    for (int w = 0; w < header_bytes(T) / 4; ++w) g.h[w] = h[w];
    const int j = p >> 1;  // the group's 128-value half
    int low = 0, high = 0;  // vector offsets of the low and high bits
    if (T == TYPE_Q2_K) low = 2 * j;
    if (T == TYPE_Q3_K) low = 2 + 2 * j, high = 0;
    if (T == TYPE_Q4_K) low = 2 * p;
    if (T == TYPE_Q5_K) low = 2 + 2 * p, high = 0;
    if (T == TYPE_Q6_K) low = 4 * j, high = 8 + 2 * j;
    constexpr int LOW = T == TYPE_Q6_K ? 4 : 2;
#pragma unroll
    for (int v = 0; v < LOW; ++v) g.q[v] = q[low + v];
#pragma unroll
    for (int v = LOW; v < k_group_vectors(T); ++v) g.q[v] = q[high + v - LOW];
    return g;
}

// Vectors first..first + count/4 - 1 of the group's bytes as words.
template <int T>
__device__ __forceinline__ void group_words(const KGroupBytes<T>& b, int first, int count,
                                            u32* words) {
#pragma unroll
    for (int v = 0; v < count / 4; ++v) {
        const uint4 u = b.q[first + v];
        words[4 * v] = u.x;
        words[4 * v + 1] = u.y;
        words[4 * v + 2] = u.z;
        words[4 * v + 3] = u.w;
    }
}

// Group p of a K-quant super-block unpacked from its bytes.
template <int T>
__device__ __forceinline__ KGroup unpack_k_group(const KGroupBytes<T>& bytes, int p) {
    KGroup g;
    const u32* h = bytes.h;
    const int j = p >> 1, half = p & 1;  // 128-value half j, its half `half`
    g.dmin = 0.0f;
#pragma unroll
    for (int t = 0; t < 4; ++t) g.min[t] = 0;
    if (T == TYPE_Q2_K || T == TYPE_Q3_K) {
        u32 low[8], high[8];
        group_words(bytes, 0, 8, low);
        if (T == TYPE_Q3_K) group_words(bytes, 2, 8, high);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const int k = 2 * half + kk;
#pragma unroll
            for (int w = 0; w < 8; ++w) {
                u32 v = (low[w] >> (2 * k)) & 0x03030303u;
                if (T == TYPE_Q3_K) v |= ((high[w] >> (4 * j + k)) & 0x01010101u) << 2;
                g.q[8 * kk + w] = v;
            }
        }
        if (T == TYPE_Q2_K) {
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const u32 s = (word_of_group(h, p) >> (8 * t)) & 0xff;
                g.scale[t] = s & 0xf;
                g.min[t] = s >> 4;
            }
            g.d = h2f((u16)(h[4] & 0xffff));
            g.dmin = h2f((u16)(h[4] >> 16));
        } else {
            const u32 low_nibbles = ((half ? h[1] : h[0]) >> (4 * j)) & 0x0f0f0f0fu;
            const u32 scales = low_nibbles | (((h[2] >> (2 * p)) & 0x03030303u) << 4);
#pragma unroll
            for (int t = 0; t < 4; ++t) g.scale[t] = (int)((scales >> (8 * t)) & 0xff) - 32;
            g.d = h2f((u16)(h[3] & 0xffff));
        }
    } else if (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        u32 nibbles[8], fifths[8];
        group_words(bytes, 0, 8, nibbles);
        if (T == TYPE_Q5_K) group_words(bytes, 2, 8, fifths);
#pragma unroll
        for (int w = 0; w < 8; ++w) {
            u32 lo = nibbles[w] & 0x0f0f0f0fu, hi = (nibbles[w] >> 4) & 0x0f0f0f0fu;
            if (T == TYPE_Q5_K) {
                lo |= ((fifths[w] >> (2 * p)) & 0x01010101u) << 4;
                hi |= ((fifths[w] >> (2 * p + 1)) & 0x01010101u) << 4;
            }
            g.q[w] = lo;
            g.q[8 + w] = hi;
        }
        k4_group_scales(h, p, g);
        g.d = h2f((u16)(h[0] & 0xffff));
        g.dmin = h2f((u16)(h[0] >> 16));
    } else {  // Q6_K
        u32 low[16], high[8];
        group_words(bytes, 0, 16, low);
        group_words(bytes, 4, 8, high);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const int k = 2 * half + kk;
#pragma unroll
            for (int w = 0; w < 8; ++w)
                g.q[8 * kk + w] = ((low[8 * kk + w] >> (4 * half)) & 0x0f0f0f0fu) |
                                  (((high[w] >> (2 * k)) & 0x03030303u) << 4);
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) g.scale[t] = (int)(i8)((word_of_group(h, p) >> (8 * t)) & 0xff);
        g.d = h2f((u16)(h[4] & 0xffff));
    }
    return g;
}

// The exact integer sums of a group with 64 activations `a` (16-byte aligned)
// whose runs of 16 sum to sums16[0..4]: *scaled = Σ scale·Σ (q - offset)·a
// and *mins = Σ min·Σ a over the four runs (the CPU backend's GroupSums for
// one group), wrapping on overflow as it does.
template <int T>
__device__ __forceinline__ void k_group_sums(const KGroup& g, const i8* a, const int* sums16,
                                             int* scaled, int* mins) {
    u32 s = 0, m = 0;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int4 x = *(const int4*)(a + 16 * t);
        int dot = __dp4a((int)g.q[4 * t], x.x, 0);
        dot = __dp4a((int)g.q[4 * t + 1], x.y, dot);
        dot = __dp4a((int)g.q[4 * t + 2], x.z, dot);
        dot = __dp4a((int)g.q[4 * t + 3], x.w, dot);
        dot -= k_offset(T) * sums16[t];
        s += (u32)g.scale[t] * (u32)dot;
        m += (u32)g.min[t] * (u32)sums16[t];
    }
    *scaled = (int)s;
    *mins = (int)m;
}

// The lane sums of group p of a super-block as llama.cpp's single-row AVX2
// kernels (`ggml_vec_dot_*_q8_K`) split them (the CPU backend's `Lanes`):
// lane l of the super-block takes bytes 4l..4l+3 of each 32-value chunk, so
// this group's words l and 8 + l; lanes[l] gets this group's part of lane l
// (Q3_K's offset off each value, as those kernels take it), and for each of
// the group's chunks c (the super-block's chunk 2p + c) chunk_mins[c] =
// Σ min·Σ a and chunk_offsets[c] = offset·Σ scale·Σ a over its two runs
// (Q6_K's offset comes off the lane of its chunk). Sums wrap like the CPU's.
template <int T>
__device__ __forceinline__ void k_group_lanes(const KGroup& g, const i8* a, const int* sums16,
                                              u32* lanes, u32* chunk_mins, u32* chunk_offsets) {
#pragma unroll
    for (int l = 0; l < 8; ++l) lanes[l] = 0;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int4 x = *(const int4*)(a + 16 * t);
        const int xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int w = 4 * t + k;
            int dot = __dp4a((int)g.q[w], xs[k], 0);
            if (T == TYPE_Q3_K) dot = __dp4a((int)0xfcfcfcfcu, xs[k], dot);  // q - 4
            lanes[w % 8] += (u32)g.scale[t] * (u32)dot;
        }
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const u32 s0 = (u32)sums16[2 * c], s1 = (u32)sums16[2 * c + 1];
        chunk_mins[c] = (u32)g.min[2 * c] * s0 + (u32)g.min[2 * c + 1] * s1;
        chunk_offsets[c] = T == TYPE_Q6_K
                               ? 32u * ((u32)g.scale[2 * c] * s0 + (u32)g.scale[2 * c + 1] * s1)
                               : 0u;
    }
}

// The warp's largest |value| (amax), its signed value (max) and its first
// index (first), from each lane's own (non-NaN, amax >= 0): the lanes' amax
// compare as integers, so on sm_80+ two warp reductions and a shuffle find
// them instead of five rounds of three shuffles. Every lane gets the result.
__device__ __forceinline__ void warp_first_amax(float& amax, float& max, int& first) {
#if __CUDA_ARCH__ >= 800
    const u32 top = __reduce_max_sync(FULL_MASK, __float_as_uint(amax));
    first = (int)__reduce_min_sync(FULL_MASK, __float_as_uint(amax) == top ? (u32)first : 256u);
    max = __shfl_sync(FULL_MASK, max, first / 8 % WARP);
    amax = __uint_as_float(top);
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float other_amax = __shfl_xor_sync(FULL_MASK, amax, o);
        const float other_max = __shfl_xor_sync(FULL_MASK, max, o);
        const int other_first = __shfl_xor_sync(FULL_MASK, first, o);
        if (other_amax > amax || (other_amax == amax && other_first < first)) {
            amax = other_amax;
            max = other_max;
            first = other_first;
        }
    }
#endif
}

// llama.cpp's Q8_K quantization (`quantize_row_q8_K_ref`, the CPU backend's)
// of one super-block of 256 values spread over a warp, lane l holding values
// 8l..8l+7 in v: the value of largest magnitude (the first of equals) sets
// iscale = -127/max, each quant is nearest_int(iscale·v) capped at 127, and
// d = 1/iscale; all zero for an all-zero block. Writes the lane's quants to q,
// returns d, and *run_sum gets the sum of run l/2 of 16 quants.
__device__ __forceinline__ float quantize_q8_k_warp(const float* v, int* q, int* run_sum) {
    const int lane = threadIdx.x % WARP;
    float amax = 0.0f, max = 0.0f;
    int first = 256;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (fabsf(v[j]) > amax) {
            amax = fabsf(v[j]);
            max = v[j];
            first = 8 * lane + j;
        }
    }
    warp_first_amax(amax, max, first);
    if (amax == 0.0f) {  // the same on every lane
#pragma unroll
        for (int j = 0; j < 8; ++j) q[j] = 0;
        *run_sum = 0;
        return 0.0f;
    }
    const float iscale = __fdiv_rn(-127.0f, max);
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        q[j] = min(nearest_int(__fmul_rn(iscale, v[j])), 127);
        sum += q[j];
    }
    *run_sum = sum + __shfl_xor_sync(FULL_MASK, sum, 1);
    return __fdiv_rn(1.0f, iscale);
}

// Eight int8 quants packed little-endian.
__device__ __forceinline__ uint2 pack8(const int* q) {
    u32 packed[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
        packed[h] = (u32)(q[4 * h] & 0xff) | (u32)(q[4 * h + 1] & 0xff) << 8 |
                    (u32)(q[4 * h + 2] & 0xff) << 16 | (u32)(q[4 * h + 3] & 0xff) << 24;
    return make_uint2(packed[0], packed[1]);
}
