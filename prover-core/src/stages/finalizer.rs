//! Stage 3, finalization: the b_g2 MSM where the accelerator left it, the randomisers applied
//! and the proof assembled.

use blstrs::{G1Projective, G2Projective, Scalar};
use group::{prime::PrimeCurveAffine, Curve, Group};

use crate::error::{Error, Result};
use crate::groth16::params::VerifyingKey;
use crate::groth16::proof::Proof;
use crate::stages::accelerator::{AcceleratorSums, PendingProof, PreparedParameters};
use crate::stages::Witness;

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

/// Stage 3: the b_g2 MSM (unless the accelerator returned it) and the proof assembly with r
/// and s.
pub trait Finalizer: Send + Sync {
    /// A short name for logs and errors.
    fn name(&self) -> &str;

    /// Computes the b_g2 sum if `pending` lacks it, and assembles the proof.
    fn finalize(
        &self,
        prepared: &PreparedParameters,
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
