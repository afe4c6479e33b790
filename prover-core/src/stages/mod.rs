//! The three stages of a partition's proof, one trait each, and what passes between them:
//!
//! - [`synthesizer`]: stage 1, a circuit with its witness becomes a [`SynthesizedPartition`]
//!   ([`partition`]: its evaluations, witness and densities).
//! - [`accelerator`]: stage 2, H and the raw MSM sums ([`Accelerator`], one
//!   [`AcceleratorWorker`] per worker and device), as planned by [`plan`].
//! - [`finalizer`]: stage 3, the b_g2 MSM where the accelerator left it and the proof's
//!   assembly ([`Finalizer`]).
//! - [`prove`]: the one-call prover over the three (no pipeline: one partition at a time).

pub mod accelerator;
pub mod density;
pub mod finalizer;
pub mod partition;
pub mod plan;
pub mod prove;
pub mod synthesizer;

pub use accelerator::{
    Accelerator, AcceleratorSums, AcceleratorWorker, DeviceMemory, HandBack, PendingProof,
    PreparedParameters, StepTime,
};
pub use finalizer::{assemble, Finalizer, FinishedPartition, Randomness};
pub use partition::{Evaluations, PartitionShape, SynthesizedPartition, Witness};
pub use synthesizer::Synthesizer;
