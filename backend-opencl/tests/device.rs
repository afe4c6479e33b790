//! The device suite on OpenCL (POCL in CI, where `CI=true` makes a missing platform a failure):
//! conformance (sums, hand-backs, byte-equal proofs, bellperson, the engine; with the device's
//! memory and under a limit that streams every base), the NTT, H pipeline and MSMs against the
//! CPU, and injected faults proved by the fallback. `PROOFLINE_OPENCL_DEVICE` picks the device;
//! the `PROOFLINE_GPU_*` settings apply as they do to the prover.

use backend_opencl::{open_or_skip, Missing, OpenClOptions};

/// This test binary's environment.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

proofline_conformance::device_backend_tests!(|mem_limit, faults, trace| {
    let mut options = OpenClOptions::from_lookup(mem_limit, env).expect("the test's settings");
    options.gpu.faults = faults;
    options.gpu.trace |= trace;
    open_or_skip(options, Missing::unless_ci(env("CI").as_deref()))
});
