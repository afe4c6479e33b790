#!/usr/bin/env bash
# PoRep C2, proofline side by side with filecoin-proofs / bellperson on one machine, one step
# per process (each step's peak RSS is its own). Prints one `step ...` line per step.
#
#   cargo build --release -p proofline-filecoin --example porep_bench
#   scripts/porep-bench.sh [target/release/examples/porep_bench] [target/porep-bench] [rounds] \
#     [sector size in bytes: 2048 (default), 4096, 16384, 32768]
#
# Parameter generation runs once each (into two empty caches); C2 runs `rounds` times each,
# alternating, on the proofline-generated parameters (the points do not change the work).
set -euo pipefail
bin=${1:-target/release/examples/porep_bench}
out=${2:-target/porep-bench}
rounds=${3:-3}
size=${4:-2048}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/params-proofline" "$out/params-bellperson" "$out/c1"
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
"$bin" seal "$out/c1" "$size"
FIL_PROOFS_PARAMETER_CACHE=$out/params-proofline "$bin" params-proofline "$out/c1"
# BELLPERSON=0 skips bellperson's parameter generation (the slow step: 13 minutes at 2 KiB on
# 2 cores).
if [ "${BELLPERSON:-1}" != 0 ]; then
  FIL_PROOFS_PARAMETER_CACHE=$out/params-bellperson "$bin" params-bellperson "$out/c1"
  rm -rf "$out/params-bellperson"
fi
for _ in $(seq "$rounds"); do
  FIL_PROOFS_PARAMETER_CACHE=$out/params-proofline "$bin" c2-filecoin "$out/c1"
  FIL_PROOFS_PARAMETER_CACHE=$out/params-proofline "$bin" c2-proofline "$out/c1" 1
done
