//! The pipeline engine: jobs of partitions through synthesis, the accelerator and the
//! finalizer, with synthesis permits, a bounded accelerator queue, an optional byte budget,
//! device routing with a bounded fallback, and every partition in the stage ledger.
//!
//! Threads and pools, each named so that a profile shows which stage burns the cores:
//! - `proofline-dispatch` grants synthesis permits (`synthesis_workers`) oldest job first, lowest partition
//!   first, and reserves each partition's bytes from the budget before its synthesis starts;
//! - synthesis runs on the `proofline-synth-<i>` threads, one task per partition, its parallel
//!   parts in the `proofline-synth-par` rayon pool (as many threads each: [`crate::parallel`]
//!   says why the tasks are not the pool's own);
//! - `proofline-handoff` moves synthesized partitions into the accelerator queue in order, one
//!   of `queue_depth` slots each; with [`ReleasePolicy::AfterHandoff`] the synthesis permit is
//!   dropped only then, so `Synthesizing + AwaitingAccelerator <= pw + queue_depth`;
//! - `proofline-accel-<device>-<slot>`: `gpu_workers` workers per device, each with the worker
//!   context its backend created once on that thread ([`accelerator`] routes hand-backs);
//! - `proofline-fallback-<i>` runs handed-back partitions on the fallback backend, at most
//!   `fallback_depth` partitions in that stage;
//! - finalizers run on the `proofline-finalize` pool;
//! - `proofline-dealloc` drops the remains off the hot path.
//!
//! Module map: [`config`] (knobs, validation, figures), `job` (a job's state and handle),
//! `pipeline` (dispatch, synthesis, hand-off), `synth_threads` (the synthesis threads),
//! [`accelerator`] (device workers, routing, fallback pool), `finalize` (finalizer pool,
//! deallocation).

pub mod accelerator;
pub mod config;
mod fallback;
mod finalize;
mod job;
mod pipeline;
mod synth_threads;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar;

use crate::accounting::ledger::StageLedger;
use crate::error::{Error, Result};
use crate::groth16::params::Parameters;
use crate::groth16::verify::{prepare_verifying_key, PreparedVerifyingKey};
use crate::runtime::budget::MemoryBudget;
use crate::runtime::permit::{Permit, Semaphore};
use crate::stages::{Accelerator, Finalizer, PreparedParameters, Randomness};
use crate::stages::{SynthesizedPartition, Synthesizer};

use accelerator::DeviceState;
pub use config::{
    estimate_buffers, estimate_bytes, estimate_partition_bytes, Config, DeviceStats, EngineStats,
    PartitionBytes, ReleasePolicy, UrgentLane, MAX_SLOTS, MAX_THREADS,
};
pub use job::{Hold, JobCanceller, JobHandle, JobTimes};
use job::{InFlight, JobState};

/// Indices of [`Core::stage_nanos`].
const SYNTHESIS: usize = 0;
const ACCELERATOR: usize = 1;
const FALLBACK: usize = 2;
const FINALIZE: usize = 3;
const VERIFY: usize = 4;

fn secs(nanos: &AtomicU64) -> f64 {
    nanos.load(Ordering::Acquire) as f64 / 1e9
}

fn add_time(nanos: &AtomicU64, since: Instant) {
    nanos.fetch_add(since.elapsed().as_nanos() as u64, Ordering::AcqRel);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A partition in the accelerator queue, holding one of its slots until a worker has moved it
/// to `OnAccelerator`.
struct Queued {
    inflight: InFlight,
    partition: SynthesizedPartition,
    slot: Permit,
}

/// The engine's state that does not depend on the circuit type.
struct Core {
    config: Config,
    /// Whether the engine's backend is the host reference ([`Accelerator::is_reference`]).
    reference: bool,
    finalizer: Arc<dyn Finalizer>,
    ledger: StageLedger,
    budget: Option<MemoryBudget>,
    /// Synthesis permits (`synthesis_workers`).
    permits: Semaphore,
    /// Accelerator queue slots (`queue_depth`).
    slots: Semaphore,
    /// Fallback pool slots (`fallback_depth`), with a fallback backend.
    fallback_slots: Option<Semaphore>,
    devices: Vec<DeviceState>,
    shutdown: AtomicBool,
    /// Hand-off pumps still running (none: no partition will be queued any more); set by
    /// `start` before any pump or worker runs.
    pumps_left: AtomicUsize,
    /// Partitions queued or on a worker, not yet routed on.
    accelerating: AtomicUsize,
    /// Partitions waiting in a device's retry channel.
    retries: AtomicUsize,
    /// Nanoseconds in synthesis, on the devices, on the fallback, in the finalizer, checking
    /// proofs.
    stage_nanos: [AtomicU64; 5],
    fallback_partitions: AtomicU64,
    /// Partition proofs checked, and those that failed the check.
    verified: AtomicU64,
    rejected: AtomicU64,
    settled: Arc<AtomicU64>,
    first_submit: Mutex<Option<Instant>>,
}

impl Core {
    fn none_in_service(&self) -> bool {
        self.devices.iter().all(|d| !d.in_service())
    }

    fn routing_done(&self) -> bool {
        self.accelerating.load(Ordering::SeqCst) == 0 && self.retries.load(Ordering::SeqCst) == 0
    }
}

struct PendingJob<C> {
    state: Arc<JobState>,
    priority: i32,
    circuits: VecDeque<(usize, C)>,
    /// What the job keeps until its last partition has left synthesis: one share here while
    /// partitions wait, one with each partition in synthesis.
    hold: Option<Arc<Hold>>,
}

struct Shared<C, S> {
    core: Arc<Core>,
    synthesizer: S,
    pending: Mutex<VecDeque<PendingJob<C>>>,
    pending_cv: Condvar,
}

/// The pipeline engine for circuits of type `C`, synthesized by `S`.
pub struct Engine<C, S> {
    shared: Arc<Shared<C, S>>,
    backend: Arc<dyn Accelerator>,
    next_job: AtomicU64,
    /// The fallback backend's preparation of each parameter set seen (at most one each).
    fallback_prepared: Mutex<Vec<PreparedParameters>>,
    /// The prepared verifying key of each parameter set seen (with verification on).
    verifiers: Mutex<Vec<(Arc<Parameters>, Arc<PreparedVerifyingKey>)>>,
    threads: Vec<JoinHandle<()>>,
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| Error::Resource {
            what: "an engine thread",
            detail: e.to_string(),
        })
}

/// Waits for the worker-context results of `n` threads: the first error is `Engine::new`'s.
fn await_ready(rx: &mpsc::Receiver<Result<()>>, n: usize) -> Result<()> {
    for _ in 0..n {
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(Error::Resource {
                    what: "an accelerator worker",
                    detail: "a worker thread ended before reporting".into(),
                })
            }
        }
    }
    Ok(())
}

fn pool(name: &'static str, n: usize) -> Result<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .map(Arc::new)
        .map_err(|e| Error::Resource {
            what: "an engine thread pool",
            detail: e.to_string(),
        })
}

impl<C, S> Engine<C, S>
where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    /// Starts an engine: validates `config` against `backend`, starts every thread, and creates
    /// each accelerator worker's context on its thread (an error there is returned here).
    pub fn new(
        config: Config,
        synthesizer: S,
        backend: Arc<dyn Accelerator>,
        finalizer: Arc<dyn Finalizer>,
    ) -> Result<Self> {
        config.validate(&*backend)?;
        let config_urgent = config.urgent;
        let budget = match config.mem_budget {
            Some(size) => Some(MemoryBudget::new(size.resolve()?)),
            None => None,
        };
        let synth_pool = pool("proofline-synth-par", config.synthesis_threads)?;
        let finalize_pool = pool("proofline-finalize", config.finalizer_threads)?;
        let devices = config
            .devices
            .iter()
            .map(|&d| DeviceState::new(d, backend.device_name(d), config.gpu_workers))
            .collect();
        let core = Arc::new(Core {
            permits: Semaphore::new(config.synthesis_workers as u64),
            slots: Semaphore::new(config.queue_depth as u64),
            fallback_slots: config
                .fallback
                .as_ref()
                .map(|_| Semaphore::new(config.fallback_depth as u64)),
            devices,
            reference: backend.is_reference(),
            finalizer,
            ledger: StageLedger::new(),
            budget,
            shutdown: AtomicBool::new(false),
            pumps_left: AtomicUsize::new(0),
            accelerating: AtomicUsize::new(0),
            retries: AtomicUsize::new(0),
            stage_nanos: Default::default(),
            fallback_partitions: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            settled: Arc::new(AtomicU64::new(0)),
            first_submit: Mutex::new(None),
            config,
        });
        let shared = Arc::new(Shared {
            core: core.clone(),
            synthesizer,
            pending: Mutex::new(VecDeque::new()),
            pending_cv: Condvar::new(),
        });
        let mut engine = Engine {
            shared: shared.clone(),
            backend: backend.clone(),
            next_job: AtomicU64::new(0),
            fallback_prepared: Mutex::new(Vec::new()),
            verifiers: Mutex::new(Vec::new()),
            threads: Vec::new(),
        };
        // On an error, dropping the engine stops what did start.
        let urgent_pool = match config_urgent {
            Some(lane) => Some(pool("proofline-urgent-par", lane.workers)?),
            None => None,
        };
        engine.start(synth_pool, urgent_pool, finalize_pool)?;
        Ok(engine)
    }

    fn start(
        &mut self,
        synth_pool: Arc<rayon::ThreadPool>,
        urgent_pool: Option<Arc<rayon::ThreadPool>>,
        finalize_pool: Arc<rayon::ThreadPool>,
    ) -> Result<()> {
        let core = self.shared.core.clone();
        let (handoff_tx, handoff_rx) = mpsc::channel();
        let (queue_tx, queue_rx) = crossbeam_channel::bounded(core.config.queue_depth);
        let mut handoffs = pipeline::Handoffs {
            normal: handoff_tx,
            urgent: None,
        };
        let mut pumps = vec![(
            "proofline-handoff",
            core.slots.clone(),
            handoff_rx,
            queue_tx,
        )];
        let mut queues = vec![queue_rx];
        // The urgent lane: its own synthesis permits and threads, hand-off pump and queue (taken
        // first by the workers).
        let mut urgent = None;
        if let (Some(lane), Some(pool)) = (core.config.urgent, urgent_pool) {
            let (tx, rx) = mpsc::channel();
            let (queue_tx, queue_rx) = crossbeam_channel::bounded(lane.workers);
            handoffs.urgent = Some(tx);
            let slots = Semaphore::new(lane.workers as u64);
            pumps.push(("proofline-handoff-urgent", slots, rx, queue_tx));
            queues.insert(0, queue_rx);
            urgent = Some((pool, Semaphore::new(lane.workers as u64)));
        }
        let (dealloc_tx, dealloc_rx) = mpsc::channel::<finalize::DeallocItem>();
        let (ready_tx, ready_rx) = mpsc::channel();
        // The fallback pool's feed: its senders go to the device workers only, so the pool
        // drains and stops after them.
        let (fallback_tx, fallback_rx) = crossbeam_channel::unbounded();
        // One dispatcher per lane, each with its synthesis threads (they stop after their
        // dispatcher, which holds their feed).
        let mut lanes = vec![(
            "proofline-dispatch",
            "proofline-synth",
            synth_pool,
            pipeline::Lane {
                permits: core.permits.clone(),
                urgent_only: false,
                defer_to: urgent.as_ref().map(|(_, permits)| permits.clone()),
                handoffs: handoffs.clone(),
            },
        )];
        if let Some((pool, permits)) = urgent {
            lanes.push((
                "proofline-dispatch-urgent",
                "proofline-synth-urgent",
                pool,
                pipeline::Lane {
                    permits,
                    urgent_only: true,
                    defer_to: None,
                    handoffs: handoffs.clone(),
                },
            ));
        }
        drop(handoffs);
        for (name, threads, pool, lane) in lanes {
            let shared = self.shared.clone();
            let mut drivers = Vec::new();
            let tasks = synth_threads::start(threads, pool, &mut drivers)?;
            self.threads.push(spawn(name.into(), move || {
                pipeline::dispatch(shared, lane, tasks)
            })?);
            self.threads.append(&mut drivers);
        }
        // Set before any pump or worker runs.
        core.pumps_left.store(pumps.len(), Ordering::SeqCst);
        for (name, slots, handoff, queue) in pumps {
            let core = core.clone();
            self.threads.push(spawn(name.into(), move || {
                pipeline::pump(core.clone(), slots, handoff, queue);
                core.pumps_left.fetch_sub(1, Ordering::SeqCst);
            })?);
        }
        let mut expected = 0;
        for d in 0..core.devices.len() {
            let device = core.devices[d].device;
            for slot in 0..core.config.gpu_workers {
                let (core, backend, queues, pool, dealloc, ready) = (
                    core.clone(),
                    self.backend.clone(),
                    queues.clone(),
                    finalize_pool.clone(),
                    dealloc_tx.clone(),
                    ready_tx.clone(),
                );
                let fallback = core.config.fallback.is_some().then(|| fallback_tx.clone());
                self.threads.push(spawn(
                    format!("proofline-accel-{device}-{slot}"),
                    move || match backend.worker(device, slot) {
                        Ok(worker) => {
                            let _ = ready.send(Ok(()));
                            drop(ready);
                            accelerator::device_worker(
                                core, d, slot, worker, queues, fallback, pool, dealloc,
                            )
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e));
                        }
                    },
                )?);
                expected += 1;
            }
        }
        drop(fallback_tx);
        if let Some(fb) = core.config.fallback.clone() {
            for i in 0..core.config.fallback_threads {
                let (core, fb, items, pool, dealloc, ready) = (
                    core.clone(),
                    fb.clone(),
                    fallback_rx.clone(),
                    finalize_pool.clone(),
                    dealloc_tx.clone(),
                    ready_tx.clone(),
                );
                self.threads
                    .push(spawn(
                        format!("proofline-fallback-{i}"),
                        move || match fb.worker(0, i) {
                            Ok(worker) => {
                                let _ = ready.send(Ok(()));
                                drop(ready);
                                accelerator::fallback_worker(core, worker, items, pool, dealloc)
                            }
                            Err(e) => {
                                let _ = ready.send(Err(e));
                            }
                        },
                    )?);
                expected += 1;
            }
        }
        drop((dealloc_tx, ready_tx, queues, fallback_rx));
        self.threads
            .push(spawn("proofline-dealloc".into(), move || {
                for (remains, inflight) in dealloc_rx {
                    drop(remains);
                    drop(inflight);
                }
            })?);
        await_ready(&ready_rx, expected)
    }

    /// The engine's stage ledger.
    pub fn ledger(&self) -> &StageLedger {
        &self.shared.core.ledger
    }

    /// The budget, if one is set.
    pub fn budget(&self) -> Option<&MemoryBudget> {
        self.shared.core.budget.as_ref()
    }

    /// Prepares `params` with the engine's backend, its resident buffers registered in the
    /// engine's ledger.
    pub fn prepare(&self, params: Arc<Parameters>) -> Result<PreparedParameters> {
        self.backend.prepare(params, self.ledger())
    }

    /// The fallback backend's preparation of `params`: made once per parameter set and reused
    /// by every job that proves with it.
    fn fallback_for(&self, params: &Arc<Parameters>) -> Result<Option<PreparedParameters>> {
        let Some(fb) = &self.shared.core.config.fallback else {
            return Ok(None);
        };
        let mut cache = lock(&self.fallback_prepared);
        if let Some(p) = cache.iter().find(|p| Arc::ptr_eq(p.params(), params)) {
            return Ok(Some(p.clone()));
        }
        let p = fb.prepare(params.clone(), self.ledger())?;
        cache.push(p.clone());
        Ok(Some(p))
    }

    /// The prepared verifying key of `params`, made once per parameter set; `None` with
    /// verification off.
    fn verifier_for(&self, params: &Arc<Parameters>) -> Option<Arc<PreparedVerifyingKey>> {
        if !self.shared.core.config.verify {
            return None;
        }
        let mut cache = lock(&self.verifiers);
        if let Some((_, v)) = cache.iter().find(|(p, _)| Arc::ptr_eq(p, params)) {
            return Some(v.clone());
        }
        let v = Arc::new(prepare_verifying_key(&params.vk));
        cache.push((params.clone(), v.clone()));
        Some(v)
    }

    /// Submits a job: one partition per circuit, proven with `prepared` (which must come from
    /// the engine's backend); its randomisers are drawn now. Each proof is checked against the
    /// public inputs its own witness holds; [`Engine::submit_statement`] checks them against
    /// the caller's.
    pub fn submit(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        self.submit_job(prepared, circuits, None, 0, None, rng)
    }

    /// Submits a job like [`Engine::submit`], scheduled by `priority`: at each partition
    /// boundary (a synthesis permit granted) the next partition is taken from the pending job
    /// of the highest priority, and among equal priorities from the oldest. Partitions already
    /// synthesized keep their place in the accelerator queue. [`Engine::submit`] is priority 0.
    pub fn submit_with_priority(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        priority: i32,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        self.submit_job(prepared, circuits, None, priority, None, rng)
    }

    /// Submits a job like [`Engine::submit_with_priority`] that keeps `hold` (its parsed input,
    /// say, with that input's share of a budget) until the last of its partitions has left
    /// synthesis, then drops it: after that the job needs nothing its circuits held, though
    /// its partitions are still on their way to proofs.
    pub fn submit_holding(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        priority: i32,
        hold: Hold,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        self.submit_job(prepared, circuits, None, priority, Some(hold), rng)
    }

    /// The host bytes one partition proven with `prepared` reserves from the budget while it
    /// is in flight (the estimate every partition of such a job is admitted with).
    pub fn partition_bytes(&self, prepared: &PreparedParameters) -> u64 {
        let (abc, rest) = self.estimate(prepared);
        abc + rest
    }

    /// `(abc, rest)`: the host bytes of one partition given back when its accelerator stage
    /// ends (the backend's host buffers are reserved with a/b/c and released with them), and
    /// the rest.
    fn estimate(&self, prepared: &PreparedParameters) -> (u64, u64) {
        let (abc, rest) = estimate_partition_bytes(prepared.params());
        let backend = self.backend.partition_host_bytes(prepared.params());
        (abc + backend, rest)
    }

    /// Submits a job with its statement: `inputs[k]` are the public inputs (without the constant
    /// ONE) that partition `k`'s proof must prove. A partition whose witness holds other inputs
    /// fails right after synthesis with [`Error::StatementMismatch`] (the circuit's data and the
    /// statement disagree: neither a device nor the parameters are at fault), and every proof is
    /// checked against the statement's inputs.
    pub fn submit_statement(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        inputs: Vec<Vec<Scalar>>,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        if inputs.len() != circuits.len() {
            return Err(Error::InvalidConfig {
                what: "job",
                detail: format!(
                    "{} partitions with {} statements: give one per partition",
                    circuits.len(),
                    inputs.len()
                ),
            });
        }
        self.submit_job(prepared, circuits, Some(inputs), 0, None, rng)
    }

    fn submit_job(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        statement: Option<Vec<Vec<Scalar>>>,
        priority: i32,
        hold: Option<Hold>,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        prepared.check_backend(self.backend.name())?;
        let fallback = self.fallback_for(prepared.params())?;
        let randomness: Vec<Randomness> =
            circuits.iter().map(|_| Randomness::random(rng)).collect();
        let core = &self.shared.core;
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(JobState {
            id: self.next_job.fetch_add(1, Ordering::AcqRel),
            prepared: prepared.clone(),
            fallback,
            verifier: self.verifier_for(prepared.params()),
            statement,
            urgent: core
                .config
                .urgent
                .is_some_and(|l| priority >= l.min_priority),
            estimate: self.estimate(prepared),
            proofs: Mutex::new(vec![None; circuits.len()]),
            error: Mutex::new(None),
            settled: AtomicUsize::new(0),
            engine_settled: core.settled.clone(),
            cancelled: AtomicBool::new(false),
            done: Mutex::new(Some(tx)),
            synthesis_nanos: AtomicU64::new(0),
            accelerator_nanos: AtomicU64::new(0),
            randomness,
        });
        if circuits.is_empty() {
            let _ = lock(&state.done).take().map(|tx| tx.send(Ok(Vec::new())));
        } else {
            lock(&core.first_submit).get_or_insert_with(Instant::now);
            lock(&self.shared.pending).push_back(PendingJob {
                state: state.clone(),
                priority,
                circuits: circuits.into_iter().enumerate().collect(),
                hold: hold.map(Arc::new),
            });
            self.shared.pending_cv.notify_all();
        }
        Ok(JobHandle { state, rx })
    }

    /// Figures so far: busy fractions per worker and per device, stage times.
    pub fn stats(&self) -> EngineStats {
        let core = &self.shared.core;
        let since = *lock(&core.first_submit);
        let wall = since.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let fraction = |nanos: &AtomicU64| {
            if wall > 0.0 {
                (secs(nanos) / wall).min(1.0)
            } else {
                0.0
            }
        };
        let devices: Vec<DeviceStats> = core
            .devices
            .iter()
            .map(|d| {
                let busy: Vec<f64> = d.busy_nanos.iter().map(fraction).collect();
                DeviceStats {
                    device: d.device,
                    name: d.name.clone(),
                    workers: busy.len(),
                    busy_fraction: busy.iter().sum::<f64>() / busy.len().max(1) as f64,
                    accelerator_seconds: d.busy_nanos.iter().map(secs).sum(),
                    partitions: d.partitions.load(Ordering::Acquire),
                    failures: d.failures.load(Ordering::Acquire),
                    rejected: d.rejected.load(Ordering::Acquire),
                    retried: d.retried.load(Ordering::Acquire),
                    in_service: d.in_service(),
                }
            })
            .collect();
        EngineStats {
            accelerator_busy: core
                .devices
                .iter()
                .flat_map(|d| d.busy_nanos.iter().map(fraction))
                .collect(),
            devices,
            synthesis_seconds: secs(&core.stage_nanos[SYNTHESIS]),
            accelerator_seconds: secs(&core.stage_nanos[ACCELERATOR]),
            fallback_seconds: secs(&core.stage_nanos[FALLBACK]),
            fallback_partitions: core.fallback_partitions.load(Ordering::Acquire),
            finalize_seconds: secs(&core.stage_nanos[FINALIZE]),
            partitions_settled: core.settled.load(Ordering::Acquire),
            partitions_verified: core.verified.load(Ordering::Acquire),
            partitions_rejected: core.rejected.load(Ordering::Acquire),
            verify_seconds: secs(&core.stage_nanos[VERIFY]),
        }
    }

    /// Finishes every submitted job, stops the threads and returns the final figures. The
    /// ledger is back to zero when this returns (resident entries aside: they leave with the
    /// prepared parameters).
    pub fn shutdown(mut self) -> EngineStats {
        self.stop(false);
        self.stats()
    }
}

impl<C, S> Engine<C, S> {
    /// Stops the threads; with `cancel`, jobs not started are cancelled first.
    fn stop(&mut self, cancel: bool) {
        if cancel {
            for job in lock(&self.shared.pending).iter() {
                job.state.cancelled.store(true, Ordering::Release);
            }
        }
        self.shared.core.shutdown.store(true, Ordering::Release);
        self.shared.pending_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<C, S> Drop for Engine<C, S> {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            // Dropped without shutdown: cancel what has not started, then wait for the threads.
            self.stop(true);
        }
    }
}
