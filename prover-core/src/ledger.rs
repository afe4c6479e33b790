//! The stage ledger: how many partitions, and how many bytes of each kind of large buffer, are
//! in each stage right now, and at most so far.
//!
//! A partition enters with [`StageLedger::enter`] and gets a [`PartitionToken`] (`#[must_use]`).
//! Moving the token to another stage moves the partition and the bytes of its buffers; dropping
//! it removes both, on error and panic paths too, so the ledger always balances back to zero.
//! Every counter is an atomic: snapshots take no lock, and nothing on the hot path waits.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The stages of a partition, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Being synthesized (holds a synthesis permit).
    Synthesizing,
    /// Synthesized, waiting for (or in) the accelerator queue.
    AwaitingAccelerator,
    /// Taken by an accelerator worker.
    OnAccelerator,
    /// In the finalizer (b_g2 MSM, assembly).
    Finalizing,
    /// Proof made; buffers being released.
    Deallocating,
}

impl Stage {
    /// All stages, in order.
    pub const ALL: [Stage; 5] = [
        Stage::Synthesizing,
        Stage::AwaitingAccelerator,
        Stage::OnAccelerator,
        Stage::Finalizing,
        Stage::Deallocating,
    ];

    /// Whether the stage is before the accelerator (synthesizing or awaiting it).
    pub fn is_pre_accelerator(self) -> bool {
        matches!(self, Stage::Synthesizing | Stage::AwaitingAccelerator)
    }

    /// The snake-case name used in reports (`synthesizing`, `awaiting_accelerator`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Synthesizing => "synthesizing",
            Stage::AwaitingAccelerator => "awaiting_accelerator",
            Stage::OnAccelerator => "on_accelerator",
            Stage::Finalizing => "finalizing",
            Stage::Deallocating => "deallocating",
        }
    }
}

/// The kinds of large buffers the ledger counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BufferKind {
    /// The a, b, c evaluations.
    Abc,
    /// The aux assignment.
    Aux,
    /// The input assignment.
    Input,
    /// The density bitmaps.
    Density,
    /// Backend temporaries on the host (H coefficients, pointer arrays, ...).
    BackendTemp,
    /// Pinned host staging buffers.
    PinnedStaging,
}

impl BufferKind {
    /// All kinds.
    pub const ALL: [BufferKind; 6] = [
        BufferKind::Abc,
        BufferKind::Aux,
        BufferKind::Input,
        BufferKind::Density,
        BufferKind::BackendTemp,
        BufferKind::PinnedStaging,
    ];

    /// The snake-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Abc => "abc",
            BufferKind::Aux => "aux",
            BufferKind::Input => "input",
            BufferKind::Density => "density",
            BufferKind::BackendTemp => "backend_temp",
            BufferKind::PinnedStaging => "pinned_staging",
        }
    }
}

/// A live counter with its high-water mark.
#[derive(Default)]
struct Gauge {
    live: AtomicU64,
    peak: AtomicU64,
}

impl Gauge {
    fn add(&self, n: u64) -> u64 {
        let now = self.live.fetch_add(n, Ordering::AcqRel) + n;
        self.peak.fetch_max(now, Ordering::AcqRel);
        now
    }

    fn sub(&self, n: u64) {
        let before = self.live.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(before >= n, "ledger gauge went negative");
    }

    fn read(&self) -> Level {
        Level {
            live: self.live.load(Ordering::Acquire),
            peak: self.peak.load(Ordering::Acquire),
        }
    }
}

/// Count and bytes gauges of one stage or buffer kind.
#[derive(Default)]
struct Pair {
    count: Gauge,
    bytes: Gauge,
}

#[derive(Default)]
struct Inner {
    stages: [Pair; 5],
    kinds: [Pair; 6],
    total_bytes: Gauge,
    /// Partitions in `Synthesizing` or `AwaitingAccelerator`: its own gauge, so that its peak is
    /// the exact maximum of the sum (two stage peaks need not coincide).
    pre_accelerator: Gauge,
}

/// A gauge's live value and peak.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Level {
    /// Now.
    pub live: u64,
    /// The most so far.
    pub peak: u64,
}

/// Count and bytes of a stage or a buffer kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Partitions (for a stage) or buffers (for a kind).
    pub count: Level,
    /// Real bytes.
    pub bytes: Level,
}

/// A lock-free reading of the whole ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Per stage, in [`Stage::ALL`] order.
    pub stages: [Usage; 5],
    /// Per buffer kind, in [`BufferKind::ALL`] order.
    pub kinds: [Usage; 6],
    /// Total live bytes over all stages, and its peak at one moment.
    pub total_bytes: Level,
    /// Partitions in `Synthesizing` or `AwaitingAccelerator` (the ones a synthesis-permit
    /// policy bounds), and the peak of that sum.
    pub pre_accelerator: Level,
}

impl Snapshot {
    /// One stage's usage.
    pub fn stage(&self, s: Stage) -> Usage {
        self.stages[s as usize]
    }

    /// One buffer kind's usage.
    pub fn kind(&self, k: BufferKind) -> Usage {
        self.kinds[k as usize]
    }

    /// Partitions in the ledger now.
    pub fn in_flight(&self) -> u64 {
        self.stages.iter().map(|u| u.count.live).sum()
    }

    /// Whether nothing is live (every stage and kind at zero).
    pub fn is_balanced(&self) -> bool {
        self.total_bytes.live == 0
            && self.pre_accelerator.live == 0
            && self
                .stages
                .iter()
                .chain(&self.kinds)
                .all(|u| u.count.live == 0 && u.bytes.live == 0)
    }
}

impl fmt::Display for Snapshot {
    /// One line: in flight, then per stage `name=count/bytes`, then the total bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in flight {}:", self.in_flight())?;
        for s in Stage::ALL {
            let u = self.stage(s);
            write!(
                f,
                " {}={}/{}",
                s.name(),
                u.count.live,
                human_bytes(u.bytes.live)
            )?;
        }
        write!(
            f,
            "; bytes {} (peak {})",
            human_bytes(self.total_bytes.live),
            human_bytes(self.total_bytes.peak)
        )
    }
}

/// `1.5 GiB`-style formatting.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The stage ledger. Cloning gives another handle to the same counters.
#[derive(Clone, Default)]
pub struct StageLedger {
    inner: Arc<Inner>,
}

impl fmt::Debug for StageLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StageLedger({})", self.snapshot())
    }
}

impl StageLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Enters a partition in `stage`, holding no buffers yet.
    pub fn enter(&self, stage: Stage, job: u64, partition: usize) -> PartitionToken {
        self.inner.stages[stage as usize].count.add(1);
        if stage.is_pre_accelerator() {
            self.inner.pre_accelerator.add(1);
        }
        tracing::debug!(job, partition, stage = stage.name(), "ledger: enter");
        PartitionToken {
            inner: self.inner.clone(),
            stage,
            job,
            partition,
            held: [(0, 0); 6],
        }
    }

    /// Reads every counter (no lock).
    pub fn snapshot(&self) -> Snapshot {
        let usage = |p: &Pair| Usage {
            count: p.count.read(),
            bytes: p.bytes.read(),
        };
        Snapshot {
            stages: std::array::from_fn(|i| usage(&self.inner.stages[i])),
            kinds: std::array::from_fn(|i| usage(&self.inner.kinds[i])),
            total_bytes: self.inner.total_bytes.read(),
            pre_accelerator: self.inner.pre_accelerator.read(),
        }
    }
}

/// One partition in the ledger. Moving it moves the partition and its bytes; dropping it removes
/// both.
#[must_use = "dropping the token removes the partition from the ledger"]
pub struct PartitionToken {
    inner: Arc<Inner>,
    stage: Stage,
    job: u64,
    partition: usize,
    /// Per kind: buffers and bytes this partition holds.
    held: [(u64, u64); 6],
}

impl fmt::Debug for PartitionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartitionToken")
            .field("job", &self.job)
            .field("partition", &self.partition)
            .field("stage", &self.stage)
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl PartitionToken {
    /// The partition's stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// Bytes this partition holds now.
    pub fn bytes(&self) -> u64 {
        self.held.iter().map(|h| h.1).sum()
    }

    /// Registers one buffer of `kind` with its real size (capacity x element size).
    pub fn register(&mut self, kind: BufferKind, bytes: u64) {
        let k = kind as usize;
        self.held[k].0 += 1;
        self.held[k].1 += bytes;
        self.inner.kinds[k].count.add(1);
        self.inner.kinds[k].bytes.add(bytes);
        self.inner.stages[self.stage as usize].bytes.add(bytes);
        self.inner.total_bytes.add(bytes);
    }

    /// Releases every buffer of `kind` this partition holds.
    pub fn release(&mut self, kind: BufferKind) {
        let k = kind as usize;
        let (count, bytes) = std::mem::take(&mut self.held[k]);
        self.inner.kinds[k].count.sub(count);
        self.inner.kinds[k].bytes.sub(bytes);
        self.inner.stages[self.stage as usize].bytes.sub(bytes);
        self.inner.total_bytes.sub(bytes);
    }

    /// Moves the partition, with its bytes, to `next`.
    pub fn advance(&mut self, next: Stage) {
        let bytes = self.bytes();
        let (from, to) = (
            &self.inner.stages[self.stage as usize],
            &self.inner.stages[next as usize],
        );
        // Remove before adding: a snapshot taken in between may miss the moving partition for
        // an instant, but never counts it twice, so upper bounds read from snapshots hold.
        from.count.sub(1);
        from.bytes.sub(bytes);
        to.count.add(1);
        to.bytes.add(bytes);
        match (self.stage.is_pre_accelerator(), next.is_pre_accelerator()) {
            (true, false) => self.inner.pre_accelerator.sub(1),
            (false, true) => {
                self.inner.pre_accelerator.add(1);
            }
            _ => {}
        }
        tracing::debug!(
            job = self.job,
            partition = self.partition,
            from = self.stage.name(),
            to = next.name(),
            bytes,
            "ledger: advance"
        );
        self.stage = next;
    }
}

impl Drop for PartitionToken {
    fn drop(&mut self) {
        for kind in BufferKind::ALL {
            self.release(kind);
        }
        self.inner.stages[self.stage as usize].count.sub(1);
        if self.stage.is_pre_accelerator() {
            self.inner.pre_accelerator.sub(1);
        }
        tracing::debug!(
            job = self.job,
            partition = self.partition,
            stage = self.stage.name(),
            "ledger: leave"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_moves_its_bytes_and_leaves_no_trace() {
        let ledger = StageLedger::new();
        let mut t = ledger.enter(Stage::Synthesizing, 1, 0);
        t.register(BufferKind::Abc, 300);
        t.register(BufferKind::Aux, 100);
        t.register(BufferKind::Abc, 30);
        let s = ledger.snapshot();
        assert_eq!(s.stage(Stage::Synthesizing).count.live, 1);
        assert_eq!(s.stage(Stage::Synthesizing).bytes.live, 430);
        assert_eq!(s.kind(BufferKind::Abc).count.live, 2);
        assert_eq!(s.kind(BufferKind::Abc).bytes.live, 330);
        let u = ledger.enter(Stage::Synthesizing, 1, 1);
        t.advance(Stage::AwaitingAccelerator);
        assert_eq!(
            ledger.snapshot().pre_accelerator,
            Level { live: 2, peak: 2 }
        );
        drop(u);
        t.advance(Stage::OnAccelerator);
        assert_eq!(
            ledger.snapshot().pre_accelerator,
            Level { live: 0, peak: 2 }
        );
        t.release(BufferKind::Abc);
        let s = ledger.snapshot();
        assert_eq!(
            s.stage(Stage::Synthesizing),
            Usage {
                count: Level { live: 0, peak: 2 },
                bytes: Level { live: 0, peak: 430 },
            }
        );
        assert_eq!(s.stage(Stage::OnAccelerator).bytes.live, 100);
        assert_eq!(s.kind(BufferKind::Abc).bytes, Level { live: 0, peak: 330 });
        assert_eq!(
            s.total_bytes,
            Level {
                live: 100,
                peak: 430
            }
        );
        assert!(!s.is_balanced());
        drop(t);
        let s = ledger.snapshot();
        assert!(s.is_balanced(), "{s}");
        assert_eq!(s.stage(Stage::OnAccelerator).count.peak, 1);
    }

    #[test]
    fn tokens_balance_on_panic_paths() {
        let ledger = StageLedger::new();
        let l2 = ledger.clone();
        let r = std::thread::spawn(move || {
            let mut t = l2.enter(Stage::Synthesizing, 7, 3);
            t.register(BufferKind::Aux, 1 << 20);
            t.advance(Stage::Finalizing);
            panic!("a stage failed");
        })
        .join();
        assert!(r.is_err());
        assert!(ledger.snapshot().is_balanced());
        assert_eq!(
            ledger.snapshot().stage(Stage::Finalizing).bytes.peak,
            1 << 20
        );
    }

    #[test]
    fn peaks_are_simultaneous_totals() {
        let ledger = StageLedger::new();
        let mut a = ledger.enter(Stage::Synthesizing, 0, 0);
        a.register(BufferKind::Aux, 10);
        drop(a);
        let mut b = ledger.enter(Stage::Synthesizing, 0, 1);
        b.register(BufferKind::Aux, 10);
        // Two partitions of 10 bytes, one after the other: the total peak is 10, not 20.
        assert_eq!(ledger.snapshot().total_bytes.peak, 10);
        let mut c = ledger.enter(Stage::Finalizing, 0, 2);
        c.register(BufferKind::Input, 5);
        assert_eq!(ledger.snapshot().total_bytes.peak, 15);
        let line = ledger.snapshot().to_string();
        assert!(
            line.starts_with("in flight 2: synthesizing=1/10 B"),
            "{line}"
        );
        drop((b, c));
        assert!(ledger.snapshot().is_balanced());
    }

    #[test]
    fn human_bytes_formats_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
