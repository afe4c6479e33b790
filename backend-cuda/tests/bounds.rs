//! Device buffers' bounds on CUDA (skipped, with the reason printed, where there is no CUDA
//! device): the OpenCL backend's `tests/support/bounds.rs` checks on the first device.

#[path = "../../backend-opencl/tests/support/bounds.rs"]
mod bounds;

use backend_cuda::{open_or_skip, CudaOptions};

#[test]
fn copies_outside_a_buffer_are_refused() {
    if let Some(b) = open_or_skip(CudaOptions::default()) {
        bounds::check_copies(b.device(0).expect("a device"));
    }
}

#[test]
fn dense_msms_past_their_bases_or_exponents_are_refused() {
    if let Some(b) = open_or_skip(CudaOptions::default()) {
        bounds::check_dense_msms(b.device(0).expect("a device"));
    }
}

#[test]
fn sorted_msms_past_their_buffers_are_refused() {
    if let Some(b) = open_or_skip(CudaOptions::default()) {
        bounds::check_sorted_msms(b.device(0).expect("a device"));
    }
}
