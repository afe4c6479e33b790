//! The conformance suite on OpenCL (POCL in CI): sums, hand-backs, byte-equal proofs,
//! bellperson, the engine; once with the device's memory and once under a memory limit small
//! enough that every query's bases are streamed in chunks and the H pipeline is split.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use common::backend_with;
use gpu_core::Faults;

/// Small enough that no query of the suite's circuits stays resident and the H pipeline keeps
/// two vectors on the device, big enough for a bucket set.
const TIGHT: u64 = 320 << 10;

fn each_limit(check: impl Fn(backend_opencl::OpenClBackend)) {
    for limit in [None, Some(TIGHT)] {
        if let Some(b) = backend_with(limit, Faults::none()) {
            eprintln!("memory limit: {limit:?}");
            check(b);
        }
    }
}

#[test]
fn opencl_conformance_accelerate_matches_cpu() {
    each_limit(|b| proofline_conformance::check_accelerate(&b));
}

#[test]
fn opencl_conformance_wrong_shape_is_handed_back() {
    each_limit(|b| proofline_conformance::check_wrong_shape(&b));
}

#[test]
fn opencl_conformance_proofs_match_cpu_bytes_and_bellperson_verifies() {
    each_limit(|b| proofline_conformance::check_proofs(&b, &CpuBackend));
}

#[test]
fn opencl_conformance_engine_proves_on_every_device() {
    each_limit(|b| proofline_conformance::check_engine(Arc::new(b), Arc::new(CpuBackend)));
}
