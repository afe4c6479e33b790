//! Resident entries: buffers a backend keeps per parameters (bases uploaded to a device once,
//! pinned host pools), which outlive every partition. They are counted apart from the stages,
//! with RAII tokens held by the backend's prepared state, so they leave the ledger when the
//! prepared parameters are dropped.

use std::fmt;
use std::sync::Arc;

use super::{Inner, Memory};

/// Number of resident kinds.
pub(super) const KINDS: usize = 6;

/// The kinds of resident buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResidentKind {
    /// Proving-key bases copied to a device.
    DeviceBases,
    /// Other per-parameters device state (precomputed tables, twiddles).
    DeviceTables,
    /// Pinned host pools reused across partitions.
    PinnedPool,
    /// The one synthesized partition a replay workload copies for every partition.
    ReplaySource,
    /// A circuit shape's recorded A, B and C matrices, shared by the pre-compiled synthesizer's
    /// workers.
    PceMatrices,
    /// A job's input as its submitter holds it while the job runs (a PoRep C2's parsed C1
    /// output: its vanilla proofs, gigabytes at 32 GiB).
    JobInput,
}

impl ResidentKind {
    /// All kinds.
    pub const ALL: [ResidentKind; KINDS] = [
        ResidentKind::DeviceBases,
        ResidentKind::DeviceTables,
        ResidentKind::PinnedPool,
        ResidentKind::ReplaySource,
        ResidentKind::PceMatrices,
        ResidentKind::JobInput,
    ];

    /// Where entries of this kind live.
    pub fn memory(self) -> Memory {
        match self {
            ResidentKind::DeviceBases | ResidentKind::DeviceTables => Memory::Device,
            ResidentKind::PinnedPool
            | ResidentKind::ReplaySource
            | ResidentKind::PceMatrices
            | ResidentKind::JobInput => Memory::Host,
        }
    }

    /// The snake-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            ResidentKind::DeviceBases => "device_bases",
            ResidentKind::DeviceTables => "device_tables",
            ResidentKind::PinnedPool => "pinned_pool",
            ResidentKind::ReplaySource => "replay_source",
            ResidentKind::PceMatrices => "pce_matrices",
            ResidentKind::JobInput => "job_input",
        }
    }
}

/// One resident buffer in the ledger; dropping it removes it.
#[must_use = "dropping the token removes the resident entry from the ledger"]
pub struct ResidentToken {
    inner: Arc<Inner>,
    kind: ResidentKind,
    bytes: u64,
}

impl fmt::Debug for ResidentToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResidentToken")
            .field("kind", &self.kind)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl ResidentToken {
    pub(super) fn new(inner: Arc<Inner>, kind: ResidentKind, bytes: u64) -> Self {
        let pair = &inner.resident[kind as usize];
        pair.count.add(1);
        pair.bytes.add(bytes);
        if kind.memory() == Memory::Device {
            inner.device_total.add(bytes);
        }
        tracing::debug!(kind = kind.name(), bytes, "ledger: resident entry");
        ResidentToken { inner, kind, bytes }
    }

    /// The entry's kind.
    pub fn kind(&self) -> ResidentKind {
        self.kind
    }

    /// The entry's bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for ResidentToken {
    fn drop(&mut self) {
        let pair = &self.inner.resident[self.kind as usize];
        pair.count.sub(1);
        pair.bytes.sub(self.bytes);
        if self.kind.memory() == Memory::Device {
            self.inner.device_total.sub(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::ledger::{BackendBuffer, BufferKind, Stage, StageLedger};

    #[test]
    fn resident_entries_are_apart_from_partitions_and_balance() {
        let ledger = StageLedger::new();
        let bases = ledger.resident(ResidentKind::DeviceBases, 1000);
        let pool = ledger.resident(ResidentKind::PinnedPool, 64);
        let s = ledger.snapshot();
        assert_eq!(s.resident_bytes(Memory::Device), 1000);
        assert_eq!(s.resident_bytes(Memory::Host), 64);
        assert_eq!(s.resident(ResidentKind::DeviceBases).count.live, 1);
        // Not partitions: the stages stay empty and the ledger is balanced.
        assert_eq!(s.total_bytes.live, 0);
        assert!(s.is_balanced());
        drop((bases, pool));
        let s = ledger.snapshot();
        assert_eq!(s.resident_bytes(Memory::Device), 0);
        assert_eq!(s.resident(ResidentKind::DeviceBases).bytes.peak, 1000);
    }

    #[test]
    fn one_buffer_is_released_before_its_stage_ends_and_never_more_than_held() {
        let ledger = StageLedger::new();
        let mut t = ledger.enter(Stage::OnAccelerator, 0, 0);
        let mut b = t.backend_buffers();
        b.register(BackendBuffer::DeviceScratch, 100);
        b.register(BackendBuffer::DeviceScratch, 30);
        b.release_one(BackendBuffer::DeviceScratch, 100);
        let s = ledger.snapshot();
        let scratch = s.kind(BufferKind::DeviceScratch);
        assert_eq!((scratch.count.live, scratch.bytes.live), (1, 30));
        assert_eq!((s.device_bytes.live, s.device_total.live), (30, 30));
        assert_eq!(scratch.bytes.peak, 130);
        // More than is held releases what is held, and the gauges stay balanced.
        t.backend_buffers()
            .release_one(BackendBuffer::DeviceScratch, 1000);
        t.backend_buffers()
            .release_one(BackendBuffer::DeviceScratch, 1);
        let s = ledger.snapshot();
        assert_eq!(s.kind(BufferKind::DeviceScratch).count.live, 0);
        assert_eq!(s.device_total.live, 0);
        drop(t);
        assert!(ledger.snapshot().is_balanced());
    }

    #[test]
    fn device_total_counts_resident_and_partition_device_bytes_at_one_moment() {
        let ledger = StageLedger::new();
        let bases = ledger.resident(ResidentKind::DeviceBases, 1000);
        let _pool = ledger.resident(ResidentKind::PinnedPool, 64);
        let mut t = ledger.enter(Stage::OnAccelerator, 0, 0);
        t.register(BufferKind::Aux, 10);
        t.backend_buffers()
            .register(BackendBuffer::DeviceScratch, 300);
        // Host bytes (the pool, the witness) are not device bytes.
        assert_eq!(ledger.snapshot().device_total.live, 1300);
        t.release_backend_buffers();
        t.backend_buffers().register(BackendBuffer::DeviceAbc, 200);
        let s = ledger.snapshot();
        // The peak is of the sum at one moment, not the sum of the parts' peaks (1500).
        assert_eq!((s.device_total.live, s.device_total.peak), (1200, 1300));
        drop(t);
        drop(bases);
        let s = ledger.snapshot();
        assert_eq!((s.device_total.live, s.device_total.peak), (0, 1300));
        assert!(s.is_balanced());
    }

    #[test]
    fn backend_buffers_are_counted_by_memory_and_released_at_once() {
        let ledger = StageLedger::new();
        let mut t = ledger.enter(Stage::OnAccelerator, 0, 0);
        t.register(BufferKind::Aux, 10);
        {
            let mut b = t.backend_buffers();
            b.register(BackendBuffer::DeviceAbc, 300);
            b.register(BackendBuffer::PinnedStaging, 40);
            b.register(BackendBuffer::DeviceScratch, 7);
        }
        let s = ledger.snapshot();
        assert_eq!(s.total_bytes.live, 50);
        assert_eq!(s.device_bytes.live, 307);
        assert_eq!(s.stage(Stage::OnAccelerator).bytes.live, 50);
        assert_eq!(s.stage_device(Stage::OnAccelerator).live, 307);
        t.advance(Stage::Fallback);
        assert_eq!(ledger.snapshot().stage_device(Stage::Fallback).live, 307);
        assert!(!ledger.snapshot().is_balanced());
        t.release_backend_buffers();
        let s = ledger.snapshot();
        assert_eq!((s.total_bytes.live, s.device_bytes.live), (10, 0));
        assert_eq!(s.stage_device(Stage::Fallback).live, 0);
        drop(t);
        assert!(ledger.snapshot().is_balanced());
        assert_eq!(ledger.snapshot().device_bytes.peak, 307);
    }
}
