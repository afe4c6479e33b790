//! The fallback pool's entry: a partition handed back by the devices waits for one of the
//! pool's slots and is queued to the fallback backend's threads (`accelerator::fallback_worker`),
//! or fails its job where there is no fallback.

use crossbeam_channel::Sender;

use crate::accounting::ledger::Stage;
use crate::error::Error;
use crate::runtime::permit::Permit;
use crate::stages::SynthesizedPartition;

use super::job::InFlight;
use super::Core;

/// A partition in the fallback pool, holding one of its slots.
pub(super) struct FallbackItem {
    pub(super) inflight: InFlight,
    pub(super) partition: SynthesizedPartition,
    pub(super) slot: Permit,
}

/// Sends a partition to the fallback pool, waiting for one of its slots; without a fallback
/// backend it fails with `error`.
pub(super) fn to_fallback(
    core: &Core,
    mut inflight: InFlight,
    partition: SynthesizedPartition,
    error: Error,
    fallback: Option<&Sender<FallbackItem>>,
) {
    if inflight.skip_if_cancelled() {
        return;
    }
    let (Some(tx), Some(slots)) = (fallback, &core.fallback_slots) else {
        return inflight.fail("accelerator", error);
    };
    let Some(slot) = slots.acquire(1) else {
        return inflight.fail("accelerator", error); // fallback_depth >= 1 is validated
    };
    inflight.token.advance(Stage::Fallback);
    if let Err(crossbeam_channel::SendError(item)) = tx.send(FallbackItem {
        inflight,
        partition,
        slot,
    }) {
        item.inflight.fail("accelerator", error);
    }
}
