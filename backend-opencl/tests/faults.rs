//! Fault injection through the engine: the device fails on chosen calls, the partitions are
//! handed back and proved by the CPU fallback, every proof verifies and nothing is lost. Twin:
//! without faults (and under a memory limit that streams every base) nothing falls back.

mod common;

use std::sync::Arc;

use backend_cpu::CpuBackend;
use common::backend_with;
use gpu_core::Faults;
use proofline_conformance::{cases, SuiteCircuit};
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proofs_batch, Config, CpuSynthesizer,
    Engine, EngineStats,
};
use rand::RngCore;

fn run(limit: Option<u64>, faults: Faults) -> Option<EngineStats> {
    let backend = backend_with(limit, faults)?;
    let mut rng = rand::thread_rng();
    let shape = cases(&mut rng).remove(0);
    let params = Arc::new(generate_seeded_parameters(shape.clone(), rng.next_u64()).unwrap());
    let pvk = prepare_verifying_key(&params.vk);
    let config = Config {
        pw: 2,
        gpu_workers: 1,
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let engine: Engine<SuiteCircuit, CpuSynthesizer> = Engine::new(
        config,
        CpuSynthesizer,
        Arc::new(backend),
        Arc::new(CpuBackend),
    )
    .unwrap();
    let prepared = engine.prepare(params).unwrap();
    let job: Vec<SuiteCircuit> = (0..6).map(|_| shape.reseeded(rng.next_u64())).collect();
    let proofs = engine
        .submit(&prepared, job.clone(), &mut rng)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(proofs.len(), job.len(), "a proof was lost");
    let inputs: Vec<_> = job.iter().map(SuiteCircuit::public_inputs).collect();
    assert!(verify_proofs_batch(&pvk, &proofs, &inputs, &mut rng).unwrap());
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
    Some(stats)
}

#[test]
fn opencl_injected_faults_fall_back_and_every_proof_verifies() {
    let Some(stats) = run(None, Faults::fail_calls([0, 2])) else {
        return;
    };
    assert_eq!(stats.fallback_partitions, 2, "{stats:?}");
    assert_eq!(stats.devices[0].failures, 2, "{stats:?}");
    assert_eq!(stats.devices[0].partitions, 4, "{stats:?}");
    assert!(stats.devices[0].in_service);
}

#[test]
fn opencl_without_faults_nothing_falls_back_even_streaming() {
    for limit in [None, Some(320 << 10)] {
        let Some(stats) = run(limit, Faults::none()) else {
            return;
        };
        assert_eq!(stats.fallback_partitions, 0, "limit {limit:?}: {stats:?}");
        assert_eq!(stats.devices[0].failures, 0, "limit {limit:?}: {stats:?}");
        assert_eq!(stats.devices[0].partitions, 6, "limit {limit:?}: {stats:?}");
    }
}
