//! Inputs for the benchmarks: random scalars and cheap distinct bases.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Curve;
use prover_core::density::ScalarBytes;

/// `n` random scalars in canonical form.
pub fn random_scalars(n: usize) -> Vec<ScalarBytes> {
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| ScalarBytes::from_scalar(&Scalar::random(&mut rng)))
        .collect()
}

/// `n` distinct points `P, 2P, 3P, ...` for a random `P` (additions, not multiplications).
pub fn bases<G: Curve>(n: usize) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Default + Clone,
{
    let p = G::random(rand::thread_rng());
    let mut acc = p;
    let proj: Vec<G> = (0..n)
        .map(|_| {
            let q = acc;
            acc += p;
            q
        })
        .collect();
    let mut out = vec![G::AffineRepr::default(); n];
    G::batch_normalize(&proj, &mut out);
    out
}

/// `n` distinct G1 points.
pub fn g1_bases(n: usize) -> Vec<G1Affine> {
    bases::<G1Projective>(n)
}

/// `n` distinct G2 points.
pub fn g2_bases(n: usize) -> Vec<G2Affine> {
    bases::<G2Projective>(n)
}
