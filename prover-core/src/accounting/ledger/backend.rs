//! The narrow handle through which a backend registers its own per-partition buffers (pinned
//! staging, device copies of a/b/c, device scratch) in the partition's ledger entry.

use super::{BufferKind, PartitionToken};

/// The buffers a backend may register for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendBuffer {
    /// Host temporaries ([`BufferKind::BackendTemp`]).
    HostTemp,
    /// Pinned host staging ([`BufferKind::PinnedStaging`]).
    PinnedStaging,
    /// Device copies of a/b/c ([`BufferKind::DeviceAbc`]).
    DeviceAbc,
    /// Other device scratch ([`BufferKind::DeviceScratch`]).
    DeviceScratch,
}

impl BackendBuffer {
    /// All of them.
    pub const ALL: [BackendBuffer; 4] = [
        BackendBuffer::HostTemp,
        BackendBuffer::PinnedStaging,
        BackendBuffer::DeviceAbc,
        BackendBuffer::DeviceScratch,
    ];
}

impl From<BackendBuffer> for BufferKind {
    fn from(b: BackendBuffer) -> Self {
        match b {
            BackendBuffer::HostTemp => BufferKind::BackendTemp,
            BackendBuffer::PinnedStaging => BufferKind::PinnedStaging,
            BackendBuffer::DeviceAbc => BufferKind::DeviceAbc,
            BackendBuffer::DeviceScratch => BufferKind::DeviceScratch,
        }
    }
}

/// A backend's view of its partition's ledger entry: it can register and release its own
/// buffers, and nothing else (the partition's stage and the synthesizer's buffers are the
/// engine's). Whatever is still registered when the accelerator stage returns is released then.
pub struct BackendBuffers<'a> {
    pub(super) token: &'a mut PartitionToken,
}

impl BackendBuffers<'_> {
    /// Registers one buffer with its real size in bytes.
    pub fn register(&mut self, kind: BackendBuffer, bytes: u64) {
        self.token.register(kind.into(), bytes);
    }

    /// Releases every buffer of `kind` registered so far.
    pub fn release(&mut self, kind: BackendBuffer) {
        self.token.release(kind.into());
    }

    /// Releases one buffer of `kind` of `bytes`, freed before the stage ends (so the ledger
    /// follows a buffer's real lifetime, not the stage's).
    pub fn release_one(&mut self, kind: BackendBuffer, bytes: u64) {
        self.token.release_one(kind.into(), bytes);
    }
}
