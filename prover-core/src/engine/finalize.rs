//! After the accelerator: the first step of the budget's release, the finalizer pool, and the
//! hand-over of the remains to the deallocation thread.

use std::sync::{mpsc, Arc};
use std::time::Instant;

use rayon::ThreadPool;

use crate::error::catch_panic;
use crate::ledger::{BufferKind, Stage};
use crate::stages::PendingProof;
use crate::synthesize::Witness;

use super::job::InFlight;
use super::{add_time, Core, FINALIZE};

/// The remains of a finished partition, dropped off the hot path.
pub(super) type DeallocItem = (Witness, InFlight);
/// Where the remains go.
pub(super) type Dealloc = mpsc::Sender<DeallocItem>;

/// Ends a partition's accelerator stage (on a device or the fallback) and moves it on to the
/// finalizer pool. When a/b/c are gone, their ledger entry and their share of the budget go back
/// now; when the backend gave them back (`PendingProof::spent`), the finalizer's thread frees
/// them first and gives their entry and share back then, so that the accelerator's thread goes
/// on to its next partition at once and nothing is counted as freed before it is.
pub(super) fn finish(
    core: &Arc<Core>,
    mut inflight: InFlight,
    mut pending: PendingProof,
    pool: &ThreadPool,
    dealloc: &Dealloc,
) {
    let spent = pending.spent.take();
    if spent.is_none() {
        abc_gone(&mut inflight);
    }
    inflight.token.advance(Stage::Finalizing);
    let core = core.clone();
    let dealloc = dealloc.clone();
    pool.spawn(move || {
        if let Some(abc) = spent {
            drop(abc);
            abc_gone(&mut inflight);
        }
        finalize(core, inflight, pending, dealloc)
    });
}

/// a/b/c are freed: their ledger entry and their share of the budget go back.
fn abc_gone(inflight: &mut InFlight) {
    inflight.token.release(BufferKind::Abc);
    let abc = inflight.job.estimate.0;
    if let Some(b) = &mut inflight.budget {
        b.release(abc);
    }
}

fn finalize(core: Arc<Core>, mut inflight: InFlight, pending: PendingProof, dealloc: Dealloc) {
    if inflight.skip_if_cancelled() {
        return;
    }
    let job = inflight.job.clone();
    let index = inflight.index;
    let t = Instant::now();
    let result = catch_panic("finalize", || {
        core.finalizer
            .finalize(&job.prepared, pending, job.randomness[index])
    });
    add_time(&core.stage_nanos[FINALIZE], t);
    match result.and_then(|r| r) {
        Ok(done) => {
            inflight.token.advance(Stage::Deallocating);
            job.settle(index, Ok(done.proof));
            let _ = dealloc.send((done.remains, inflight));
        }
        Err(e) => inflight.fail("finalize", e),
    }
}
