// llama.cpp's greedy continuations of raw prompts longer than 256 tokens, on
// the CPU with T threads: the JSON lines of
// crates/tl-cli/tests/golden/llama_cpp_long_context_greedy.jsonl.
//
// Past 256 cached positions llama.cpp splits a single-token step's attention
// into one chunk per thread, ceil(n_kv / T) positions each (n_kv: the cache
// view, a multiple of 256). Where that is 256 (2 threads up to position 511,
// 3 up to 767, 4 up to 1023) its order is our canonical one, so its tokens are
// ours; each case keeps its steps inside that range.
//
// The prompts are the first N tokens of a text (no BOS, special tokens
// parsed, as scripts/llama_cpp_long_prompt_references.py does), run in
// batches of 512 (llama-cpp-python's default) in a fresh context of 2048,
// flash attention on, f16 KV cache; then 32 greedy steps.
//
// Build against llama.cpp 0c1e570 (its CPU build line is in
// ../shared/tools/llama-cpp-source.sh; the library target `llama` suffices):
//   g++ -O2 -std=c++17 scripts/llama_cpp_long_context_greedy.cpp -I LLAMA/include \
//       -I LLAMA/ggml/include -L LLAMA/build/bin -lllama -lggml -lggml-base \
//       -Wl,-rpath,LLAMA/build/bin -o llama_cpp_long_context_greedy
// Usage: llama_cpp_long_context_greedy MODEL.gguf TEXT_FILE TOKENS:THREADS...
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static const int STEPS = 32;

static std::string json_string(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char) c;
        } else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += (char) c;
        }
    }
    return out + "\"";
}

static std::string text_of(const llama_vocab * vocab, const std::vector<llama_token> & tokens) {
    std::vector<char> buf(tokens.size() * 64 + 64);
    int n = llama_detokenize(vocab, tokens.data(), (int) tokens.size(), buf.data(),
                             (int) buf.size(), false, true);
    if (n < 0) exit(1);
    return std::string(buf.data(), n);
}

static void decode(llama_context * ctx, const std::vector<llama_token> & tokens, int start) {
    for (size_t at = 0; at < tokens.size(); at += 512) {
        size_t n = std::min<size_t>(512, tokens.size() - at);
        llama_batch batch = llama_batch_init((int) n, 0, 1);
        for (size_t i = 0; i < n; i++) {
            batch.token[i] = tokens[at + i];
            batch.pos[i] = start + (int) (at + i);
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = at + i + 1 == tokens.size();
        }
        batch.n_tokens = (int) n;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_decode failed\n");
            exit(1);
        }
        llama_batch_free(batch);
    }
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXT_FILE TOKENS:THREADS...\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    std::ifstream file(argv[2]);
    std::stringstream read;
    read << file.rdbuf();
    const std::string text = read.str();
    std::vector<llama_token> all(text.size() + 16);
    int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), all.data(), (int) all.size(),
                           false, true);
    if (n < 0) return 1;
    all.resize(n);
    for (int a = 3; a < argc; a++) {
        int count = 0, threads = 0;
        if (sscanf(argv[a], "%d:%d", &count, &threads) != 2 || count > n) return 2;
        std::vector<llama_token> prompt(all.begin(), all.begin() + count);
        llama_context_params p = llama_context_default_params();
        p.n_ctx = 2048;
        p.n_batch = 512;
        p.n_ubatch = 512;
        p.n_threads = threads;
        p.n_threads_batch = threads;
        p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        llama_context * ctx = llama_init_from_model(model, p);
        decode(ctx, prompt, 0);
        std::vector<llama_token> reply;
        for (int i = 0; i < STEPS; i++) {
            const float * logits = llama_get_logits_ith(ctx, -1);
            llama_token best = 0;
            for (int t = 1; t < n_vocab; t++)
                if (logits[t] > logits[best]) best = t;
            reply.push_back(best);
            decode(ctx, {best}, count + i);
        }
        printf("{\"prompt\": %s, \"prompt_tokens\": %d, \"threads\": %d, \"n_predict\": %d, "
               "\"completion\": %s}\n",
               json_string(text_of(vocab, prompt)).c_str(), count, threads, STEPS,
               json_string(text_of(vocab, reply)).c_str());
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}
