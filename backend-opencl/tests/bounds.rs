//! Device buffers' bounds on OpenCL (POCL in CI, where `CI=true` makes a missing platform a
//! failure): `support/bounds.rs`'s checks on the first device.

#[path = "support/bounds.rs"]
mod bounds;

use backend_opencl::{open_or_skip, OpenClOptions};

#[test]
fn copies_outside_a_buffer_are_refused() {
    if let Some(b) = open_or_skip(OpenClOptions::default()) {
        bounds::check_copies(b.device(0).expect("a device"));
    }
}

#[test]
fn dense_msms_past_their_bases_or_exponents_are_refused() {
    if let Some(b) = open_or_skip(OpenClOptions::default()) {
        bounds::check_dense_msms(b.device(0).expect("a device"));
    }
}

#[test]
fn sorted_msms_past_their_buffers_are_refused() {
    if let Some(b) = open_or_skip(OpenClOptions::default()) {
        bounds::check_sorted_msms(b.device(0).expect("a device"));
    }
}
