//! Multi-scalar multiplication on the CPU, on the affine bases in place.
//!
//! The scalars of a variable that a query does not use are skipped (density filtering), zero
//! scalars are dropped, and the bases of scalars equal to one are added without multiplying:
//! real witnesses are mostly bits. The rest goes through arrays of pointers into the parameters
//! and the witness (nothing is copied or converted per call) to one of two engines
//! ([`MsmEngine`]): proofline's batch-affine Pippenger (`pippenger.rs`, the default) or blst's
//! `blst_p{1,2}s_mult_pippenger`, kept for comparison.

mod batch;
mod buckets;
mod curve;
mod field;
mod pippenger;
mod reduce;
mod sum;
pub mod window;

pub use curve::MsmGroup;

use group::Group;
use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::plan::MsmTerm;
use prover_core::stages::Witness;
use rayon::prelude::*;

/// Which Pippenger runs the MSMs' dense part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MsmEngine {
    /// proofline's: signed-digit windows, batch-affine buckets (`pippenger.rs`).
    #[default]
    Proofline,
    /// blst's `blst_p{1,2}s_mult_pippenger`, one call per thread over a range of points.
    Blst,
}

/// The (base, scalar) pairs of an MSM's dense part, as pointers that cross threads; they point
/// into the parameters and the witness, which outlive the MSM.
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
    msm_terms_with(MsmEngine::default(), bases, terms, witness)
}

/// [`msm_terms`] on the given engine.
pub fn msm_terms_with<'a, G: MsmGroup>(
    engine: MsmEngine,
    bases: &[G],
    terms: impl IntoIterator<Item = &'a MsmTerm>,
    witness: &Witness,
) -> G::Projective {
    terms.into_iter().fold(G::Projective::identity(), |acc, t| {
        acc + msm_with(
            engine,
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
    msm_with(MsmEngine::default(), bases, scalars, density)
}

/// [`msm`] on the given engine.
pub fn msm_with<G: MsmGroup>(
    engine: MsmEngine,
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

    // Phase 1, in parallel chunks of variables: sum the bases of ones (batch-affine rounds, or
    // mixed additions for blst), collect the rest.
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
            let mut ones: Vec<&G> = Vec::new();
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
                if sc.is_zero() || base.is_infinity() {
                } else if sc.is_one() {
                    ones.push(base);
                } else {
                    pairs.points.push(base as *const G);
                    pairs.scalars.push(sc.0.as_ptr());
                }
            }
            let ones = match engine {
                MsmEngine::Proofline => sum::sum(ones),
                MsmEngine::Blst => {
                    ones.into_iter()
                        .fold(G::Projective::identity(), |mut acc, b| {
                            acc += b;
                            acc
                        })
                }
            };
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

    // Phase 2: the dense part.
    total
        + match engine {
            MsmEngine::Proofline => pippenger::pippenger(&all),
            MsmEngine::Blst => blst_split(&all),
        }
}

/// blst's Pippenger over one range of points per thread.
fn blst_split<G: MsmGroup>(all: &Pairs<G>) -> G::Projective {
    let n = all.points.len();
    let threads = rayon::current_num_threads().max(1);
    let per = n.div_ceil(threads).max(1 << 12);
    let sums: Vec<G::Projective> = (0..n.div_ceil(per))
        .into_par_iter()
        .map(|k| {
            let r = k * per..((k + 1) * per).min(n);
            G::blst_pippenger(&all.points[r.clone()], &all.scalars[r])
        })
        .collect();
    sums.into_iter()
        .fold(G::Projective::identity(), |acc, x| acc + x)
}

#[cfg(test)]
mod tests;
