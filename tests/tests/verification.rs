//! No wrong proof leaves the engine: every partition proof is checked before it is reported; a
//! device's proof that fails is proved again on the CPU fallback and counts against the device;
//! a failing proof from the CPU reference fails its job and names the parameters; with the
//! check off, the wrong proof would have gone out.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use blstrs::Scalar;
use proofline_tests::{Behaviour, Gate, RandomCircuit, TestBackend};
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proof, Accelerator, Config,
    CpuSynthesizer, Engine, EngineStats, Error, Parameters, Proof,
};

const SHAPE: u64 = 73;

fn params(seed: u64) -> Arc<Parameters> {
    Arc::new(generate_seeded_parameters(RandomCircuit::new(2, 6, SHAPE, 0).shape(), seed).unwrap())
}

fn circuit(p: usize) -> RandomCircuit {
    RandomCircuit::new(2, 6, SHAPE, p as u64 + 1)
}

/// The rule that makes the emulated device return a wrong sum for partition `p`.
fn corrupt(p: usize) -> (Scalar, Behaviour) {
    (circuit(p).public_inputs()[0], Behaviour::Corrupt)
}

/// Proves one job of `partitions` on `backend` with `params`; checks that the ledger balanced
/// and returns the job's outcome and the figures.
fn prove(
    backend: Arc<dyn Accelerator>,
    config: Config,
    params: Arc<Parameters>,
    partitions: usize,
) -> (prover_core::Result<Vec<Proof>>, EngineStats) {
    let engine: Engine<RandomCircuit, CpuSynthesizer> =
        Engine::new(config, CpuSynthesizer, backend, Arc::new(CpuBackend)).unwrap();
    let prepared = engine.prepare(params).unwrap();
    let circuits = (0..partitions).map(circuit).collect();
    let outcome = engine
        .submit(&prepared, circuits, &mut rand::thread_rng())
        .unwrap()
        .wait();
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
    (outcome, stats)
}

/// Which of `proofs` verify for their partition's inputs under `params`.
fn verifying(params: &Parameters, proofs: &[Proof]) -> Vec<bool> {
    let pvk = prepare_verifying_key(&params.vk);
    proofs
        .iter()
        .enumerate()
        .map(|(p, proof)| verify_proof(&pvk, proof, &circuit(p).public_inputs()).unwrap())
        .collect()
}

fn with_fallback() -> Config {
    Config {
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    }
}

#[test]
fn a_device_proof_that_fails_is_proved_again_on_the_cpu_and_counted() {
    let params = params(SHAPE);
    let backend = Arc::new(TestBackend::new(Gate::opened(), vec![corrupt(1)]));
    let (outcome, stats) = prove(backend, with_fallback(), params.clone(), 3);
    let proofs = outcome.expect("the job succeeds on the fallback");
    assert_eq!(verifying(&params, &proofs), [true; 3]);
    assert_eq!(
        stats.partitions_verified, 4,
        "three proofs and the rejected one"
    );
    assert_eq!(stats.partitions_rejected, 1, "{stats:?}");
    assert_eq!(stats.fallback_partitions, 1, "{stats:?}");
    let d = &stats.devices[0];
    assert_eq!((d.rejected, d.failures, d.partitions), (1, 1, 2), "{d:?}");
    assert!(d.in_service);
    assert!(stats.verify_seconds > 0.0);
}

#[test]
fn with_the_check_off_the_wrong_proof_goes_out() {
    // The twin of the test above: the same faulty device, verification off.
    let params = params(SHAPE);
    let backend = Arc::new(TestBackend::new(Gate::opened(), vec![corrupt(1)]));
    let config = Config {
        verify: false,
        ..with_fallback()
    };
    let (outcome, stats) = prove(backend, config, params.clone(), 3);
    let proofs = outcome.expect("nothing checks the proofs");
    assert_eq!(verifying(&params, &proofs), [true, false, true]);
    assert_eq!(
        (stats.partitions_verified, stats.partitions_rejected),
        (0, 0)
    );
    assert_eq!(stats.fallback_partitions, 0);
}

#[test]
fn without_a_fallback_the_rejected_partition_fails_its_job_naming_the_device() {
    let params = params(SHAPE);
    let backend = Arc::new(TestBackend::new(Gate::opened(), vec![corrupt(0)]));
    let (outcome, stats) = prove(backend, Config::default(), params, 2);
    match outcome {
        Err(Error::PartitionFailed {
            partition: 0,
            stage: "verification",
            source,
        }) => match *source {
            Error::ProofRejected {
                ref produced_by,
                ref detail,
            } => {
                assert_eq!(produced_by, "test:0");
                assert!(detail.contains("both suspects"), "{detail}");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert_eq!(stats.devices[0].rejected, 1);
}

#[test]
fn a_device_whose_proofs_keep_failing_goes_out_of_service() {
    let params = params(SHAPE);
    let rules = (0..6).map(corrupt).collect();
    let backend = Arc::new(TestBackend::new(Gate::opened(), rules));
    let config = Config {
        max_device_failures: 2,
        synthesis_workers: 1,
        ..with_fallback()
    };
    let (outcome, stats) = prove(backend, config, params.clone(), 6);
    let proofs = outcome.expect("every partition ends on the fallback");
    assert_eq!(verifying(&params, &proofs), [true; 6]);
    let d = &stats.devices[0];
    assert!(!d.in_service, "{d:?}");
    assert!(d.rejected >= 2, "{d:?}");
    assert_eq!(stats.fallback_partitions, 6, "{stats:?}");
}

#[test]
fn the_cpu_s_own_failing_proof_blames_the_parameters() {
    // Parameters of the same shape from another seed: they decode and fit every size, but
    // belong to another setup, so the CPU's proofs do not verify.
    let right = params(SHAPE);
    let wrong = params(SHAPE + 1);
    let mut wrong_vk = (*wrong).clone();
    wrong_vk.vk = right.vk.clone();
    let (outcome, stats) = prove(
        Arc::new(CpuBackend),
        Config::default(),
        Arc::new(wrong_vk),
        2,
    );
    match outcome {
        Err(Error::PartitionFailed { source, stage, .. }) => {
            assert_eq!(stage, "verification");
            let msg = source.to_string();
            assert!(msg.contains("cpu:0"), "{msg}");
            assert!(msg.contains("parameters are suspect"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert!(stats.partitions_rejected >= 1);
    // Twin: the right parameters prove and every proof is checked.
    let (outcome, stats) = prove(Arc::new(CpuBackend), Config::default(), right.clone(), 2);
    assert_eq!(verifying(&right, &outcome.unwrap()), [true; 2]);
    assert_eq!(
        (stats.partitions_verified, stats.partitions_rejected),
        (2, 0)
    );
}
