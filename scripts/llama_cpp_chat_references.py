#!/usr/bin/env python3
"""Writes llama.cpp's greedy replies to chat prompts (the default model's ChatML
template with its default system turn, as `tl generate` renders a prompt without
--raw) to crates/tl-cli/tests/golden/llama_cpp_chat_greedy.jsonl.

llama.cpp comes from `pip install llama-cpp-python` built as docs/perf.md says
(CPU, AVX2, flash attention on, f16 KV cache: llama.cpp's defaults).

usage: llama_cpp_chat_references.py MODEL.gguf
"""
import json
import sys

import llama_cpp

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QUESTIONS = [
    "What is the capital of France?",
    "Name three fruits.",
    "What is 2 + 2?",
    "Write a short greeting.",
]
TOKENS = 24


def main():
    llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=2048, n_threads=2, n_threads_batch=2,
                          flash_attn=True, verbose=False)
    with open("crates/tl-cli/tests/golden/llama_cpp_chat_greedy.jsonl", "w", encoding="utf-8") as out:
        for question in QUESTIONS:
            prompt = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
                      "<|im_start|>assistant\n")
            tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
            reply = []
            for token in llm.generate(tokens, top_k=1, temp=0.0, repeat_penalty=1.0, reset=True):
                if llm._model.token_is_eog(token) if hasattr(llm._model, "token_is_eog") else token == llm.token_eos():
                    break
                reply.append(token)
                if len(reply) == TOKENS:
                    break
            text = llm.detokenize(reply).decode("utf-8", errors="replace")
            out.write(json.dumps({"question": question, "n_predict": TOKENS, "completion": text}) + "\n")


if __name__ == "__main__":
    main()
