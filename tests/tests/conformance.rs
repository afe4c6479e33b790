//! The conformance suite for the fault-injecting test backends: one that hands back every
//! second partition, one every third. Their results must match the CPU's; their hand-backs
//! must be untouched. And the suite's own strength: a backend that refuses one kind of
//! partition (all zeros, all ones, no aux in A), or that returns wrong sums, fails it.

use std::panic::{catch_unwind, AssertUnwindSafe};

use backend_cpu::CpuBackend;
use proofline_conformance::{check_accelerate_with, check_proofs_with, every_device, HandBacks};
use proofline_tests::{Gate, TestBackend};
use prover_core::SynthesizedPartition;

mod every_second {
    proofline_conformance::conformance_tests!(
        proofline_tests::TestBackend::failing_every(2),
        backend_cpu::CpuBackend,
        injected
    );
}

mod every_third {
    proofline_conformance::conformance_tests!(
        proofline_tests::TestBackend::failing_every(3),
        backend_cpu::CpuBackend,
        injected
    );
}

mod never_failing {
    proofline_conformance::conformance_tests!(
        proofline_tests::TestBackend::new(proofline_tests::Gate::opened(), vec![]),
        backend_cpu::CpuBackend
    );
}

fn aux_all(p: &SynthesizedPartition, byte: u8) -> bool {
    let aux = &p.witness.aux;
    !aux.is_empty()
        && aux.iter().all(|s| {
            let mut want = [0u8; 32];
            want[0] = byte;
            s.0 == want
        })
}

fn all_zeros(p: &SynthesizedPartition) -> bool {
    aux_all(p, 0)
}

fn all_ones(p: &SynthesizedPartition) -> bool {
    aux_all(p, 1)
}

fn no_aux_in_a(p: &SynthesizedPartition) -> bool {
    let d = &p.witness.a_aux_density;
    (0..d.len()).all(|i| !d.get(i))
}

/// Whether `check` fails (panics) for `backend`.
fn fails(check: impl FnOnce()) -> bool {
    catch_unwind(AssertUnwindSafe(check)).is_err()
}

#[test]
fn a_backend_refusing_a_kind_of_partition_fails_the_suite() {
    for (name, refuse) in [
        ("all zeros", all_zeros as fn(&SynthesizedPartition) -> bool),
        ("all ones", all_ones),
        ("no aux in A", no_aux_in_a),
    ] {
        // Even where hand-backs are allowed (injected faults), a kind refused every time fails.
        let backend = TestBackend::failing_every(3).refusing(refuse);
        assert!(
            fails(|| check_accelerate_with(&backend, &every_device(&backend), HandBacks::Injected)),
            "refusing {name}: check_accelerate passed"
        );
        let backend = TestBackend::new(Gate::opened(), vec![]).refusing(refuse);
        assert!(
            fails(|| check_proofs_with(
                &backend,
                &every_device(&backend),
                &CpuBackend,
                HandBacks::None
            )),
            "refusing {name}: check_proofs passed"
        );
    }
    // Twin: the same backend refusing nothing passes both.
    let backend = TestBackend::failing_every(3);
    assert!(!fails(|| check_accelerate_with(
        &backend,
        &every_device(&backend),
        HandBacks::Injected
    )));
    let backend = TestBackend::new(Gate::opened(), vec![]);
    assert!(!fails(|| check_proofs_with(
        &backend,
        &every_device(&backend),
        &CpuBackend,
        HandBacks::None
    )));
}

#[test]
fn a_backend_with_wrong_sums_fails_the_suite() {
    let wrong_on_zeros = || TestBackend::new(Gate::opened(), vec![]).corrupting(all_zeros);
    let backend = wrong_on_zeros();
    assert!(fails(|| check_accelerate_with(
        &backend,
        &every_device(&backend),
        HandBacks::None
    )));
    let backend = wrong_on_zeros();
    assert!(fails(|| check_proofs_with(
        &backend,
        &every_device(&backend),
        &CpuBackend,
        HandBacks::None
    )));
}
