//! proofline's backend conformance suite, written once and run by every backend crate as a
//! dev-dependency (`cargo test -p <backend>` runs it), like arkworks' test templates:
//!
//! ```ignore
//! proofline_conformance::conformance_tests!(backend_cpu::CpuBackend, backend_cpu::CpuBackend);
//! ```
//!
//! expands to `#[test]` functions whose names contain `conformance`. Every check compares the
//! backend with the CPU reference (`backend_cpu`) on fresh random inputs (new seeds every run,
//! printed on failure):
//! - [`check_accelerate`]: on every device of the backend, the accelerator's sums (and b_g2 when
//!   the backend computes it) equal the CPU's, compared as compressed affine encodings; a
//!   hand-back returns the partition exactly as it was given; the backend's buffers leave the
//!   ledger;
//! - [`check_wrong_shape`]: a partition of another circuit is handed back untouched with a
//!   shape error, never turned into a wrong proof;
//! - [`check_proofs`]: whole proofs for the same r and s are byte for byte the CPU backend's,
//!   and bellperson verifies them (and rejects a wrong public input);
//! - [`check_engine`]: jobs through the engine on every device, with the CPU fallback, all
//!   verify and the ledger balances.
//!
//! "Every device" is the devices the caller names: the macros' tests name every device the
//! backend opened, or those `PROOFLINE_TEST_DEVICES` names ([`SuiteEnv`], read by the tests).
//!
//! - [`circuits`]: the suite's circuits; [`settings`]: what the environment tells the tests;
//! - [`device`]: the device-level checks of backends on gpu-core; [`bounds`]: their refusals of
//!   copies and MSMs outside their buffers.

pub mod bounds;
pub mod circuits;
pub mod device;
pub mod settings;

use std::sync::Arc;

use backend_cpu::{msm::msm_terms, CpuBackend, CpuWorker};
use bellperson::groth16 as bp;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use group::Curve;
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::{
    generate_seeded_parameters, Accelerator, AcceleratorWorker, Config, CpuSynthesizer, Engine,
    Error, Finalizer, HandBack, Parameters, PendingProof, PreparedParameters, Proof, Randomness,
    SynthesizedPartition, Synthesizer,
};
use rand::RngCore;

pub use circuits::{cases, SuiteCircuit, Values};
pub use settings::SuiteEnv;

/// The compressed encoding of a G1 sum (what "equal" means for points here).
fn g1(p: &G1Projective) -> Vec<u8> {
    p.to_affine().to_compressed().to_vec()
}

fn g2(p: &G2Projective) -> Vec<u8> {
    p.to_affine().to_compressed().to_vec()
}

/// A digest of everything a partition holds, to check that a hand-back is untouched.
fn fingerprint(p: &SynthesizedPartition) -> Vec<u8> {
    let mut out = Vec::new();
    let e = &p.evaluations;
    for v in [&e.a, &e.b, &e.c] {
        out.extend((v.len() as u64).to_le_bytes());
        for s in v.iter() {
            out.extend(s.to_bytes_le());
        }
    }
    let w = &p.witness;
    for v in [&w.input, &w.aux] {
        out.extend((v.len() as u64).to_le_bytes());
        for s in v.iter() {
            out.extend(s.0);
        }
    }
    for d in [&w.a_aux_density, &w.b_input_density, &w.b_aux_density] {
        out.extend((0..d.len()).map(|i| u8::from(d.get(i))));
    }
    out
}

fn synthesize(c: &SuiteCircuit) -> SynthesizedPartition {
    CpuSynthesizer
        .synthesize(c.clone())
        .unwrap_or_else(|e| panic!("{}: synthesis failed: {e}", c.describe()))
}

fn params_for(c: &SuiteCircuit, rng: &mut impl RngCore) -> Arc<Parameters> {
    Arc::new(
        generate_seeded_parameters(c.clone(), rng.next_u64())
            .unwrap_or_else(|e| panic!("{}: parameters: {e}", c.describe())),
    )
}

fn cpu_prepared(params: &Arc<Parameters>) -> PreparedParameters {
    CpuBackend
        .prepare(params.clone(), &StageLedger::new())
        .expect("the CPU backend prepares any parameters")
}

/// The CPU reference's accelerator output.
fn reference(params: &Arc<Parameters>, c: &SuiteCircuit) -> PendingProof {
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    CpuWorker
        .accelerate(
            &cpu_prepared(params),
            synthesize(c),
            &mut token.backend_buffers(),
        )
        .unwrap_or_else(|b| panic!("{}: the CPU reference failed: {}", c.describe(), b.error))
}

/// Runs `c` through `worker`; on a hand-back, checks that the partition came back untouched
/// and returns `None`.
fn accelerate_checked(
    worker: &mut dyn AcceleratorWorker,
    prepared: &PreparedParameters,
    c: &SuiteCircuit,
    what: &str,
) -> Option<PendingProof> {
    let ledger = StageLedger::new();
    let mut token = ledger.enter(Stage::OnAccelerator, 0, 0);
    let before = fingerprint(&synthesize(c));
    let out = worker.accelerate(prepared, synthesize(c), &mut token.backend_buffers());
    token.release_backend_buffers();
    drop(token);
    assert!(
        ledger.snapshot().is_balanced(),
        "{what}: {}: ledger {}",
        c.describe(),
        ledger.snapshot()
    );
    match out {
        Ok(p) => Some(p),
        Err(HandBack { partition, error }) => {
            assert_eq!(
                fingerprint(&partition),
                before,
                "{what}: {}: a handed-back partition was changed ({error})",
                c.describe()
            );
            assert!(!error.to_string().is_empty());
            None
        }
    }
}

/// What the suite accepts of a backend's hand-backs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBacks {
    /// No fault is injected: every call must produce a result.
    None,
    /// The backend hands some calls back on purpose (fault injection): each case must still
    /// produce a result on every device within its rounds, so that a backend refusing a kind of
    /// partition (all zeros, all ones, an empty density) fails.
    Injected,
}

/// Rounds of each case on each device (contexts are reused across partitions).
const ROUNDS: usize = 3;

/// Every device `backend` opened (what the suite checks where no device is named).
pub fn every_device(backend: &dyn Accelerator) -> Vec<usize> {
    (0..backend.device_count()).collect()
}

/// [`check_accelerate_with`] for a backend with no injected fault.
pub fn check_accelerate(backend: &dyn Accelerator, devices: &[usize]) {
    check_accelerate_with(backend, devices, HandBacks::None)
}

/// On each of `devices`: the accelerator's sums equal the CPU reference's (b_g2 too when the
/// backend returns it); hand-backs are untouched. Every case must produce results on every
/// device: every round (`HandBacks::None`), or at least one (`HandBacks::Injected`).
pub fn check_accelerate_with(backend: &dyn Accelerator, devices: &[usize], hand_backs: HandBacks) {
    let mut rng = rand::thread_rng();
    for c in cases(&mut rng) {
        let params = params_for(&c, &mut rng);
        let prepared = backend
            .prepare(params.clone(), &StageLedger::new())
            .unwrap_or_else(|e| panic!("{}: prepare failed: {e}", backend.name()));
        let want = reference(&params, &c);
        let want_b_g2 = msm_terms(&params.b_g2, &want.plan.b, &want.witness);
        for &device in devices {
            let what = format!("{} device {device}", backend.name());
            let mut worker = backend.worker(device, 0).expect("a worker");
            let mut produced = 0;
            // Several partitions per worker: contexts are reused across partitions.
            for round in 0..ROUNDS {
                let Some(got) = accelerate_checked(&mut *worker, &prepared, &c, &what) else {
                    continue;
                };
                produced += 1;
                let ctx = format!("{what}, round {round}: {}", c.describe());
                assert_eq!(g1(&got.sums.h), g1(&want.sums.h), "h: {ctx}");
                assert_eq!(g1(&got.sums.l), g1(&want.sums.l), "l: {ctx}");
                assert_eq!(g1(&got.sums.a), g1(&want.sums.a), "a: {ctx}");
                assert_eq!(g1(&got.sums.b_g1), g1(&want.sums.b_g1), "b_g1: {ctx}");
                if let Some(b) = &got.b_g2 {
                    assert_eq!(g2(b), g2(&want_b_g2), "b_g2: {ctx}");
                }
                assert_eq!(got.plan, want.plan, "plan: {ctx}");
            }
            let least = match hand_backs {
                HandBacks::None => ROUNDS,
                HandBacks::Injected => 1,
            };
            assert!(
                produced >= least,
                "{what}: {}: {produced} of {ROUNDS} rounds produced a result ({hand_backs:?} \
                 asks for at least {least})",
                c.describe()
            );
        }
    }
}

/// A partition of another circuit is handed back untouched, with a shape error, on each of
/// `devices`.
pub fn check_wrong_shape(backend: &dyn Accelerator, devices: &[usize]) {
    let mut rng = rand::thread_rng();
    let right = cases(&mut rng).remove(0);
    let wrong = SuiteCircuit {
        squares: right.squares + 1,
        ..right.clone()
    };
    let params = params_for(&right, &mut rng);
    let prepared = backend
        .prepare(params, &StageLedger::new())
        .expect("prepare");
    for &device in devices {
        let mut worker = backend.worker(device, 0).expect("a worker");
        let what = format!("{} device {device}", backend.name());
        let got = accelerate_checked(&mut *worker, &prepared, &wrong, &what);
        assert!(
            got.is_none(),
            "{what}: a wrong-shape partition was accelerated"
        );
        // Twin: the right circuit goes through (possibly after a backend's planned failure).
        let ok =
            (0..4).any(|_| accelerate_checked(&mut *worker, &prepared, &right, &what).is_some());
        assert!(ok, "{what}: the right circuit never went through");
    }
}

fn bp_verify(params: &Parameters, proof: &Proof, inputs: &[Scalar]) -> bool {
    let mut bytes = Vec::new();
    params.vk.write(&mut bytes).expect("writing the key");
    let vk = bp::VerifyingKey::<Bls12>::read(&bytes[..]).expect("bellperson reads our key");
    let pvk = bp::prepare_verifying_key(&vk);
    let proof = bp::Proof::<Bls12>::read(&proof.to_bytes()[..]).expect("bellperson reads it");
    bp::verify_proof(&pvk, &proof, inputs).expect("bellperson's verifier runs")
}

/// [`check_proofs_with`] for a backend with no injected fault.
pub fn check_proofs(backend: &dyn Accelerator, devices: &[usize], finalizer: &dyn Finalizer) {
    check_proofs_with(backend, devices, finalizer, HandBacks::None)
}

/// Whole proofs on each of `devices`, same r and s: the backend's own proof (never the CPU's in
/// its place) is byte for byte the CPU backend's, accepted by bellperson (and a wrong public
/// input rejected). With `HandBacks::Injected` a case may be handed back before a later round
/// goes through.
pub fn check_proofs_with(
    backend: &dyn Accelerator,
    devices: &[usize],
    finalizer: &dyn Finalizer,
    hand_backs: HandBacks,
) {
    let mut rng = rand::thread_rng();
    for c in cases(&mut rng) {
        let params = params_for(&c, &mut rng);
        let prepared = backend
            .prepare(params.clone(), &StageLedger::new())
            .expect("prepare");
        let cpu = cpu_prepared(&params);
        let rs = Randomness::random(&mut rng);
        for &device in devices {
            let mut worker = backend.worker(device, 0).expect("a worker");
            let what = format!("{} device {device}", backend.name());
            let tries = match hand_backs {
                HandBacks::None => 1,
                HandBacks::Injected => ROUNDS,
            };
            let pending = (0..tries)
                .find_map(|_| accelerate_checked(&mut *worker, &prepared, &c, &what))
                .unwrap_or_else(|| {
                    panic!(
                        "{what}: {}: handed back {tries} time(s): no proof of the backend's own \
                         to check",
                        c.describe()
                    )
                });
            let ours = finalizer
                .finalize(&prepared, pending, rs)
                .unwrap_or_else(|e| panic!("{what}: finalize: {e}"))
                .proof;
            let theirs = CpuBackend
                .finalize(&cpu, reference(&params, &c), rs)
                .expect("the CPU finalizer")
                .proof;
            assert_eq!(
                ours.to_bytes(),
                theirs.to_bytes(),
                "{what}: {}",
                c.describe()
            );
            let inputs = c.public_inputs();
            assert!(
                bp_verify(&params, &ours, &inputs),
                "{what}: {}",
                c.describe()
            );
            let mut wrong = inputs.clone();
            wrong[0] += Scalar::from(1u64);
            assert!(
                !bp_verify(&params, &ours, &wrong),
                "{what}: wrong input accepted"
            );
        }
    }
}

/// Jobs through the engine on `devices` (two workers each) with the CPU fallback: every proof
/// verifies, the ledger balances, every device took part or handed back.
pub fn check_engine(
    backend: Arc<dyn Accelerator>,
    devices: &[usize],
    finalizer: Arc<dyn Finalizer>,
) {
    let mut rng = rand::thread_rng();
    let shape = cases(&mut rng).remove(0);
    let params = params_for(&shape, &mut rng);
    let pvk = prover_core::prepare_verifying_key(&params.vk);
    let config = Config {
        synthesis_workers: 2,
        queue_depth: 2,
        devices: devices.to_vec(),
        gpu_workers: 2,
        synthesis_threads: 2,
        finalizer_threads: 1,
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let engine: Engine<SuiteCircuit, CpuSynthesizer> =
        Engine::new(config, CpuSynthesizer, backend.clone(), finalizer)
            .unwrap_or_else(|e| panic!("{}: engine: {e}", backend.name()));
    let prepared = engine.prepare(params).expect("prepare");
    let jobs: Vec<Vec<SuiteCircuit>> = (0..3)
        .map(|_| (0..4).map(|_| shape.reseeded(rng.next_u64())).collect())
        .collect();
    let handles: Vec<_> = jobs
        .iter()
        .map(|j| {
            engine
                .submit(&prepared, j.clone(), &mut rng)
                .expect("submit")
        })
        .collect();
    for (job, h) in jobs.iter().zip(handles) {
        let proofs = h
            .wait()
            .unwrap_or_else(|e| panic!("{}: job: {e}", backend.name()));
        let inputs: Vec<Vec<Scalar>> = job.iter().map(SuiteCircuit::public_inputs).collect();
        assert!(
            prover_core::verify_proofs_batch(&pvk, &proofs, &inputs, &mut rng).expect("verify"),
            "{}: a proof did not verify",
            backend.name()
        );
    }
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
    assert_eq!(stats.devices.len(), devices.len());
    let done: u64 = stats.devices.iter().map(|d| d.partitions).sum();
    assert_eq!(done + stats.fallback_partitions, 12, "{stats:?}");
    // Every proof was checked before it was reported, and a correct backend's all pass.
    assert_eq!(stats.partitions_verified, 12, "{stats:?}");
    assert_eq!(stats.partitions_rejected, 0, "{stats:?}");
    // Twin: parameters prepared by another backend are refused at submit.
    if backend.name() != "cpu" {
        let other = cpu_prepared(prepared.params());
        let engine: Engine<SuiteCircuit, CpuSynthesizer> = Engine::new(
            Config::default(),
            CpuSynthesizer,
            backend.clone(),
            Arc::new(CpuBackend),
        )
        .expect("engine");
        assert!(matches!(
            engine.submit(&other, vec![shape.clone()], &mut rng),
            Err(Error::BackendMismatch { .. })
        ));
    }
}

/// Expands to the suite's `#[test]` functions for a backend and its finalizer (expressions
/// evaluated once per test), on every device of the backend or those `PROOFLINE_TEST_DEVICES`
/// names (the tests read their environment: [`SuiteEnv`]).
/// `conformance_tests!(backend, finalizer)` for a backend with no injected fault;
/// `conformance_tests!(backend, finalizer, injected)` for one that hands back on purpose.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:expr, $finalizer:expr) => {
        $crate::conformance_tests!($backend, $finalizer, $crate::HandBacks::None);
    };
    ($backend:expr, $finalizer:expr, injected) => {
        $crate::conformance_tests!($backend, $finalizer, $crate::HandBacks::Injected);
    };
    ($backend:expr, $finalizer:expr, $hand_backs:expr) => {
        /// The suite's settings, from this test binary's environment.
        fn conformance_env() -> $crate::SuiteEnv {
            $crate::SuiteEnv::from_lookup(|name| ::std::env::var(name).ok())
        }

        #[test]
        fn conformance_accelerate_matches_cpu() {
            let backend = $backend;
            let devices = conformance_env().devices_of(&backend);
            $crate::check_accelerate_with(&backend, &devices, $hand_backs);
        }

        #[test]
        fn conformance_wrong_shape_is_handed_back() {
            let backend = $backend;
            $crate::check_wrong_shape(&backend, &conformance_env().devices_of(&backend));
        }

        #[test]
        fn conformance_proofs_match_cpu_bytes_and_bellperson_verifies() {
            let backend = $backend;
            let devices = conformance_env().devices_of(&backend);
            $crate::check_proofs_with(&backend, &devices, &$finalizer, $hand_backs);
        }

        #[test]
        fn conformance_engine_proves_on_every_device() {
            let backend = ::std::sync::Arc::new($backend);
            let devices = conformance_env().devices_of(&*backend);
            $crate::check_engine(backend, &devices, ::std::sync::Arc::new($finalizer));
        }
    };
}
