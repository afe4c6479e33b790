//! Stage 1, synthesis: a bellpepper-core circuit with its witness becomes a synthesized
//! partition. The CPU's implementations are in `crate::synthesis`.

use bellpepper_core::Circuit;
use blstrs::Scalar;

use crate::error::Result;
use crate::stages::partition::SynthesizedPartition;

/// Stage 1: turns circuits into synthesized partitions.
pub trait Synthesizer: Send + Sync {
    /// Synthesizes one circuit with its witness.
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition>;
}

/// A shared synthesizer (the caller keeps a handle, as to the workloads crate's `Replay`).
impl<S: Synthesizer> Synthesizer for std::sync::Arc<S> {
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        (**self).synthesize(circuit)
    }
}
