//! The device suite on OpenCL (POCL in CI, where `CI=true` makes a missing platform a failure):
//! conformance (sums, hand-backs, byte-equal proofs, bellperson, the engine; with the device's
//! memory and under a limit that streams every base), the NTT, H pipeline and MSMs against the
//! CPU, and injected faults proved by the fallback. `PROOFLINE_OPENCL_DEVICE` picks the device.

use backend_opencl::{open_or_skip, OpenClOptions};

proofline_conformance::device_backend_tests!(|mem_limit, faults, trace| open_or_skip(
    OpenClOptions {
        mem_limit,
        faults: Some(faults),
        trace,
        ..OpenClOptions::default()
    }
));
