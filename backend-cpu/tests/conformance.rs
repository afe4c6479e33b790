//! The conformance suite for the CPU backend (the reference checks itself: sums, hand-backs,
//! byte-equal proofs, bellperson, the engine).

proofline_conformance::conformance_tests!(backend_cpu::CpuBackend, backend_cpu::CpuBackend);
