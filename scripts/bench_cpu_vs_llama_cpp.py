#!/usr/bin/env python3
"""Side-by-side CPU speed of `tl` and llama.cpp (through llama-cpp-python) on one
model: prefill tokens/s for an N-token prompt and decode tokens/s for M greedy
tokens, median over several repetitions, both with the same thread count.

llama.cpp is built as the README of docs/perf.md says:
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_OPENMP=OFF" pip install llama-cpp-python

usage: bench_cpu_vs_llama_cpp.py MODEL.gguf TEXT_FILE [--tl [LABEL=]PATH ...]
       [--prompt-tokens 512] [--decode-tokens 128] [--reps 3] [--threads 2]
"""
import argparse
import re
import statistics
import subprocess
import time


def llama_cpp_run(llm, prompt_tokens, decode_tokens):
    llm.reset()
    llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
    start = time.perf_counter()
    llm.eval(prompt_tokens)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(decode_tokens):
        llm.eval([198])  # a fixed token: speed does not depend on which
    decode = time.perf_counter() - start
    return len(prompt_tokens) / prefill, decode_tokens / decode


def tl_run(binary, model, prompt_text, decode_tokens, threads):
    env = {"RAYON_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [binary, "generate", "-m", model, "--raw", "--temperature", "0", "--stats",
         "-n", str(decode_tokens), "-p", prompt_text],
        capture_output=True, text=True, env=env, check=True)
    m = re.search(r"prompt (\d+) tokens \(([\d.]+) tok/s\), generated (\d+) tokens \(([\d.]+) tok/s\)", out.stderr)
    if not m:
        raise SystemExit(f"unexpected tl output: {out.stderr}")
    return int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--tl", action="append", metavar="LABEL=PATH",
                    help="tl binary to time (repeatable, e.g. --tl before=/tmp/tl-old --tl after=target/release/tl)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import llama_cpp
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=2048, n_batch=512, n_ubatch=512,
                          n_threads=args.threads, n_threads_batch=args.threads,
                          flash_attn=True, verbose=False)
    text = open(args.text, encoding="utf-8").read()
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)[: args.prompt_tokens]
    prompt_text = llm.detokenize(tokens).decode("utf-8", errors="ignore")

    binaries = dict(b.split("=", 1) if "=" in b else ("tl", b) for b in (args.tl or ["target/release/tl"]))
    rows = {"llama.cpp": ([], [])}
    rows.update({label: ([], []) for label in binaries})
    for _ in range(args.reps):
        pp, tg = llama_cpp_run(llm, tokens, args.decode_tokens)
        rows["llama.cpp"][0].append(pp)
        rows["llama.cpp"][1].append(tg)
        for label, binary in binaries.items():
            n_prompt, pp, n_gen, tg = tl_run(binary, args.model, prompt_text, args.decode_tokens, args.threads)
            rows[label][0].append(pp)
            rows[label][1].append(tg)
    print(f"prompt {len(tokens)} tokens (tl: {n_prompt}), decode {args.decode_tokens} tokens (tl generated {n_gen}), "
          f"{args.threads} threads, median of {args.reps}")
    print(f"{'engine':<10} {'prefill tok/s':>14} {'decode tok/s':>13}   (all runs)")
    for name, (pp, tg) in rows.items():
        print(f"{name:<10} {statistics.median(pp):>14.1f} {statistics.median(tg):>13.1f}   "
              f"pp {[round(x, 1) for x in pp]} tg {[round(x, 1) for x in tg]}")
    base_pp, base_tg = (statistics.median(v) for v in rows["llama.cpp"])
    for label in binaries:
        ratio_pp = statistics.median(rows[label][0]) / base_pp
        ratio_tg = statistics.median(rows[label][1]) / base_tg
        print(f"{label} / llama.cpp: prefill {ratio_pp:.2f}x, decode {ratio_tg:.2f}x")


if __name__ == "__main__":
    main()
