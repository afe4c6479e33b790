//! Stages 2 and 3: the accelerator (`GpuBackend`) and the `Finalizer`, with the types that pass
//! between them. Each stage's output is its own type, so stages cannot be mixed up.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use group::{prime::PrimeCurveAffine, Curve, Group};

use crate::error::{Error, Result};
use crate::params::{Parameters, VerifyingKey};
use crate::proof::Proof;
use crate::synthesize::{SynthesizedPartition, Witness};

/// The raw MSM sums of the accelerator stage (no randomiser applied yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceleratorSums {
    /// `sum_i h_i * H_i`: the quotient polynomial against the H query.
    pub h: G1Projective,
    /// `sum_j aux_j * L_j`.
    pub l: G1Projective,
    /// `sum_i z_i * A_i` over the A query (inputs and dense aux).
    pub a: G1Projective,
    /// `sum_i z_i * B_i` over the B query in G1.
    pub b_g1: G1Projective,
}

/// The accelerator's output: the raw sums and the witness, which the finalizer still needs.
#[derive(Debug)]
pub struct PendingProof {
    /// The four G1 sums.
    pub sums: AcceleratorSums,
    /// The witness (a/b/c are gone).
    pub witness: Witness,
}

/// A partition handed back untouched by a failing accelerator, with the reason, so that the
/// caller can run it elsewhere instead of losing it.
pub struct HandBack {
    /// The partition, exactly as it was given (boxed: this is the rare path).
    pub partition: Box<SynthesizedPartition>,
    /// Why the backend failed.
    pub error: Error,
}

impl fmt::Debug for HandBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandBack")
            .field("error", &self.error)
            .field("shape", &self.partition.shape())
            .finish()
    }
}

/// Parameters prepared by a backend: the parameters and whatever per-parameters state the
/// backend keeps (for example bases resident on a device), reused by every partition.
#[derive(Clone)]
pub struct PreparedParameters {
    params: Arc<Parameters>,
    backend: String,
    state: Option<Arc<dyn Any + Send + Sync>>,
}

impl PreparedParameters {
    /// Prepared parameters with backend state.
    pub fn new(
        params: Arc<Parameters>,
        backend: impl Into<String>,
        state: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Self {
        PreparedParameters {
            params,
            backend: backend.into(),
            state,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &Arc<Parameters> {
        &self.params
    }

    /// The name of the backend that prepared them.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The backend's state, if it is of type `T`.
    pub fn state<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.state.as_deref().and_then(|s| s.downcast_ref())
    }
}

impl fmt::Debug for PreparedParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedParameters")
            .field("backend", &self.backend)
            .field("domain_size", &self.params.domain_size())
            .field("has_state", &self.state.is_some())
            .finish()
    }
}

/// Stage 2: H through iNTT, coset NTT and coset iNTT; the raw MSM sums for h, l, a and b_g1.
pub trait GpuBackend: Send + Sync {
    /// A short name for logs and errors (`cpu`, `cuda:0`, ...).
    fn name(&self) -> &str;

    /// Per-parameters preparation, done once and reused across partitions and jobs.
    fn prepare(&self, params: Arc<Parameters>) -> Result<PreparedParameters>;

    /// Runs the stage. a/b/c are released when it ends; on error the partition is handed back
    /// untouched.
    fn accelerate(
        &self,
        prepared: &PreparedParameters,
        partition: SynthesizedPartition,
    ) -> Result<PendingProof, HandBack>;
}

/// The randomisers of one partition's proof, drawn when its job is submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Randomness {
    /// Blinds A (and C).
    pub r: Scalar,
    /// Blinds B (and C).
    pub s: Scalar,
}

impl Randomness {
    /// Draws fresh randomisers.
    pub fn random(rng: &mut impl rand_core::RngCore) -> Self {
        use ff::Field;
        Randomness {
            r: Scalar::random(&mut *rng),
            s: Scalar::random(rng),
        }
    }
}

/// A finished partition: its proof, and the buffers left to deallocate off the hot path.
#[derive(Debug)]
pub struct FinishedPartition {
    /// The proof.
    pub proof: Proof,
    /// The witness, to be dropped by the deallocation stage.
    pub remains: Witness,
}

/// Stage 3: the b_g2 MSM and the proof assembly with r and s.
pub trait Finalizer: Send + Sync {
    /// A short name for logs and errors.
    fn name(&self) -> &str;

    /// Computes the b_g2 sum and assembles the proof.
    fn finalize(
        &self,
        params: &Parameters,
        pending: PendingProof,
        randomness: Randomness,
    ) -> Result<FinishedPartition>;
}

/// Assembles a proof from the raw sums (bellperson's formulas):
/// `A = alpha + a + r delta`, `B = beta + b_g2 + s delta`,
/// `C = s a + r b_g1 + r s delta + s alpha + r beta + h + l` (all in G1 but B).
pub fn assemble(
    vk: &VerifyingKey,
    sums: &AcceleratorSums,
    b_g2_sum: &G2Projective,
    randomness: Randomness,
) -> Result<Proof> {
    if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
        return Err(Error::Malformed {
            what: "verifying key",
            detail: "delta is the identity (a subverted key)".into(),
        });
    }
    let Randomness { r, s } = randomness;
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let alpha_g1 = G1Projective::from(vk.alpha_g1);
    let g_a = alpha_g1 + delta_g1 * r + sums.a;
    let g_b = G2Projective::from(vk.beta_g2) + G2Projective::from(vk.delta_g2) * s + b_g2_sum;
    let g_c = sums.a * s
        + sums.b_g1 * r
        + delta_g1 * (r * s)
        + alpha_g1 * s
        + G1Projective::from(vk.beta_g1) * r
        + sums.h
        + sums.l;
    let proof = Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    };
    if bool::from(g_a.is_identity() | g_b.is_identity() | g_c.is_identity()) {
        return Err(Error::Malformed {
            what: "proof",
            detail: "a proof point is the identity; draw other randomisers".into(),
        });
    }
    Ok(proof)
}
