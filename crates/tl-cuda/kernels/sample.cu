// The sampler on the device, for a batch of sequences at once (grid y = job):
// top_k_select picks each job's candidates from its row of logits, then
// sample_candidates applies the penalties on the window's tokens, top-k,
// softmax with temperature, top-p, min-p and the weighted draw, giving one
// token id. It follows the host sampler (tl-engine's sampler module) step for
// step and operation for operation, so both pick the same token from the same
// logits and the same draw: the same total orders (logit, then lower token;
// probability, then lower token), f64 sums in the same sequence, exp in
// double rounded to float, and explicitly rounded float and double operations
// (no contraction into an FMA the host does not do).

// One sequence's step (`SampleJob` in ops/sample.rs writes these 14 words).
struct SampleJob {
    int row;           // its row of logits, and its slot in `tokens`
    int top_k;         // candidates kept after the penalties
    int window_len;    // tokens the penalties look at
    int window_start;  // where they start in `windows`
    int greedy;        // take the best candidate instead of drawing
    float temperature;
    float top_p;
    float min_p;
    float repeat;
    float presence;
    float frequency;
    int unused;
    double draw;       // the uniform draw in [0, 1)
};

// Pairs a selection holds (ties at the k-th value beyond this: the host
// decides), and window tokens whose logits it carries.
#define TOP_K_CAPACITY 1024
#define TOP_K_WINDOW 1024
#define SELECTION_LEN (2 + 2 * TOP_K_CAPACITY + TOP_K_WINDOW)

// A float's position in the total order (as f32::total_cmp) as an unsigned
// key: larger keys for larger values. Unusable values (NaN, -inf) get 0, below
// every usable one.
__device__ __forceinline__ u32 order_key(float v) {
    if (!(v > -__int_as_float(0x7f800000))) return 0u;
    const u32 b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ u32 warp_sum_u32(u32 v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// The selection runs in two steps, so that the passes over a row of 50k-150k
// logits spread over many multiprocessors: top_k_partial splits each row into
// TOP_K_PARTS slices and keeps, per slice, the values at or above the slice's
// own k-th largest (a superset of what the row's selection takes from it: a
// slice's k-th largest is never above the row's); top_k_select then finds the
// row's k-th largest among those and keeps every value at or above it.
#define TOP_K_PARTS 32
#define PART_LEN (2 + 2 * TOP_K_CAPACITY)

// Among the keys of `digits` counted in `histogram`, the digit holding the
// remaining-th largest (scanning down from 255; digit 0 when the counts run
// out); warp 0 only, 8 digits a lane. Updates prefix and remaining.
__device__ void find_digit(const u32* histogram, int shift, u32* prefix, u32* remaining) {
    const int lane = threadIdx.x % WARP;
    u32 counts[8];
    u32 total = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        counts[j] = histogram[255 - 8 * lane - j];
        total += counts[j];
    }
    u32 inclusive = total;  // the counts of this lane's digits and every digit above
#pragma unroll
    for (int o = 1; o < WARP; o <<= 1) {
        const u32 t = __shfl_up_sync(FULL_MASK, inclusive, o);
        if (lane >= o) inclusive += t;
    }
    u32 above = inclusive - total;
    const u32 wanted = *remaining;
    __syncwarp();
    if (above < wanted && (wanted <= inclusive || lane == WARP - 1)) {
        int j = 0;
        for (; j < 7 && above + counts[j] < wanted; ++j) above += counts[j];
        *remaining = wanted - above;
        *prefix |= (u32)(255 - 8 * lane - j) << shift;
    }
}

// The key of the k-th largest usable key among key_at(0..count) (keys of 0
// are unusable), or 1 when at most k are usable: the selection is every key
// at or above the result. A radix select over the keys' four bytes; every
// thread of the block calls it.
template <typename KeyAt>
__device__ u32 kth_largest_key(KeyAt key_at, int count, int k) {
    __shared__ u32 histogram[256];
    __shared__ u32 prefix, remaining, usable;
    if (threadIdx.x == 0) {
        prefix = 0u;
        remaining = (u32)k;
        usable = 0u;
    }
    __syncthreads();
    u32 local = 0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) local += key_at(i) != 0u;
    local = warp_sum_u32(local);
    if (threadIdx.x % WARP == 0) atomicAdd(&usable, local);
    __syncthreads();
    if (usable <= (u32)k) return 1u;
    u32 mask = 0u;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < 256; d += blockDim.x) histogram[d] = 0u;
        __syncthreads();
        const u32 want = prefix;
        for (int i = threadIdx.x; i < count; i += blockDim.x) {
            const u32 key = key_at(i);
            if (key != 0u && (key & mask) == want) atomicAdd(&histogram[(key >> shift) & 0xffu], 1u);
        }
        __syncthreads();
        if (threadIdx.x < WARP) find_digit(histogram, shift, &prefix, &remaining);
        __syncthreads();
        mask |= 0xffu << shift;
    }
    return prefix;
}

// Keys a block stages in shared memory: a loop of global loads that feeds
// shared atomics runs at the latency of each load, so the radix passes read
// the keys from shared memory when they fit (slices of rows up to 262,144
// logits; merged candidates of top-k up to about 256), else from global.
#define STAGED_KEYS 8192

// Appends every candidate i < count whose key is usable and at or above
// `threshold` to `out` as (token, value bits) pairs after a two-word header:
// [0] pairs written (at most TOP_K_CAPACITY), [1] candidates kept (more than
// written: ties overflowed). `written` and `kept` are shared counters at zero;
// every thread of the block calls it.
template <typename KeyAt, typename PairAt>
__device__ void keep_at_or_above(KeyAt key_at, PairAt pair_at, int count, u32 threshold, u32* out,
                                 u32& written, u32& kept) {
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        const u32 key = key_at(i);
        if (key >= threshold && key != 0u) {
            atomicAdd(&kept, 1u);
            const u32 slot = atomicAdd(&written, 1u);
            if (slot < (u32)TOP_K_CAPACITY) {
                const uint2 pair = pair_at(i);
                out[2 + 2 * slot] = pair.x;
                out[3 + 2 * slot] = pair.y;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        out[0] = min(written, (u32)TOP_K_CAPACITY);
        out[1] = kept;
    }
}

// Step one, grid (TOP_K_PARTS, jobs): slice blockIdx.x of job blockIdx.y's
// row keeps the values at or above its own k-th largest (k = top_k +
// window_len). Its part gets [0] pairs written (at most TOP_K_CAPACITY), [1]
// pairs kept, then (token, value bits) pairs.
extern "C" __global__ void top_k_partial(const float* logits, int n, const SampleJob* jobs,
                                         u32* partials) {
    __shared__ u32 staged[STAGED_KEYS];
    __shared__ u32 written, kept;
    const SampleJob job = jobs[blockIdx.y];
    const int slice = (n + TOP_K_PARTS - 1) / TOP_K_PARTS;
    const int start = min(n, (int)blockIdx.x * slice);
    const int count = min(n, start + slice) - start;
    const float* x = logits + (size_t)job.row * n + start;
    u32* out = partials + ((size_t)blockIdx.y * TOP_K_PARTS + blockIdx.x) * PART_LEN;
    const bool in_shared = count <= STAGED_KEYS;
    if (in_shared)
        for (int i = threadIdx.x; i < count; i += blockDim.x) staged[i] = order_key(x[i]);
    if (threadIdx.x == 0) {
        written = 0u;
        kept = 0u;
    }
    auto key_at = [&](int i) { return in_shared ? staged[i] : order_key(x[i]); };
    const u32 threshold = kth_largest_key(key_at, count, job.top_k + job.window_len);
    auto pair_at = [&](int i) { return make_uint2((u32)(start + i), __float_as_uint(x[i])); };
    keep_at_or_above(key_at, pair_at, count, threshold, out, written, kept);
}

// Step two, one block per job: the k = top_k + window_len largest usable
// values of the row, from the parts top_k_partial kept: every value whose key
// is above the k-th largest key, and every value equal to it (the sampler
// keeps the lowest token ids among those). Its selection gets: [0] pairs
// written (at most TOP_K_CAPACITY), [1] pairs selected (more than written:
// the host must decide), then (token, value bits) pairs in no particular
// order, then after TOP_K_CAPACITY pairs the values at the window's tokens
// (NaN bits for a token outside the row): the tokens the penalties will
// change.
extern "C" __global__ void top_k_select(const float* logits, int n, const SampleJob* jobs,
                                        const u32* windows, const u32* partials,
                                        u32* selections) {
    __shared__ u32 staged[STAGED_KEYS];
    __shared__ u32 part_start[TOP_K_PARTS + 1];
    __shared__ u32 overflowed, written, selected;
    const SampleJob job = jobs[blockIdx.y];
    const float* x = logits + (size_t)job.row * n;
    const u32* window = windows + job.window_start;
    const u32* parts = partials + (size_t)blockIdx.y * TOP_K_PARTS * PART_LEN;
    u32* out = selections + (size_t)blockIdx.y * SELECTION_LEN;
    for (int j = threadIdx.x; j < job.window_len; j += blockDim.x)
        out[2 + 2 * TOP_K_CAPACITY + j] = window[j] < (u32)n ? __float_as_uint(x[window[j]]) : 0x7fc00000u;
    static_assert(TOP_K_PARTS == WARP, "one lane per part");
    if (threadIdx.x < WARP) {
        // Where each part's pairs start among all candidates: a scan over lanes.
        const int p = threadIdx.x;
        const u32 part_written = parts[p * PART_LEN], part_kept = parts[p * PART_LEN + 1];
        u32 inclusive = part_written;
#pragma unroll
        for (int o = 1; o < WARP; o <<= 1) {
            const u32 t = __shfl_up_sync(FULL_MASK, inclusive, o);
            if (p >= o) inclusive += t;
        }
        part_start[p] = inclusive - part_written;
        if (p == WARP - 1) part_start[TOP_K_PARTS] = inclusive;
        const bool any_overflow = __any_sync(FULL_MASK, part_kept > part_written);
        if (p == 0) {
            overflowed = any_overflow ? 1u : 0u;
            written = 0u;
            selected = 0u;
        }
    }
    __syncthreads();
    if (overflowed) {  // ties overflowed a part: the host decides
        if (threadIdx.x == 0) {
            out[0] = 0u;
            out[1] = 1u;
        }
        return;
    }
    // Candidate i is slot i - part_start[p] of the part p holding it.
    const int count = (int)part_start[TOP_K_PARTS];
    auto pair_at = [&](int i) {
        int p = 0;
        while (part_start[p + 1] <= (u32)i) ++p;
        return parts + p * PART_LEN + 2 + 2 * (i - (int)part_start[p]);
    };
    const bool in_shared = count <= STAGED_KEYS;
    if (in_shared) {
        // Slot by slot, so that no thread searches for its part.
        for (int i = threadIdx.x; i < TOP_K_PARTS * TOP_K_CAPACITY; i += blockDim.x) {
            const int p = i / TOP_K_CAPACITY, slot = i % TOP_K_CAPACITY;
            if ((u32)slot < part_start[p + 1] - part_start[p])
                staged[part_start[p] + slot] = order_key(__uint_as_float(parts[p * PART_LEN + 3 + 2 * slot]));
        }
    }
    auto key_at = [&](int i) { return in_shared ? staged[i] : order_key(__uint_as_float(pair_at(i)[1])); };
    const u32 threshold = kth_largest_key(key_at, count, job.top_k + job.window_len);
    auto pair_value = [&](int i) {
        const u32* pair = pair_at(i);
        return make_uint2(pair[0], pair[1]);
    };
    keep_at_or_above(key_at, pair_value, count, threshold, out, written, selected);
}

#define SAMPLE_MAX_K 256
// Candidates one call can hold: the selection's pairs and the window's tokens.
#define SAMPLE_MAX_CANDIDATES 2048
// What `out` gets when the device cannot decide (the selection overflowed, or
// no usable candidate): the host then samples from the whole row.
#define SAMPLE_FALLBACK 0xffffffffu

// llama.cpp's repetition penalty, then OpenAI's frequency and presence ones,
// rounded as the host rounds them.
__device__ __forceinline__ float penalized_logit(float logit, u32 count, float repeat,
                                                 float presence, float frequency) {
    const float repeated = logit > 0.0f ? __fdiv_rn(logit, repeat) : __fmul_rn(logit, repeat);
    return __fsub_rn(__fsub_rn(repeated, __fmul_rn((float)count, frequency)), presence);
}

// A candidate as one sortable number: larger means more likely first (higher
// logit in f32::total_cmp's order, then the lower token).
__device__ __forceinline__ u64 candidate_key(float logit, u32 token) {
    return ((u64)order_key(logit) << 32) | (u64)(~token);
}

__device__ __forceinline__ u32 token_of(u64 key) { return ~(u32)key; }

// order_key's inverse for usable values.
__device__ __forceinline__ float logit_of(u64 key) {
    const u32 k = (u32)(key >> 32);
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Every usable candidate into keys: the window's distinct tokens with their
// penalised logits, and the selection's pairs that are not window tokens.
// Returns (through `count`) how many.
__device__ void gather_candidates(const u32* selection, const u32* window, int window_len,
                                  float repeat, float presence, float frequency, u64* keys,
                                  u32* count) {
    const u32* window_logits = selection + 2 + 2 * TOP_K_CAPACITY;
    for (int j = threadIdx.x; j < window_len; j += blockDim.x) {
        const u32 token = window[j];
        bool first = true;
        u32 seen = 0;
        for (int i = 0; i < window_len; ++i) {
            if (window[i] == token) {
                first = first && i >= j;
                ++seen;
            }
        }
        const float logit = __uint_as_float(window_logits[j]);
        if (!first || logit != logit) continue;  // a repeat, or outside the vocabulary
        const float penalized = penalized_logit(logit, seen, repeat, presence, frequency);
        if (penalized > -__int_as_float(0x7f800000)) keys[atomicAdd(count, 1u)] = candidate_key(penalized, token);
    }
    const int written = (int)selection[0];
    for (int p = threadIdx.x; p < written; p += blockDim.x) {
        const u32 token = selection[2 + 2 * p];
        const float logit = __uint_as_float(selection[3 + 2 * p]);
        bool in_window = false;
        for (int i = 0; i < window_len; ++i) in_window = in_window || window[i] == token;
        if (!in_window && logit > -__int_as_float(0x7f800000)) keys[atomicAdd(count, 1u)] = candidate_key(logit, token);
    }
}

// The `kept` best of keys[0..n) (distinct), most likely first, into best.
__device__ void rank_best(const u64* keys, int n, int kept, u64* best) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int rank = 0;
        for (int j = 0; j < n; ++j) rank += keys[j] > keys[i];
        if (rank < kept) best[rank] = keys[i];
    }
}

// order[r] = the index of the r-th most probable of best[0..n) (ties: lower token).
__device__ void rank_by_probability(const u64* best, const float* prob, int n, u32* order) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int rank = 0;
        for (int j = 0; j < n; ++j)
            rank += prob[j] > prob[i] || (prob[j] == prob[i] && token_of(best[j]) < token_of(best[i]));
        order[rank] = (u32)i;
    }
}

// top-p, min-p and the draw, on one thread (the sums must run in the host's
// order): `order` holds the candidates in the order the host has them at
// top-p (probability order when top-p is on, else logit order).
__device__ u32 truncate_and_draw(const u64* best, const float* prob, u32* order, int n,
                                 float top_p, float min_p, double draw) {
    int survivors = n;
    if (top_p < 1.0f) {
        double total = 0.0;  // in logit order, as the host sums it
        for (int i = 0; i < n; ++i) total = __dadd_rn(total, (double)prob[i]);
        const double target = __dmul_rn((double)top_p, total);
        double cumulative = 0.0;
        for (int r = 0; r < n; ++r) {
            cumulative = __dadd_rn(cumulative, (double)prob[order[r]]);
            if (cumulative >= target) {
                survivors = r + 1;
                break;
            }
        }
    }
    if (min_p > 0.0f) {
        float max_prob = 0.0f;
        for (int r = 0; r < survivors; ++r) max_prob = fmaxf(max_prob, prob[order[r]]);
        const float threshold = __fmul_rn(min_p, max_prob);
        int kept = 0;
        for (int r = 0; r < survivors; ++r)
            if (prob[order[r]] >= threshold) order[kept++] = order[r];
        survivors = kept;
    }
    double total = 0.0;
    for (int r = 0; r < survivors; ++r) total = __dadd_rn(total, (double)prob[order[r]]);
    const double target = __dmul_rn(draw, total);
    double cumulative = 0.0;
    for (int r = 0; r < survivors; ++r) {
        cumulative = __dadd_rn(cumulative, (double)prob[order[r]]);
        if (cumulative > target) return token_of(best[order[r]]);
    }
    // Rounding left the sum a hair below the target: the last candidate with
    // any mass (else the last).
    for (int r = survivors - 1; r >= 0; --r)
        if (prob[order[r]] > 0.0f) return token_of(best[order[r]]);
    return survivors > 0 ? token_of(best[order[survivors - 1]]) : SAMPLE_FALLBACK;
}

// One token for job blockIdx.y from its selection (top_k_select's output)
// and its window: with `greedy`, the best candidate after the penalties; else
// the host sampler's draw for `draw`. Writes tokens[row * token_stride].
extern "C" __global__ void sample_candidates(const SampleJob* jobs, const u32* windows,
                                             const u32* selections, u32* tokens,
                                             int token_stride) {
    __shared__ u64 keys[SAMPLE_MAX_CANDIDATES];
    __shared__ u64 best[SAMPLE_MAX_K];
    __shared__ float prob[SAMPLE_MAX_K];
    __shared__ u32 order[SAMPLE_MAX_K];
    __shared__ u32 count;
    const SampleJob job = jobs[blockIdx.y];
    const u32* selection = selections + (size_t)blockIdx.y * SELECTION_LEN;
    u32* out = tokens + (size_t)job.row * token_stride;
    if (selection[1] > selection[0]) {  // ties overflowed the selection
        if (threadIdx.x == 0) out[0] = SAMPLE_FALLBACK;
        return;
    }
    if (threadIdx.x == 0) count = 0u;
    __syncthreads();
    gather_candidates(selection, windows + job.window_start, job.window_len, job.repeat,
                      job.presence, job.frequency, keys, &count);
    __syncthreads();
    const int n = (int)count;
    const int kept = min(n, job.top_k);
    rank_best(keys, n, kept, best);
    __syncthreads();
    if (kept == 0 || job.greedy) {
        if (threadIdx.x == 0) out[0] = kept == 0 ? SAMPLE_FALLBACK : token_of(best[0]);
        return;
    }
    const float max_logit = logit_of(best[0]);
    const float infinity = __int_as_float(0x7f800000);
    for (int i = threadIdx.x; i < kept; i += blockDim.x) {
        const float logit = logit_of(best[i]);
        prob[i] = max_logit == infinity
                      ? (logit == infinity ? 1.0f : 0.0f)
                      : (float)exp((double)__fdiv_rn(__fsub_rn(logit, max_logit), job.temperature));
        order[i] = (u32)i;
    }
    __syncthreads();
    if (job.top_p < 1.0f) {
        rank_by_probability(best, prob, kept, order);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[0] = truncate_and_draw(best, prob, order, kept, job.top_p, job.min_p, job.draw);
}
