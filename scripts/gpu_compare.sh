#!/usr/bin/env bash
# Side-by-side GPU benchmark of several `tl` binaries (e.g. before and after a
# change), on a machine with an NVIDIA GPU; nothing is built here. For each model
# and round, every binary runs `tl bench` in turn, so all see the same machine
# state; then each binary runs once more with `--profile` (device time per kernel).
#
# Usage: scripts/gpu_compare.sh OUT NAME=BIN [NAME=BIN ...]
# Environment:
#   MODELS   space-separated models: a GGUF path, or SHAPE:QUANT for `tl model synth`
#            (default: "tinyllama:q4_0 tinyllama:q8_0 smollm2:q4_1")
#   ROUNDS   rounds of the side-by-side runs (default 2)
#   BENCH    `tl bench` test arguments (default "-p 512,1024 -n 128 --reps 5")
#   PROFILE  arguments of the profiled run (default "-p 512 -n 64 --reps 1"; empty: none)
#   TL_KERNEL_CACHE  compiled kernels (default: a fresh folder), to share between calls
set -uo pipefail
OUT=$1
shift
mkdir -p "$OUT"
WORK=$(mktemp -d)
export TL_KERNEL_CACHE="${TL_KERNEL_CACHE:-$WORK/kernels}"
MODELS=${MODELS:-"tinyllama:q4_0 tinyllama:q8_0 smollm2:q4_1"}
ROUNDS=${ROUNDS:-2}
BENCH=${BENCH:-"-p 512,1024 -n 128 --reps 5"}
PROFILE=${PROFILE-"-p 512 -n 64 --reps 1"}

for lib in libnvrtc.so libcublas.so; do
    dir=$(dirname "$(find / -name "$lib*" -not -path '*/proc/*' 2>/dev/null | head -1)")
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/environment.txt"

names=()
declare -A bins
for spec in "$@"; do
    names+=("${spec%%=*}")
    bins[${spec%%=*}]=${spec#*=}
done
first=${bins[${names[0]}]}

model_files=()
for m in $MODELS; do
    if [ -f "$m" ]; then
        model_files+=("$m")
    else
        file="$WORK/${m/:/-}.gguf"
        "$first" model synth --shape "${m%%:*}" --quant "${m#*:}" -o "$file" >/dev/null 2>&1 ||
            echo "synth $m failed"
        model_files+=("$file")
    fi
done

for round in $(seq 1 "$ROUNDS"); do
    for model in "${model_files[@]}"; do
        for name in "${names[@]}"; do
            label="$(basename "$model" .gguf)-$name-r$round"
            # shellcheck disable=SC2086
            "${bins[$name]}" bench --device cuda --json -m "$model" $BENCH >"$OUT/$label.json" 2>"$OUT/$label.err" ||
                echo "FAILED: $label (see $label.err)"
        done
    done
done

if [ -n "$PROFILE" ]; then
    for model in "${model_files[@]}"; do
        for name in "${names[@]}"; do
            label="profile-$(basename "$model" .gguf)-$name"
            # shellcheck disable=SC2086
            "${bins[$name]}" bench --device cuda -m "$model" $PROFILE --profile >"$OUT/$label.md" 2>"$OUT/$label.err" ||
                echo "FAILED: $label"
        done
    done
fi

# One line per model, test and binary: the median tokens/s of each round.
python3 - "$OUT" <<'EOF'
import glob, json, os, re, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    label = os.path.basename(path)[:-5]
    model, name, rnd = re.match(r"(.*)-([^-]+)-r(\d+)$", label).groups()
    try:
        report = json.load(open(path))
    except ValueError:
        continue
    for r in report["results"]:
        rows.setdefault((model, r["test"], name), []).append(r["tokens_per_second_median"])
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("| model | test | binary | tokens/s per round |\n|---|---|---|---|\n")
    for (model, test, name), rates in sorted(rows.items()):
        f.write(f"| {model} | {test} | {name} | {', '.join(f'{x:.1f}' for x in rates)} |\n")
print(open(os.path.join(out, "summary.md")).read())
EOF
