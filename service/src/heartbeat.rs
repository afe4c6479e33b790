//! A node's heartbeat: every third of its lease it extends the leases of the jobs it runs and
//! stops those it no longer owns (cancelled through another node, or lost when its lease ran
//! out); more often, it puts any node's run-out jobs back in the queue (or fails them after
//! their last attempt).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::server::{lock, Shared};
use crate::store::{Expired, StoreError};

/// Beats until the server's stop has waited for its running jobs: a heartbeat every third of
/// the lease, and a look for run-out leases every tenth of it (at most a second apart), or as
/// soon as the earliest lease of a running job ends if that is sooner, so that a dead node's
/// job goes back to the queue as its lease ends.
pub(crate) fn run(shared: &Shared) {
    let lease = shared.node.lease_ms;
    let beat_every = Duration::from_millis((lease / 3).max(10));
    let look_every = Duration::from_millis((lease / 10).clamp(10, 1000));
    let (mut next_beat, mut next_look) = (Instant::now(), Instant::now());
    while !shared.done.load(Ordering::Acquire) {
        let now = Instant::now();
        if now >= next_beat {
            next_beat = now + beat_every;
            beat(shared);
        }
        if now >= next_look {
            expire(shared);
            next_look = now + until_next_look(shared, look_every);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn beat(shared: &Shared) {
    // The jobs running before the store is asked: a job claimed after the answer is not in it
    // and must not be taken for lost.
    let before: Vec<(String, u32)> = lock(&shared.running)
        .iter()
        .map(|(id, r)| (id.clone(), r.attempt))
        .collect();
    let owned = shared.store().heartbeat(&shared.node, &before);
    match owned {
        Ok(owned) => {
            for (id, attempt) in before {
                if owned.contains(&(id.clone(), attempt)) {
                    continue;
                }
                if let Some(r) = lock(&shared.running).get(&id) {
                    if r.attempt == attempt {
                        r.cancel.cancel();
                    }
                }
            }
        }
        Err(StoreError::Busy(e)) => {
            // Another process runs under this node's name: these jobs are no longer this one's.
            eprintln!("error: {e}");
            for r in lock(&shared.running).values() {
                r.cancel.cancel();
            }
        }
        Err(e) => eprintln!("error: heartbeat of node {:?}: {e}", shared.node.name),
    }
}

fn expire(shared: &Shared) {
    let expired = shared.store().expire_leases(shared.max_attempts);
    match expired {
        Ok(expired) if !expired.is_empty() => {
            report(&expired);
            for _ in &expired {
                shared.metrics.lease_expired();
            }
            shared.ended.notify_waiters();
            shared.wake_worker();
        }
        Ok(_) => {}
        Err(e) => eprintln!("error: expiring leases: {e}"),
    }
}

/// How long until the next look: `look_every`, or less where the earliest running lease ends
/// sooner (a few milliseconds after it, since a lease ends once the store's clock is past it).
fn until_next_look(shared: &Shared, look_every: Duration) -> Duration {
    match shared.store().next_lease_end() {
        // Not sooner than a tenth of the interval: a lease the look could not end (the store
        // failed it) is not looked at in a busy loop.
        Ok(Some(left_ms)) => {
            look_every.min(Duration::from_millis(left_ms + 5).max(look_every / 10))
        }
        Ok(None) => look_every,
        Err(e) => {
            eprintln!("error: reading the next lease's end: {e}");
            look_every
        }
    }
}

/// Says what happened to jobs whose lease ran out.
pub(crate) fn report(expired: &[Expired]) {
    for e in expired {
        if e.requeued {
            eprintln!(
                "job {}: its lease on node {:?} ran out (attempt {}): back in the queue",
                e.id, e.owner, e.attempts
            );
        } else {
            eprintln!(
                "job {}: its lease on node {:?} ran out on its last attempt ({}): failed",
                e.id, e.owner, e.attempts
            );
        }
    }
}
