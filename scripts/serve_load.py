#!/usr/bin/env python3
"""Load test for `tl serve`: N concurrent streaming clients (OpenAI chat API,
greedy unless --temperature, client i with seed i; fixed length), then each
prompt again alone. Prints aggregate tokens/s,
time to first token and inter-token latency (p50/p99), and checks that every
stream's text equals what its prompt gives alone. Standard library only, so it
runs on machines without pip.

Two aggregates, both against the single client's decode rate (its tokens after
the first over the time between them): `aggregate_tokens_per_s`, all tokens
over the whole run (the prompts' prefill and the ramps in and out included),
and `all_decoding_tokens_per_s`, the tokens streamed while every client was
past its first token and none had finished, over that window: the same kind
of rate as the single client's, with all N sequences in the batch.

    python3 scripts/serve_load.py --url http://127.0.0.1:8080 --clients 16 \\
        --tokens 64 [--model NAME] [--json OUT.json] [--prompt-tokens 625] \\
        [--temperature 0.8]
"""

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

TOPICS = ["the sea", "a mountain", "bread", "the moon", "a library", "rain",
          "a violin", "winter", "a garden", "trains", "a lighthouse", "honey",
          "the desert", "a clock", "chess", "a river"]


def prompt_for(i, prompt_tokens):
    topic = TOPICS[i % len(TOPICS)]
    text = f"Write a short story about {topic} (story {i})."
    if prompt_tokens:
        # About one token per word for this filler.
        filler = " ".join(f"word{j % 97}" for j in range(prompt_tokens))
        text = f"{filler}\n{text} {time.time_ns()}"
    return text


def stream_chat(url, model, prompt, tokens, temperature=0.0, seed=0):
    """Returns (text, ttft_seconds, inter_token_gaps, completion_tokens,
    arrival_times): a time.perf_counter() reading for each streamed piece."""
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=600)
    body = json.dumps({
        "model": model, "stream": True, "temperature": temperature, "seed": seed,
        "max_tokens": tokens,
        "messages": [{"role": "user", "content": prompt}],
        "stream_options": {"include_usage": True},
    })
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    text, times, usage = [], [], None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            piece = choice.get("delta", {}).get("content")
            if piece:
                times.append(time.perf_counter())
                text.append(piece)
    conn.close()
    ttft = times[0] - start if times else float("nan")
    gaps = [b - a for a, b in zip(times, times[1:])]
    completion = usage["completion_tokens"] if usage else len(times)
    return "".join(text), ttft, gaps, completion, times


def first_model(url):
    """The first model the server lists (its default)."""
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    conn.request("GET", "/v1/models")
    return json.loads(conn.getresponse().read())["data"][0]["id"]


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run_concurrent(url, model, prompts, tokens, temperature):
    results = [None] * len(prompts)
    errors = []
    barrier = threading.Barrier(len(prompts))

    def client(i):
        try:
            barrier.wait()
            results[i] = stream_chat(url, model, prompts[i], tokens, temperature, i)
        except Exception as e:  # reported below
            errors.append(f"client {i}: {e}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError("; ".join(errors))
    return results, elapsed


def all_decoding_rate(results):
    """Pieces streamed per second while every stream was between its first
    and its last piece (None when that window is empty)."""
    start = max(r[4][0] for r in results if r[4])
    end = min(r[4][-1] for r in results if r[4])
    if end <= start:
        return None
    inside = sum(1 for r in results for t in r[4] if start < t <= end)
    return inside / (end - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default=None, help="default: the first of /v1/models")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=0,
                    help="pad prompts to about this many tokens (fresh each run)")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="sample (the server's other defaults, client i with seed i)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    model = args.model or first_model(args.url)
    prompts = [prompt_for(i, args.prompt_tokens) for i in range(args.clients)]

    solo = [stream_chat(args.url, model, p, args.tokens, args.temperature, i)
            for i, p in enumerate(prompts)]
    single_rate = statistics.median(
        (r[3] - 1) / sum(r[2]) for r in solo if r[2])
    results, elapsed = run_concurrent(args.url, model, prompts, args.tokens, args.temperature)
    total = sum(r[3] for r in results)
    aggregate = total / elapsed
    all_decoding = all_decoding_rate(results)
    ttfts = [r[1] for r in results]
    gaps = [g for r in results for g in r[2]]
    mismatched = [i for i, (a, b) in enumerate(zip(solo, results)) if a[0] != b[0]]
    figures = {
        "clients": args.clients, "tokens_per_client": args.tokens,
        "prompt_tokens": args.prompt_tokens, "temperature": args.temperature,
        "single_client_decode_tokens_per_s": round(single_rate, 1),
        "aggregate_tokens_per_s": round(aggregate, 1),
        "speedup": round(aggregate / single_rate, 2),
        "all_decoding_tokens_per_s": all_decoding and round(all_decoding, 1),
        "all_decoding_speedup": all_decoding and round(all_decoding / single_rate, 2),
        "ttft_ms_p50": round(percentile(ttfts, 50) * 1e3, 1),
        "ttft_ms_p99": round(percentile(ttfts, 99) * 1e3, 1),
        "itl_ms_p50": round(percentile(gaps, 50) * 1e3, 2),
        "itl_ms_p99": round(percentile(gaps, 99) * 1e3, 2),
        "solo_ttft_ms_p50": round(percentile([r[1] for r in solo], 50) * 1e3, 1),
        "outputs_equal_to_solo": len(prompts) - len(mismatched),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    if mismatched:
        print(f"streams differing from their solo run: {mismatched}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
