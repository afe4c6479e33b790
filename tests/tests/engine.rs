//! The pipeline engine: backpressure bounds, the after-synthesis pile-up, the budget, failures,
//! cancellation, order, and 1,000 partitions with none lost. Gates instead of sleeps.

use std::sync::{Arc, Mutex};

use backend_cpu::CpuBackend;
use blstrs::Scalar;
use proofline_tests::{wait_until, Behaviour, Gate, RandomCircuit, TestBackend};
use proptest::prelude::*;
use prover_core::accounting::ledger::{Stage, StageLedger};
use prover_core::bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use prover_core::runtime::budget::BudgetSize;
use prover_core::runtime::engine::estimate_partition_bytes;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proofs_batch, Accelerator, Config,
    CpuSynthesizer, Engine, Error, PreparedParameters, PreparedVerifyingKey, ReleasePolicy,
    Synthesizer, UrgentLane,
};

const INPUTS: usize = 2;
const CONSTRAINTS: usize = 6;
const SHAPE: u64 = 99;

fn setup() -> (PreparedParameters, PreparedVerifyingKey) {
    let params = generate_seeded_parameters(
        RandomCircuit::new(INPUTS, CONSTRAINTS, SHAPE, 0).shape(),
        SHAPE,
    )
    .unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    // Prepared by the test backend, as the engines below use it.
    let prepared = TestBackend::new(Gate::opened(), vec![])
        .prepare(Arc::new(params), &StageLedger::new())
        .unwrap();
    (prepared, pvk)
}

fn circuit(job: usize, p: usize) -> RandomCircuit {
    RandomCircuit::new(INPUTS, CONSTRAINTS, SHAPE, (job * 10_000 + p) as u64 + 1)
}

fn engine(
    config: Config,
    gate: Arc<Gate>,
    rules: Vec<(Scalar, Behaviour)>,
) -> Engine<RandomCircuit, CpuSynthesizer> {
    Engine::new(
        config,
        CpuSynthesizer,
        Arc::new(TestBackend::new(gate, rules)),
        Arc::new(CpuBackend),
    )
    .unwrap()
}

fn submit(
    engine: &Engine<RandomCircuit, CpuSynthesizer>,
    prepared: &PreparedParameters,
    job: usize,
    partitions: usize,
) -> prover_core::JobHandle {
    let circuits = (0..partitions).map(|p| circuit(job, p)).collect();
    engine
        .submit(prepared, circuits, &mut rand::thread_rng())
        .unwrap()
}

fn check_job(pvk: &PreparedVerifyingKey, job: usize, proofs: &[prover_core::Proof]) {
    let inputs: Vec<Vec<Scalar>> = (0..proofs.len())
        .map(|p| circuit(job, p).public_inputs())
        .collect();
    assert!(
        verify_proofs_batch(pvk, proofs, &inputs, &mut rand::thread_rng()).unwrap(),
        "job {job}"
    );
}

/// Runs `jobs` jobs of `partitions` with the gate closed until the pre-accelerator stages are
/// saturated, then open; returns the peak of Synthesizing + AwaitingAccelerator.
fn run(config: Config, jobs: usize, partitions: usize) -> u64 {
    let (prepared, pvk) = setup();
    let (pw, qd) = (config.synthesis_workers, config.queue_depth);
    let gate = Gate::closed();
    let engine = engine(config, gate.clone(), vec![]);
    let handles: Vec<_> = (0..jobs)
        .map(|j| submit(&engine, &prepared, j, partitions))
        .collect();
    let total = jobs * partitions;
    // Saturated: one partition at the gate, and everything else that may wait is waiting.
    let waiting = (total - 1).min(pw + qd);
    wait_until("the pipeline to fill", || {
        let s = engine.ledger().snapshot();
        gate.arrived() == 1 && s.pre_accelerator.live as usize == waiting
    });
    gate.open();
    for (j, h) in handles.into_iter().enumerate() {
        check_job(&pvk, j, &h.wait().unwrap());
    }
    let ledger = engine.ledger().clone();
    engine.shutdown();
    let s = ledger.snapshot();
    assert!(s.is_balanced(), "{s}");
    s.pre_accelerator.peak
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn after_handoff_bounds_the_synthesis_side(pw in 1usize..5, qd in 1usize..3, jobs in 1usize..4, partitions in 1usize..6) {
        let config = Config { synthesis_workers: pw, queue_depth: qd, synthesis_threads: 2, finalizer_threads: 1, ..Config::default() };
        let peak = run(config, jobs, partitions);
        prop_assert!(peak as usize <= pw + qd, "peak {} > pw {} + queue {}", peak, pw, qd);
    }

    #[test]
    fn the_budget_bounds_the_ledger(partitions_per_budget in 1u64..4, pw in 1usize..5, partitions in 2usize..8) {
        let (prepared, pvk) = setup();
        let (abc, rest) = estimate_partition_bytes(prepared.params());
        // The test backend's pinned staging is reserved with the partition.
        let pinned = TestBackend::new(Gate::opened(), vec![]).partition_host_bytes(prepared.params());
        let budget = partitions_per_budget * (abc + pinned + rest);
        let config = Config { synthesis_workers: pw, mem_budget: Some(BudgetSize::Bytes(budget)), synthesis_threads: 2, finalizer_threads: 1, ..Config::default() };
        let engine = engine(config, Gate::opened(), vec![]);
        let h = submit(&engine, &prepared, 0, partitions);
        check_job(&pvk, 0, &h.wait().unwrap());
        let ledger = engine.ledger().clone();
        engine.shutdown();
        let s = ledger.snapshot();
        prop_assert!(s.total_bytes.peak <= budget, "ledger peak {} > budget {}", s.total_bytes.peak, budget);
        prop_assert!(s.total_bytes.peak > 0);
        prop_assert!(s.is_balanced());
    }
}

/// A backend that gives a/b/c back (`PendingProof::spent`, the test backend, as the device
/// backends do) has them freed on the finalizer's thread: the ledger counts them into the
/// finalizing stage until then, and balances. Its twin, the CPU backend (which consumes them),
/// leaves nothing of them to finalizing (one partition, so that nothing else piles up there).
#[test]
fn given_back_abc_stays_in_the_ledger_until_the_finalizer_frees_it() {
    let (prepared, pvk) = setup();
    // One partition's a/b/c as synthesis leaves them (exact lengths; the estimate for the
    // budget is an upper bound: domain-sized).
    let abc = CpuSynthesizer
        .synthesize(circuit(0, 0))
        .unwrap()
        .evaluations
        .heap_bytes() as u64;
    assert!(abc > 0 && abc <= estimate_partition_bytes(prepared.params()).0);
    let config = || Config {
        synthesis_workers: 2,
        synthesis_threads: 2,
        finalizer_threads: 1,
        ..Config::default()
    };
    let engine = engine(config(), Gate::opened(), vec![]);
    check_job(&pvk, 0, &submit(&engine, &prepared, 0, 4).wait().unwrap());
    let ledger = engine.ledger().clone();
    engine.shutdown();
    let s = ledger.snapshot();
    assert!(s.is_balanced(), "{s}");
    assert!(s.stage(Stage::Finalizing).bytes.peak >= abc, "{s}");
    // Twin: the CPU backend.
    let params = prepared.params().clone();
    let cpu: Engine<RandomCircuit, CpuSynthesizer> = Engine::new(
        config(),
        CpuSynthesizer,
        Arc::new(CpuBackend),
        Arc::new(CpuBackend),
    )
    .unwrap();
    let cpu_prepared = cpu.prepare(params).unwrap();
    // One partition: several waiting for the one finalizer thread would add up their
    // assignments past one partition's a/b/c (seen under a loaded CI machine).
    check_job(&pvk, 0, &submit(&cpu, &cpu_prepared, 0, 1).wait().unwrap());
    let ledger = cpu.ledger().clone();
    cpu.shutdown();
    let s = ledger.snapshot();
    assert!(s.is_balanced(), "{s}");
    assert!(s.stage(Stage::Finalizing).bytes.peak < abc, "{s}");
}

#[test]
fn after_synthesis_piles_up_in_front_of_a_held_accelerator() {
    let (prepared, pvk) = setup();
    let (pw, qd, total) = (2, 1, 12);
    let gate = Gate::closed();
    let config = Config {
        synthesis_workers: pw,
        queue_depth: qd,
        release: ReleasePolicy::AfterSynthesis,
        synthesis_threads: 2,
        ..Config::default()
    };
    let engine = engine(config, gate.clone(), vec![]);
    let h = submit(&engine, &prepared, 0, total);
    // Every partition but the one at the gate ends up synthesized and waiting.
    wait_until("the pile-up", || {
        engine
            .ledger()
            .snapshot()
            .stage(Stage::AwaitingAccelerator)
            .count
            .live as usize
            == total - 1
    });
    let s = engine.ledger().snapshot();
    assert!(s.stage(Stage::AwaitingAccelerator).count.live as usize > pw + qd);
    assert!(s.pre_accelerator.peak as usize > pw + qd);
    gate.open();
    check_job(&pvk, 0, &h.wait().unwrap());
    let ledger = engine.ledger().clone();
    engine.shutdown();
    assert!(ledger.snapshot().is_balanced());
}

#[test]
fn failing_partitions_fail_their_job_only() {
    let (prepared, pvk) = setup();
    // Job 1 partition 2: unsatisfied (synthesis); job 2 partition 1: accelerator error;
    // job 3 partition 0: accelerator panic. Jobs 0 and 4 must complete.
    let rules = vec![
        (circuit(2, 1).public_inputs()[0], Behaviour::Fail),
        (circuit(3, 0).public_inputs()[0], Behaviour::Panic),
    ];
    let engine = engine(
        Config {
            synthesis_workers: 3,
            ..Config::default()
        },
        Gate::opened(),
        rules,
    );
    let handles: Vec<_> = (0..5)
        .map(|j| {
            let circuits = (0..4)
                .map(|p| {
                    let mut c = circuit(j, p);
                    c.break_last = j == 1 && p == 2;
                    c
                })
                .collect();
            engine
                .submit(&prepared, circuits, &mut rand::thread_rng())
                .unwrap()
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.wait()).collect();
    check_job(&pvk, 0, results[0].as_ref().unwrap());
    check_job(&pvk, 4, results[4].as_ref().unwrap());
    let failed = |j: usize| match &results[j] {
        Err(Error::PartitionFailed {
            partition,
            stage,
            source,
        }) => (*partition, *stage, source.to_string()),
        other => panic!("job {j}: {other:?}"),
    };
    let (p, stage, msg) = failed(1);
    assert_eq!((p, stage), (2, "synthesis"));
    assert!(msg.contains("not satisfied"), "{msg}");
    let (p, stage, msg) = failed(2);
    assert_eq!((p, stage), (1, "accelerator"));
    assert!(msg.contains("failing on purpose"), "{msg}");
    let (p, stage, msg) = failed(3);
    assert_eq!((p, stage), (0, "accelerator"));
    assert!(msg.contains("panicked"), "{msg}");
    let ledger = engine.ledger().clone();
    engine.shutdown();
    assert!(ledger.snapshot().is_balanced(), "{}", ledger.snapshot());
}

#[test]
fn the_fallback_retries_a_handed_back_partition() {
    let (prepared, pvk) = setup();
    let rules = vec![(circuit(0, 1).public_inputs()[0], Behaviour::Fail)];
    let config = Config {
        fallback: Some(Arc::new(CpuBackend)),
        ..Config::default()
    };
    let engine = engine(config, Gate::opened(), rules.clone());
    let h = submit(&engine, &prepared, 0, 3);
    check_job(&pvk, 0, &h.wait().unwrap());
    engine.shutdown();
    // Twin: without the fallback the same job fails.
    let engine = self::engine(Config::default(), Gate::opened(), rules);
    let h = submit(&engine, &prepared, 0, 3);
    assert!(matches!(
        h.wait(),
        Err(Error::PartitionFailed {
            partition: 1,
            stage: "accelerator",
            ..
        })
    ));
}

#[test]
fn a_partition_larger_than_the_budget_is_an_error_not_a_deadlock() {
    let (prepared, _) = setup();
    let (abc, rest) = estimate_partition_bytes(prepared.params());
    let config = Config {
        mem_budget: Some(BudgetSize::Bytes(abc + rest - 1)),
        ..Config::default()
    };
    let engine = engine(config, Gate::opened(), vec![]);
    let h = engine
        .submit(&prepared, vec![circuit(0, 0)], &mut rand::thread_rng())
        .unwrap();
    match h.wait() {
        Err(Error::PartitionFailed {
            stage: "budget",
            source,
            ..
        }) => assert!(matches!(*source, Error::OverBudget { .. })),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cancelling_a_job_frees_everything() {
    let (prepared, pvk) = setup();
    let gate = Gate::closed();
    let engine = engine(
        Config {
            synthesis_workers: 2,
            ..Config::default()
        },
        gate.clone(),
        vec![],
    );
    let doomed = submit(&engine, &prepared, 0, 6);
    let kept = submit(&engine, &prepared, 1, 3);
    wait_until("a partition at the gate", || gate.arrived() >= 1);
    doomed.cancel();
    gate.open();
    assert!(matches!(doomed.wait(), Err(Error::Cancelled)));
    check_job(&pvk, 1, &kept.wait().unwrap());
    let ledger = engine.ledger().clone();
    engine.shutdown();
    assert!(ledger.snapshot().is_balanced());
}

/// A circuit that logs the order in which synthesis starts, and may wait at a gate there.
#[derive(Clone)]
struct Logged {
    tag: (usize, usize),
    log: Arc<Mutex<Vec<(usize, usize)>>>,
    hold: Option<Arc<Gate>>,
    inner: RandomCircuit,
}

impl Circuit<Scalar> for Logged {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.log.lock().unwrap().push(self.tag);
        if let Some(g) = &self.hold {
            g.pass();
        }
        self.inner.synthesize(cs)
    }
}

fn logged_engine(gate: Arc<Gate>) -> Engine<Logged, CpuSynthesizer> {
    Engine::new(
        Config {
            synthesis_workers: 1,
            synthesis_threads: 1,
            ..Config::default()
        },
        CpuSynthesizer,
        Arc::new(TestBackend::new(gate, vec![])),
        Arc::new(CpuBackend),
    )
    .unwrap()
}

fn logged(
    job: usize,
    partitions: usize,
    log: &Arc<Mutex<Vec<(usize, usize)>>>,
    hold: Option<&Arc<Gate>>,
) -> Vec<Logged> {
    (0..partitions)
        .map(|p| Logged {
            tag: (job, p),
            log: log.clone(),
            hold: hold.filter(|_| p == 0).cloned(),
            inner: circuit(job, p),
        })
        .collect()
}

#[test]
fn permits_go_oldest_job_first_lowest_partition_first() {
    let (prepared, _) = setup();
    let log = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate::closed();
    let engine = logged_engine(gate.clone());
    let handles: Vec<_> = (0..3)
        .map(|j| {
            engine
                .submit(&prepared, logged(j, 4, &log, None), &mut rand::thread_rng())
                .unwrap()
        })
        .collect();
    gate.open();
    for h in handles {
        h.wait().unwrap();
    }
    let got = log.lock().unwrap().clone();
    let mut want = got.clone();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(got.len(), 12);
}

#[test]
fn a_higher_priority_job_takes_the_next_partition_boundary() {
    let (prepared, pvk) = setup();
    let log = Arc::new(Mutex::new(Vec::new()));
    // Job 0's first partition waits in synthesis (holding the only permit) while the others
    // are submitted: two of priority 0, then two of priority 5.
    let hold = Gate::closed();
    let engine = logged_engine(Gate::opened());
    let mut rng = rand::thread_rng();
    let first = engine
        .submit(&prepared, logged(0, 4, &log, Some(&hold)), &mut rng)
        .unwrap();
    wait_until("job 0's first partition in synthesis", || {
        hold.arrived() >= 1
    });
    let mut handles = vec![(0, first)];
    for (job, priority) in [(1, 0), (2, 5), (3, 5)] {
        let h = engine
            .submit_with_priority(&prepared, logged(job, 2, &log, None), priority, &mut rng)
            .unwrap();
        handles.push((job, h));
    }
    hold.open();
    for (job, h) in handles {
        check_job(&pvk, job, &h.wait().unwrap());
    }
    let got = log.lock().unwrap().clone();
    // The partition already started, then priority 5 in submission order, then the rest of
    // job 0 (older) before job 1.
    let want = vec![
        (0, 0),
        (2, 0),
        (2, 1),
        (3, 0),
        (3, 1),
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
        (1, 1),
    ];
    assert_eq!(got, want);
    // Its twin: all at priority 0, submission order holds.
    let log0 = Arc::new(Mutex::new(Vec::new()));
    let hold = Gate::closed();
    let first = engine
        .submit(&prepared, logged(0, 2, &log0, Some(&hold)), &mut rng)
        .unwrap();
    wait_until("the first partition in synthesis", || hold.arrived() >= 1);
    let second = engine
        .submit_with_priority(&prepared, logged(1, 2, &log0, None), 0, &mut rng)
        .unwrap();
    hold.open();
    first.wait().unwrap();
    second.wait().unwrap();
    assert_eq!(*log0.lock().unwrap(), vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
}

/// The jobs' letters in the order the accelerator took their (single) partitions.
fn taken_order(backend: &TestBackend, jobs: &[(char, usize)]) -> String {
    let first = |job: usize| circuit(job, 0).public_inputs()[0];
    backend
        .taken
        .lock()
        .unwrap()
        .iter()
        .map(|x| {
            jobs.iter()
                .find(|(_, j)| first(*j) == *x)
                .map_or('?', |(c, _)| *c)
        })
        .collect()
}

/// Opens its gate when dropped.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Three one-partition jobs of priority 0 fill the pipeline (one on the accelerator, behind a
/// closed gate; one in the queue; one synthesized and waiting for a queue slot, holding the only
/// synthesis permit), then a job of priority 10 arrives. Returns the order in which the
/// accelerator took the partitions: `U` is the urgent job.
fn urgent_behind_a_full_pipeline(urgent: Option<UrgentLane>) -> String {
    let (prepared, pvk) = setup();
    let gate = Gate::closed();
    let backend = Arc::new(TestBackend::new(gate.clone(), vec![]));
    let engine = Engine::new(
        Config {
            synthesis_workers: 1,
            synthesis_threads: 1,
            queue_depth: 1,
            urgent,
            ..Config::default()
        },
        CpuSynthesizer,
        backend.clone(),
        Arc::new(CpuBackend),
    )
    .unwrap();
    // Opens the gate if a check below fails, so that the engine's drop does not wait forever.
    let _open = OpenOnDrop(gate.clone());
    let handles: Vec<_> = (0..3)
        .map(|j| (j, submit(&engine, &prepared, j, 1)))
        .collect();
    wait_until("the pipeline full behind the closed gate", || {
        let s = engine.ledger().snapshot();
        gate.arrived() == 1 && s.stage(Stage::AwaitingAccelerator).count.live == 2
    });
    let urgent_job = 7;
    let priority = 10;
    let u = engine
        .submit_with_priority(
            &prepared,
            vec![circuit(urgent_job, 0)],
            priority,
            &mut rand::thread_rng(),
        )
        .unwrap();
    // With a lane the urgent partition is synthesized and queued at once; without one its
    // synthesis waits for the permit, which waits for the queue, which waits for the gate.
    if urgent.is_some_and(|l| priority >= l.min_priority) {
        wait_until("the urgent partition queued", || {
            engine
                .ledger()
                .snapshot()
                .stage(Stage::AwaitingAccelerator)
                .count
                .live
                == 3
        });
    }
    gate.open();
    check_job(&pvk, urgent_job, &u.wait().unwrap());
    for (j, h) in handles {
        check_job(&pvk, j, &h.wait().unwrap());
    }
    engine.shutdown();
    assert!(backend.taken.lock().unwrap().len() == 4);
    taken_order(&backend, &[('a', 0), ('b', 1), ('c', 2), ('U', urgent_job)])
}

#[test]
fn an_urgent_lane_takes_the_accelerator_next_past_a_full_pipeline() {
    let lane = UrgentLane {
        min_priority: 10,
        workers: 1,
    };
    // The partition already on the accelerator finishes first; the urgent one is next.
    assert_eq!(urgent_behind_a_full_pipeline(Some(lane)), "aUbc");
    // Twin without a lane: priority orders only the next synthesis, so the urgent job waits
    // for everything already synthesized.
    assert_eq!(urgent_behind_a_full_pipeline(None), "abcU");
    // A job below the lane's priority does not take it.
    let high = UrgentLane {
        min_priority: 11,
        workers: 1,
    };
    assert_eq!(urgent_behind_a_full_pipeline(Some(high)), "abcU");
}

/// A job of `partitions` holding a token, with one synthesis permit and one queue slot behind a
/// closed accelerator gate: whether the engine still held the token once the pipeline was full
/// (one partition on the accelerator, one queued, one synthesized and waiting for the slot),
/// and whether it held it after the job's proofs came back.
fn hold_behind_a_full_pipeline(partitions: usize) -> (bool, bool) {
    let (prepared, pvk) = setup();
    let gate = Gate::closed();
    let engine = engine(
        Config {
            synthesis_workers: 1,
            synthesis_threads: 1,
            queue_depth: 1,
            ..Config::default()
        },
        gate.clone(),
        vec![],
    );
    let _open = OpenOnDrop(gate.clone());
    let token = Arc::new(());
    let circuits = (0..partitions).map(|p| circuit(0, p)).collect();
    let hold: prover_core::Hold = Box::new(token.clone());
    let handle = engine
        .submit_holding(&prepared, circuits, 0, hold, &mut rand::thread_rng())
        .unwrap();
    wait_until("the pipeline full behind the closed gate", || {
        let s = engine.ledger().snapshot();
        gate.arrived() == 1 && s.stage(Stage::AwaitingAccelerator).count.live == 2
    });
    // The job cannot have ended: its first partition is still at the gate.
    let held_while_full = Arc::strong_count(&token) > 1;
    gate.open();
    check_job(&pvk, 0, &handle.wait().unwrap());
    let held_after = Arc::strong_count(&token) > 1;
    engine.shutdown();
    (held_while_full, held_after)
}

#[test]
fn a_jobs_hold_is_let_go_when_its_last_partition_leaves_synthesis() {
    // Three partitions: all synthesized once the pipeline is full, so the hold is gone before
    // the job ends.
    assert_eq!(hold_behind_a_full_pipeline(3), (false, false));
    // Twin: a fourth partition still waits for the permit, so the hold is kept until it is
    // synthesized.
    assert_eq!(hold_behind_a_full_pipeline(4), (true, false));
}

#[test]
fn an_urgent_lane_of_no_workers_is_refused() {
    let backend = Arc::new(TestBackend::new(Gate::opened(), vec![]));
    let config = Config {
        urgent: Some(UrgentLane {
            min_priority: 1,
            workers: 0,
        }),
        ..Config::default()
    };
    let err = Engine::<RandomCircuit, CpuSynthesizer>::new(
        config.clone(),
        CpuSynthesizer,
        backend.clone(),
        Arc::new(CpuBackend),
    )
    .err()
    .expect("a lane of no workers is refused");
    assert!(
        err.to_string()
            .contains("urgent.workers is 0; it must be between 1 and"),
        "{err}"
    );
    // Twin: one worker starts.
    let one = Config {
        urgent: Some(UrgentLane {
            min_priority: 1,
            workers: 1,
        }),
        ..config
    };
    Engine::<RandomCircuit, CpuSynthesizer>::new(
        one,
        CpuSynthesizer,
        backend,
        Arc::new(CpuBackend),
    )
    .unwrap()
    .shutdown();
}

#[test]
fn a_thousand_partitions_none_lost_and_bounded() {
    let (prepared, pvk) = setup();
    let (pw, qd) = (4, 2);
    let config = Config {
        synthesis_workers: pw,
        queue_depth: qd,
        gpu_workers: 2,
        ..Config::default()
    };
    let engine = engine(config, Gate::opened(), vec![]);
    let sampler = prover_core::runtime::sampler::Sampler::start(
        engine.ledger().clone(),
        std::time::Duration::from_millis(2),
    );
    let handles: Vec<_> = (0..10)
        .map(|j| submit(&engine, &prepared, j, 100))
        .collect();
    for (j, h) in handles.into_iter().enumerate() {
        let proofs = h.wait().unwrap();
        assert_eq!(proofs.len(), 100);
        check_job(&pvk, j, &proofs);
    }
    let timeline = sampler.stop();
    let ledger = engine.ledger().clone();
    engine.shutdown();
    let s = ledger.snapshot();
    assert!(s.is_balanced());
    assert!(s.pre_accelerator.peak as usize <= pw + qd);
    assert!(s.stage(Stage::OnAccelerator).count.peak <= 2);
    for sample in &timeline {
        assert!(
            (sample.count(Stage::Synthesizing) + sample.count(Stage::AwaitingAccelerator)) as usize
                <= pw + qd
        );
    }
}

#[test]
fn the_cpu_quotient_s_growth_of_abc_to_the_domain_is_counted() {
    use proofline_workloads::circuits::DenseCircuit;
    use prover_core::accounting::ledger::BufferKind;
    // Peak of the CPU accelerator's host temporaries for one partition of `circuit`, and the
    // growth of its a/b/c to the domain (32 bytes a slot). Both circuits have a domain of 32.
    let run = |circuit: DenseCircuit| -> (u64, u64) {
        let shape = DenseCircuit::new(circuit.constraints(), 1, 5);
        let params = generate_seeded_parameters(shape, 5).unwrap();
        let pvk = prepare_verifying_key(&params.vk);
        let synthesized = CpuSynthesizer.synthesize(circuit.clone()).unwrap();
        let len = synthesized.evaluations.a.len() as u64;
        let growth = 3 * (params.domain_size() as u64 - len) * 32;
        let engine: Engine<DenseCircuit, CpuSynthesizer> = Engine::new(
            Config {
                synthesis_workers: 1,
                synthesis_threads: 1,
                finalizer_threads: 1,
                ..Config::default()
            },
            CpuSynthesizer,
            Arc::new(CpuBackend),
            Arc::new(CpuBackend),
        )
        .unwrap();
        let prepared = engine.prepare(Arc::new(params)).unwrap();
        let proofs = engine
            .submit(&prepared, vec![circuit.clone()], &mut rand::thread_rng())
            .unwrap()
            .wait()
            .unwrap();
        let inputs = vec![circuit.public_inputs()];
        assert!(verify_proofs_batch(&pvk, &proofs, &inputs, &mut rand::thread_rng()).unwrap());
        let ledger = engine.ledger().clone();
        engine.shutdown();
        let s = ledger.snapshot();
        assert!(s.is_balanced(), "{s}");
        (s.kind(BufferKind::BackendTemp).bytes.peak, growth)
    };
    // Besides the growth, the quotient's one twiddle table: half the domain of 32 scalars.
    let table = 16 * 32;
    // 20 chain constraints (and the input's): a domain of 32, a/b/c grown from their lengths.
    let (temp, growth) = run(DenseCircuit::new(20, 1, 5).with_witness(1));
    assert!(growth > 0);
    assert_eq!(temp, growth + table);
    // Twin: a circuit that fills its domain grows nothing and registers the table alone.
    let full = DenseCircuit::with_domain(5, 1, 5);
    let (temp, growth) = run(DenseCircuit::new(full.constraints(), 1, 5).with_witness(1));
    assert_eq!((temp, growth), (table, 0));
}

/// Where a synthesis ran: its body's thread (and whether that is a rayon worker) and the thread
/// of its parallel part.
#[derive(Debug, Clone)]
struct Ran {
    body: String,
    body_on_a_worker: bool,
    part: String,
}

/// The CPU synthesizer, recording where each synthesis and its parallel part ran.
struct Recording(Arc<Mutex<Vec<Ran>>>);

impl Synthesizer for Recording {
    fn synthesize<C: Circuit<Scalar>>(
        &self,
        circuit: C,
    ) -> prover_core::Result<prover_core::stages::SynthesizedPartition> {
        let name = || std::thread::current().name().unwrap_or("").to_string();
        let part = prover_core::parallel::install(|| {
            let (n, _) = rayon::join(name, || ());
            n
        });
        self.0.lock().unwrap().push(Ran {
            body: name(),
            body_on_a_worker: rayon::current_thread_index().is_some(),
            part,
        });
        CpuSynthesizer.synthesize(circuit)
    }
}

/// A partition's synthesis is not a task of the pool its parallel parts run in: a rayon worker
/// waiting for its part of a parallel loop takes queued work, which made a pre-compiled dense
/// 2^22 synthesis 2.5x slower with 8 in flight than with 4 on 16 cores.
#[test]
fn synthesis_runs_on_its_own_threads_and_its_parallel_parts_in_the_pool() {
    let (prepared, pvk) = setup();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let config = Config {
        synthesis_workers: 3,
        synthesis_threads: 2,
        ..Config::default()
    };
    let engine: Engine<RandomCircuit, Recording> = Engine::new(
        config,
        Recording(runs.clone()),
        Arc::new(TestBackend::new(Gate::opened(), vec![])),
        Arc::new(CpuBackend),
    )
    .unwrap();
    let h = engine
        .submit(
            &prepared,
            (0..6).map(|p| circuit(0, p)).collect(),
            &mut rand::thread_rng(),
        )
        .unwrap();
    check_job(&pvk, 0, &h.wait().unwrap());
    engine.shutdown();
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 6);
    for r in &runs {
        let body_thread = r
            .body
            .strip_prefix("proofline-synth-")
            .and_then(|i| i.parse::<usize>().ok());
        assert!(
            !r.body_on_a_worker && body_thread.is_some_and(|i| i < 2),
            "a synthesis ran on {r:?}, not on one of the 2 synthesis threads"
        );
        assert!(
            r.part.starts_with("proofline-synth-par-"),
            "a parallel part ran on {r:?}, not in the synthesis pool"
        );
    }
}
