//! Inputs for the benchmarks: random scalars, PoRep-like witnesses, and distinct bases whose
//! discrete logarithms are known (so any MSM over them has an exact answer computed with scalar
//! arithmetic alone).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::Witness;
use rayon::prelude::*;

/// Bases per chunk of consecutive multiples.
const CHUNK: usize = 4096;

/// `n` random scalars in canonical form.
pub fn random_scalars(n: usize) -> Vec<ScalarBytes> {
    (0..n)
        .into_par_iter()
        .map_init(rand::thread_rng, |rng, _| {
            ScalarBytes::from_scalar(&Scalar::random(rng))
        })
        .collect()
}

pub use proofline_workloads::synthetic::POREP_MIX;

/// A witness of `n` PoRep-like aux scalars (`POREP_MIX`, fresh each call), every variable used.
pub fn porep_like_witness(n: usize) -> Witness {
    let aux = proofline_workloads::synthetic::porep_like_aux(n, rand::random());
    Witness {
        input: Vec::new(),
        aux,
        a_aux_density: Density::default(),
        b_input_density: Density::default(),
        b_aux_density: Density::default(),
    }
}

/// `n` distinct points with known logarithms to a random `P`: chunk `c` of `CHUNK` bases is
/// `k_c P, (k_c + 1) P, ...` for a random `k_c` (additions after one multiplication per chunk,
/// chunks in parallel).
pub struct KnownBases<G: Curve> {
    /// The affine points.
    pub points: Vec<G::AffineRepr>,
    p: G,
    starts: Vec<Scalar>,
}

impl<G> KnownBases<G>
where
    G: Curve + Group<Scalar = Scalar> + Send + Sync,
    G::AffineRepr: Default + Clone + Send + Sync,
{
    /// Makes `n` of them.
    pub fn new(n: usize) -> Self {
        let mut rng = rand::thread_rng();
        let p = G::random(&mut rng);
        let starts: Vec<Scalar> = (0..n.div_ceil(CHUNK))
            .map(|_| Scalar::random(&mut rng))
            .collect();
        let mut points = vec![G::AffineRepr::default(); n];
        points
            .par_chunks_mut(CHUNK)
            .zip(starts.par_iter())
            .for_each(|(out, k)| {
                let mut acc = p * k;
                let proj: Vec<G> = (0..out.len())
                    .map(|_| {
                        let q = acc;
                        acc += p;
                        q
                    })
                    .collect();
                G::batch_normalize(&proj, out);
            });
        KnownBases { points, p, starts }
    }

    /// The logarithm of base `i`.
    pub fn log(&self, i: usize) -> Scalar {
        self.starts[i / CHUNK] + Scalar::from((i % CHUNK) as u64)
    }

    /// The exact value of `sum_i s_i bases[i]` over the first `scalars.len()` bases.
    pub fn msm(&self, scalars: &[ScalarBytes]) -> G {
        let e: Scalar = scalars
            .par_iter()
            .enumerate()
            .map(|(i, s)| s.to_scalar().expect("canonical scalars") * self.log(i))
            .reduce(|| Scalar::ZERO, |a, b| a + b);
        self.p * e
    }
}

/// `n` distinct G1 points.
pub fn g1_bases(n: usize) -> Vec<G1Affine> {
    KnownBases::<G1Projective>::new(n).points
}

/// `n` distinct G2 points.
pub fn g2_bases(n: usize) -> Vec<G2Affine> {
    KnownBases::<G2Projective>::new(n).points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bases_have_their_logs_and_the_exact_msm() {
        let b = KnownBases::<G1Projective>::new(CHUNK + 5);
        let p = G1Projective::from(b.points[0]) * b.log(0).invert().unwrap();
        for i in [0, 1, CHUNK - 1, CHUNK, CHUNK + 4] {
            assert_eq!(G1Projective::from(b.points[i]), p * b.log(i), "base {i}");
        }
        let s = random_scalars(CHUNK + 5);
        let naive: G1Projective = b
            .points
            .iter()
            .zip(&s)
            .map(|(g, e)| *g * e.to_scalar().unwrap())
            .sum();
        assert_eq!(b.msm(&s), naive);
        // Negative twin: one scalar changed changes the answer.
        let mut t = s.clone();
        t[7] = ScalarBytes::from_scalar(&Scalar::ONE);
        assert_ne!(b.msm(&t), naive);
    }

    #[test]
    fn porep_like_witness_has_the_mix() {
        let w = porep_like_witness(100_000);
        let zeros = w.aux.iter().filter(|s| s.is_zero()).count();
        let ones = w.aux.iter().filter(|s| s.is_one()).count();
        assert!((49_000..53_000).contains(&zeros), "{zeros}");
        assert!((45_000..49_000).contains(&ones), "{ones}");
    }
}
