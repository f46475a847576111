#!/usr/bin/env bash
# Fuzzes every target (or those named) for MINUTES each, one after the other,
# and prints a Markdown table for docs/reliability.md.
#
#   scripts/fuzz.sh [MINUTES] [TARGET...]      # default: 10 minutes, all six
#
# Targets: gguf vocab tokenize template lang http. Findings (the minimised
# input, the first input and a report per distinct failure) go to
# $TL_FUZZ_OUT/TARGET/failures (default fuzz/out); each target's corpus is
# kept in $TL_FUZZ_OUT/corpus/TARGET, so a later campaign goes on from where
# this one stopped. TL_FUZZ_SEED sets the mutation seed (default 1).
#
# The fuzzer is built in release with debug assertions (which include the
# standard library's checks of unsafe preconditions, in dependencies too) and
# line tables, as cargo-fuzz builds, and with overflow checks in the
# workspace's crates: an integer overflow on hostile input is a finding even
# though a release build would wrap silently. Dependencies keep release
# arithmetic, since their wrapping is theirs to intend. Never part of CI:
# `cargo test -p tl-fuzz` only runs a smoke test of a few seconds per target.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-10}
[ $# -gt 0 ] && shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(gguf vocab tokenize template lang http)
fi
out=${TL_FUZZ_OUT:-fuzz/out}
seed=${TL_FUZZ_SEED:-1}

export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
cargo build --release -p tl-fuzz \
    --config 'profile.release.package."*".overflow-checks=false'
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/tl-fuzz"

for target in "${targets[@]}"; do
    rm -f "$out/$target/summary.txt"
    # One target's fuzzer failing (not the product: that is a finding) must
    # not cost the others their turn.
    if ! "$bin" "$target" --seconds $((minutes * 60)) --seed "$seed" \
        --out "$out" --corpus "$out/corpus/$target" >/dev/null; then
        echo "tl-fuzz $target stopped with an error" >&2
    fi
done

# One summary.txt per target, as `key value` lines.
field() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
echo
echo "| target | minutes | executions | execs/s | failures (unique) |"
echo "|---|---:|---:|---:|---:|"
for target in "${targets[@]}"; do
    summary="$out/$target/summary.txt"
    if [ ! -f "$summary" ]; then
        echo "| $target | - | - | - | tl-fuzz failed |"
        continue
    fi
    minutes_run=$(awk -v s="$(field seconds "$summary")" 'BEGIN { printf "%.1f", s / 60 }')
    echo "| $target | $minutes_run | $(field executions "$summary") |" \
        "$(field execs_per_second "$summary") |" \
        "$(field failures "$summary") ($(field unique_failures "$summary")) |"
done
echo
for target in "${targets[@]}"; do
    grep -s '^finding ' "$out/$target/summary.txt" | sed "s/^finding /$target: /" || true
done
