#!/usr/bin/env python3
"""Time to first token through `tl serve` (or any OpenAI-compatible server):
a fresh prompt of about N tokens each time (a unique number first, so no
cached prefix helps), `max_tokens` 1, streamed; prints each run and the median.
Standard library only.

    python3 scripts/serve_ttft.py --url http://127.0.0.1:8080 [--tokens 625] [--runs 5]
"""

import argparse
import http.client
import json
import statistics
import time
import urllib.parse

from serve_load import first_model


# Common words that are one token each (with their leading space) in the
# usual BPE vocabularies.
WORDS = ("the of and to in is was for on that with as by at from his her they "
         "this have had not are but were one all can there which when what your "
         "said time more would about could people them some than only other into "
         "after first also made many then most over such years where some").split()


def first_token_time(url, model, prompt):
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 1,
                       "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    first, prompt_tokens = None, None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            prompt_tokens = chunk["usage"]["prompt_tokens"]
        if first is None and chunk.get("choices") and chunk["choices"][0].get("text") is not None:
            first = time.perf_counter()
    conn.close()
    return (first - start) if first else float("nan"), prompt_tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default=None)
    ap.add_argument("--tokens", type=int, default=625)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    model = args.model or first_model(args.url)
    times, counts = [], []
    for run in range(args.runs + 1):  # the first run warms up
        words = " ".join(WORDS[(run * 31 + j * 7) % len(WORDS)] for j in range(args.tokens - 19))
        prompt = f"{time.time_ns()} {words}"
        seconds, prompt_tokens = first_token_time(args.url, model, prompt)
        if run > 0:
            times.append(seconds)
            counts.append(prompt_tokens)
            print(f"run {run}: {seconds * 1e3:.2f} ms ({prompt_tokens} prompt tokens)")
    figures = {"runs_ms": [round(t * 1e3, 2) for t in times],
               "median_ms": round(statistics.median(times) * 1e3, 2),
               "prompt_tokens": counts}
    print(json.dumps(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f)


if __name__ == "__main__":
    main()
