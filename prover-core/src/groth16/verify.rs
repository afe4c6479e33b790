//! The Groth16 verifier: single proofs and randomized batches.
//!
//! Checks `e(A, B) = e(alpha, beta) * e(IC(x), gamma) * e(C, delta)` as one multi-Miller loop
//! against `-gamma` and `-delta` and one final exponentiation.

use blstrs::{Bls12, G1Affine, G1Projective, G2Prepared, Gt, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use pairing::{Engine, MillerLoopResult, MultiMillerLoop};

use crate::error::{Error, Result};
use crate::groth16::params::VerifyingKey;
use crate::groth16::proof::Proof;

/// A verifying key with its pairing-side precomputation.
#[derive(Debug, Clone)]
pub struct PreparedVerifyingKey {
    /// `e(alpha_g1, beta_g2)`.
    pub alpha_g1_beta_g2: Gt,
    /// `-gamma_g2`, prepared for Miller loops.
    pub neg_gamma_g2: G2Prepared,
    /// `-delta_g2`, prepared.
    pub neg_delta_g2: G2Prepared,
    /// The IC points.
    pub ic: Vec<G1Affine>,
}

/// Prepares a verifying key.
pub fn prepare_verifying_key(vk: &VerifyingKey) -> PreparedVerifyingKey {
    PreparedVerifyingKey {
        alpha_g1_beta_g2: Bls12::pairing(&vk.alpha_g1, &vk.beta_g2),
        neg_gamma_g2: G2Prepared::from(-vk.gamma_g2),
        neg_delta_g2: G2Prepared::from(-vk.delta_g2),
        ic: vk.ic.clone(),
    }
}

impl PreparedVerifyingKey {
    fn check_inputs(&self, inputs: &[Scalar]) -> Result<()> {
        if inputs.len() + 1 != self.ic.len() {
            return Err(Error::PublicInputCount {
                expected: self.ic.len().saturating_sub(1),
                got: inputs.len(),
            });
        }
        Ok(())
    }

    /// `ic[0] + sum_i x_i ic[i+1]`, with the x_i possibly weighted (batch mode).
    fn ic_sum(&self, ic0_weight: Scalar, inputs: &[Scalar]) -> G1Projective {
        let points: Vec<G1Projective> = self.ic.iter().map(G1Projective::from).collect();
        let mut scalars = Vec::with_capacity(points.len());
        scalars.push(ic0_weight);
        scalars.extend_from_slice(inputs);
        G1Projective::multi_exp(&points, &scalars)
    }
}

/// Verifies one proof. `Ok(false)` means the proof is invalid for these inputs; an error means
/// the request is malformed (wrong number of inputs).
pub fn verify_proof(pvk: &PreparedVerifyingKey, proof: &Proof, inputs: &[Scalar]) -> Result<bool> {
    pvk.check_inputs(inputs)?;
    let acc = pvk.ic_sum(Scalar::ONE, inputs).to_affine();
    let b = G2Prepared::from(proof.b);
    let ml = Bls12::multi_miller_loop(&[
        (&proof.a, &b),
        (&acc, &pvk.neg_gamma_g2),
        (&proof.c, &pvk.neg_delta_g2),
    ]);
    Ok(ml.final_exponentiation() == pvk.alpha_g1_beta_g2)
}

/// Checks a freshly made proof before it leaves the prover: its three points are on their
/// curves, in the prime-order subgroup and not the identity (a device fault can produce points
/// that are none of these, and the pairing check assumes them), and the proof verifies for
/// `inputs`. `Ok(false)` means the proof is wrong.
pub fn check_proof(pvk: &PreparedVerifyingKey, proof: &Proof, inputs: &[Scalar]) -> Result<bool> {
    let points_ok = proof.a.is_on_curve()
        & proof.a.is_torsion_free()
        & !proof.a.is_identity()
        & proof.b.is_on_curve()
        & proof.b.is_torsion_free()
        & !proof.b.is_identity()
        & proof.c.is_on_curve()
        & proof.c.is_torsion_free()
        & !proof.c.is_identity();
    if !bool::from(points_ok) {
        return Ok(false);
    }
    verify_proof(pvk, proof, inputs)
}

/// Verifies many proofs at once with random 128-bit weights (Zcash spec, appendix B.2): one
/// Miller loop per proof plus two, and one final exponentiation. `Ok(true)` means all are valid
/// except with probability 2^-128; on `Ok(false)`, check them one by one to find the bad ones.
pub fn verify_proofs_batch(
    pvk: &PreparedVerifyingKey,
    proofs: &[Proof],
    inputs: &[Vec<Scalar>],
    rng: &mut impl rand_core::RngCore,
) -> Result<bool> {
    if proofs.len() != inputs.len() {
        return Err(Error::Malformed {
            what: "batch verification request",
            detail: format!("{} proofs but {} input lists", proofs.len(), inputs.len()),
        });
    }
    for x in inputs {
        pvk.check_inputs(x)?;
    }
    if proofs.is_empty() {
        return Ok(true);
    }
    let weights: Vec<Scalar> = proofs
        .iter()
        .map(|_| {
            let lo = Scalar::from(rng.next_u64());
            let hi = Scalar::from(rng.next_u64());
            hi * Scalar::from(u64::MAX) + hi + lo
        })
        .collect();
    let weight_sum: Scalar = weights.iter().sum();
    let mut combined = vec![Scalar::ZERO; pvk.ic.len() - 1];
    for (z, x) in weights.iter().zip(inputs) {
        for (c, xi) in combined.iter_mut().zip(x) {
            *c += *z * xi;
        }
    }
    let acc = pvk.ic_sum(weight_sum, &combined).to_affine();
    let c_sum = proofs
        .iter()
        .zip(&weights)
        .map(|(p, z)| p.c * z)
        .fold(G1Projective::identity(), |a, b| a + b)
        .to_affine();
    let weighted_a: Vec<G1Affine> = proofs
        .iter()
        .zip(&weights)
        .map(|(p, z)| (p.a * z).to_affine())
        .collect();
    let prepared_b: Vec<G2Prepared> = proofs.iter().map(|p| G2Prepared::from(p.b)).collect();
    let mut terms: Vec<(&G1Affine, &G2Prepared)> = weighted_a.iter().zip(&prepared_b).collect();
    terms.push((&acc, &pvk.neg_gamma_g2));
    terms.push((&c_sum, &pvk.neg_delta_g2));
    let ml = Bls12::multi_miller_loop(&terms);
    Ok(ml.final_exponentiation() == pvk.alpha_g1_beta_g2 * weight_sum)
}
