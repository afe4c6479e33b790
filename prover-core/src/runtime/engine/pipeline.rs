//! The CPU side before the accelerator: the dispatcher that grants synthesis permits in order,
//! the synthesis tasks, and the hand-off pump into the accelerator queue.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use crossbeam_channel::Sender;

use crate::accounting::ledger::{BufferKind, PartitionToken, Stage};
use crate::error::{catch_panic, Error};
use crate::runtime::permit::{Permit, Semaphore};
use crate::stages::{SynthesizedPartition, Synthesizer};

use super::job::{Hold, InFlight, JobState};
use super::synth_threads::Task;
use super::{add_time, lock, Core, PendingJob, Queued, Shared, SYNTHESIS};

/// A synthesized partition on its way to the queue, with its synthesis permit (after-handoff).
pub(super) struct HandOff {
    inflight: InFlight,
    partition: SynthesizedPartition,
    permit: Option<Permit>,
}

/// Where synthesized partitions go: the urgent lane's hand-off for urgent jobs (with a lane),
/// the shared one for the rest.
#[derive(Clone)]
pub(super) struct Handoffs {
    pub normal: mpsc::Sender<HandOff>,
    pub urgent: Option<mpsc::Sender<HandOff>>,
}

impl Handoffs {
    fn of(&self, job: &JobState) -> mpsc::Sender<HandOff> {
        match (&self.urgent, job.urgent) {
            (Some(urgent), true) => urgent.clone(),
            _ => self.normal.clone(),
        }
    }
}

/// One dispatcher's permits, and the jobs it takes (`urgent_only`: the urgent lane's, of
/// [`JobState::urgent`] jobs only; else any). `defer_to` is the urgent lane's permits, for the
/// shared dispatcher:
/// it leaves urgent jobs to that lane while the lane has a permit free (their synthesis then
/// never waits for a shared synthesis thread), and helps with them otherwise.
pub(super) struct Lane {
    pub permits: Semaphore,
    pub urgent_only: bool,
    pub defer_to: Option<Semaphore>,
    pub handoffs: Handoffs,
}

/// Grants the lane's permits in order (highest priority first, then the oldest job, lowest
/// partition first) and starts synthesis tasks; reserves each partition's bytes from the budget
/// before its synthesis starts.
pub(super) fn dispatch<C, S>(shared: Arc<Shared<C, S>>, lane: Lane, tasks: Sender<Task>)
where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    let core = shared.core.clone();
    let takes = |job: &PendingJob<C>| {
        (job.state.urgent || !lane.urgent_only)
            && !(job.state.urgent && lane.defer_to.as_ref().is_some_and(|u| u.available() > 0))
    };
    loop {
        let Some(permit) = lane.permits.acquire(1) else {
            return; // a lane's permits are >= 1 (validated): unreachable
        };
        let next = {
            let mut pending = lock(&shared.pending);
            loop {
                // A cancelled job's partitions are skipped at once, not one per permit, so
                // that what it holds is let go now.
                for job in pending.iter_mut().filter(|j| j.state.is_cancelled()) {
                    for (index, _) in job.circuits.drain(..) {
                        job.state.skip(index);
                    }
                    job.hold = None;
                }
                pending.retain(|j| !j.circuits.is_empty());
                // The highest priority; the oldest among equals (jobs are in submission order).
                let best = pending
                    .iter()
                    .enumerate()
                    .filter(|(_, j)| takes(j))
                    .max_by_key(|(i, j)| (j.priority, std::cmp::Reverse(*i)))
                    .map(|(i, _)| i);
                if let Some(job) = best.and_then(|i| pending.get_mut(i)) {
                    if let Some((index, circuit)) = job.circuits.pop_front() {
                        // The last partition takes the waiting share of the job's hold.
                        let hold = if job.circuits.is_empty() {
                            job.hold.take()
                        } else {
                            job.hold.clone()
                        };
                        break Some((job.state.clone(), index, circuit, hold));
                    }
                    continue;
                }
                if core.shutdown.load(Ordering::Acquire) {
                    break None;
                }
                pending = shared
                    .pending_cv
                    .wait(pending)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        let Some((job, index, circuit, hold)) = next else {
            return;
        };
        if job.is_cancelled() {
            job.skip(index);
            continue;
        }
        let budget = match &core.budget {
            Some(b) => match b.acquire(job.estimate.0 + job.estimate.1) {
                Ok(p) => Some(p),
                Err(e) => {
                    job.fail(index, "budget", e);
                    continue;
                }
            },
            None => None,
        };
        let (shared, handoff, state) = (shared.clone(), lane.handoffs.of(&job), job.clone());
        let task: Task = Box::new(move || {
            synthesize(shared, job, index, circuit, hold, permit, budget, handoff)
        });
        if let Err(crossbeam_channel::SendError(task)) = tasks.send(task) {
            // No synthesis thread is left (they only stop after this dispatcher): fail, never
            // lose. Dropping the task gives its permit and reservation back.
            drop(task);
            state.fail(index, "synthesis", Error::ShutDown);
        }
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
    hold: Option<Arc<Hold>>,
    permit: Permit,
    budget: Option<Permit>,
    handoff: mpsc::Sender<HandOff>,
) where
    C: Circuit<Scalar> + Send + 'static,
    S: Synthesizer + 'static,
{
    let core = &shared.core;
    let token = core.ledger.enter(Stage::Synthesizing, job.id, index);
    if job.is_cancelled() {
        return job.skip(index);
    }
    let t = Instant::now();
    let result = catch_panic("synthesis", || shared.synthesizer.synthesize(circuit));
    add_time(&core.stage_nanos[SYNTHESIS], t);
    add_time(&job.synthesis_nanos, t);
    // The partition has left synthesis: its share of the job's hold goes.
    drop(hold);
    let partition = match result.and_then(|r| r) {
        Ok(p) => p,
        Err(e) => return job.fail(index, "synthesis", e),
    };
    if let Some(declared) = job.statement.as_ref().and_then(|s| s.get(index)) {
        let own = partition.witness.public_inputs();
        if own != *declared {
            let position = own
                .iter()
                .zip(declared)
                .position(|(a, b)| a != b)
                .unwrap_or(own.len().min(declared.len()));
            let error = Error::StatementMismatch {
                position,
                own: own.len(),
                declared: declared.len(),
            };
            return job.fail(index, "synthesis", error);
        }
    }
    let mut inflight = InFlight {
        job,
        index,
        token,
        budget,
        produced_by: None,
    };
    register_buffers(&mut inflight.token, &partition);
    // A synthesizer other than the CPU one may hold more than the estimate: take the rest from
    // the budget if it is free, or fail the partition (never wait while holding a permit).
    if let (Some(budget), Some(reserved)) = (&core.budget, &mut inflight.budget) {
        let real = inflight.token.bytes();
        if real > reserved.amount() {
            match budget.try_acquire(real - reserved.amount()) {
                Some(extra) => reserved.absorb(extra),
                None => {
                    let budget = budget.capacity();
                    return inflight.fail(
                        "synthesis",
                        Error::OverBudget {
                            needed: real,
                            budget,
                        },
                    );
                }
            }
        }
    }
    inflight.token.advance(Stage::AwaitingAccelerator);
    let permit = match core.config.release {
        crate::runtime::engine::ReleasePolicy::AfterHandoff => Some(permit),
        crate::runtime::engine::ReleasePolicy::AfterSynthesis => {
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

/// Moves synthesized partitions into the accelerator queue in order, one queue slot each; with
/// after-handoff, the synthesis permit goes back only once the queue has accepted the
/// partition. The slot is given back by the worker that takes the partition, after the ledger
/// moves it to `OnAccelerator`, so that `Synthesizing + AwaitingAccelerator <= pw +
/// queue_depth` holds at every instant (a bare bounded channel frees its slot at the receive,
/// before that move).
pub(super) fn pump(
    core: Arc<Core>,
    slots: Semaphore,
    handoff: mpsc::Receiver<HandOff>,
    queue: Sender<Queued>,
) {
    for h in handoff {
        if h.inflight.skip_if_cancelled() {
            continue;
        }
        let Some(slot) = slots.acquire(1) else {
            return; // queue_depth >= 1 is validated: unreachable
        };
        let HandOff {
            inflight,
            partition,
            permit,
        } = h;
        // Counted before it can be received, so no worker stops while it may still be routed.
        core.accelerating.fetch_add(1, Ordering::SeqCst);
        if let Err(crossbeam_channel::SendError(q)) = queue.send(Queued {
            inflight,
            partition,
            slot,
        }) {
            // No worker is left to take it (they only stop after this pump): fail, never lose.
            core.accelerating.fetch_sub(1, Ordering::SeqCst);
            q.inflight.fail("accelerator", Error::ShutDown);
            return;
        }
        drop(permit);
    }
}
