//! The engine with several devices: routing, per-device figures, retries on another device,
//! the bounded fallback, devices taken out of service, and prepared parameters checked at
//! submit. Emulated devices (the fault-injecting test backend), no sleeps.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use blstrs::Scalar;
use proofline_tests::{prepare_cpu, Gate, RandomCircuit, TestBackend};
use prover_core::accounting::ledger::{Memory, ResidentKind, Stage};
use prover_core::runtime::budget::BudgetSize;
use prover_core::runtime::engine::estimate_partition_bytes;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proofs_batch, Accelerator, Config,
    CpuSynthesizer, Engine, EngineStats, Error, Parameters,
};

const SHAPE: u64 = 41;

fn params() -> Arc<Parameters> {
    Arc::new(generate_seeded_parameters(RandomCircuit::new(2, 6, SHAPE, 0).shape(), SHAPE).unwrap())
}

fn circuit(job: usize, p: usize) -> RandomCircuit {
    RandomCircuit::new(2, 6, SHAPE, (job * 1000 + p) as u64 + 1)
}

type TestEngine = Engine<RandomCircuit, CpuSynthesizer>;

/// An engine on `backend`, CPU synthesis and finalizer.
fn engine(config: Config, backend: impl Accelerator + 'static) -> prover_core::Result<TestEngine> {
    Engine::new(
        config,
        CpuSynthesizer,
        Arc::new(backend),
        Arc::new(CpuBackend),
    )
}

/// Proves `jobs` jobs of `partitions` on `backend` with `config`; checks every proof and that
/// the ledger balances; returns the figures and the ledger's final snapshot.
fn run(
    backend: TestBackend,
    config: Config,
    jobs: usize,
    partitions: usize,
) -> (EngineStats, prover_core::accounting::ledger::Snapshot) {
    let params = params();
    let pvk = prepare_verifying_key(&params.vk);
    let engine = engine(config, backend).unwrap();
    let prepared = engine.prepare(params).unwrap();
    let handles: Vec<_> = (0..jobs)
        .map(|j| {
            let circuits = (0..partitions).map(|p| circuit(j, p)).collect();
            engine
                .submit(&prepared, circuits, &mut rand::thread_rng())
                .unwrap()
        })
        .collect();
    for (j, h) in handles.into_iter().enumerate() {
        let proofs = h.wait().unwrap_or_else(|e| panic!("job {j}: {e}"));
        let inputs: Vec<Vec<Scalar>> = (0..partitions)
            .map(|p| circuit(j, p).public_inputs())
            .collect();
        assert!(
            verify_proofs_batch(&pvk, &proofs, &inputs, &mut rand::thread_rng()).unwrap(),
            "job {j}"
        );
    }
    let ledger = engine.ledger().clone();
    let stats = engine.shutdown();
    let snap = ledger.snapshot();
    assert!(snap.is_balanced(), "{snap}");
    // The emulated devices' resident bases left with the prepared parameters.
    drop(prepared);
    assert_eq!(ledger.snapshot().resident_bytes(Memory::Device), 0);
    (stats, snap)
}

#[test]
fn two_devices_with_two_workers_each_share_the_work_and_report_apart() {
    let backend = TestBackend::with_devices(Gate::opened(), vec![], vec![None, None]);
    let config = Config {
        synthesis_workers: 3,
        queue_depth: 2,
        devices: vec![0, 1],
        gpu_workers: 2,
        synthesis_threads: 2,
        finalizer_threads: 1,
        ..Config::default()
    };
    let received = backend.received.clone();
    let (stats, snap) = run(backend, config, 3, 8);
    assert_eq!(stats.devices.len(), 2);
    assert_eq!(stats.accelerator_busy.len(), 4, "one figure per worker");
    let names: Vec<&str> = stats.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["test:0", "test:1"]);
    let total: u64 = stats.devices.iter().map(|d| d.partitions).sum();
    assert_eq!(total, 24);
    for (d, dev) in stats.devices.iter().enumerate() {
        assert_eq!(dev.workers, 2);
        assert_eq!(dev.failures, 0);
        assert!(dev.in_service);
        // What each device reports is what it received.
        assert_eq!(
            dev.partitions as usize,
            received[d].load(std::sync::atomic::Ordering::Acquire)
        );
        assert!(dev.busy_fraction >= 0.0 && dev.busy_fraction <= 1.0);
        if dev.partitions > 0 {
            assert!(dev.accelerator_seconds > 0.0, "{dev:?}");
        }
    }
    assert_eq!(stats.fallback_partitions, 0);
    // Device memory was registered per partition and released: peaks show, nothing is live.
    assert!(snap.device_bytes.peak > 0 && snap.device_bytes.live == 0);
    assert!(snap.resident(ResidentKind::DeviceBases).count.peak >= 2);
}

#[test]
fn a_hand_back_is_retried_on_the_other_healthy_device_first() {
    // Device 0 hands back every second partition; device 1 is healthy. A hand-back goes to
    // device 1 when its retry channel has room, to the fallback otherwise.
    let backend = TestBackend::with_devices(Gate::opened(), vec![], vec![Some(2), None]);
    let config = Config {
        devices: vec![0, 1],
        gpu_workers: 1,
        synthesis_threads: 2,
        finalizer_threads: 1,
        fallback: Some(Arc::new(CpuBackend)),
        max_device_failures: 1000,
        ..Config::default()
    };
    let (stats, snap) = run(backend, config, 2, 10);
    let (d0, d1) = (&stats.devices[0], &stats.devices[1]);
    assert_eq!(
        d0.partitions + d1.partitions + stats.fallback_partitions,
        20
    );
    assert!(d0.in_service && d1.in_service);
    assert_eq!(d1.failures, 0);
    // Every hand-back was retried on device 1 or run on the fallback, none lost...
    assert_eq!(
        d1.retried + stats.fallback_partitions,
        d0.failures,
        "{stats:?}"
    );
    // ...and the first one always finds room on device 1.
    assert!(d0.failures >= 1 && d1.retried >= 1, "{stats:?}");
    assert_eq!(d0.retried, 0, "device 1 never hands back");
    assert!(snap.stage(Stage::Fallback).count.peak >= 1);
    // Twin: with only the failing device and no fallback, its hand-backs fail their jobs.
    let params = params();
    let engine = engine(
        Config {
            max_device_failures: 1000,
            ..Config::default()
        },
        TestBackend::with_devices(Gate::opened(), vec![], vec![Some(2)]),
    )
    .unwrap();
    let prepared = engine.prepare(params).unwrap();
    let h = engine
        .submit(
            &prepared,
            (0..4).map(|p| circuit(9, p)).collect(),
            &mut rand::thread_rng(),
        )
        .unwrap();
    assert!(matches!(
        h.wait(),
        Err(Error::PartitionFailed {
            stage: "accelerator",
            ..
        })
    ));
}

#[test]
fn a_device_that_fails_everything_is_taken_out_and_the_fallback_stays_bounded() {
    let params = params();
    let (abc, rest) = estimate_partition_bytes(&params);
    let backend = TestBackend::with_devices(Gate::opened(), vec![], vec![Some(1)]);
    let pinned = backend.partition_host_bytes(&params);
    let budget = 3 * (abc + pinned + rest);
    let (pw, qd, depth) = (3, 2, 2);
    let config = Config {
        synthesis_workers: pw,
        queue_depth: qd,
        synthesis_threads: 2,
        finalizer_threads: 1,
        mem_budget: Some(BudgetSize::Bytes(budget)),
        fallback: Some(Arc::new(CpuBackend)),
        fallback_threads: 1,
        fallback_depth: depth,
        max_device_failures: 3,
        ..Config::default()
    };
    let (stats, snap) = run(backend, config, 3, 8);
    let dev = &stats.devices[0];
    // Three consecutive failures took it out; the rest went straight to the fallback.
    assert!(!dev.in_service);
    assert_eq!(dev.failures, 3);
    assert_eq!(dev.partitions, 0);
    assert_eq!(stats.fallback_partitions, 24);
    // The bounds: the fallback stage, the synthesis side, the budget.
    assert!(
        snap.stage(Stage::Fallback).count.peak as usize <= depth,
        "fallback peak {} > depth {depth}",
        snap.stage(Stage::Fallback).count.peak
    );
    assert!(snap.stage(Stage::Fallback).count.peak >= 1);
    assert!(snap.pre_accelerator.peak as usize <= pw + qd);
    assert!(
        snap.total_bytes.peak <= budget,
        "{} > {budget}",
        snap.total_bytes.peak
    );
    // The device's busy time is its own three failed calls; the proving was the fallback's.
    assert!(stats.fallback_seconds > 0.0);
    assert!(
        dev.accelerator_seconds < stats.fallback_seconds,
        "device {} s, fallback {} s",
        dev.accelerator_seconds,
        stats.fallback_seconds
    );
}

#[test]
fn every_nth_failure_with_the_fallback_loses_nothing() {
    let backend = TestBackend::with_devices(Gate::opened(), vec![], vec![Some(3)]);
    let config = Config {
        synthesis_workers: 2,
        synthesis_threads: 2,
        finalizer_threads: 1,
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let (stats, _) = run(backend, config, 4, 6);
    let dev = &stats.devices[0];
    assert!(dev.in_service, "never three failures in a row");
    assert_eq!(dev.partitions + stats.fallback_partitions, 24);
    assert_eq!(dev.failures, stats.fallback_partitions);
    assert!(stats.fallback_partitions >= 7, "{stats:?}");
}

#[test]
fn parameters_of_another_backend_are_refused_at_submit() {
    let params = params();
    let engine = engine(Config::default(), TestBackend::new(Gate::opened(), vec![])).unwrap();
    let cpu = prepare_cpu((*params).clone());
    match engine.submit(&cpu, vec![circuit(0, 0)], &mut rand::thread_rng()) {
        Err(Error::BackendMismatch { prepared, used }) => {
            assert_eq!((prepared.as_str(), used.as_str()), ("cpu", "test"))
        }
        other => panic!("{:?}", other.map(|h| h.id())),
    }
    // Twin: the engine's own preparation is accepted.
    let ours = engine.prepare(params).unwrap();
    assert!(engine
        .submit(&ours, vec![circuit(0, 0)], &mut rand::thread_rng())
        .unwrap()
        .wait()
        .is_ok());
    // And the state downcast names the mix-up instead of yielding nothing.
    assert!(matches!(
        cpu.state::<u32>(),
        Err(Error::BackendMismatch { .. })
    ));
}

#[test]
fn configurations_that_cannot_run_are_refused_before_anything_starts() {
    let bad = [
        Config {
            devices: vec![1],
            ..Config::default()
        },
        Config {
            devices: vec![],
            ..Config::default()
        },
        Config {
            devices: vec![0, 0],
            ..Config::default()
        },
        Config {
            synthesis_workers: 0,
            ..Config::default()
        },
        Config {
            synthesis_threads: 100_000,
            ..Config::default()
        },
        Config {
            fallback_depth: 0,
            ..Config::default()
        },
    ];
    for config in bad {
        let shown = format!("{config:?}");
        match engine(config, TestBackend::new(Gate::opened(), vec![])) {
            Err(Error::InvalidConfig { detail, .. }) => assert!(!detail.is_empty()),
            Err(e) => panic!("{shown}: {e}"),
            Ok(_) => panic!("{shown}: accepted"),
        }
    }
    // Twin: two devices exist on a two-device backend.
    let two = TestBackend::with_devices(Gate::opened(), vec![], vec![None, None]);
    assert!(engine(
        Config {
            devices: vec![1, 0],
            ..Config::default()
        },
        two,
    )
    .is_ok());
}

/// The CPU backend, counting its preparations.
struct CountingCpu(std::sync::atomic::AtomicUsize);

impl Accelerator for CountingCpu {
    fn name(&self) -> &str {
        "cpu"
    }
    fn device_count(&self) -> usize {
        1
    }
    fn prepare(
        &self,
        params: Arc<Parameters>,
        ledger: &prover_core::accounting::ledger::StageLedger,
    ) -> prover_core::Result<prover_core::PreparedParameters> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        CpuBackend.prepare(params, ledger)
    }
    fn worker(
        &self,
        device: usize,
        slot: usize,
    ) -> prover_core::Result<Box<dyn prover_core::AcceleratorWorker>> {
        CpuBackend.worker(device, slot)
    }
}

#[test]
fn the_fallback_is_prepared_once_per_parameter_set() {
    let fallback = Arc::new(CountingCpu(Default::default()));
    let engine = engine(
        Config {
            fallback: Some(fallback.clone()),
            ..Config::default()
        },
        TestBackend::with_devices(Gate::opened(), vec![], vec![Some(2)]),
    )
    .unwrap();
    let one = engine.prepare(params()).unwrap();
    let two = engine.prepare(params()).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|j| {
            let prepared = if j < 3 { &one } else { &two };
            engine
                .submit(
                    prepared,
                    (0..3).map(|p| circuit(j, p)).collect(),
                    &mut rand::thread_rng(),
                )
                .unwrap()
        })
        .collect();
    for h in handles {
        h.wait().unwrap();
    }
    // Three jobs on one parameter set, one on another: two preparations, not four.
    assert_eq!(fallback.0.load(std::sync::atomic::Ordering::Acquire), 2);
    assert!(engine.shutdown().fallback_partitions > 0);
}
