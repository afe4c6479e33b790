//! The conformance suite for the fault-injecting test backends: one that hands back every
//! second partition, one every third. Their results must match the CPU's; their hand-backs
//! must be untouched.

mod every_second {
    proofline_conformance::conformance_tests!(
        proofline_tests::TestBackend::failing_every(2),
        backend_cpu::CpuBackend
    );
}

mod every_third {
    proofline_conformance::conformance_tests!(
        proofline_tests::TestBackend::failing_every(3),
        backend_cpu::CpuBackend
    );
}
