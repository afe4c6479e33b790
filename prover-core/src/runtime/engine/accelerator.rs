//! The accelerator stage: one thread per worker and device, each owning the worker context its
//! backend created once; the routing of handed-back partitions (another healthy device first,
//! then the bounded fallback pool); device health.
//!
//! - A worker takes partitions from the shared accelerator queue; a partition it takes stays on
//!   its device for the whole stage.
//! - A partition handed back by a device is offered to another healthy device that has not
//!   tried it (through that device's retry channel, room for `gpu_workers`, never waiting);
//!   failing that it goes to the fallback pool, which has `fallback_depth` slots: a worker
//!   waits for a slot, so a dead device is slowed to the pool's pace instead of piling
//!   partitions into it. Without a fallback backend, a hand-back that no other device has room
//!   for fails its job. Either way the partition is in the ledger's `Fallback` stage until it
//!   runs again.
//! - After `max_device_failures` consecutive failures a device is out of service: its workers
//!   stop taking partitions, unless no device is left in service, in which case they pass every
//!   partition straight to the fallback pool.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, Sender, TrySendError};
use rayon::ThreadPool;

use crate::accounting::ledger::Stage;
use crate::error::{catch_panic, Error, Result};
use crate::stages::SynthesizedPartition;
use crate::stages::{AcceleratorWorker, HandBack, PendingProof, PreparedParameters};

use super::fallback::{to_fallback, FallbackItem};
use super::finalize::{finish, Dealloc};
use super::job::InFlight;
use super::{add_time, Core, Queued, ACCELERATOR, FALLBACK};

/// A partition handed back by a device, with the devices that tried it.
pub(super) struct Retry {
    inflight: InFlight,
    partition: SynthesizedPartition,
    tried: Vec<usize>,
}

/// One device's state: health, figures and its retry channel.
pub(super) struct DeviceState {
    pub device: usize,
    pub name: String,
    in_service: AtomicBool,
    consecutive_failures: AtomicUsize,
    pub failures: AtomicU64,
    /// Partitions whose proof did not verify (counted in `failures` too).
    pub rejected: AtomicU64,
    pub partitions: AtomicU64,
    /// Partitions it took from its retry channel (handed back by another device).
    pub retried: AtomicU64,
    /// Per worker of this device.
    pub busy_nanos: Vec<AtomicU64>,
    retry_tx: Sender<Retry>,
    retry_rx: Receiver<Retry>,
}

impl DeviceState {
    pub fn new(device: usize, name: String, workers: usize) -> Self {
        // One retry per worker may wait: offers beyond that go to the fallback pool.
        let (retry_tx, retry_rx) = crossbeam_channel::bounded(workers);
        DeviceState {
            device,
            name,
            in_service: AtomicBool::new(true),
            consecutive_failures: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            partitions: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            busy_nanos: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            retry_tx,
            retry_rx,
        }
    }

    pub fn in_service(&self) -> bool {
        self.in_service.load(Ordering::SeqCst)
    }

    /// A partition completed: with verification on, once its proof has verified.
    pub(super) fn record_success(&self) {
        self.partitions.fetch_add(1, Ordering::AcqRel);
        self.consecutive_failures.store(0, Ordering::Release);
    }

    /// A proof made from this device's sums did not verify: a failure like a hand-back.
    pub(super) fn record_rejection(&self, max: usize, error: &Error) {
        self.rejected.fetch_add(1, Ordering::AcqRel);
        self.record_failure(max, error);
    }

    fn record_failure(&self, max: usize, error: &Error) {
        self.failures.fetch_add(1, Ordering::AcqRel);
        let n = self.consecutive_failures.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= max && self.in_service.swap(false, Ordering::SeqCst) {
            tracing::error!(
                device = %self.name,
                consecutive_failures = n,
                last_error = %error,
                "device taken out of service"
            );
        }
    }
}

/// What a worker takes next.
enum Next {
    Queued(Queued),
    Retry(Retry),
    Stop,
}

/// The accelerator queues a worker takes partitions from, the urgent lane's first
/// ([`super::Config::urgent`]), and which of them have closed.
pub(super) struct Queues {
    queues: Vec<(Receiver<Queued>, bool)>,
}

impl Queues {
    /// `queues` in the order they are taken from.
    pub(super) fn new(queues: Vec<Receiver<Queued>>) -> Self {
        Queues {
            queues: queues.into_iter().map(|q| (q, false)).collect(),
        }
    }

    fn all_closed(&self) -> bool {
        self.queues.iter().all(|(_, closed)| *closed)
    }

    /// The first partition waiting in an open queue, in the queues' order, without waiting.
    fn try_take(&mut self) -> Option<Queued> {
        for (q, closed) in &mut self.queues {
            if *closed {
                continue;
            }
            match q.try_recv() {
                Ok(item) => return Some(item),
                Err(crossbeam_channel::TryRecvError::Disconnected) => *closed = true,
                Err(crossbeam_channel::TryRecvError::Empty) => {}
            }
        }
        None
    }
}

/// Waits for the next partition of device `d`'s worker: its retries first, then the queues in
/// their order (while the device is in service, or when no device is). Stops once every queue
/// is closed and empty and no partition is left that could still be routed here: every
/// partition is counted in `Core::accelerating` from before a pump queues it until its worker
/// has routed it, and in `Core::retries` while it waits in a retry channel.
fn next(core: &Core, d: usize, queues: &mut Queues) -> Next {
    let dev = &core.devices[d];
    loop {
        if let Ok(r) = dev.retry_rx.try_recv() {
            return Next::Retry(r);
        }
        let take_queue = dev.in_service() || core.none_in_service();
        if take_queue {
            if let Some(q) = queues.try_take() {
                return Next::Queued(q);
            }
        }
        // Nothing waiting: sleep until a retry or any open queue has something (then take it
        // in order on the next turn), or a short while.
        let mut sel = Select::new();
        sel.recv(&dev.retry_rx);
        if take_queue {
            for (q, closed) in &queues.queues {
                if !*closed {
                    sel.recv(q);
                }
            }
        }
        let _ = sel.ready_timeout(Duration::from_millis(20));
        // Workers that do not watch the queues learn of their end from the pumps.
        if core.pumps_left.load(Ordering::SeqCst) == 0 {
            for (q, closed) in &mut queues.queues {
                if q.is_empty() {
                    *closed = true;
                }
            }
        }
        if queues.all_closed() && core.routing_done() {
            return Next::Stop;
        }
    }
}

/// The loop of one accelerator worker on device `d`.
#[allow(clippy::too_many_arguments)]
pub(super) fn device_worker(
    core: Arc<Core>,
    d: usize,
    slot: usize,
    mut worker: Box<dyn AcceleratorWorker>,
    queues: Vec<Receiver<Queued>>,
    fallback: Option<Sender<FallbackItem>>,
    pool: Arc<ThreadPool>,
    dealloc: Dealloc,
) {
    let dev = &core.devices[d];
    let mut queues = Queues::new(queues);
    loop {
        let (mut inflight, partition, mut tried) = match next(&core, d, &mut queues) {
            Next::Stop => return,
            Next::Queued(Queued {
                mut inflight,
                partition,
                slot,
            }) => {
                // Counted in `accelerating` by the pump already.
                inflight.token.advance(Stage::OnAccelerator);
                drop(slot);
                (inflight, partition, Vec::new())
            }
            Next::Retry(r) => {
                core.accelerating.fetch_add(1, Ordering::SeqCst);
                core.retries.fetch_sub(1, Ordering::SeqCst);
                dev.retried.fetch_add(1, Ordering::AcqRel);
                let Retry {
                    mut inflight,
                    partition,
                    tried,
                } = r;
                inflight.token.advance(Stage::OnAccelerator);
                (inflight, partition, tried)
            }
        };
        let done = Accelerating(&core);
        if inflight.skip_if_cancelled() {
            continue;
        }
        if !dev.in_service() {
            // Passing partitions on for a device that is out of service (none is left in
            // service, or this one was routed here before it went out).
            tried.push(d);
            let error = Error::Backend {
                backend: dev.name.clone(),
                source: "device is out of service after repeated failures".into(),
            };
            route(&core, inflight, partition, error, tried, fallback.as_ref());
            drop(done);
            continue;
        }
        let job = inflight.job.clone();
        let t = Instant::now();
        let outcome = catch_panic("accelerator", || {
            worker.accelerate(
                &job.prepared,
                partition,
                &mut inflight.token.backend_buffers(),
            )
        });
        inflight.token.release_backend_buffers();
        add_time(&dev.busy_nanos[slot], t);
        add_time(&core.stage_nanos[ACCELERATOR], t);
        add_time(&job.accelerator_nanos, t);
        match outcome {
            Ok(Ok(pending)) => {
                // With verification on, the device succeeded once the proof has verified.
                if inflight.job.verifier.is_none() {
                    dev.record_success();
                }
                inflight.produced_by = Some(d);
                finish(&core, inflight, pending, &pool, &dealloc, fallback.as_ref());
            }
            Ok(Err(HandBack { partition, error })) => {
                dev.record_failure(core.config.max_device_failures, &error);
                tracing::warn!(
                    job = job.id,
                    partition = inflight.index,
                    device = %dev.name,
                    error = %error,
                    "accelerator handed a partition back"
                );
                tried.push(d);
                route(&core, inflight, *partition, error, tried, fallback.as_ref());
            }
            Err(panic) => {
                // The partition was consumed by the panicking call: it fails.
                dev.record_failure(core.config.max_device_failures, &panic);
                inflight.fail("accelerator", panic);
            }
        }
        drop(done);
    }
}

/// Decrements the count of partitions being accelerated when dropped (after any retry it
/// routed was counted), so that workers never stop while a retry may still come.
struct Accelerating<'a>(&'a Core);

impl Drop for Accelerating<'_> {
    fn drop(&mut self) {
        self.0.accelerating.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Routes a handed-back partition: to a healthy device that has not tried it, if one has room
/// in its retry channel (offered without waiting: a worker that waited on another device's
/// workers could deadlock with them); else to the fallback pool, waiting for one of its
/// `fallback_depth` slots (the pool's threads free them without waiting on any device, so the
/// wait ends); else, without a fallback backend, it fails with the device's error.
///
/// The partition enters the `Fallback` stage when a retry channel or a pool slot takes it, so
/// that stage holds at most `fallback_depth` partitions in the pool plus `gpu_workers` per
/// device in retry channels.
fn route(
    core: &Core,
    inflight: InFlight,
    partition: SynthesizedPartition,
    error: Error,
    tried: Vec<usize>,
    fallback: Option<&Sender<FallbackItem>>,
) {
    if inflight.skip_if_cancelled() {
        return;
    }
    let mut retry = Retry {
        inflight,
        partition,
        tried,
    };
    let others = (0..core.devices.len())
        .filter(|e| !retry.tried.contains(e) && core.devices[*e].in_service())
        .collect::<Vec<_>>();
    for e in others {
        let dev = &core.devices[e];
        if dev.retry_tx.is_full() {
            continue;
        }
        retry.inflight.token.advance(Stage::Fallback);
        core.retries.fetch_add(1, Ordering::SeqCst);
        match dev.retry_tx.try_send(retry) {
            Ok(()) => return,
            Err(TrySendError::Full(r) | TrySendError::Disconnected(r)) => {
                // Filled by another worker in between: back on this worker.
                core.retries.fetch_sub(1, Ordering::SeqCst);
                retry = r;
                retry.inflight.token.advance(Stage::OnAccelerator);
            }
        }
    }
    let Retry {
        inflight,
        partition,
        ..
    } = retry;
    to_fallback(core, inflight, partition, error, fallback);
}

/// The loop of one fallback thread: runs handed-back partitions on the fallback backend with
/// its own worker. Its time is the fallback's, not any device's.
pub(super) fn fallback_worker(
    core: Arc<Core>,
    mut worker: Box<dyn AcceleratorWorker>,
    items: Receiver<FallbackItem>,
    pool: Arc<ThreadPool>,
    dealloc: Dealloc,
) {
    for item in items {
        let FallbackItem {
            mut inflight,
            partition,
            slot,
        } = item;
        if inflight.skip_if_cancelled() {
            continue;
        }
        let job = inflight.job.clone();
        let Some(prepared) = job.fallback.as_ref() else {
            inflight.fail(
                "accelerator (fallback)",
                Error::Panicked {
                    stage: "engine",
                    message: "a job without fallback parameters reached the fallback".into(),
                },
            );
            continue;
        };
        tracing::info!(
            job = job.id,
            partition = inflight.index,
            "running a handed-back partition on the fallback backend"
        );
        let t = Instant::now();
        let outcome = run(&mut *worker, prepared, partition, &mut inflight);
        add_time(&core.stage_nanos[FALLBACK], t);
        add_time(&job.accelerator_nanos, t);
        core.fallback_partitions.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok(pending) => finish(&core, inflight, pending, &pool, &dealloc, None),
            Err(e) => inflight.fail("accelerator (fallback)", e),
        }
        // The partition has left the Fallback stage: its slot frees.
        drop(slot);
    }
}

fn run(
    worker: &mut dyn AcceleratorWorker,
    prepared: &PreparedParameters,
    partition: SynthesizedPartition,
    inflight: &mut InFlight,
) -> Result<PendingProof> {
    let outcome = catch_panic("accelerator (fallback)", || {
        worker.accelerate(prepared, partition, &mut inflight.token.backend_buffers())
    });
    inflight.token.release_backend_buffers();
    outcome?.map_err(|back| back.error)
}
