#!/usr/bin/env python3
"""Writes llama.cpp's greedy continuations of long raw prompts (64 tokens or
more, so llama.cpp runs the prompt through its tiled flash attention) to
crates/tl-cli/tests/golden/llama_cpp_long_prompt_greedy.jsonl.

The prompts are the first 64, 100 and 200 tokens of the GPL text in
testdata/reference/gpl-3.txt, each continued by 32 tokens: contexts
stay within 256 positions, the length below which llama.cpp's single-token
steps attend in one chunk (beyond it, it splits the positions by thread).
Each prompt gets a fresh context: llama-cpp-python would otherwise reuse the
previous prompt's cache for the shared prefix and run only the rest, a
shorter batch.

llama.cpp comes from `pip install llama-cpp-python` built as docs/perf.md says
(CPU, AVX2, flash attention on, f16 KV cache: llama.cpp's defaults).

usage: llama_cpp_long_prompt_references.py MODEL.gguf TEXT_FILE
"""
import json
import sys

import llama_cpp

PROMPT_TOKENS = [64, 100, 200]
TOKENS = 32


def main():
    model, text_file = sys.argv[1], sys.argv[2]
    text = open(text_file, encoding="utf-8").read()
    out_path = "crates/tl-cli/tests/golden/llama_cpp_long_prompt_greedy.jsonl"
    with open(out_path, "w", encoding="utf-8") as out:
        for count in PROMPT_TOKENS:
            llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_threads=2, n_threads_batch=2,
                                  flash_attn=True, verbose=False)
            tokens = llm.tokenize(text.encode(), add_bos=False, special=True)[:count]
            prompt = llm.detokenize(tokens).decode("utf-8")
            assert llm.tokenize(prompt.encode(), add_bos=False, special=True) == tokens
            reply = []
            for token in llm.generate(tokens, top_k=1, temp=0.0, repeat_penalty=1.0, reset=True):
                reply.append(token)
                if len(reply) == TOKENS:
                    break
            completion = llm.detokenize(reply).decode("utf-8", errors="replace")
            out.write(json.dumps({"prompt": prompt, "prompt_tokens": count, "n_predict": TOKENS,
                                  "completion": completion}) + "\n")


if __name__ == "__main__":
    main()
