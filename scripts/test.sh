#!/usr/bin/env bash
# The test command: unit and integration tests, then every benchmark once in test mode.
set -euo pipefail
cd "$(dirname "$0")/.."
# NVRTC for the CUDA kernels' compile test (no GPU needed): the PyPI wheel `.ci/run` installs
# under target/nvrtc, or any folder holding libnvrtc.so.13 named by PROOFLINE_NVRTC_DIR.
nvrtc_dir="${PROOFLINE_NVRTC_DIR:-$PWD/target/nvrtc/nvidia/cu13/lib}"
if [ -d "$nvrtc_dir" ]; then
  export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
cargo test --workspace --locked
cargo test --workspace --locked --benches
