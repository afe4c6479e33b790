//! Whole-partition proofs at 2^14 and 2^16 constraints, with bellperson 0.26 proving
//! the same circuit with the same parameters side by side; and the engine's check of one
//! partition proof (`check_proof`, what verification by default adds to each partition) at the
//! same sizes, so that its share of a partition's proving time is read from one run.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use bellperson::groth16 as bp;
use blstrs::Bls12;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use proofline_workloads::circuits::DenseCircuit;
use prover_core::accounting::ledger::StageLedger;
use prover_core::{
    check_proof, generate_seeded_parameters, prepare_verifying_key, prove, Accelerator,
    CpuSynthesizer, PointCheck, Stages,
};

const SIZES: [u32; 2] = [14, 16];
const INPUTS: usize = 4;

/// The CPU backend's stages.
fn cpu_stages() -> Stages<'static, CpuSynthesizer> {
    Stages {
        synthesizer: &CpuSynthesizer,
        accelerator: &CpuBackend,
        finalizer: &CpuBackend,
    }
}

/// `params` prepared by the CPU backend.
fn cpu_prepared(params: prover_core::Parameters) -> prover_core::PreparedParameters {
    CpuBackend
        .prepare(Arc::new(params), &StageLedger::new())
        .unwrap()
}

fn bench_partition_proof(c: &mut Criterion) {
    let mut g = c.benchmark_group("partition_proof");
    g.sample_size(10);
    let stages = cpu_stages();
    for k in SIZES {
        let shape = DenseCircuit::with_domain(k, INPUTS, 1);
        let params = generate_seeded_parameters(shape.clone(), 1).unwrap();
        let mut bytes = Vec::new();
        params.write(&mut bytes).unwrap();
        let bp_params = bp::Parameters::<Bls12>::read(&bytes[..], false).unwrap();
        assert_eq!(
            prover_core::Parameters::from_bytes(&bytes, PointCheck::Unchecked).unwrap(),
            params
        );
        let prepared = cpu_prepared(params);
        let circuit = shape.with_witness(3);
        let mut rng = rand::thread_rng();
        g.bench_function(BenchmarkId::new("proofline", k), |b| {
            b.iter(|| prove(stages, &prepared, vec![circuit.clone()], &mut rng).unwrap())
        });
        g.bench_function(BenchmarkId::new("bellperson", k), |b| {
            b.iter(|| bp::create_random_proof(circuit.clone(), &bp_params, &mut rng).unwrap())
        });
    }
    g.finish();
}

/// The engine's check of one partition proof: its points' curve and subgroup checks and the
/// pairing check. Checked before it is timed: the proof passes, a wrong input fails.
fn bench_check_proof(c: &mut Criterion) {
    let mut g = c.benchmark_group("partition_check");
    let stages = cpu_stages();
    for k in SIZES {
        let shape = DenseCircuit::with_domain(k, INPUTS, 1);
        let params = generate_seeded_parameters(shape.clone(), 1).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let prepared = cpu_prepared(params);
        let circuit = shape.with_witness(3);
        let inputs = circuit.public_inputs();
        let proof = prove(stages, &prepared, vec![circuit], &mut rand::thread_rng())
            .unwrap()
            .remove(0);
        assert!(
            check_proof(&pvk, &proof, &inputs).unwrap(),
            "2^{k}: the proof fails"
        );
        let mut wrong = inputs.clone();
        wrong[0] += blstrs::Scalar::from(1u64);
        assert!(
            !check_proof(&pvk, &proof, &wrong).unwrap(),
            "2^{k}: a wrong input passes"
        );
        g.bench_function(BenchmarkId::new("proofline", k), |b| {
            b.iter(|| check_proof(&pvk, &proof, &inputs).unwrap())
        });
    }
    g.finish();
}

criterion_group! {
    name = prove_benches;
    config = common::criterion();
    targets = bench_partition_proof, bench_check_proof
}
criterion_main!(prove_benches);
