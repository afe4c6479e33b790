#!/usr/bin/env bash
# The test command: unit and integration tests, then every benchmark once in test mode.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
cargo test --workspace --locked --benches
