//! A timeline of the ledger: per-stage counts and bytes and the process RSS, sampled on a timer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::accounting::ledger::{Stage, StageLedger};

/// One sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t_seconds: f64,
    /// Resident set size of the process, bytes (0 where it cannot be read).
    pub rss_bytes: u64,
    /// Per stage in [`Stage::ALL`] order: live partitions and live bytes.
    pub stages: [(u64, u64); 6],
}

impl Sample {
    /// Live partitions in `stage`.
    pub fn count(&self, stage: Stage) -> u64 {
        self.stages[stage as usize].0
    }
}

/// Resident set size of this process now, from `/proc/self/statm`.
pub fn current_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

/// Peak resident set size of this process (`VmHWM` in `/proc/self/status`).
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn page_size() -> u64 {
    // The base page size on every Linux target proofline runs on; statm counts in these.
    4096
}

/// Samples a ledger on a background thread until stopped.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    taken: Arc<AtomicUsize>,
    handle: JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Starts sampling `ledger` every `interval` (the first sample is taken at once).
    pub fn start(ledger: StageLedger, interval: Duration) -> Self {
        let (stop, rx) = mpsc::channel::<()>();
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        let handle = std::thread::Builder::new()
            .name("proofline-sampler".into())
            .spawn(move || {
                let start = Instant::now();
                let sample = || {
                    let snap = ledger.snapshot();
                    counter.fetch_add(1, Ordering::Release);
                    Sample {
                        t_seconds: start.elapsed().as_secs_f64(),
                        rss_bytes: current_rss().unwrap_or(0),
                        stages: std::array::from_fn(|i| {
                            (snap.stages[i].count.live, snap.stages[i].bytes.live)
                        }),
                    }
                };
                let mut out = vec![sample()];
                loop {
                    match rx.recv_timeout(interval) {
                        Err(mpsc::RecvTimeoutError::Timeout) => out.push(sample()),
                        // Stopped: one last sample, then the timeline.
                        Ok(()) => {
                            out.push(sample());
                            return out;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => return out,
                    }
                }
            })
            .expect("spawning the sampler thread");
        Sampler {
            stop,
            taken,
            handle,
        }
    }

    /// Samples taken so far.
    pub fn samples_taken(&self) -> usize {
        self.taken.load(Ordering::Acquire)
    }

    /// Stops and returns the timeline (with one last sample).
    pub fn stop(self) -> Vec<Sample> {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ledger::BufferKind;

    #[test]
    fn samples_follow_the_ledger() {
        let ledger = StageLedger::new();
        let sampler = Sampler::start(ledger.clone(), Duration::from_millis(1));
        let wait_for_two_more = |s: &Sampler| {
            let n = s.samples_taken();
            while s.samples_taken() < n + 2 {
                std::thread::yield_now();
            }
        };
        let mut t = ledger.enter(Stage::Finalizing, 0, 0);
        t.register(BufferKind::Aux, 4096);
        wait_for_two_more(&sampler);
        drop(t);
        let timeline = sampler.stop();
        assert!(timeline.len() >= 2);
        assert!(timeline
            .windows(2)
            .all(|w| w[0].t_seconds <= w[1].t_seconds));
        assert!(timeline
            .iter()
            .any(|s| s.stages[Stage::Finalizing as usize] == (1, 4096)));
        assert_eq!(timeline.last().unwrap().count(Stage::Finalizing), 0);
        assert!(timeline[0].rss_bytes > 0);
        // VmHWM is synced lazily by the kernel and may trail statm for a moment: only check it reads.
        assert!(peak_rss().unwrap() > 0);
    }
}
