//! The one-call prover: the three stages over a list of partitions, one partition at a time,
//! on device 0 of the backend. (The pipelined engine, with its ledger, backpressure and device
//! routing, is built on the same stages.)

use bellpepper_core::Circuit;
use blstrs::Scalar;

use crate::accounting::ledger::{Stage, StageLedger};
use crate::error::{Error, Result};
use crate::groth16::proof::Proof;
use crate::stages::Synthesizer;
use crate::stages::{Accelerator, Finalizer, PreparedParameters, Randomness};

/// The three stages of a prover.
#[derive(Clone, Copy)]
pub struct Stages<'a, S> {
    /// Stage 1.
    pub synthesizer: &'a S,
    /// Stage 2.
    pub accelerator: &'a dyn Accelerator,
    /// Stage 3.
    pub finalizer: &'a dyn Finalizer,
}

/// Proves every circuit with the given randomisers (one per circuit), in order.
pub fn prove_with_randomness<S, C>(
    stages: Stages<'_, S>,
    prepared: &PreparedParameters,
    circuits: Vec<C>,
    randomness: &[Randomness],
) -> Result<Vec<Proof>>
where
    S: Synthesizer,
    C: Circuit<Scalar>,
{
    if circuits.len() != randomness.len() {
        return Err(Error::InvalidConfig {
            what: "prove request",
            detail: format!(
                "{} circuits but {} randomisers",
                circuits.len(),
                randomness.len()
            ),
        });
    }
    prepared.check_backend(stages.accelerator.name())?;
    let failed = |partition, stage| {
        move |e: Error| Error::PartitionFailed {
            partition,
            stage,
            source: Box::new(e),
        }
    };
    let mut worker = stages.accelerator.worker(0, 0)?;
    // A private ledger: the backend registers its buffers somewhere, and nobody reads it.
    let ledger = StageLedger::new();
    let mut proofs = Vec::with_capacity(circuits.len());
    for (i, (circuit, rs)) in circuits.into_iter().zip(randomness).enumerate() {
        let partition = stages
            .synthesizer
            .synthesize(circuit)
            .map_err(failed(i, "synthesis"))?;
        let mut token = ledger.enter(Stage::OnAccelerator, 0, i);
        let pending = worker
            .accelerate(prepared, partition, &mut token.backend_buffers())
            .map_err(|h| failed(i, "accelerator")(h.error))?;
        drop(token);
        let finished = stages
            .finalizer
            .finalize(prepared, pending, *rs)
            .map_err(failed(i, "finalize"))?;
        drop(finished.remains);
        proofs.push(finished.proof);
    }
    Ok(proofs)
}

/// Proves every circuit with fresh randomisers drawn from `rng`.
pub fn prove<S, C>(
    stages: Stages<'_, S>,
    prepared: &PreparedParameters,
    circuits: Vec<C>,
    rng: &mut impl rand_core::RngCore,
) -> Result<Vec<Proof>>
where
    S: Synthesizer,
    C: Circuit<Scalar>,
{
    let randomness: Vec<_> = (0..circuits.len())
        .map(|_| Randomness::random(rng))
        .collect();
    prove_with_randomness(stages, prepared, circuits, &randomness)
}
