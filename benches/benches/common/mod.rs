//! The criterion settings every bench shares: pprof as criterion's profiler, so that
//! `cargo bench -p proofline-benches --bench NAME -- --profile-time 10 [FILTER]` samples each
//! benchmark for that long instead of timing it and writes its flamegraph to
//! `target/criterion/<benchmark>/profile/flamegraph.svg`.

use criterion::Criterion;
use pprof::criterion::{Output, PProfProfiler};

/// Samples per second while profiling.
const SAMPLE_HZ: i32 = 199;

/// Criterion's defaults with the pprof profiler.
pub fn criterion() -> Criterion {
    Criterion::default().with_profiler(PProfProfiler::new(SAMPLE_HZ, Output::Flamegraph(None)))
}
