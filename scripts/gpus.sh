#!/usr/bin/env bash
# A GPU round on the GPU machine, with binaries built elsewhere: every step
# runs once per device set of GPU_SETS in the same call, so one device and two are measured by
# the same binary on the same machine. Each step writes under $OUT/<step>[-g<set>]/.
#
#   GPU_SETS="0 0,1" scripts/gpus.sh suite replay real porep c2
#
#   BIN        folder with `proofline` (bench profile), `cuda-device` (the CUDA device suite's
#              test binary) and `gpu-bench` (benches/benches/gpu.rs)  default .gpu/bin
#   PEER       the sppark-bench folder (a copy of ../shared/peers/sppark-bench)
#                                                                  default .gpu/peers/sppark-bench
#   GPU_SETS   device sets, space-separated (`--gpus` syntax)       default "0"
#   OUT        where the logs go, each sweep's results.json,
#              results.csv and report.svg, the measurement records
#              (records.jsonl: porep and c2) and the benchmarks'
#              criterion folder (bench)                             default target/gpus
#   WORK       where the sweeps write everything (timelines, logs)  default /tmp/gpus
#   WORKERS    accelerator workers per device (--gpu-workers)       default 2
#   LOG2       the dense workload's 2^K constraints                 default 22
#   PARTS      partitions per job in the dense sweeps                default 8
#   JOBS       jobs per point in the dense sweeps                   default 4
#   REPLAY_PW, REAL_PW, POREP_JOBS                                 default 1,2,4 / 8,16,32 / 8
#   SHAPES, ROUNDS  the shapes step's sector sizes and rounds  default "2KiB 4KiB 16KiB 32KiB" / 2
#
# Steps:
#   suite   the CUDA device suite on each device of every set (PROOFLINE_TEST_DEVICES=d)
#   replay  `sweep --replay` on the dense workload (the accelerator bounds it)
#   real    `sweep --synthesis pce` on the same workload (synthesis may bound it)
#   porep   `sweep --circuit porep-2k --jobs POREP_JOBS` (each proof checked by verify_seal)
#   c2      one sector sealed, then `c2 --backend cuda --gpus d` on each device
#   shapes  a sector of each tree shape's test size (2KiB, 4KiB, 16KiB: the 32 GiB shape, 32KiB:
#           the 64 GiB shape) sealed, then C2 on the CPU backend and on CUDA (first device),
#           with filecoin-proofs' seal_commit_phase2 (`porep_bench c2-filecoin`, twice in one
#           process: cold, then warm) beside them; and a 16KiB SnapDeals update on both
#           backends. Needs `porep_bench` in BIN.
#   production  the device suite's production sizes on each device (NTT 2^27 in the default
#           shape, G1 MSMs 2^24 and 2^27, G2 2^24, each against a known answer)
#   bench   the checked benchmarks at the GPU machine's sizes (NTT and H pipeline up to 2^27,
#           each result checked before it is timed), CUDA only
#   peer    sppark-bench beside them: G1 2^24 and 2^27, NTT 2^27, G2 2^22 and 2^24
# Parameters are generated on the first device when missing (the dense ones under
# /tmp/proofline-params, the Filecoin ones under /tmp/fil-params).
set -uo pipefail
BIN=${BIN:-.gpu/bin}
GPU_SETS=${GPU_SETS:-0}
OUT=${OUT:-target/gpus}
WORK=${WORK:-/tmp/gpus}
WORKERS=${WORKERS:-2}
LOG2=${LOG2:-22}
PARTS=${PARTS:-8}
JOBS=${JOBS:-4}
REPLAY_PW=${REPLAY_PW:-1,2,4}
REAL_PW=${REAL_PW:-8,16,32}
POREP_JOBS=${POREP_JOBS:-8}
SHAPES=${SHAPES:-2KiB 4KiB 16KiB 32KiB}
ROUNDS=${ROUNDS:-2}
PARAMS=/tmp/proofline-params
export FIL_PROOFS_PARAMETER_CACHE=${FIL_PROOFS_PARAMETER_CACHE:-/tmp/fil-params}
mkdir -p "$OUT" "$WORK" "$PARAMS" "$FIL_PROOFS_PARAMETER_CACHE"
PL="$BIN/proofline"
DENSE="--backend cuda --gpu-workers $WORKERS --log2-constraints $LOG2 --partitions $PARTS --jobs $JOBS --params-dir $PARAMS"
status=0

# The devices of every set, each once.
devices() {
  tr ' ,' '\n\n' <<<"$GPU_SETS" | grep -v '^$' | sort -un
}

# A sweep's summary files copied from $WORK/$1 to $OUT/$1.
keep() {
  mkdir -p "$OUT/$1"
  cp "$WORK/$1"/results.json "$WORK/$1"/results.csv "$WORK/$1"/report.svg "$OUT/$1/" 2>/dev/null
}

# Runs a command, its output to $1 (and the last lines to stdout); a failure is remembered.
step() {
  local log=$1
  shift
  echo "== $(date -u +%T) $*" >"$log"
  local t0=$SECONDS
  "$@" >>"$log" 2>&1
  local rc=$?
  echo "== rc $rc after $((SECONDS - t0)) s" >>"$log"
  tail -n 30 "$log"
  [ $rc -eq 0 ] || status=1
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null || true

for s in "$@"; do
  case $s in
    suite)
      for d in $(devices); do
        PROOFLINE_TEST_DEVICES=$d step "$OUT/suite-dev$d.txt" "$BIN/cuda-device" --test-threads 1
      done
      ;;
    replay | real)
      if [ $s = replay ]; then extra="--replay --pw $REPLAY_PW"; else extra="--synthesis pce --pw $REAL_PW"; fi
      for g in $GPU_SETS; do
        # shellcheck disable=SC2086
        rm -rf "$WORK/$s-g$g"
        step "$OUT/$s-g$g.txt" "$PL" sweep $DENSE $extra --gpus "$g" --out "$WORK/$s-g$g"
        keep "$s-g$g"
      done
      ;;
    porep)
      for g in $GPU_SETS; do
        rm -rf "$WORK/porep-g$g"
        step "$OUT/porep-g$g.txt" "$PL" sweep --backend cuda --gpu-workers "$WORKERS" \
          --circuit porep-2k --jobs "$POREP_JOBS" --pw 4 --gpus "$g" --out "$WORK/porep-g$g" \
          --record "$OUT/records.jsonl" --record-table gpu-pipeline
        keep "porep-g$g"
      done
      ;;
    c2)
      rm -rf /tmp/c1-2k
      step "$OUT/seal.txt" "$PL" filecoin seal --sector-size 2KiB --out /tmp/c1-2k
      for d in $(devices); do
        step "$OUT/c2-dev$d.txt" "$PL" c2 --c1 /tmp/c1-2k/c1.json --backend cuda --gpus "$d" \
          --record "$OUT/records.jsonl" --record-table gpu-pipeline
      done
      ;;
    shapes)
      d=$(devices | head -1)
      for size in $SHAPES; do
        rm -rf "/tmp/c1-$size"
        step "$OUT/seal-$size.txt" "$PL" filecoin seal --sector-size "$size" --out "/tmp/c1-$size"
        # The first run generates the parameters; the runs after it read them.
        step "$OUT/c2-$size-cpu-first.txt" "$PL" c2 --c1 "/tmp/c1-$size/c1-raw.json" --backend cpu --pw 4
        for round in $(seq "$ROUNDS"); do
          step "$OUT/c2-$size-cpu-$round.txt" "$PL" c2 --c1 "/tmp/c1-$size/c1-raw.json" --backend cpu --pw 4
          step "$OUT/c2-$size-cuda-$round.txt" "$PL" c2 --c1 "/tmp/c1-$size/c1-raw.json" --backend cuda \
            --gpus "$d" --pw 4
          step "$OUT/c2-$size-filecoin-$round.txt" "$BIN/porep_bench" c2-filecoin "/tmp/c1-$size"
        done
      done
      rm -rf /tmp/snap-16k
      step "$OUT/snap-16KiB.txt" "$PL" filecoin snap --sector-size 16KiB --out /tmp/snap-16k
      for round in $(seq "$ROUNDS"); do
        for backend in cpu cuda; do
          step "$OUT/snap-16KiB-$backend-$round.txt" "$PL" snap-prove --dir /tmp/snap-16k \
            --backend "$backend" --pw 4
        done
      done
      ;;
    production)
      for d in $(devices); do
        PROOFLINE_TEST_DEVICES=$d PROOFLINE_DEVICE_CHECK_SIZES=production \
          step "$OUT/production-dev$d.txt" "$BIN/cuda-device" stages_ --test-threads 1 --nocapture
      done
      ;;
    bench)
      PROOFLINE_GPU_BENCH=full PROOFLINE_GPU_BENCH_API=cuda \
        step "$OUT/bench.txt" "$BIN/gpu-bench" --bench "${BENCH_FILTER:-}" \
        --warm-up-time 1 --measurement-time 3 --sample-size 10
      # For `cargo xtask record-criterion --criterion $OUT/criterion` on the build machine.
      rm -rf "$OUT/criterion" && cp -r target/criterion "$OUT/criterion" 2>/dev/null
      ;;
    peer)
      G1_SIZES=24,27 NTT_SIZES=27 G2_SIZES=22,24 TOTAL_BUDGET=${PEER_BUDGET:-300} \
        step "$OUT/peer.txt" env OUT="$OUT" bash "${PEER:-.gpu/peers/sppark-bench}/run.sh"
      ;;
    *)
      echo "unknown step $s (suite, replay, real, porep, c2, production, bench, peer)" >&2
      exit 2
      ;;
  esac
done
exit $status
