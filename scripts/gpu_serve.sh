#!/usr/bin/env bash
# `tl serve` on a GPU machine (nothing is built here; BIN as for
# scripts/gpu_checks.sh, with model.gguf): time to first token for a fresh
# ~625-token prompt (streamed, max_tokens 1, median of 5) with the default and
# a larger prefill chunk, then streaming load with 1, 16 and 64 clients.
# Results (JSON and logs) go to OUT.
#
# Usage: scripts/gpu_serve.sh BIN OUT [TL]
#   TL  the binary's name in BIN (default tl; e.g. tl-base for an older build)
set -uo pipefail
BIN=$(cd "$1" && pwd)
OUT=$2
TL=${3:-tl}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
status=0
for lib in libnvrtc.so libcublas.so; do
    dir=$(dirname "$(find / -name "$lib*" -not -path '*/proc/*' 2>/dev/null | head -1)")
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done
export TL_KERNEL_CACHE=${TL_KERNEL_CACHE:-$(mktemp -d)}

serve() {  # name, extra tl serve args...; sets URL and PID
    local name=$1; shift
    "$BIN/$TL" serve -m "$BIN/model.gguf" --device cuda --port 0 "$@" >"$OUT/serve-$name.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do
        URL=$(grep -o 'http://[0-9.:]*' "$OUT/serve-$name.log" | head -1)
        [ -n "$URL" ] && return 0
        kill -0 $PID 2>/dev/null || break
        sleep 0.1
    done
    echo "tl serve ($name) did not start:"; cat "$OUT/serve-$name.log"; status=1; return 1
}
stop() { kill $PID 2>/dev/null; wait $PID 2>/dev/null; }

echo "=== time to first token, 625-token prompt, --prefill-chunk 512 (default)"
if serve chunk512 --parallel 64; then
    python3 "$HERE/serve_ttft.py" --url "$URL" --tokens 625 --runs 5 --json "$OUT/ttft-chunk512.json" || status=1
    for clients in 1 16 64; do
        echo "=== load: $clients clients, 64 tokens each"
        python3 "$HERE/serve_load.py" --url "$URL" --clients $clients --tokens 64 \
            --json "$OUT/load-$clients.json" || status=1
    done
    curl -s "$URL/metrics" >"$OUT/metrics-after-load.txt" 2>/dev/null || true
    stop
fi
echo "=== time to first token, --prefill-chunk 2048"
if serve chunk2048 --parallel 4 --prefill-chunk 2048; then
    python3 "$HERE/serve_ttft.py" --url "$URL" --tokens 625 --runs 5 --json "$OUT/ttft-chunk2048.json" || status=1
    stop
fi
echo "=== two models on one GPU (the second loads on demand, on a thread of its own)"
ln -sf "$BIN/model.gguf" "$OUT/copy.gguf"
"$BIN/$TL" serve -m "$BIN/model.gguf" -m "$OUT/copy.gguf" --device cuda --port 0 --parallel 4 -v \
    >"$OUT/serve-two.log" 2>&1 &
PID=$!
for _ in $(seq 600); do
    URL=$(grep -o 'http://[0-9.:]*' "$OUT/serve-two.log" | head -1)
    [ -n "$URL" ] && break
    sleep 0.1
done
python3 - "$URL" <<'PY' || status=1
import json, sys, urllib.request
url = sys.argv[1]
def complete(model):
    body = json.dumps({"model": model, "prompt": "1, 2, 3,", "max_tokens": 8, "temperature": 0}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", body)) as r:
        return json.load(r)["choices"][0]["text"]
first = complete("model")
second = complete("copy")
print("model:", repr(first), "copy:", repr(second))
assert first == second, "the two copies answer differently"
with urllib.request.urlopen(url + "/metrics") as r:
    loaded = [l for l in r.read().decode().splitlines() if l.startswith("tl_models_loaded ")]
print(loaded)
assert loaded == ["tl_models_loaded 2"], loaded
PY
stop

exit $status
