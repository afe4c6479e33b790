//! proofline's workloads, for tests, benchmarks, the sweep and the `prove` command; none of them
//! is part of the prover itself:
//!
//! - [`circuits`]: the benchmark circuits (`dense`, with its shape and witness seeds).
//! - [`synthetic`]: a partition shaped like a 32 GiB PoRep's, with random values (a timing
//!   workload, not a proof).
//! - [`replay`]: a synthesizer that synthesizes once and copies after, so that the accelerator
//!   bounds a run.
#![warn(missing_docs)]

pub mod circuits;
pub mod replay;
pub mod synthetic;
