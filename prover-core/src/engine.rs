//! The pipeline engine: jobs of partitions through synthesis, the accelerator and the
//! finalizer, with synthesis permits, a bounded accelerator queue, an optional byte budget, one
//! fallback retry, and every partition in the stage ledger.
//!
//! Threads and pools, each named so that a profile shows which stage burns the cores:
//! - a dispatcher grants synthesis permits (`pw`) oldest job first, lowest partition first, and
//!   reserves each partition's bytes from the budget before its synthesis starts;
//! - synthesis runs on the `proofline-synth` rayon pool, one task per partition;
//! - a hand-off pump moves synthesized partitions into the accelerator queue in order, taking one
//!   of `queue_depth` slots each; with `ReleasePolicy::AfterHandoff` the synthesis permit is
//!   dropped only then, so `Synthesizing + AwaitingAccelerator <= pw + queue_depth`;
//! - `gpu_workers` accelerator workers take partitions from the queue;
//! - finalizers run on the `proofline-finalize` pool;
//! - a deallocation thread drops the remains off the hot path.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar;

use crate::budget::{BudgetPermit, BudgetSize, MemoryBudget};
use crate::error::{Error, Result};
use crate::ledger::{BufferKind, PartitionToken, Stage, StageLedger};
use crate::params::Parameters;
use crate::proof::Proof;
use crate::stages::{Finalizer, GpuBackend, PendingProof, PreparedParameters, Randomness};
use crate::synthesize::{SynthesizedPartition, Synthesizer};

/// When a partition gives its synthesis permit back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleasePolicy {
    /// Once the accelerator queue has accepted the partition (the fix; default).
    #[default]
    AfterHandoff,
    /// As soon as synthesis ends: the published bug, kept to show its effect. Only the number of
    /// partitions submitted bounds how many then wait for the accelerator.
    AfterSynthesis,
}

impl ReleasePolicy {
    /// `after-handoff` / `after-synthesis`.
    pub fn name(self) -> &'static str {
        match self {
            ReleasePolicy::AfterHandoff => "after-handoff",
            ReleasePolicy::AfterSynthesis => "after-synthesis",
        }
    }
}

/// The engine's knobs.
#[derive(Clone)]
pub struct Config {
    /// Synthesis permits: partitions between the start of synthesis and the hand-off.
    pub pw: usize,
    /// When the permit is given back.
    pub release: ReleasePolicy,
    /// Slots of the accelerator queue (>= 1).
    pub queue_depth: usize,
    /// Accelerator workers (per device; one device for now).
    pub gpu_workers: usize,
    /// Threads of the finalizer pool (0: one per CPU).
    pub finalizer_threads: usize,
    /// Threads of the synthesis pool (0: one per CPU).
    pub synthesis_threads: usize,
    /// Optional byte budget for the partitions' buffers.
    pub mem_budget: Option<BudgetSize>,
    /// Where a partition that the backend hands back is retried once (`None`: no retry). Set it
    /// to the CPU backend (`backend_cpu::CpuBackend`) for the usual behaviour.
    pub fallback: Option<Arc<dyn GpuBackend>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pw: 4,
            release: ReleasePolicy::AfterHandoff,
            queue_depth: 1,
            gpu_workers: 1,
            finalizer_threads: 0,
            synthesis_threads: 0,
            mem_budget: None,
            fallback: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("pw", &self.pw)
            .field("release", &self.release)
            .field("queue_depth", &self.queue_depth)
            .field("gpu_workers", &self.gpu_workers)
            .field("finalizer_threads", &self.finalizer_threads)
            .field("synthesis_threads", &self.synthesis_threads)
            .field("mem_budget", &self.mem_budget)
            .field(
                "fallback",
                &self.fallback.as_ref().map(|b| b.name().to_string()),
            )
            .finish()
    }
}

impl Config {
    fn validate(&self) -> Result<()> {
        let bad = |detail: &str| {
            Err(Error::Malformed {
                what: "engine config",
                detail: detail.into(),
            })
        };
        if self.pw == 0 {
            return bad("pw must be at least 1");
        }
        if self.queue_depth == 0 {
            return bad("queue_depth must be at least 1");
        }
        if self.gpu_workers == 0 {
            return bad("gpu_workers must be at least 1");
        }
        Ok(())
    }
}

/// Host bytes of a partition's large buffers, as the CPU synthesizer allocates them (vectors
/// grown by pushing end with a power-of-two capacity): `(abc, rest)`.
pub fn estimate_partition_bytes(params: &Parameters) -> (u64, u64) {
    let scalars = |n: usize| (n.max(4).next_power_of_two() * 32) as u64;
    let words = |bits: usize| (bits.div_ceil(64).max(4).next_power_of_two() * 8) as u64;
    let aux = params.l.len();
    let inputs = params.vk.ic.len();
    let abc = 3 * scalars(params.domain_size());
    let rest = scalars(aux) + scalars(inputs) + 2 * words(aux) + words(inputs);
    (abc, rest)
}

/// A counting semaphore with RAII permits.
struct Semaphore {
    free: Mutex<usize>,
    cv: Condvar,
}

impl Semaphore {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Semaphore {
            free: Mutex::new(n),
            cv: Condvar::new(),
        })
    }

    fn acquire(self: &Arc<Self>) -> Permit {
        let mut free = lock(&self.free);
        while *free == 0 {
            free = self.cv.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Permit { sem: self.clone() }
    }
}

#[must_use]
struct Permit {
    sem: Arc<Semaphore>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        *lock(&self.sem.free) += 1;
        self.sem.cv.notify_one();
    }
}

fn secs(nanos: &AtomicU64) -> f64 {
    nanos.load(Ordering::Acquire) as f64 / 1e9
}

fn add_time(nanos: &AtomicU64, since: Instant) {
    nanos.fetch_add(since.elapsed().as_nanos() as u64, Ordering::AcqRel);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// A job's shared state.
struct JobState {
    id: u64,
    prepared: PreparedParameters,
    fallback: Option<(Arc<dyn GpuBackend>, PreparedParameters)>,
    randomness: Vec<Randomness>,
    estimate: (u64, u64),
    proofs: Mutex<Vec<Option<Proof>>>,
    error: Mutex<Option<Error>>,
    settled: AtomicUsize,
    /// The engine's count of settled partitions (all jobs).
    engine_settled: Arc<AtomicU64>,
    cancelled: AtomicBool,
    done: Mutex<Option<mpsc::Sender<Result<Vec<Proof>>>>>,
}

impl JobState {
    fn total(&self) -> usize {
        self.randomness.len()
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Records a partition's outcome exactly once; the last one delivers the job's result.
    fn settle(&self, index: usize, outcome: Result<Proof>) {
        match outcome {
            Ok(p) => lock(&self.proofs)[index] = Some(p),
            Err(e) => {
                let mut err = lock(&self.error);
                if err.is_none() {
                    tracing::warn!(job = self.id, partition = index, error = %e, "job failed");
                    *err = Some(e);
                }
                // The rest of the job is skipped at the next stage boundary.
                self.cancelled.store(true, Ordering::Release);
            }
        }
        self.engine_settled.fetch_add(1, Ordering::AcqRel);
        if self.settled.fetch_add(1, Ordering::AcqRel) + 1 == self.total() {
            let result = match lock(&self.error).take() {
                Some(e) => Err(e),
                None => Ok(lock(&self.proofs)
                    .iter_mut()
                    .map(|p| p.take().expect("every partition settled with a proof"))
                    .collect()),
            };
            if let Some(tx) = lock(&self.done).take() {
                let _ = tx.send(result);
            }
        }
    }

    fn fail(&self, index: usize, stage: &'static str, e: Error) {
        self.settle(
            index,
            Err(Error::PartitionFailed {
                partition: index,
                stage,
                source: Box::new(e),
            }),
        );
    }

    fn skip(&self, index: usize) {
        self.settle(index, Err(Error::Cancelled));
    }
}

/// A submitted job: wait for its proofs, or cancel it.
pub struct JobHandle {
    state: Arc<JobState>,
    rx: mpsc::Receiver<Result<Vec<Proof>>>,
}

impl JobHandle {
    /// The job's id (submission order).
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Waits for all the job's proofs, in partition order, or its first error.
    pub fn wait(self) -> Result<Vec<Proof>> {
        self.rx.recv().unwrap_or(Err(Error::ShutDown))
    }

    /// Cancels the job: partitions not started are skipped, partitions in flight are dropped at
    /// their next stage boundary, and everything they hold is freed. `wait` then returns
    /// `Error::Cancelled` (unless the job had already finished or failed).
    pub fn cancel(&self) {
        let mut err = lock(&self.state.error);
        if err.is_none() {
            *err = Some(Error::Cancelled);
        }
        self.state.cancelled.store(true, Ordering::Release);
    }
}

/// A partition on its way through the stages: what it holds travels with it.
struct InFlight {
    job: Arc<JobState>,
    index: usize,
    token: PartitionToken,
    budget: Option<BudgetPermit>,
}

struct HandOff {
    inflight: InFlight,
    partition: SynthesizedPartition,
    permit: Option<Permit>,
}

struct Queued {
    inflight: InFlight,
    partition: SynthesizedPartition,
    slot: Permit,
}

struct PendingJob<C> {
    state: Arc<JobState>,
    circuits: VecDeque<(usize, C)>,
}

struct Shared<C, S> {
    config: Config,
    synthesizer: Arc<S>,
    backend: Arc<dyn GpuBackend>,
    finalizer: Arc<dyn Finalizer>,
    ledger: StageLedger,
    budget: Option<MemoryBudget>,
    permits: Arc<Semaphore>,
    pending: Mutex<VecDeque<PendingJob<C>>>,
    pending_cv: Condvar,
    shutdown: AtomicBool,
    next_job: AtomicU64,
    busy_nanos: Vec<AtomicU64>,
    /// Nanoseconds spent in synthesis, the accelerator and the finalizer, summed over partitions.
    stage_nanos: [AtomicU64; 3],
    settled: Arc<AtomicU64>,
    first_submit: Mutex<Option<Instant>>,
}

/// Figures of an engine's run.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    /// Per accelerator worker: the fraction of the time since the first submission that it
    /// spent in the accelerator (backend or fallback).
    pub accelerator_busy: Vec<f64>,
    /// Seconds spent in synthesis, summed over partitions.
    pub synthesis_seconds: f64,
    /// Seconds spent in the accelerator stage, summed over partitions.
    pub accelerator_seconds: f64,
    /// Seconds spent in the finalizer, summed over partitions.
    pub finalize_seconds: f64,
    /// Partitions settled (proven, failed or skipped), all jobs.
    pub partitions_settled: u64,
}

impl EngineStats {
    /// The mean over workers.
    pub fn mean_accelerator_busy(&self) -> f64 {
        if self.accelerator_busy.is_empty() {
            0.0
        } else {
            self.accelerator_busy.iter().sum::<f64>() / self.accelerator_busy.len() as f64
        }
    }
}

/// The pipeline engine for circuits of type `C`, synthesized by `S`.
pub struct Engine<C, S> {
    shared: Arc<Shared<C, S>>,
    threads: Vec<JoinHandle<()>>,
}

impl<C, S> Engine<C, S>
where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    /// Starts an engine.
    pub fn new(
        config: Config,
        synthesizer: S,
        backend: Arc<dyn GpuBackend>,
        finalizer: Arc<dyn Finalizer>,
    ) -> Result<Self> {
        config.validate()?;
        let budget = match config.mem_budget {
            Some(size) => Some(MemoryBudget::new(size.resolve()?)),
            None => None,
        };
        let pool = |name: &'static str, n: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("{name}-{i}"))
                .build()
                .map_err(|e| Error::Malformed {
                    what: "engine thread pool",
                    detail: e.to_string(),
                })
        };
        let synth_pool = Arc::new(pool("proofline-synth", config.synthesis_threads)?);
        let finalize_pool = Arc::new(pool("proofline-finalize", config.finalizer_threads)?);
        let shared = Arc::new(Shared {
            permits: Semaphore::new(config.pw),
            busy_nanos: (0..config.gpu_workers).map(|_| AtomicU64::new(0)).collect(),
            stage_nanos: Default::default(),
            settled: Arc::new(AtomicU64::new(0)),
            config,
            synthesizer: Arc::new(synthesizer),
            backend,
            finalizer,
            ledger: StageLedger::new(),
            budget,
            pending: Mutex::new(VecDeque::new()),
            pending_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            next_job: AtomicU64::new(0),
            first_submit: Mutex::new(None),
        });

        let (handoff_tx, handoff_rx) = mpsc::channel::<HandOff>();
        let (accel_tx, accel_rx) = mpsc::channel::<Queued>();
        let accel_rx = Arc::new(Mutex::new(accel_rx));
        let (dealloc_tx, dealloc_rx) = mpsc::channel::<(PendingRemains, InFlight)>();
        let slots = Semaphore::new(shared.config.queue_depth);
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| Error::io("spawning an engine thread", e))
        };
        let mut threads = Vec::new();
        {
            let shared = shared.clone();
            threads.push(spawn(
                "proofline-dispatch".into(),
                Box::new(move || dispatch(shared, synth_pool, handoff_tx)),
            )?);
        }
        {
            let shared = shared.clone();
            threads.push(spawn(
                "proofline-handoff".into(),
                Box::new(move || pump(shared, handoff_rx, accel_tx, slots)),
            )?);
        }
        for w in 0..shared.config.gpu_workers {
            let shared = shared.clone();
            let rx = accel_rx.clone();
            let pool = finalize_pool.clone();
            let dealloc = dealloc_tx.clone();
            threads.push(spawn(
                format!("proofline-accel-{w}"),
                Box::new(move || accelerate(shared, w, rx, pool, dealloc)),
            )?);
        }
        drop(dealloc_tx);
        threads.push(spawn(
            "proofline-dealloc".into(),
            Box::new(move || {
                for (remains, inflight) in dealloc_rx {
                    drop(remains);
                    drop(inflight);
                }
            }),
        )?);
        Ok(Engine { shared, threads })
    }

    /// The engine's stage ledger.
    pub fn ledger(&self) -> &StageLedger {
        &self.shared.ledger
    }

    /// The budget, if one is set.
    pub fn budget(&self) -> Option<&MemoryBudget> {
        self.shared.budget.as_ref()
    }

    /// Submits a job: one partition per circuit, proven with `prepared`; its randomisers are
    /// drawn now.
    pub fn submit(
        &self,
        prepared: &PreparedParameters,
        circuits: Vec<C>,
        rng: &mut impl rand_core::RngCore,
    ) -> Result<JobHandle> {
        let randomness: Vec<Randomness> =
            circuits.iter().map(|_| Randomness::random(rng)).collect();
        let fallback = match &self.shared.config.fallback {
            Some(fb) => Some((fb.clone(), fb.prepare(prepared.params().clone())?)),
            None => None,
        };
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(JobState {
            id: self.shared.next_job.fetch_add(1, Ordering::AcqRel),
            prepared: prepared.clone(),
            fallback,
            estimate: estimate_partition_bytes(prepared.params()),
            proofs: Mutex::new(vec![None; circuits.len()]),
            error: Mutex::new(None),
            settled: AtomicUsize::new(0),
            engine_settled: self.shared.settled.clone(),
            cancelled: AtomicBool::new(false),
            done: Mutex::new(Some(tx)),
            randomness,
        });
        if circuits.is_empty() {
            let _ = lock(&state.done).take().map(|tx| tx.send(Ok(Vec::new())));
        } else {
            lock(&self.shared.first_submit).get_or_insert_with(Instant::now);
            lock(&self.shared.pending).push_back(PendingJob {
                state: state.clone(),
                circuits: circuits.into_iter().enumerate().collect(),
            });
            self.shared.pending_cv.notify_all();
        }
        Ok(JobHandle { state, rx })
    }

    /// Accelerator busy fractions so far.
    pub fn stats(&self) -> EngineStats {
        let since = *lock(&self.shared.first_submit);
        let wall = since.map_or(0.0, |t| t.elapsed().as_secs_f64());
        EngineStats {
            accelerator_busy: self
                .shared
                .busy_nanos
                .iter()
                .map(|b| {
                    if wall > 0.0 {
                        (b.load(Ordering::Acquire) as f64 / 1e9 / wall).min(1.0)
                    } else {
                        0.0
                    }
                })
                .collect(),
            synthesis_seconds: secs(&self.shared.stage_nanos[0]),
            accelerator_seconds: secs(&self.shared.stage_nanos[1]),
            finalize_seconds: secs(&self.shared.stage_nanos[2]),
            partitions_settled: self.shared.settled.load(Ordering::Acquire),
        }
    }

    /// Finishes every submitted job, stops the threads and returns the final figures. The
    /// ledger is back to zero when this returns.
    pub fn shutdown(mut self) -> EngineStats {
        let stats = self.stats();
        self.stop();
        stats
    }

    fn stop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.pending_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<C, S> Drop for Engine<C, S> {
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        // Dropped without shutdown: cancel what has not started, then wait for the threads.
        for job in lock(&self.shared.pending).iter() {
            job.state.cancelled.store(true, Ordering::Release);
        }
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.pending_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The witness and backend leftovers that the deallocation thread drops.
type PendingRemains = crate::synthesize::Witness;

/// Grants permits in order and starts synthesis tasks.
fn dispatch<C, S>(
    shared: Arc<Shared<C, S>>,
    pool: Arc<rayon::ThreadPool>,
    handoff: mpsc::Sender<HandOff>,
) where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    loop {
        let permit = shared.permits.acquire();
        // The next partition: oldest job first, lowest partition first.
        let next = {
            let mut pending = lock(&shared.pending);
            loop {
                while pending.front().is_some_and(|j| j.circuits.is_empty()) {
                    pending.pop_front();
                }
                if let Some(job) = pending.front_mut() {
                    let (index, circuit) = job.circuits.pop_front().expect("non-empty");
                    break Some((job.state.clone(), index, circuit));
                }
                if shared.shutdown.load(Ordering::Acquire) {
                    break None;
                }
                pending = shared
                    .pending_cv
                    .wait(pending)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        let Some((job, index, circuit)) = next else {
            return;
        };
        if job.is_cancelled() {
            job.skip(index);
            continue;
        }
        let budget = match &shared.budget {
            Some(b) => match b.acquire(job.estimate.0 + job.estimate.1) {
                Ok(p) => Some(p),
                Err(e) => {
                    job.fail(index, "budget", e);
                    continue;
                }
            },
            None => None,
        };
        let shared = shared.clone();
        let handoff = handoff.clone();
        pool.spawn(move || synthesize(shared, job, index, circuit, permit, budget, handoff));
    }
}

fn register_buffers(token: &mut PartitionToken, p: &SynthesizedPartition) {
    let size = std::mem::size_of::<Scalar>() as u64;
    let e = &p.evaluations;
    for v in [&e.a, &e.b, &e.c] {
        token.register(BufferKind::Abc, v.capacity() as u64 * size);
    }
    let w = &p.witness;
    token.register(BufferKind::Aux, w.aux_bytes() as u64);
    token.register(BufferKind::Input, w.input_bytes() as u64);
    token.register(BufferKind::Density, w.density_bytes() as u64);
}

#[allow(clippy::too_many_arguments)]
fn synthesize<C, S>(
    shared: Arc<Shared<C, S>>,
    job: Arc<JobState>,
    index: usize,
    circuit: C,
    permit: Permit,
    budget: Option<BudgetPermit>,
    handoff: mpsc::Sender<HandOff>,
) where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    let token = shared.ledger.enter(Stage::Synthesizing, job.id, index);
    if job.is_cancelled() {
        return job.skip(index);
    }
    let t = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| shared.synthesizer.synthesize(circuit)));
    add_time(&shared.stage_nanos[0], t);
    let partition = match result {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return job.fail(index, "synthesis", e),
        Err(p) => {
            return job.fail(
                index,
                "synthesis",
                Error::Panicked {
                    stage: "synthesis",
                    message: panic_message(p),
                },
            )
        }
    };
    let mut inflight = InFlight {
        job,
        index,
        token,
        budget,
    };
    register_buffers(&mut inflight.token, &partition);
    // A synthesizer other than the CPU one may hold more than the estimate: take the rest from
    // the budget if it is free, or fail the partition (never wait while holding a permit).
    if let (Some(budget), Some(reserved)) = (&shared.budget, &mut inflight.budget) {
        let real = inflight.token.bytes();
        if real > reserved.bytes() {
            match budget.try_acquire(real - reserved.bytes()) {
                Some(extra) => reserved.absorb(extra),
                None => {
                    return inflight.job.fail(
                        index,
                        "synthesis",
                        Error::OverBudget {
                            needed: real,
                            budget: budget.capacity(),
                        },
                    )
                }
            }
        }
    }
    inflight.token.advance(Stage::AwaitingAccelerator);
    let permit = match shared.config.release {
        ReleasePolicy::AfterHandoff => Some(permit),
        ReleasePolicy::AfterSynthesis => {
            drop(permit);
            None
        }
    };
    let _ = handoff.send(HandOff {
        inflight,
        partition,
        permit,
    });
}

/// Moves synthesized partitions into the accelerator queue, in order, one queue slot each.
fn pump<C, S>(
    shared: Arc<Shared<C, S>>,
    handoff: mpsc::Receiver<HandOff>,
    accel: mpsc::Sender<Queued>,
    slots: Arc<Semaphore>,
) {
    for h in handoff {
        if h.inflight.job.is_cancelled() {
            h.inflight.job.skip(h.inflight.index);
            continue;
        }
        let slot = slots.acquire();
        let HandOff {
            inflight,
            partition,
            permit,
        } = h;
        if accel
            .send(Queued {
                inflight,
                partition,
                slot,
            })
            .is_err()
        {
            return;
        }
        // The queue has accepted it: now the synthesis permit goes back (after-handoff).
        drop(permit);
    }
    drop(shared);
}

fn accelerate<C, S>(
    shared: Arc<Shared<C, S>>,
    worker: usize,
    queue: Arc<Mutex<mpsc::Receiver<Queued>>>,
    pool: Arc<rayon::ThreadPool>,
    dealloc: mpsc::Sender<(PendingRemains, InFlight)>,
) where
    C: Send + 'static,
    S: Synthesizer + 'static,
{
    loop {
        let next = lock(&queue).recv();
        let Ok(Queued {
            mut inflight,
            partition,
            slot,
        }) = next
        else {
            return;
        };
        inflight.token.advance(Stage::OnAccelerator);
        drop(slot);
        let job = inflight.job.clone();
        let index = inflight.index;
        if job.is_cancelled() {
            job.skip(index);
            continue;
        }
        let t = Instant::now();
        let first = catch_unwind(AssertUnwindSafe(|| {
            shared.backend.accelerate(&job.prepared, partition)
        }));
        let outcome = match first {
            Ok(Ok(pending)) => Ok(pending),
            Ok(Err(back)) => match &job.fallback {
                Some((fb, prepared)) => {
                    tracing::warn!(
                        job = job.id,
                        partition = index,
                        backend = shared.backend.name(),
                        fallback = fb.name(),
                        error = %back.error,
                        "accelerator failed; retrying on the fallback backend"
                    );
                    match catch_unwind(AssertUnwindSafe(|| {
                        fb.accelerate(prepared, *back.partition)
                    })) {
                        Ok(Ok(pending)) => Ok(pending),
                        Ok(Err(back2)) => Err(back2.error),
                        Err(p) => Err(Error::Panicked {
                            stage: "accelerator (fallback)",
                            message: panic_message(p),
                        }),
                    }
                }
                None => Err(back.error),
            },
            Err(p) => Err(Error::Panicked {
                stage: "accelerator",
                message: panic_message(p),
            }),
        };
        add_time(&shared.busy_nanos[worker], t);
        add_time(&shared.stage_nanos[1], t);
        let pending = match outcome {
            Ok(p) => p,
            Err(e) => {
                job.fail(index, "accelerator", e);
                continue;
            }
        };
        // a/b/c are gone: first step of the budget's release.
        inflight.token.release(BufferKind::Abc);
        if let Some(b) = &mut inflight.budget {
            b.release(job.estimate.0);
        }
        inflight.token.advance(Stage::Finalizing);
        let shared = shared.clone();
        let dealloc = dealloc.clone();
        pool.spawn(move || finalize(shared, inflight, pending, dealloc));
    }
}

fn finalize<C, S>(
    shared: Arc<Shared<C, S>>,
    mut inflight: InFlight,
    pending: PendingProof,
    dealloc: mpsc::Sender<(PendingRemains, InFlight)>,
) {
    let job = inflight.job.clone();
    let index = inflight.index;
    if job.is_cancelled() {
        return job.skip(index);
    }
    let params = job.prepared.params().clone();
    let t = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        shared
            .finalizer
            .finalize(&params, pending, job.randomness[index])
    }));
    add_time(&shared.stage_nanos[2], t);
    match result {
        Ok(Ok(done)) => {
            inflight.token.advance(Stage::Deallocating);
            job.settle(index, Ok(done.proof));
            let _ = dealloc.send((done.remains, inflight));
        }
        Ok(Err(e)) => job.fail(index, "finalize", e),
        Err(p) => job.fail(
            index,
            "finalize",
            Error::Panicked {
                stage: "finalize",
                message: panic_message(p),
            },
        ),
    }
}
