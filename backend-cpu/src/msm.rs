//! Multi-scalar multiplication on the CPU: blst's Pippenger on the affine bases in place.
//!
//! The scalars of a variable that a query does not use are skipped (density filtering), zero
//! scalars are dropped, and the bases of scalars equal to one are added without multiplying:
//! real witnesses are mostly bits. The rest goes to `blst_p{1,2}s_mult_pippenger` through arrays
//! of pointers into the parameters and the witness, so nothing is copied or converted per call.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;
use prover_core::density::{Density, ScalarBytes};
use prover_core::plan::MsmTerm;
use prover_core::synthesize::Witness;
use rayon::prelude::*;

/// A group whose MSM runs on blst.
pub trait MsmGroup: Copy + Send + Sync + 'static {
    /// The projective point type.
    type Projective: Group + Send + Sync + for<'a> std::ops::AddAssign<&'a Self>;
    /// Pippenger over `points.len()` (point, scalar) pairs given by pointers.
    fn pippenger(points: &[*const Self], scalars: &[*const u8]) -> Self::Projective;
}

macro_rules! impl_msm_group {
    ($affine:ty, $proj:ty, $raw:ty, $scratch:path, $mult:path) => {
        impl MsmGroup for $affine {
            type Projective = $proj;

            fn pippenger(points: &[*const Self], scalars: &[*const u8]) -> $proj {
                debug_assert_eq!(points.len(), scalars.len());
                let n = points.len();
                let mut out = <$proj>::identity();
                if n == 0 {
                    return out;
                }
                // SAFETY: blst reads `n` pointers from each array (see multi_scalar.c: a null
                // entry would switch to flat mode, and none is null), each point is a valid
                // affine point of the parameters (`repr(transparent)` over blst's type), each
                // scalar pointer has 32 readable bytes, and the scratch has the size blst asks.
                unsafe {
                    let bytes = $scratch(n);
                    let mut scratch = vec![0u64; bytes.div_ceil(8)];
                    $mult(
                        out.as_mut(),
                        points.as_ptr().cast::<*const $raw>(),
                        n,
                        scalars.as_ptr(),
                        255,
                        scratch.as_mut_ptr().cast(),
                    );
                }
                out
            }
        }
    };
}

impl_msm_group!(
    G1Affine,
    G1Projective,
    blst::blst_p1_affine,
    blst::blst_p1s_mult_pippenger_scratch_sizeof,
    blst::blst_p1s_mult_pippenger
);
impl_msm_group!(
    G2Affine,
    G2Projective,
    blst::blst_p2_affine,
    blst::blst_p2s_mult_pippenger_scratch_sizeof,
    blst::blst_p2s_mult_pippenger
);

/// Pointers that cross threads; they point into slices that outlive the MSM.
struct Pairs<G> {
    points: Vec<*const G>,
    scalars: Vec<*const u8>,
}

// SAFETY: the pointers are only read, and the data they point to is shared immutably (`&[G]`,
// `&[ScalarBytes]`) for the whole MSM.
unsafe impl<G: Sync> Send for Pairs<G> {}
// SAFETY: as above; shared references only read the pointer arrays.
unsafe impl<G: Sync> Sync for Pairs<G> {}

const SCAN_CHUNK: usize = 1 << 14;

/// Executes terms of a query plan against one query's `bases`: the sum over the terms of their
/// MSMs (each term's bases range, scalars and density come from the plan).
pub fn msm_terms<'a, G: MsmGroup>(
    bases: &[G],
    terms: impl IntoIterator<Item = &'a MsmTerm>,
    witness: &Witness,
) -> G::Projective {
    terms.into_iter().fold(G::Projective::identity(), |acc, t| {
        acc + msm(
            &bases[t.bases.clone()],
            t.scalars(witness),
            t.density(witness),
        )
    })
}

/// `sum_j scalars[j] * bases[k(j)]` over the variables `j` that `density` marks (all of them
/// when `None`), where `k(j)` counts the marked variables before `j`: the layout of a query whose
/// unused points were filtered out. `bases` must hold exactly the marked count.
pub fn msm<G: MsmGroup>(
    bases: &[G],
    scalars: &[ScalarBytes],
    density: Option<&Density>,
) -> G::Projective {
    let expected = density.map_or(scalars.len(), Density::count_ones);
    assert_eq!(
        bases.len(),
        expected,
        "MSM: {} bases for {} used scalars",
        bases.len(),
        expected
    );
    if let Some(d) = density {
        assert_eq!(d.len(), scalars.len(), "MSM: density length");
    }

    // Phase 1, in parallel chunks of variables: sum the bases of ones, collect the rest.
    let starts: Vec<(usize, usize)> = {
        let mut base = 0;
        (0..scalars.len())
            .step_by(SCAN_CHUNK)
            .map(|s| {
                let e = (s + SCAN_CHUNK).min(scalars.len());
                let here = base;
                base += density.map_or(e - s, |d| (s..e).filter(|&j| d.get(j)).count());
                (s, here)
            })
            .collect()
    };
    let parts: Vec<(G::Projective, Pairs<G>)> = starts
        .into_par_iter()
        .map(|(s, mut k)| {
            let e = (s + SCAN_CHUNK).min(scalars.len());
            let mut ones = G::Projective::identity();
            let mut pairs = Pairs {
                points: Vec::new(),
                scalars: Vec::new(),
            };
            for (j, sc) in scalars[s..e].iter().enumerate() {
                if density.is_some_and(|d| !d.get(s + j)) {
                    continue;
                }
                let base = &bases[k];
                k += 1;
                if sc.is_zero() {
                } else if sc.is_one() {
                    ones += base;
                } else {
                    pairs.points.push(base as *const G);
                    pairs.scalars.push(sc.0.as_ptr());
                }
            }
            (ones, pairs)
        })
        .collect();

    let mut total = G::Projective::identity();
    let mut all = Pairs {
        points: Vec::new(),
        scalars: Vec::new(),
    };
    for (ones, pairs) in parts {
        total += ones;
        all.points.extend_from_slice(&pairs.points);
        all.scalars.extend_from_slice(&pairs.scalars);
    }

    // Phase 2: Pippenger over one slice per thread.
    let n = all.points.len();
    let threads = rayon::current_num_threads().max(1);
    let per = n.div_ceil(threads).max(1 << 12);
    let all = &all;
    let sums: Vec<G::Projective> = (0..n.div_ceil(per))
        .into_par_iter()
        .map(|k| {
            let r = k * per..((k + 1) * per).min(n);
            G::pippenger(&all.points[r.clone()], &all.scalars[r])
        })
        .collect();
    sums.into_iter().fold(total, |acc, x| acc + x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use ff::Field;
    use group::Curve;

    fn naive<G: Curve<Scalar = Scalar>>(bases: &[G], scalars: &[Scalar]) -> G {
        bases
            .iter()
            .zip(scalars)
            .fold(G::identity(), |acc, (b, s)| acc + *b * *s)
    }

    fn random_scalars(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
        // A mix of zeros, ones and dense values, as witnesses have.
        (0..n)
            .map(|i| match i % 5 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn g1_msm_matches_naive_with_density() {
        let mut rng = rand::thread_rng();
        for n in [0usize, 1, 2, 7, 33, 1000, 5000] {
            let scalars = random_scalars(n, &mut rng);
            let mut density = Density::default();
            let mut used = Vec::new();
            for (j, s) in scalars.iter().enumerate() {
                density.push_unset();
                if j % 3 != 2 {
                    density.set(j);
                    used.push(*s);
                }
            }
            let bases: Vec<G1Projective> = (0..used.len())
                .map(|_| G1Projective::random(&mut rng))
                .collect();
            let affine: Vec<G1Affine> = bases.iter().map(|b| b.to_affine()).collect();
            let bytes: Vec<ScalarBytes> = scalars.iter().map(ScalarBytes::from_scalar).collect();
            let got = msm(&affine, &bytes, Some(&density));
            let want = naive(&bases, &used);
            assert_eq!(got, want, "n = {n}");
            if !used.is_empty() && used.iter().any(|s| !bool::from(s.is_zero())) {
                // Negative twin: one flipped scalar changes the sum.
                let mut bad = bytes.clone();
                let j = (0..n)
                    .find(|&j| density.get(j) && !bad[j].is_zero())
                    .unwrap();
                bad[j] = ScalarBytes::from_scalar(&(scalars[j] + Scalar::ONE));
                assert_ne!(msm(&affine, &bad, Some(&density)), want);
            }
        }
    }

    #[test]
    fn g2_msm_matches_naive_dense() {
        let mut rng = rand::thread_rng();
        for n in [1usize, 40, 700] {
            let scalars = random_scalars(n, &mut rng);
            let bases: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut rng)).collect();
            let affine: Vec<G2Affine> = bases.iter().map(|b| b.to_affine()).collect();
            let bytes: Vec<ScalarBytes> = scalars.iter().map(ScalarBytes::from_scalar).collect();
            assert_eq!(msm(&affine, &bytes, None), naive(&bases, &scalars));
        }
    }
}
