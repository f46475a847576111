#!/usr/bin/env bash
# Builds what scripts/gpu_checks.sh and scripts/gpu_compare.sh run on a GPU
# machine (which builds nothing) and packs it into DIR, compressed, for a copy
# that moves at most 64 MiB at a time:
#   part1  tl, kernels, cuda_backend, every_backend, tensor_logic (gzip), and the first 40 MB of the default
#          model (model.part1); with extra NAME=PATH arguments, those tl binaries
#          too (tl-NAME.gz), e.g. a build of an older commit to compare against
#   part2  the rest of the default model (model.part2)
# On the GPU machine: gunzip the binaries and `cat model.part1 model.part2 >
# model.gguf` into one folder, then run scripts/gpu_checks.sh on it. When the
# two parts travel in two calls, unpack the first outside the checkout (e.g.
# /tmp): between calls the machine keeps only the folder carried next and
# files outside the checkout.
#
# Usage: scripts/gpu_bundle.sh DIR part1|part2 [NAME=PATH ...]
set -euo pipefail
DIR=$1
PART=$2
shift 2
SPLIT=40000000
MODEL=$(cargo run --release -q -p tl-cli -- model pull)
rm -rf "$DIR"
mkdir -p "$DIR"
if [ "$PART" = part2 ]; then
    tail -c +$((SPLIT + 1)) "$MODEL" >"$DIR/model.part2"
    exit 0
fi
cargo build --release -p tl-cli
pack() {  # source, name
    strip -o "$DIR/$2" "$1"
    gzip -9 "$DIR/$2"
}
pack target/release/tl tl
cargo test --release --no-run -p tl-cuda --test kernels -p tl-engine --test cuda_backend --test every_backend \
    -p tl-lang --test tensor_logic --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("kernels", "cuda_backend", "every_backend", "tensor_logic"):
        print(m["target"]["name"], m["executable"])' |
    while read -r name path; do pack "$path" "$name"; done
for spec in "$@"; do
    pack "${spec#*=}" "tl-${spec%%=*}"
done
head -c $SPLIT "$MODEL" >"$DIR/model.part1"
du -sh "$DIR"
