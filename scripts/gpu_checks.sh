#!/usr/bin/env bash
# Every GPU check and benchmark in one go, on a machine with an NVIDIA GPU and no
# Rust toolchain: nothing is built here. BIN holds binaries built elsewhere
# (`scripts/gpu_bundle.sh` makes them; gunzip them first):
#   tl            the release binary
#   kernels       tl-cuda's kernel tests (cargo test --release --no-run)
#   cuda_backend  tl-engine's whole-model GPU tests (the GPU against the CPU)
#   every_backend tl-engine's per-backend tests (each body on the CPU and the GPU)
#   tensor_logic  tl-lang's tensor-logic tests (index equations on the GPU)
#   model.gguf    the default model (SmolLM2-135M-Instruct Q4_1), optional
# Results go to OUT (logs, bench tables and JSON).
#
# Usage: scripts/gpu_checks.sh BIN OUT [full|quick|tests]
#   full   every test on the default model, synthetic TinyLlama/SmolLM2/Qwen3
#          shapes and the tiny Qwen3 test model, then benchmarks (default)
#   quick  the tests on one small synthetic model, benchmarks of it
#   tests  as full without the benchmarks (scripts/gpu_compare.sh times builds
#          side by side)
set -uo pipefail
BIN=$(cd "$1" && pwd)
OUT=$2
MODE=${3:-full}
mkdir -p "$OUT"
MODELS=$(mktemp -d)
export TL_KERNEL_CACHE="$MODELS/kernels"
status=0

# The CUDA libraries the backend loads at run time (NVRTC, cuBLAS).
for lib in libnvrtc.so libcublas.so; do
    dir=$(dirname "$(find / -name "$lib*" -not -path '*/proc/*' 2>/dev/null | head -1)")
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" | tee "$OUT/environment.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee -a "$OUT/environment.txt"

step() { echo; echo "=== $*"; }
run_logged() {  # name, command...
    local name=$1; shift
    "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "FAILED ($rc): $name"; status=1; }
}

step "kernel tests"
run_logged kernels "$BIN/kernels" --test-threads=1 --nocapture

step "synthetic models"
synth() {  # shape quant
    local file="$MODELS/$1-$2.gguf"
    "$BIN/tl" model synth --shape "$1" --quant "$2" -o "$file" >/dev/null 2>&1 || { echo "synth $1 $2 failed"; status=1; }
    echo "$file"
}
if [ "$MODE" = quick ]; then
    TEST_MODELS="$(synth smollm2 q4_0)"
else
    TEST_MODELS="$(synth tinyllama q4_0):$(synth tinyllama q8_0):$(synth smollm2 f16)"
    # Qwen3: the 0.6B shape, and the tiny model whose CPU logits are checked
    # against llama.cpp's (heads of 32: the non-tensor-core prompt path).
    TEST_MODELS="$TEST_MODELS:$(synth qwen3-0.6b q8_0)"
    TEST_MODELS="$TEST_MODELS:$(cd "$(dirname "$0")/.." && pwd)/crates/tl-engine/tests/golden/tiny-qwen3-q8_0.gguf"
fi
DEFAULT="$BIN/model.gguf"
[ -f "$DEFAULT" ] && TEST_MODELS="$DEFAULT:$TEST_MODELS"
mkdir -p "$HOME/.cache/tensorlogic/models"
[ -f "$DEFAULT" ] && ln -sf "$DEFAULT" "$HOME/.cache/tensorlogic/models/SmolLM2-135M-Instruct.Q4_1.gguf"

step "whole-model GPU tests ($TEST_MODELS)"
TL_GPU_TEST_MODELS="$TEST_MODELS" run_logged cuda_backend "$BIN/cuda_backend" --test-threads=1 --nocapture
TL_GPU_TEST_MODELS="$TEST_MODELS" run_logged every_backend "$BIN/every_backend" --test-threads=1 --nocapture

step "index equations on the GPU (--device cuda)"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
run_logged lang_gpu "$BIN/tensor_logic" --test-threads=1 --nocapture float_equations_contract_on_the_gpu
run_logged lang_equations_cuda "$BIN/tl" run --device cuda --test "$REPO/tests/lang/equations.tl"

if [ "$MODE" = tests ]; then
    step "benchmarks skipped (tests mode)"
else
step "benchmarks"
bench() {  # name, tl bench args...
    local name=$1; shift
    run_logged "bench-$name" "$BIN/tl" bench --device cuda --json "$@"
}
IFS=: read -r -a models <<< "$TEST_MODELS"
for model in "${models[@]}"; do
    name=$(basename "$model" .gguf)
    bench "$name" -m "$model" -p 512,1024 -n 128 --reps 5
done
if [ "$MODE" != quick ]; then
    "$BIN/tl" model synth --shape tinyllama --quant f16 -o "$MODELS/tinyllama-f16.gguf" >/dev/null 2>&1
    bench tinyllama-f16 -m "$MODELS/tinyllama-f16.gguf" -p 512,1024 -n 128 --reps 5
    "$BIN/tl" model synth --shape qwen3-0.6b --quant f16 -o "$MODELS/qwen3-0.6b-f16.gguf" >/dev/null 2>&1
    bench qwen3-0.6b-f16 -m "$MODELS/qwen3-0.6b-f16.gguf" -p 512,1024 -n 128 --reps 5
    [ -f "$DEFAULT" ] && bench default-depth4096 -m "$DEFAULT" -p 0 -n 128 --depth 4096 --reps 5
    [ -f "$DEFAULT" ] && bench default-nographs -m "$DEFAULT" -p 0 -n 128 --reps 5 --cuda-graphs off
fi

fi

step "generation"
if [ -f "$DEFAULT" ]; then
    run_logged generate "$BIN/tl" -v generate --device cuda -m "$DEFAULT" --temperature 0 -n 48 --stats --prompt "Write one sentence about GPUs."
fi

step "summary"
for f in "$OUT"/bench-*.log; do
    [ -f "$f" ] || continue
    python3 - "$f" <<'PY'
import json, sys, re
text = open(sys.argv[1]).read()
start = text.find('{')
try:
    r = json.loads(text[start:text.rfind('}') + 1])
except Exception as e:
    print(sys.argv[1], "unreadable:", e); sys.exit()
name = r["model"].rsplit("/", 1)[-1]
for t in r["results"]:
    print(f'{name:32} {t["test"]:14} {t["tokens_per_second_median"]:10.1f} tok/s  [{t["tokens_per_second_min"]:.1f}, {t["tokens_per_second_max"]:.1f}]  {t["milliseconds_median"]:8.2f} ms  syncs/token {t["syncs_per_token"]:.3f}')
PY
done
grep -h "CPU vs CPU\|GPU vs CPU\|identical to the CPU\|test result" "$OUT"/*.log
exit $status
