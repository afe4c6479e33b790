//! A job's shared state, its handle, and a partition in flight (what travels with it from
//! stage to stage).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blstrs::Scalar;

use crate::accounting::ledger::PartitionToken;
use crate::error::{Error, Result};
use crate::groth16::proof::Proof;
use crate::groth16::verify::PreparedVerifyingKey;
use crate::runtime::permit::Permit;
use crate::stages::{PreparedParameters, Randomness};

use super::lock;

/// What a job keeps until the last of its partitions has left synthesis
/// ([`super::Engine::submit_holding`]).
pub type Hold = Box<dyn std::any::Any + Send + Sync>;

/// A job's shared state.
pub(super) struct JobState {
    pub id: u64,
    pub prepared: PreparedParameters,
    /// The fallback backend's preparation of the same parameters (prepared once per
    /// parameters by the engine, shared by every job that uses them).
    pub fallback: Option<PreparedParameters>,
    /// The prepared verifying key every partition proof is checked with before it is
    /// reported (`None`: verification is off).
    pub verifier: Option<Arc<PreparedVerifyingKey>>,
    /// The public inputs the caller declared for each partition (`None`: each witness's own).
    pub statement: Option<Vec<Vec<Scalar>>>,
    /// Whether the job's partitions take the urgent lane ([`super::Config::urgent`]).
    pub urgent: bool,
    pub randomness: Vec<Randomness>,
    /// `(abc, rest)` host bytes of one partition, for the budget.
    pub estimate: (u64, u64),
    pub proofs: Mutex<Vec<Option<Proof>>>,
    pub error: Mutex<Option<Error>>,
    pub settled: AtomicUsize,
    /// The engine's count of settled partitions (all jobs).
    pub engine_settled: Arc<AtomicU64>,
    pub cancelled: AtomicBool,
    pub done: Mutex<Option<mpsc::Sender<Result<Vec<Proof>>>>>,
    /// Nanoseconds its partitions spent in synthesis, and on an accelerator (the fallback's
    /// included).
    pub synthesis_nanos: AtomicU64,
    pub accelerator_nanos: AtomicU64,
}

/// Where a job's partitions spent their time, summed over its partitions (which overlap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobTimes {
    /// In synthesis.
    pub synthesis: Duration,
    /// On an accelerator (a fallback backend's time included).
    pub accelerator: Duration,
}

impl JobState {
    fn total(&self) -> usize {
        self.randomness.len()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Records a partition's outcome exactly once; the last one delivers the job's result.
    pub fn settle(&self, index: usize, outcome: Result<Proof>) {
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
                None => {
                    let proofs: Option<Vec<Proof>> =
                        lock(&self.proofs).iter_mut().map(Option::take).collect();
                    proofs.ok_or_else(|| Error::Panicked {
                        stage: "engine",
                        message: "a partition settled without a proof or an error".into(),
                    })
                }
            };
            if let Some(tx) = lock(&self.done).take() {
                let _ = tx.send(result);
            }
        }
    }

    pub fn fail(&self, index: usize, stage: &'static str, e: Error) {
        self.settle(
            index,
            Err(Error::PartitionFailed {
                partition: index,
                stage,
                source: Box::new(e),
            }),
        );
    }

    pub fn skip(&self, index: usize) {
        self.settle(index, Err(Error::Cancelled));
    }
}

/// A submitted job: wait for its proofs, or cancel it.
pub struct JobHandle {
    pub(super) state: Arc<JobState>,
    pub(super) rx: mpsc::Receiver<Result<Vec<Proof>>>,
}

impl JobHandle {
    /// The job's id (submission order).
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Waits for all the job's proofs, in partition order, or its first error.
    pub fn wait(self) -> Result<Vec<Proof>> {
        self.wait_timed().0
    }

    /// As [`JobHandle::wait`], with where the job's partitions spent their time.
    pub fn wait_timed(self) -> (Result<Vec<Proof>>, JobTimes) {
        let result = self.rx.recv().unwrap_or(Err(Error::ShutDown));
        let nanos = |n: &AtomicU64| Duration::from_nanos(n.load(Ordering::Acquire));
        let times = JobTimes {
            synthesis: nanos(&self.state.synthesis_nanos),
            accelerator: nanos(&self.state.accelerator_nanos),
        };
        (result, times)
    }

    /// Cancels the job: partitions not started are skipped, partitions in flight are dropped at
    /// their next stage boundary, and everything they hold is freed. `wait` then returns
    /// `Error::Cancelled` (unless the job had already finished or failed).
    pub fn cancel(&self) {
        cancel(&self.state);
    }

    /// A handle that cancels this job from another thread than the one waiting for it.
    pub fn canceller(&self) -> JobCanceller {
        JobCanceller(self.state.clone())
    }
}

/// Cancels a job (as [`JobHandle::cancel`]) from anywhere; cloned freely.
#[derive(Clone)]
pub struct JobCanceller(Arc<JobState>);

impl JobCanceller {
    /// Cancels the job: see [`JobHandle::cancel`].
    pub fn cancel(&self) {
        cancel(&self.0);
    }
}

fn cancel(state: &JobState) {
    let mut err = lock(&state.error);
    if err.is_none() {
        *err = Some(Error::Cancelled);
    }
    state.cancelled.store(true, Ordering::Release);
}

/// A partition on its way through the stages: what it holds travels with it.
pub(super) struct InFlight {
    pub job: Arc<JobState>,
    pub index: usize,
    pub token: PartitionToken,
    pub budget: Option<Permit>,
    /// The device (an index into the engine's devices) whose accelerator produced the
    /// partition's sums; `None` before the accelerator and on the fallback backend.
    pub produced_by: Option<usize>,
}

impl InFlight {
    /// Skips the partition if its job was cancelled; true if it was.
    pub fn skip_if_cancelled(&self) -> bool {
        if self.job.is_cancelled() {
            self.job.skip(self.index);
            true
        } else {
            false
        }
    }

    /// Fails the partition in `stage`.
    pub fn fail(self, stage: &'static str, e: Error) {
        self.job.fail(self.index, stage, e);
    }
}
