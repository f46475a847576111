#!/usr/bin/env python3
"""Writes llama.cpp's embeddings of the reference texts (`llama-embedding`,
CPU build, 2 threads), one JSON object per line:
{"model", "text", "prompt_tokens", "embedding"}.

    python3 scripts/llama_cpp_embedding_references.py LLAMA_BIN_DIR NAME=MODEL.gguf... \
        > testdata/reference/embeddings.jsonl

Each text is embedded by a process of its own (so each is one batch of its
own tokens, as `tl` runs it; in a batch of several prompts of 64 tokens or
more llama.cpp takes its tiled attention for all of them, and its vector of
the same short text moves by about 5e-4 cosine distance) with `--pooling mean --embd-normalize 2`: the
mean of the final norm's output over the prompt's tokens, L2-normalised.
The text is tokenized as is (BOS added when the model's metadata says so).
`llama-embedding` prints 7 decimals; `prompt_tokens` is the count it reports
with `--verbose-prompt`.
"""

import json
import os
import re
import subprocess
import sys

TEXTS = [
    "Hello world",
    "The capital of France is Paris.",
    "Embeddings map text to vectors, so that similar meanings lie close together.",
    "Übermäßig große Äpfel — 東京 🚀",
    "fn main() {\n    println!(\"hi\");\n}",
    "a",
]
# A text of about 200 tokens (the GPL's first 1,000 characters): past 64
# rows a prompt takes the tiled attention and GEMM paths.
LONG_TEXT_CHARS = 1000
# Unlikely in any text, so a text with newlines stays one prompt.
SEPARATOR = "<|tl-separator|>"


def embed(bin_dir, model, text):
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    args = [os.path.join(bin_dir, "llama-embedding"), "-m", model, "-p", text,
            "--pooling", "mean", "--embd-normalize", "2", "-t", "2",
            "--embd-separator", SEPARATOR, "--embd-output-format", "json",
            "--verbose-prompt"]
    run = subprocess.run(args, capture_output=True, env=env, check=True)
    counts = re.findall(rb"number of tokens in prompt = (\d+)", run.stderr)
    if len(counts) != 1:
        raise SystemExit(f"expected one prompt's token count for {text!r}")
    # --verbose-prompt prints the tokens to stdout before the JSON.
    data = json.loads(run.stdout[run.stdout.index(b"\n{\n") :])["data"]
    if len(data) != 1:
        raise SystemExit(f"expected one embedding for {text!r}, got {len(data)}")
    return int(counts[0]), data[0]["embedding"]


def long_text():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "testdata", "reference", "gpl-3.txt")
    with open(path, encoding="utf-8") as f:
        return f.read()[:LONG_TEXT_CHARS]


def main():
    bin_dir, models = sys.argv[1], sys.argv[2:]
    for spec in models:
        name, model = spec.split("=", 1)
        for text in TEXTS + [long_text()]:
            tokens, embedding = embed(bin_dir, model, text)
            row = {"model": name, "text": text, "prompt_tokens": tokens,
                   "embedding": embedding}
            print(json.dumps(row, ensure_ascii=False, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
