#!/usr/bin/env python3
"""Writes llama.cpp's logits for the tiny synthetic Qwen3 model to
crates/tl-engine/tests/golden/llama_cpp_tiny_qwen3_logits.json, the reference
that crates/tl-engine/tests/architectures_llama_cpp.rs holds the CPU backend to.

The model is crates/tl-engine/tests/golden/tiny-qwen3-q8_0.gguf: the output
of `tl model synth --shape tiny-qwen3 --quant q8_0 --seed 0` with its norm
weights (all ones there) replaced, with `--norms`, by values that differ per
element, so that every weight of Qwen3's block counts. Random weights: the
logits say nothing about language, but every step of the block (the per-head
query/key norms, RoPE on pairs half a head apart, the tied output head)
shapes them.

Two cases, each in a fresh context:
  - a prompt of 80 tokens in one batch (llama.cpp's tiled flash attention),
    the logits of four of its rows;
  - a prompt of 10 tokens, then 6 single-token steps (the decode path), the
    logits after each step.

llama.cpp comes from `pip install llama-cpp-python` built as docs/perf.md says
(CPU, AVX2, flash attention on, f16 KV cache: llama.cpp's defaults).

usage: llama_cpp_qwen3_references.py --norms MODEL.gguf   (once, in place)
       llama_cpp_qwen3_references.py MODEL.gguf
"""
import json
import math
import sys

import llama_cpp

OUT = "crates/tl-engine/tests/golden/llama_cpp_tiny_qwen3_logits.json"
VOCAB = 512


def tokens(count, salt):
    # Ids past the 3 control tokens of the made-up vocabulary.
    return [3 + (salt + 37 * i) % (VOCAB - 3) for i in range(count)]


def context(model):
    return llama_cpp.Llama(model_path=model, n_ctx=256, n_threads=2, n_threads_batch=2,
                           flash_attn=True, logits_all=True, verbose=False)


def row(llm, index):
    return [float(v) for v in llm.scores[index]]


def set_norms(model):
    """Gives every F32 norm vector values in (0.5, 1.5), different per element
    and per tensor (`pip install gguf` for the reader)."""
    import gguf

    reader = gguf.GGUFReader(model, "r+")
    for n, tensor in enumerate(reader.tensors):
        if tensor.name.endswith("norm.weight"):
            for i in range(len(tensor.data)):
                tensor.data[i] = 1.0 + 0.5 * math.sin(1.7 * i + 0.9 * n)
    reader.data.flush()


def main():
    if sys.argv[1] == "--norms":
        set_norms(sys.argv[2])
        return
    model = sys.argv[1]
    prompt = tokens(80, 7)
    llm = context(model)
    llm.eval(prompt)
    rows = [0, 1, 40, 79]
    batch = {"tokens": prompt, "rows": rows, "logits": [row(llm, r) for r in rows]}

    llm = context(model)
    start, steps = tokens(10, 101), tokens(6, 211)
    llm.eval(start)
    logits = []
    for i, token in enumerate(steps):
        llm.eval([token])
        logits.append(row(llm, len(start) + i))
    decode = {"prompt": start, "steps": steps, "logits": logits}

    with open(OUT, "w", encoding="utf-8") as out:
        json.dump({"prompt_batch": batch, "decode": decode}, out)
        out.write("\n")


if __name__ == "__main__":
    main()
