//! Inputs for the benchmarks: random scalars and cheap distinct bases.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use prover_core::density::ScalarBytes;

/// `n` random scalars in canonical form.
pub fn random_scalars(n: usize) -> Vec<ScalarBytes> {
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| ScalarBytes::from_scalar(&Scalar::random(&mut rng)))
        .collect()
}

/// `n` distinct G1 points `P, 2P, 3P, ...` for a random `P` (additions, not multiplications).
pub fn g1_bases(n: usize) -> Vec<G1Affine> {
    let p = G1Projective::random(rand::thread_rng());
    let mut acc = p;
    let proj: Vec<G1Projective> = (0..n)
        .map(|_| {
            let q = acc;
            acc += p;
            q
        })
        .collect();
    let mut out = vec![G1Affine::default(); n];
    G1Projective::batch_normalize(&proj, &mut out);
    out
}

/// `n` distinct G2 points, as [`g1_bases`].
pub fn g2_bases(n: usize) -> Vec<G2Affine> {
    let p = G2Projective::random(rand::thread_rng());
    let mut acc = p;
    let proj: Vec<G2Projective> = (0..n)
        .map(|_| {
            let q = acc;
            acc += p;
            q
        })
        .collect();
    let mut out = vec![G2Affine::default(); n];
    G2Projective::batch_normalize(&proj, &mut out);
    out
}
