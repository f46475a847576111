// RoPE with the K/V write into the cache, and causal grouped-query attention over
// the f16 cache: split-K "flash decoding" for one new token, and one warp per
// (query row, head) for a prefill batch. The cache of one layer is
// [kv_head][capacity][head_dim] f16, the CPU backend's layout.

#define MAX_HEAD_DIM 256
#define ATTN_WARPS 4

// qkv is [rows][q_width + 2·kv_width] (the fused QKV projection's output). Rotates
// each query head in place (adjacent pairs, the GGUF llama layout) and writes the
// rotated keys and the values of row r into the cache at position *start + r.
// cos_sin is [position][head_dim/2] of (cos, sin). One block per row.
extern "C" __global__ void rope_store_kv(float* qkv, int heads, int kv_heads, int head_dim,
                                         const float2* cos_sin, const int* start,
                                         u16* k_cache, u16* v_cache, int capacity) {
    const int row = blockIdx.x;
    const int pos = *start + row;
    const int pairs = head_dim / 2;
    const int q_width = heads * head_dim, kv_width = kv_heads * head_dim;
    float* q = qkv + (u64)row * (q_width + 2 * kv_width);
    float* k = q + q_width;
    const float* v = k + kv_width;
    const float2* table = cos_sin + (u64)pos * pairs;
    for (int i = threadIdx.x; i < (heads + kv_heads) * pairs; i += blockDim.x) {
        const int head = i / pairs, pair = i % pairs;
        const float2 cs = table[pair];
        if (head < heads) {
            float* p = q + head * head_dim + 2 * pair;
            const float x0 = p[0], x1 = p[1];
            p[0] = fmaf(x0, cs.x, -(x1 * cs.y));
            p[1] = fmaf(x0, cs.y, x1 * cs.x);
        } else {
            const int kh = head - heads;
            const float* p = k + kh * head_dim + 2 * pair;
            const float x0 = p[0], x1 = p[1];
            const u64 at = ((u64)kh * capacity + pos) * head_dim + 2 * pair;
            k_cache[at] = f2h(fmaf(x0, cs.x, -(x1 * cs.y)));
            k_cache[at + 1] = f2h(fmaf(x0, cs.y, x1 * cs.x));
            const float* pv = v + kh * head_dim + 2 * pair;
            v_cache[at] = f2h(pv[0]);
            v_cache[at + 1] = f2h(pv[1]);
        }
    }
}

// Online-softmax state of one warp: running max, running sum, and each lane's
// share of the output (dims lane, lane+32, ...).
struct Softmax {
    float max, sum;
    float acc[MAX_HEAD_DIM / WARP];
};

// Decode, first pass: query head blockIdx.x over split blockIdx.y of the
// positions 0..=*last. Writes (max, sum, acc[head_dim]) per (head, split).
extern "C" __global__ void attention_decode_split(const float* q, const u16* k_cache,
                                                  const u16* v_cache, const int* last,
                                                  int heads, int kv_heads, int head_dim,
                                                  int capacity, float scale, float* partial) {
    const int head = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
    const int len = *last + 1;
    const int chunk = (len + splits - 1) / splits;
    const int begin = split * chunk, end = min(len, begin + chunk);
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int per_lane = head_dim / WARP;
    const int kv_head = head / (heads / kv_heads);
    const u16* keys = k_cache + (u64)kv_head * capacity * head_dim;
    const u16* values = v_cache + (u64)kv_head * capacity * head_dim;
    float qr[MAX_HEAD_DIM / WARP];
    for (int j = 0; j < per_lane; ++j) qr[j] = q[head * head_dim + lane + j * WARP];
    Softmax s;
    s.max = -__int_as_float(0x7f800000);
    s.sum = 0.0f;
    for (int j = 0; j < per_lane; ++j) s.acc[j] = 0.0f;
    for (int p = begin + warp; p < end; p += ATTN_WARPS) {
        const u16* kp = keys + (u64)p * head_dim;
        float dot = 0.0f;
        for (int j = 0; j < per_lane; ++j) dot += qr[j] * h2f(kp[lane + j * WARP]);
        const float score = warp_sum(dot) * scale;
        const float m = fmaxf(s.max, score);
        const float old = expf(s.max - m), w = expf(score - m);
        const u16* vp = values + (u64)p * head_dim;
        for (int j = 0; j < per_lane; ++j) s.acc[j] = s.acc[j] * old + w * h2f(vp[lane + j * WARP]);
        s.sum = s.sum * old + w;
        s.max = m;
    }
    // Merge the block's warps through shared memory.
    __shared__ float w_max[ATTN_WARPS], w_sum[ATTN_WARPS];
    __shared__ float w_acc[ATTN_WARPS][MAX_HEAD_DIM];
    if (lane == 0) {
        w_max[warp] = s.max;
        w_sum[warp] = s.sum;
    }
    for (int j = 0; j < per_lane; ++j) w_acc[warp][lane + j * WARP] = s.acc[j];
    __syncthreads();
    float* out = partial + ((u64)head * splits + split) * (head_dim + 2);
    float m = w_max[0];
    for (int w = 1; w < ATTN_WARPS; ++w) m = fmaxf(m, w_max[w]);
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < ATTN_WARPS; ++w)
            if (w_sum[w] > 0.0f) a += w_acc[w][d] * expf(w_max[w] - m);
        out[2 + d] = a;
    }
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < ATTN_WARPS; ++w)
            if (w_sum[w] > 0.0f) total += w_sum[w] * expf(w_max[w] - m);
        out[0] = m;
        out[1] = total;
    }
}

// Decode, second pass: merges the splits of head blockIdx.x into out[head].
extern "C" __global__ void attention_decode_merge(const float* partial, int splits,
                                                  int head_dim, float* out) {
    const int head = blockIdx.x;
    const float* p = partial + (u64)head * splits * (head_dim + 2);
    float m = -__int_as_float(0x7f800000);
    for (int s = 0; s < splits; ++s)
        if (p[s * (head_dim + 2) + 1] > 0.0f) m = fmaxf(m, p[s * (head_dim + 2)]);
    float total = 0.0f;
    for (int s = 0; s < splits; ++s) {
        const float* ps = p + s * (head_dim + 2);
        if (ps[1] > 0.0f) total += ps[1] * expf(ps[0] - m);
    }
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float* ps = p + s * (head_dim + 2);
            if (ps[1] > 0.0f) a += ps[2 + d] * expf(ps[0] - m);
        }
        out[head * head_dim + d] = a * inverse;
    }
}

// Prefill: one warp per (row, head); row r sits at position *start + r and sees
// positions 0..=that. Lanes take 32 keys at a time (each lane one whole dot
// product), then the chunk's weights are broadcast to accumulate the values,
// each lane owning head_dim/32 output dims. q rows are `q_stride` floats apart
// (the fused QKV buffer); out is f16 [row][heads·head_dim], the next GEMM's input.
extern "C" __global__ void attention_prefill(const float* q, int q_stride, const u16* k_cache,
                                             const u16* v_cache, const int* start, int rows,
                                             int heads, int kv_heads, int head_dim,
                                             int capacity, float scale, u16* out) {
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int item = blockIdx.x * ATTN_WARPS + warp;
    if (item >= rows * heads) return;
    const int row = item / heads, head = item % heads;
    const int visible = *start + row + 1;
    const int per_lane = head_dim / WARP;
    const int kv_head = head / (heads / kv_heads);
    const u16* keys = k_cache + (u64)kv_head * capacity * head_dim;
    const u16* values = v_cache + (u64)kv_head * capacity * head_dim;
    __shared__ float q_shared[ATTN_WARPS][MAX_HEAD_DIM];
    const float* qr = q + (u64)row * q_stride + head * head_dim;
    for (int d = lane; d < head_dim; d += WARP) q_shared[warp][d] = qr[d];
    __syncwarp();
    float m = -__int_as_float(0x7f800000), sum = 0.0f;
    float acc[MAX_HEAD_DIM / WARP];
    for (int j = 0; j < per_lane; ++j) acc[j] = 0.0f;
    for (int base = 0; base < visible; base += WARP) {
        const int p = base + lane;
        float score = -__int_as_float(0x7f800000);
        if (p < visible) {
            const u16* kp = keys + (u64)p * head_dim;
            float dot = 0.0f;
            for (int d = 0; d < head_dim; d += 2) {
                const u32 pair = *(const u32*)(kp + d);
                dot += q_shared[warp][d] * h2f((u16)(pair & 0xffff)) +
                       q_shared[warp][d + 1] * h2f((u16)(pair >> 16));
            }
            score = dot * scale;
        }
        const float chunk_max = warp_max(score);
        const float new_max = fmaxf(m, chunk_max);
        const float old = expf(m - new_max);
        const float w = p < visible ? expf(score - new_max) : 0.0f;
        sum = sum * old + warp_sum(w);
        for (int j = 0; j < per_lane; ++j) acc[j] *= old;
        const int count = min(WARP, visible - base);
        for (int i = 0; i < count; ++i) {
            const float wi = __shfl_sync(FULL_MASK, w, i);
            const u16* vp = values + (u64)(base + i) * head_dim;
            for (int j = 0; j < per_lane; ++j) acc[j] += wi * h2f(vp[lane + j * WARP]);
        }
        m = new_max;
    }
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    u16* o = out + (u64)row * heads * head_dim + head * head_dim;
    for (int j = 0; j < per_lane; ++j) o[lane + j * WARP] = f2h(acc[j] * inverse);
}
