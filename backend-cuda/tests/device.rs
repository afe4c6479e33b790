//! The device suite on CUDA (skipped, with the reason printed, where there is no CUDA device:
//! CI has none): conformance with the device's memory and under a limit that streams every
//! base, the NTT, H pipeline and MSMs against the CPU, and injected faults proved by the
//! fallback.

use backend_cuda::{open_or_skip, CudaOptions};

proofline_conformance::device_backend_tests!(|mem_limit, faults, trace| open_or_skip(
    CudaOptions {
        mem_limit,
        faults: Some(faults),
        trace,
    }
));
