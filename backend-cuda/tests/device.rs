//! The device suite on CUDA (skipped, with the reason printed, where there is no CUDA device:
//! CI has none): conformance with the device's memory and under a limit that streams every
//! base, the NTT, H pipeline and MSMs against the CPU, and injected faults proved by the
//! fallback. The `PROOFLINE_GPU_*` settings apply as they do to the prover.

use backend_cuda::{open_or_skip, CudaOptions};
use gpu_core::GpuOptions;

proofline_conformance::device_backend_tests!(|mem_limit, faults, trace| {
    let lookup = |name: &str| std::env::var(name).ok();
    let mut gpu = GpuOptions::from_lookup(mem_limit, lookup).expect("the test's settings");
    gpu.faults = faults;
    gpu.trace |= trace;
    open_or_skip(CudaOptions { gpu })
});
