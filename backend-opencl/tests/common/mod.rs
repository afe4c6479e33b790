//! Opening the OpenCL backend in tests: with `CI=true` a missing platform fails the test (CI
//! installs POCL); elsewhere the test is skipped with the reason printed.

use backend_opencl::{open, OpenClBackend, OpenClOptions, Selector};
use gpu_core::{Device, Faults};
use prover_core::GpuBackend;

/// Whether this run is CI's (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The backend with `mem_limit` and `faults`, or `None` (skip) when there is no OpenCL here and
/// this is not CI. Prints the devices it runs on.
pub fn backend_with(mem_limit: Option<u64>, faults: Faults) -> Option<OpenClBackend> {
    let selector = std::env::var("PROOFLINE_OPENCL_DEVICE")
        .map(|s| Selector::parse(&s).expect("PROOFLINE_OPENCL_DEVICE"))
        .unwrap_or_default();
    match open(OpenClOptions {
        selector,
        mem_limit,
        faults: Some(faults),
    }) {
        Ok(b) => {
            for d in 0..b.device_count() {
                let gpu = b.device(d).expect("device");
                let info = gpu.device.info();
                eprintln!(
                    "OpenCL device {d}: {} on {} ({} compute units, limit {}){}",
                    info.name,
                    info.platform,
                    info.compute_units,
                    prover_core::ledger::human_bytes(gpu.gauge.limit()),
                    if gpu.device.from_cache { ", program from the cache" } else { "" }
                );
            }
            Some(b)
        }
        Err(e) if !in_ci() => {
            eprintln!("skipped: no OpenCL device here ({e}); CI installs POCL and fails instead");
            None
        }
        Err(e) => panic!("CI=true but the OpenCL backend did not open: {e}"),
    }
}

/// The backend with no limit and no faults.
#[allow(dead_code)]
pub fn backend() -> Option<OpenClBackend> {
    backend_with(None, Faults::none())
}
