// Build against llama.cpp 0c1e570 (scripts/llama-cpp-source.sh has the build):
//   g++ -O2 -std=c++17 scripts/llama_cpp_tokenize.cpp -I LLAMA/include -I LLAMA/ggml/include \
//       -L LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,LLAMA/build/bin -o tokenize
// Usage: tokenize VOCAB.gguf STRINGS.inp > STRINGS.out
// Tokenizes each test string of an .inp file (split on "\n__ggml_vocab_test__\n")
// with llama.cpp's vocabulary-only load, no BOS, special tokens not parsed,
// and prints one line of ids per string (the .out format).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "llama.h"
int main(int argc, char ** argv) {
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::ifstream in(argv[2]);
    std::stringstream ss; ss << in.rdbuf();
    std::string all = ss.str(), sep = "\n__ggml_vocab_test__\n";
    size_t pos = 0;
    while (pos < all.size()) {
        size_t next = all.find(sep, pos);
        if (next == std::string::npos) break;
        std::string text = all.substr(pos, next - pos);
        pos = next + sep.size();
        std::vector<llama_token> ids(text.size() + 16);
        int n = llama_tokenize(vocab, text.data(), (int) text.size(), ids.data(), (int) ids.size(), false, false);
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    return 0;
}
