//! Pre-compiled synthesis proves the same bytes as bellpepper's constraint system: for the
//! dense, merkle and sha256 workloads, the matrices recorded from the circuit without its
//! witness, the same witness, r and s give the same proof, and it verifies. (The Filecoin
//! circuits are checked in the filecoin crate's tests.)

use std::sync::Arc;

use backend_cpu::CpuBackend;
use harness::workloads::{Workload, WorkloadCircuit, WorkloadSpec};
use prover_core::accounting::ledger::StageLedger;
use prover_core::stages::Randomness;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, prove_with_randomness, verify_proof,
    Accelerator, CpuSynthesizer, Error, PceSynthesizer, Precompiled, PreparedParameters, Proof,
    Stages, Synthesizer,
};
use rand::Rng;

fn prove_bytes<S: Synthesizer>(
    synthesizer: &S,
    prepared: &PreparedParameters,
    circuit: WorkloadCircuit,
    rs: [Randomness; 1],
) -> Vec<u8> {
    let stages = Stages {
        synthesizer,
        accelerator: &CpuBackend,
        finalizer: &CpuBackend,
    };
    Proof::many_to_bytes(&prove_with_randomness(stages, prepared, vec![circuit], &rs).unwrap())
}

fn same_proof_bytes(kind: Workload, log2: u32) {
    let spec = WorkloadSpec { kind, log2 };
    let mut rng = rand::thread_rng();
    let params = generate_seeded_parameters(spec.shape().unwrap(), rng.gen()).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let prepared = CpuBackend
        .prepare(Arc::new(params), &StageLedger::new())
        .unwrap();
    // Recorded from the shape: no witness needed.
    let pce = PceSynthesizer::new(Arc::new(
        Precompiled::record(spec.shape().unwrap()).unwrap(),
    ));
    let (circuit, inputs) = spec
        .partition(rng.gen_range(0..1000), rng.gen_range(0..10))
        .unwrap();
    let rs = [Randomness::random(&mut rng)];
    let cs = prove_bytes(&CpuSynthesizer, &prepared, circuit.clone(), rs);
    let with_pce = prove_bytes(&pce, &prepared, circuit, rs);
    assert_eq!(cs, with_pce, "{}: proof bytes differ", kind.name());
    let proof = Proof::from_bytes(&with_pce).unwrap();
    assert!(verify_proof(&pvk, &proof, &inputs).unwrap());
    // Twin: the proof does not verify for other inputs.
    let mut wrong = inputs.clone();
    wrong[0] += blstrs::Scalar::from(1u64);
    assert!(!verify_proof(&pvk, &proof, &wrong).unwrap());
}

#[test]
fn dense_proofs_are_the_same_bytes() {
    same_proof_bytes(Workload::Dense, 10);
}

#[test]
fn merkle_proofs_are_the_same_bytes() {
    same_proof_bytes(Workload::Merkle, 12);
}

#[test]
fn sha256_proofs_are_the_same_bytes() {
    same_proof_bytes(Workload::Sha256, 15);
}

#[test]
fn another_workloads_matrices_are_refused() {
    let dense = WorkloadSpec {
        kind: Workload::Dense,
        log2: 10,
    };
    let merkle = WorkloadSpec {
        kind: Workload::Merkle,
        log2: 12,
    };
    let pce = Precompiled::record(dense.shape().unwrap()).unwrap();
    let (circuit, _) = merkle.partition(0, 0).unwrap();
    let e = pce.synthesize(circuit).unwrap_err();
    assert!(matches!(e, Error::PrecompiledMismatch { .. }), "{e}");
    // Twin: the workload it was recorded from is accepted.
    pce.synthesize(dense.partition(0, 0).unwrap().0).unwrap();
}
