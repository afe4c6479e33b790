//! Opening the OpenCL backend in tests (a skip with the reason printed where there is no
//! OpenCL, a failure under `CI=true`).

use backend_opencl::{open_or_skip, OpenClBackend, OpenClOptions};
use gpu_core::Faults;

/// The backend with `mem_limit` and `faults`, or `None` (skip).
pub fn backend_with(mem_limit: Option<u64>, faults: Faults) -> Option<OpenClBackend> {
    open_or_skip(OpenClOptions {
        mem_limit,
        faults: Some(faults),
        ..OpenClOptions::default()
    })
}
