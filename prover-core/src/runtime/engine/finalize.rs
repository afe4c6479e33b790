//! After the accelerator: the first step of the budget's release, the finalizer pool, the check
//! of every proof before it is reported, and the hand-over of the remains to the deallocation
//! thread.
//!
//! With verification on ([`super::Config::verify`]), a device's a/b/c (when its backend gives
//! them back) are kept until the partition's proof has verified: a proof that fails is proved
//! again from them on the fallback backend, and the device's failure is counted. A proof from
//! the host reference that fails points to the parameters or the witness and fails the job.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use crossbeam_channel::Sender;
use rayon::ThreadPool;

use crate::accounting::ledger::{BufferKind, Stage};
use crate::error::{catch_panic, Error};
use crate::groth16::verify::check_proof;
use crate::stages::PendingProof;
use crate::stages::{Evaluations, SynthesizedPartition, Witness};

use super::fallback::{to_fallback, FallbackItem};
use super::job::InFlight;
use super::{add_time, Core, FINALIZE, VERIFY};

/// The remains of a finished partition, dropped off the hot path.
pub(super) type DeallocItem = (Witness, InFlight);
/// Where the remains go.
pub(super) type Dealloc = mpsc::Sender<DeallocItem>;

/// Ends a partition's accelerator stage (on a device or the fallback) and moves it on to the
/// finalizer pool. When a/b/c are gone, their ledger entry and their share of the budget go back
/// now; when the backend gave them back (`PendingProof::spent`), the finalizer's thread frees
/// them first and gives their entry and share back then (or, for a device's partition whose
/// proof is to be checked with a fallback to turn to, once the proof has verified), so that the
/// accelerator's thread goes on to its next partition at once and nothing is counted as freed
/// before it is. `fallback` is the fallback pool's feed (device workers only).
pub(super) fn finish(
    core: &Arc<Core>,
    mut inflight: InFlight,
    mut pending: PendingProof,
    pool: &ThreadPool,
    dealloc: &Dealloc,
    fallback: Option<&Sender<FallbackItem>>,
) {
    let spent = pending.spent.take();
    if spent.is_none() {
        abc_gone(&mut inflight);
    }
    let keep = spent.is_some()
        && inflight.produced_by.is_some()
        && inflight.job.verifier.is_some()
        && fallback.is_some();
    let fallback = fallback.filter(|_| keep).cloned();
    inflight.token.advance(Stage::Finalizing);
    let core = core.clone();
    let dealloc = dealloc.clone();
    pool.spawn(move || {
        let spent = match spent {
            Some(abc) if !keep => {
                drop(abc);
                abc_gone(&mut inflight);
                None
            }
            kept => kept,
        };
        finalize(core, inflight, pending, dealloc, spent, fallback)
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

fn finalize(
    core: Arc<Core>,
    mut inflight: InFlight,
    pending: PendingProof,
    dealloc: Dealloc,
    mut spent: Option<Evaluations>,
    fallback: Option<Sender<FallbackItem>>,
) {
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
    let done = match result.and_then(|r| r) {
        Ok(done) => done,
        Err(e) => return inflight.fail("finalize", e),
    };
    if let Some(pvk) = &job.verifier {
        let t = Instant::now();
        let checked = check_proof(pvk, &done.proof, &done.remains.public_inputs());
        add_time(&core.stage_nanos[VERIFY], t);
        core.verified.fetch_add(1, Ordering::AcqRel);
        let why = match checked {
            Ok(true) => None,
            Ok(false) => Some("it fails the pairing check or a point is off its curve".into()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            core.rejected.fetch_add(1, Ordering::AcqRel);
            return rejected(&core, inflight, done.remains, spent, fallback, why);
        }
        if let Some(d) = inflight.produced_by {
            core.devices[d].record_success();
        }
    }
    if let Some(abc) = spent.take() {
        drop(abc);
        abc_gone(&mut inflight);
    }
    inflight.token.advance(Stage::Deallocating);
    job.settle(index, Ok(done.proof));
    let _ = dealloc.send((done.remains, inflight));
}

/// What the parameters or the witness are suspected of when the host reference's proof fails.
const REFERENCE_FAILED: &str = "the CPU reference computed it, so no device is at fault: the \
     parameters are suspect (they do not belong to this circuit: damaged, or made for another \
     one), or the witness does not satisfy the circuit; delete a generated parameter file to \
     have it made again, or fetch the production file again";

/// A partition's proof did not verify. A device's partition is proved again on the fallback
/// backend when its a/b/c were kept, and the device's failure counts towards taking it out of
/// service; a proof from the host reference fails the job, naming the parameters and the witness
/// as the suspects.
fn rejected(
    core: &Core,
    mut inflight: InFlight,
    witness: Witness,
    spent: Option<Evaluations>,
    fallback: Option<Sender<FallbackItem>>,
    why: String,
) {
    let job = inflight.job.id;
    let index = inflight.index;
    let reference_failed = |produced_by: String| Error::ProofRejected {
        produced_by,
        detail: format!("{why}; {REFERENCE_FAILED}"),
    };
    let error = match inflight.produced_by.take() {
        Some(d) if core.reference => reference_failed(core.devices[d].name.clone()),
        Some(d) => {
            let dev = &core.devices[d];
            let error = Error::ProofRejected {
                produced_by: dev.name.clone(),
                detail: format!("{why}; the device's sums are wrong, or the parameters are"),
            };
            dev.record_rejection(core.config.max_device_failures, &error);
            tracing::warn!(job, partition = index, device = %dev.name, error = %error,
                "a device's proof did not verify");
            match (spent, fallback) {
                (Some(evaluations), Some(tx)) => {
                    let partition = SynthesizedPartition {
                        evaluations,
                        witness,
                    };
                    return to_fallback(core, inflight, partition, error, Some(&tx));
                }
                _ => Error::ProofRejected {
                    produced_by: dev.name.clone(),
                    detail: format!(
                        "{why}; it could not be proved again on the CPU (no fallback backend, or \
                         the backend kept no copy of a/b/c), so the device and the parameters \
                         are both suspects"
                    ),
                },
            }
        }
        None => match &core.config.fallback {
            Some(fb) if fb.is_reference() => {
                reference_failed(format!("{} (the fallback backend)", fb.name()))
            }
            fb => Error::ProofRejected {
                produced_by: format!(
                    "{} (the fallback backend)",
                    fb.as_ref().map_or("none", |f| f.name())
                ),
                detail: format!("{why}; its sums are wrong, or the parameters are"),
            },
        },
    };
    tracing::error!(job, partition = index, error = %error, "a partition's proof did not verify");
    inflight.fail("verification", error);
}
