#!/usr/bin/env python3
"""Writes greedy continuations by llama.cpp's `llama-completion` (CPU build,
2 threads) for the reference prompts, one JSON object per line:
{"model", "prompt", "n_predict", "completion"}.

    python3 scripts/llama_cpp_greedy_references.py LLAMA_BIN_DIR NAME=MODEL.gguf... > OUT.jsonl

The prompts are the five of testdata/reference/public_greedy_16.jsonl and six
more; each is tokenized as is (no chat template) and continued for 32 tokens
at temperature 0, or until an end-of-generation token. `completion` is the
generated text (invalid UTF-8 replaced), without llama-completion's closing
newlines and "[end of text]" marker.
"""

import json
import os
import subprocess
import sys

TOKENS = 32
EXTRA_PROMPTS = [
    "Water boils at a temperature of",
    "In 1969, the first person to walk on the moon was",
    "Here is a short poem about autumn leaves:\n",
    "The quick brown fox",
    "List three prime numbers:",
    "Q: What is the largest planet in our solar system?\nA:",
]


def prompts():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "testdata", "reference", "public_greedy_16.jsonl")
    with open(path) as f:
        return [json.loads(line)["prompt"] for line in f if line.strip()] + EXTRA_PROMPTS


def completion(bin_dir, model, prompt):
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    args = [os.path.join(bin_dir, "llama-completion"), "-m", model, "-p", prompt,
            "-n", str(TOKENS), "--temp", "0", "-t", "2", "--no-display-prompt", "-no-cnv"]
    out = subprocess.run(args, capture_output=True, env=env, check=True).stdout
    text = out.decode("utf-8", errors="replace")
    if text.endswith(" [end of text]\n\n\n"):
        return text[: -len(" [end of text]\n\n\n")]
    return text[:-2] if text.endswith("\n\n") else text


def main():
    bin_dir, models = sys.argv[1], sys.argv[2:]
    for spec in models:
        name, model = spec.split("=", 1)
        for prompt in prompts():
            row = {"model": name, "prompt": prompt, "n_predict": TOKENS,
                   "completion": completion(bin_dir, model, prompt)}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
