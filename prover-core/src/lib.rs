//! proofline's core: Groth16 on BLS12-381 in bellperson's formats, split into the stages of a
//! partitioned prover.
//!
//! - [`params`], [`proof`]: keys, parameters and proofs, read and written in bellperson's layout.
//! - [`files`]: the one policy for the files a command reads (regular files only, each kind's
//!   size limit, errors that name the file) and the folders it creates.
//! - [`generator`]: seeded parameter generation, interchangeable with bellperson's.
//! - [`verify`]: single and batch verification.
//! - [`synthesize`], [`stages`], [`prove`]: the three stage traits (`Synthesizer`,
//!   `GpuBackend` with its per-worker `AcceleratorWorker`, `Finalizer`) and the one-call prover
//!   over them.
//! - [`domain`], [`plan`]: the evaluation domain and the query plan (which bases meet which
//!   scalars) that every backend executes.
//! - [`ledger`]: the stage ledger (partitions and buffer bytes per stage, host and device, live
//!   and peak; resident per-parameters entries).
//! - [`engine`], [`permit`], [`budget`], [`sampler`]: the pipeline engine with synthesis
//!   permits, a bounded accelerator queue, device routing with a bounded fallback, and a byte
//!   budget; the ledger's timeline.
//! - [`pce`]: pre-compiled synthesis (a circuit shape's matrices recorded once, then witness-only
//!   synthesis and a parallel sparse product per partition).
//! - [`parallel`]: the pool that synthesis's parallel parts run in (the engine's synthesis pool).
//! - [`circuits`]: demo workloads for tests, benchmarks and the `prove` command.
#![warn(missing_docs)]

pub mod budget;
pub mod circuits;
pub mod density;
pub mod domain;
mod encoding;
pub mod engine;
pub mod error;
pub mod files;
pub mod generator;
pub mod ledger;
pub mod parallel;
pub mod params;
pub mod pce;
pub mod permit;
pub mod plan;
pub mod proof;
pub mod prove;
pub mod public;
pub mod replay;
pub mod sampler;
pub mod stages;
pub mod synthesize;
pub mod synthetic;
pub mod trace;
pub mod verify;
pub mod write_behind;

pub use bellpepper_core;
pub use blstrs;
pub use domain::Domain;
pub use encoding::{EncodedPoint, PointCheck};
pub use engine::{Config, DeviceStats, Engine, EngineStats, JobHandle, ReleasePolicy};
pub use error::{catch_panic, Error, PointError, Result};
pub use generator::{
    generate_parameters, generate_parameters_on, generate_parameters_with_progress,
    generate_random_parameters, generate_seeded_parameters, write_parameters_on,
    write_parameters_with_progress, CpuMultiplier, GenPhase, GenProgress, Multiplier, Trapdoor,
};
pub use params::{KeyShape, Parameters, VerifyingKey};
pub use pce::{PceSynthesizer, Precompiled};
pub use plan::{MsmTerm, QueryPlan};
pub use proof::Proof;
pub use prove::{prove, prove_with_randomness, Stages};
pub use stages::{
    assemble, AcceleratorSums, AcceleratorWorker, DeviceMemory, Finalizer, FinishedPartition,
    GpuBackend, HandBack, PendingProof, PreparedParameters, Randomness, StepTime,
};
pub use synthesize::{
    circuit_size, CircuitSize, CpuSynthesizer, Evaluations, PartitionShape, SynthesizedPartition,
    Synthesizer, Witness,
};
pub use trace::{DeviceSpan, SpanKind, TraceSummary};
pub use verify::{
    check_proof, prepare_verifying_key, verify_proof, verify_proofs_batch, PreparedVerifyingKey,
};
