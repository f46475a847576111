// llama.cpp's logits for a synthetic model, in the JSON the architecture
// tests read (crates/tl-engine/tests/golden/llama_cpp_tiny_*_logits.json):
// the same two cases as scripts/llama_cpp_qwen3_references.py, through
// llama.cpp's C API instead of llama-cpp-python (CPU, 2 threads, flash
// attention on, f16 KV cache, a context of 256):
//   - a prompt of 80 tokens in one batch, the logits of rows 0, 1, 40, 79;
//   - a prompt of 10 tokens, then 6 single-token steps, the logits after each.
// Token ids are made up past the 3 control tokens of a 512-token vocabulary.
//
// Build against llama.cpp 0c1e570 (scripts/llama-cpp-source.sh has the build):
//   g++ -O2 -std=c++17 scripts/llama_cpp_logits.cpp -I LLAMA/include \
//       -I LLAMA/ggml/include -L LLAMA/build/bin -lllama -lggml -lggml-base \
//       -Wl,-rpath,LLAMA/build/bin -o llama_cpp_logits
// Usage: llama_cpp_logits MODEL.gguf > OUT.json
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

static const int VOCAB = 512;

static std::vector<llama_token> tokens(int count, int salt) {
    std::vector<llama_token> out;
    for (int i = 0; i < count; i++) out.push_back(3 + (salt + 37 * i) % (VOCAB - 3));
    return out;
}

static llama_context * context(llama_model * model) {
    llama_context_params params = llama_context_default_params();
    params.n_ctx = 256;
    params.n_batch = 256;
    params.n_ubatch = 256;
    params.n_threads = 2;
    params.n_threads_batch = 2;
    params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    return llama_init_from_model(model, params);
}

// Evaluates `toks` at positions from `start`, asking for every row's logits.
static void eval(llama_context * ctx, const std::vector<llama_token> & toks, int start) {
    llama_batch batch = llama_batch_init((int) toks.size(), 0, 1);
    for (size_t i = 0; i < toks.size(); i++) {
        batch.token[i] = toks[i];
        batch.pos[i] = start + (int) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = (int) toks.size();
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_decode failed\n");
        exit(1);
    }
    llama_batch_free(batch);
}

static void print_ids(const std::vector<llama_token> & ids) {
    printf("[");
    for (size_t i = 0; i < ids.size(); i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("]");
}

static void print_row(const float * row, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf("%s%.9g", i ? ", " : "", row[i]);
    printf("]");
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model_params mparams = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mparams);
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    std::vector<llama_token> prompt = tokens(80, 7);
    const int rows[4] = {0, 1, 40, 79};
    llama_context * ctx = context(model);
    eval(ctx, prompt, 0);
    printf("{\"prompt_batch\": {\"tokens\": ");
    print_ids(prompt);
    printf(", \"rows\": [0, 1, 40, 79], \"logits\": [");
    for (int r = 0; r < 4; r++) {
        if (r) printf(", ");
        print_row(llama_get_logits_ith(ctx, rows[r]), n_vocab);
    }
    printf("]}, ");
    llama_free(ctx);

    ctx = context(model);
    std::vector<llama_token> start = tokens(10, 101), steps = tokens(6, 211);
    eval(ctx, start, 0);
    printf("\"decode\": {\"prompt\": ");
    print_ids(start);
    printf(", \"steps\": ");
    print_ids(steps);
    printf(", \"logits\": [");
    for (size_t i = 0; i < steps.size(); i++) {
        eval(ctx, {steps[i]}, (int) (start.size() + i));
        if (i) printf(", ");
        print_row(llama_get_logits_ith(ctx, 0), n_vocab);
    }
    printf("]}}\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
