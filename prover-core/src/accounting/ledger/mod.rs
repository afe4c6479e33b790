//! The stage ledger: how many partitions, and how many bytes of each kind of large buffer, are
//! in each stage right now, and at most so far.
//!
//! A partition enters with [`StageLedger::enter`] and gets a [`PartitionToken`] (`#[must_use]`).
//! Moving the token to another stage moves the partition and the bytes of its buffers; dropping
//! it removes both, on error and panic paths too, so the ledger always balances back to zero.
//! Every counter is an atomic: snapshots take no lock, and nothing on the hot path waits.
//!
//! Host and device memory are counted apart: a stage's `bytes` are host bytes, its
//! `device_bytes` the device buffers its partitions hold (registered by a backend through the
//! narrow [`BackendBuffers`] handle). Per-parameters buffers that outlive partitions (bases
//! resident on a device, pinned pools) are [`resident`] entries, reported apart from the stages.

mod backend;
pub mod resident;

pub use backend::{BackendBuffer, BackendBuffers};
pub use resident::{ResidentKind, ResidentToken};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::units::human_bytes;

/// The stages of a partition, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Being synthesized (holds a synthesis permit).
    Synthesizing,
    /// Synthesized, waiting for (or in) the accelerator queue.
    AwaitingAccelerator,
    /// Taken by an accelerator worker.
    OnAccelerator,
    /// Handed back by a device: waiting for (or on) another device or the fallback backend.
    Fallback,
    /// In the finalizer (b_g2 MSM, assembly).
    Finalizing,
    /// Proof made; buffers being released.
    Deallocating,
}

impl Stage {
    /// All stages, in order.
    pub const ALL: [Stage; 6] = [
        Stage::Synthesizing,
        Stage::AwaitingAccelerator,
        Stage::OnAccelerator,
        Stage::Fallback,
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
            Stage::Fallback => "fallback",
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
    /// Backend temporaries on the host (pointer arrays, staging copies, ...), registered by the
    /// backend.
    BackendTemp,
    /// Pinned (page-locked) host staging buffers, registered by the backend.
    PinnedStaging,
    /// Device copies of a, b and c (and the H work built on them), registered by the backend.
    DeviceAbc,
    /// Other device scratch of a partition (MSM buckets, scalars), registered by the backend.
    DeviceScratch,
}

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Host RAM (what the byte budget and the RSS see).
    Host,
    /// Accelerator memory.
    Device,
}

impl BufferKind {
    /// All kinds.
    pub const ALL: [BufferKind; 8] = [
        BufferKind::Abc,
        BufferKind::Aux,
        BufferKind::Input,
        BufferKind::Density,
        BufferKind::BackendTemp,
        BufferKind::PinnedStaging,
        BufferKind::DeviceAbc,
        BufferKind::DeviceScratch,
    ];

    /// Where buffers of this kind live.
    pub fn memory(self) -> Memory {
        match self {
            BufferKind::DeviceAbc | BufferKind::DeviceScratch => Memory::Device,
            _ => Memory::Host,
        }
    }

    /// The snake-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Abc => "abc",
            BufferKind::Aux => "aux",
            BufferKind::Input => "input",
            BufferKind::Density => "density",
            BufferKind::BackendTemp => "backend_temp",
            BufferKind::PinnedStaging => "pinned_staging",
            BufferKind::DeviceAbc => "device_abc",
            BufferKind::DeviceScratch => "device_scratch",
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
    stages: [Pair; 6],
    /// Device bytes per stage.
    stage_device: [Gauge; 6],
    kinds: [Pair; 8],
    total_bytes: Gauge,
    device_bytes: Gauge,
    /// Every device byte: partitions' and resident entries'.
    device_total: Gauge,
    resident: [Pair; resident::KINDS],
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
    /// Per stage, in [`Stage::ALL`] order (host bytes).
    pub stages: [Usage; 6],
    /// Per stage, device bytes.
    pub stage_device_bytes: [Level; 6],
    /// Per buffer kind, in [`BufferKind::ALL`] order (bytes in the kind's memory).
    pub kinds: [Usage; 8],
    /// Total live host bytes of partitions over all stages, and its peak at one moment.
    pub total_bytes: Level,
    /// Total live device bytes of partitions, and its peak at one moment.
    pub device_bytes: Level,
    /// Every device byte the ledger knows (partitions' buffers and resident entries such as
    /// uploaded bases), and its peak at one moment: what the driver should report in use
    /// beyond its own baseline.
    pub device_total: Level,
    /// Per resident kind, in [`ResidentKind::ALL`] order: entries and bytes.
    pub resident: [Usage; resident::KINDS],
    /// Partitions in `Synthesizing` or `AwaitingAccelerator` (the ones a synthesis-permit
    /// policy bounds), and the peak of that sum.
    pub pre_accelerator: Level,
}

impl Snapshot {
    /// One stage's usage.
    pub fn stage(&self, s: Stage) -> Usage {
        self.stages[s as usize]
    }

    /// One stage's device bytes.
    pub fn stage_device(&self, s: Stage) -> Level {
        self.stage_device_bytes[s as usize]
    }

    /// One buffer kind's usage.
    pub fn kind(&self, k: BufferKind) -> Usage {
        self.kinds[k as usize]
    }

    /// One resident kind's usage.
    pub fn resident(&self, k: ResidentKind) -> Usage {
        self.resident[k as usize]
    }

    /// Live resident bytes in `memory`.
    pub fn resident_bytes(&self, memory: Memory) -> u64 {
        ResidentKind::ALL
            .iter()
            .filter(|k| k.memory() == memory)
            .map(|k| self.resident(*k).bytes.live)
            .sum()
    }

    /// Partitions in the ledger now.
    pub fn in_flight(&self) -> u64 {
        self.stages.iter().map(|u| u.count.live).sum()
    }

    /// Whether nothing is live (every stage and kind at zero).
    /// Resident entries are not partitions and are not part of this check.
    pub fn is_balanced(&self) -> bool {
        self.total_bytes.live == 0
            && self.device_bytes.live == 0
            && self.device_total.live == self.resident_bytes(Memory::Device)
            && self.stage_device_bytes.iter().all(|l| l.live == 0)
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
        )?;
        if self.device_bytes.peak > 0 {
            write!(
                f,
                "; device {} (peak {})",
                human_bytes(self.device_bytes.live),
                human_bytes(self.device_bytes.peak)
            )?;
        }
        Ok(())
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
            held: [(0, 0); 8],
        }
    }

    /// Registers a per-parameters buffer of `kind` (`bytes` in the kind's memory) until the
    /// returned token is dropped.
    pub fn resident(&self, kind: ResidentKind, bytes: u64) -> ResidentToken {
        ResidentToken::new(self.inner.clone(), kind, bytes)
    }

    /// Reads every counter (no lock).
    pub fn snapshot(&self) -> Snapshot {
        let usage = |p: &Pair| Usage {
            count: p.count.read(),
            bytes: p.bytes.read(),
        };
        Snapshot {
            stages: std::array::from_fn(|i| usage(&self.inner.stages[i])),
            stage_device_bytes: std::array::from_fn(|i| self.inner.stage_device[i].read()),
            kinds: std::array::from_fn(|i| usage(&self.inner.kinds[i])),
            total_bytes: self.inner.total_bytes.read(),
            device_bytes: self.inner.device_bytes.read(),
            device_total: self.inner.device_total.read(),
            resident: std::array::from_fn(|i| usage(&self.inner.resident[i])),
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
    held: [(u64, u64); 8],
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

    /// Host bytes this partition holds now.
    pub fn bytes(&self) -> u64 {
        self.bytes_in(Memory::Host)
    }

    /// Device bytes this partition holds now.
    pub fn device_bytes(&self) -> u64 {
        self.bytes_in(Memory::Device)
    }

    fn bytes_in(&self, memory: Memory) -> u64 {
        BufferKind::ALL
            .iter()
            .filter(|k| k.memory() == memory)
            .map(|k| self.held[*k as usize].1)
            .sum()
    }

    /// The stage gauge of `memory`'s bytes and the total gauge of that memory.
    fn gauges(&self, stage: Stage, memory: Memory) -> (&Gauge, &Gauge) {
        match memory {
            Memory::Host => (
                &self.inner.stages[stage as usize].bytes,
                &self.inner.total_bytes,
            ),
            Memory::Device => (
                &self.inner.stage_device[stage as usize],
                &self.inner.device_bytes,
            ),
        }
    }

    /// Registers one buffer of `kind` with its real size (capacity x element size).
    pub fn register(&mut self, kind: BufferKind, bytes: u64) {
        let k = kind as usize;
        self.held[k].0 += 1;
        self.held[k].1 += bytes;
        self.inner.kinds[k].count.add(1);
        self.inner.kinds[k].bytes.add(bytes);
        let (stage, total) = self.gauges(self.stage, kind.memory());
        stage.add(bytes);
        total.add(bytes);
        if kind.memory() == Memory::Device {
            self.inner.device_total.add(bytes);
        }
    }

    /// Releases every buffer of `kind` this partition holds.
    pub fn release(&mut self, kind: BufferKind) {
        let (count, bytes) = self.held[kind as usize];
        self.remove(kind, count, bytes);
    }

    /// Releases one buffer of `kind` of `bytes` (freed before its stage ends), never more than
    /// the partition holds of that kind.
    pub fn release_one(&mut self, kind: BufferKind, bytes: u64) {
        let (count, held) = self.held[kind as usize];
        self.remove(kind, count.min(1), bytes.min(held));
    }

    fn remove(&mut self, kind: BufferKind, count: u64, bytes: u64) {
        let k = kind as usize;
        self.held[k].0 -= count;
        self.held[k].1 -= bytes;
        self.inner.kinds[k].count.sub(count);
        self.inner.kinds[k].bytes.sub(bytes);
        let (stage, total) = self.gauges(self.stage, kind.memory());
        stage.sub(bytes);
        total.sub(bytes);
        if kind.memory() == Memory::Device {
            self.inner.device_total.sub(bytes);
        }
    }

    /// The narrow handle a backend registers its own buffers through.
    pub fn backend_buffers(&mut self) -> BackendBuffers<'_> {
        BackendBuffers { token: self }
    }

    /// Releases every buffer a backend registered (the backend's buffers of a partition live
    /// only while its accelerator stage runs).
    pub fn release_backend_buffers(&mut self) {
        for kind in BackendBuffer::ALL {
            self.release(kind.into());
        }
    }

    /// Moves the partition, with its bytes, to `next`.
    pub fn advance(&mut self, next: Stage) {
        let bytes = self.bytes();
        let device = self.device_bytes();
        let (from, to) = (
            &self.inner.stages[self.stage as usize],
            &self.inner.stages[next as usize],
        );
        // Remove before adding: a snapshot taken in between may miss the moving partition for
        // an instant, but never counts it twice, so upper bounds read from snapshots hold.
        from.count.sub(1);
        from.bytes.sub(bytes);
        self.inner.stage_device[self.stage as usize].sub(device);
        to.count.add(1);
        to.bytes.add(bytes);
        self.inner.stage_device[next as usize].add(device);
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
}
