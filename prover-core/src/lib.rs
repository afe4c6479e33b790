//! proofline's core: Groth16 on BLS12-381 in bellperson's formats, split into the stages of a
//! partitioned prover. In layers, each using only those listed before it:
//!
//! - [`error`], [`files`], [`units`], [`parallel`], [`write_behind`]: the error type, the one
//!   policy for the files a command reads (regular files only, each kind's size limit, errors
//!   that name the file), byte counts in words, the pool synthesis's parallel parts run in, and
//!   files synced while they are written.
//! - [`groth16`]: keys, parameters and proofs in bellperson's layout, seeded parameter
//!   generation, verification, the evaluation domain, bellperson's shape of a circuit.
//! - [`accounting`]: the stage ledger (partitions and buffer bytes per stage, host and device,
//!   live and peak) and the device trace.
//! - [`stages`]: the three stage traits ([`Synthesizer`], [`Accelerator`] with its per-worker
//!   [`AcceleratorWorker`], [`Finalizer`]), the types that pass between them, the query plan
//!   every backend executes, and the one-call prover over them.
//! - [`synthesis`]: stage 1 on the CPU (bellpepper's constraint system, and pre-compiled
//!   constraints).
//! - [`runtime`]: the pipeline engine with synthesis permits, a bounded accelerator queue,
//!   device routing with a bounded fallback, a byte budget, and the ledger's timeline.
//!
//! The demo and timing workloads (circuits, the synthetic partition, replay) are in the
//! `proofline-workloads` crate; the CPU, CUDA and OpenCL implementations of stages 2 and 3 in
//! the backend crates.
#![warn(missing_docs)]

pub mod accounting;
pub mod error;
pub mod files;
pub mod groth16;
pub mod parallel;
pub mod runtime;
pub mod stages;
pub mod synthesis;
pub mod units;
pub mod write_behind;

pub use accounting::trace::{DeviceSpan, SpanKind, TraceSummary};
pub use bellpepper_core;
pub use blstrs;
pub use error::{catch_panic, Error, PointError, Result};
pub use groth16::domain::Domain;
pub use groth16::encoding::{EncodedPoint, PointCheck};
pub use groth16::generator::{
    generate_parameters, generate_parameters_on, generate_parameters_with_progress,
    generate_random_parameters, generate_seeded_parameters, write_parameters_on,
    write_parameters_with_progress, CpuMultiplier, GenPhase, GenProgress, Multiplier, Trapdoor,
};
pub use groth16::params::{KeyShape, Parameters, VerifyingKey};
pub use groth16::points::Points;
pub use groth16::proof::Proof;
pub use groth16::verify::{
    check_proof, prepare_verifying_key, verify_proof, verify_proofs_batch, PreparedVerifyingKey,
};
pub use runtime::engine::{
    Config, DeviceStats, Engine, EngineStats, Hold, JobCanceller, JobHandle, JobTimes,
    ReleasePolicy, UrgentLane,
};
pub use stages::plan::{MsmTerm, QueryPlan};
pub use stages::prove::{prove, prove_with_randomness, Stages};
pub use stages::{
    assemble, Accelerator, AcceleratorSums, AcceleratorWorker, DeviceMemory, Evaluations,
    Finalizer, FinishedPartition, HandBack, PartitionShape, PendingProof, PreparedParameters,
    Randomness, StepTime, SynthesizedPartition, Synthesizer, Witness,
};
pub use synthesis::cpu::{
    circuit_density, circuit_size, CircuitDensity, CircuitSize, CpuSynthesizer,
};
pub use synthesis::pce::{PceSynthesizer, Precompiled};
