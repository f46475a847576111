#!/usr/bin/env bash
# CPU speed of GGUF files against llama.cpp, side by side in one run:
# llama-bench, then `tl bench` for each tl binary given, prompt 512 and 128
# generated tokens, medians (docs/perf.md, "Weight types against llama.cpp").
#
#   scripts/bench_weight_types.sh LLAMA_BIN_DIR "tl [tl-old ...]" FILE.gguf...
#
# THREADS (default 2) and REPS (default 3) change the thread count and reps.
set -euo pipefail
llama_bin=$1
binaries=$2
shift 2
threads=${THREADS:-2}
reps=${REPS:-3}
for file in "$@"; do
    echo "== $file"
    "$llama_bin/llama-bench" -m "$file" -t "$threads" -p 512 -n 128 -r "$reps" 2>/dev/null |
        grep -E "pp512|tg128" | awk -F'|' '{print "llama.cpp", $(NF-2), $(NF-1)}'
    for tl in $binaries; do
        "$tl" bench -m "$file" --device cpu --threads "$threads" -p 512 -n 128 --reps "$reps" 2>/dev/null |
            grep -E "pp512|tg128" | sed "s|^|$tl |"
    done
done
