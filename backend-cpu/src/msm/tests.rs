//! Both engines against a naive sum and against each other, on fresh random inputs, with the
//! shapes that stress bucket accumulation: repeated bases and digits (queue collisions, side
//! sums), a point and its negation in one bucket (cancellation), a point added to itself
//! (doubling), the identity as a base, all-zero and all-one scalars, density filtering.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use prover_core::stages::density::{Density, ScalarBytes};
use rand::Rng;

use super::*;

const ENGINES: [MsmEngine; 2] = [MsmEngine::Proofline, MsmEngine::Blst];

fn naive<G: Curve<Scalar = Scalar>>(bases: &[G], scalars: &[Scalar]) -> G {
    bases
        .iter()
        .zip(scalars)
        .fold(G::identity(), |acc, (b, s)| acc + *b * *s)
}

/// A mix of zeros, ones and dense values, as witnesses have.
fn mixed_scalars(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
    (0..n)
        .map(|i| match i % 5 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

fn bytes(scalars: &[Scalar]) -> Vec<ScalarBytes> {
    scalars.iter().map(ScalarBytes::from_scalar).collect()
}

fn affine<G: Curve>(points: &[G]) -> Vec<G::AffineRepr> {
    points.iter().map(|p| p.to_affine()).collect()
}

/// Checks both engines on `(bases, scalars)` against the naive sum, and a negative twin: one
/// changed scalar (the first nonzero one, plus one) changes every engine's sum.
fn check<G>(bases: &[G], scalars: &[Scalar], what: &str)
where
    G: Curve<Scalar = Scalar>,
    G::AffineRepr: MsmGroup<Projective = G>,
{
    let want = naive(bases, scalars);
    let points = affine(bases);
    let b = bytes(scalars);
    for engine in ENGINES {
        assert_eq!(
            msm_with(engine, &points, &b, None),
            want,
            "{engine:?}: {what}"
        );
    }
    if let Some(j) = (0..scalars.len()).find(|&j| !bool::from(bases[j].is_identity())) {
        let mut bad = scalars.to_vec();
        bad[j] += Scalar::ONE;
        let bad = bytes(&bad);
        for engine in ENGINES {
            assert_ne!(
                msm_with(engine, &points, &bad, None),
                want,
                "{engine:?} (negative twin): {what}"
            );
        }
    }
}

#[test]
fn g1_random_sizes_match_naive() {
    let mut rng = rand::thread_rng();
    let mut sizes = vec![0usize, 1, 2, 3, 7, 33, 257, 1000, 5000];
    sizes.extend((0..3).map(|_| rng.gen_range(1..20_000)));
    for n in sizes {
        let bases: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        check(&bases, &scalars, &format!("G1, n = {n}"));
    }
}

#[test]
fn g2_random_sizes_match_naive() {
    let mut rng = rand::thread_rng();
    for n in [1usize, 40, 700, rng.gen_range(1..3000)] {
        let bases: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut rng)).collect();
        check(&bases, &mixed_scalars(n, &mut rng), &format!("G2, n = {n}"));
    }
}

#[test]
fn repeated_bases_and_digits() {
    let mut rng = rand::thread_rng();
    let p = G1Projective::random(&mut rng);
    let q = G1Projective::random(&mut rng);
    let s = Scalar::random(&mut rng);
    let n = 3000;
    // One base and one scalar throughout: every window's digits fall in one bucket, so every
    // addition collides in the queue and the point is added to itself (doubling).
    check(&vec![p; n], &vec![s; n], "one base, one scalar");
    // One base, random scalars: doublings among chords.
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    check(&vec![p; n], &scalars, "one base, random scalars");
    // Two bases, one scalar: two points alternating into the same buckets.
    let two: Vec<G1Projective> = (0..n).map(|i| if i % 2 == 0 { p } else { q }).collect();
    check(&two, &vec![s; n], "two bases, one scalar");
    // A point and its negation with the same scalar: buckets cancel to empty and refill.
    let pm: Vec<G1Projective> = (0..n).map(|i| if i % 2 == 0 { p } else { -p }).collect();
    let want = if n % 2 == 0 {
        G1Projective::identity()
    } else {
        p * s
    };
    assert_eq!(naive(&pm, &vec![s; n]), want);
    check(&pm, &vec![s; n], "a point and its negation");
    // Scalars of one (summed apart from the Pippenger): doublings and cancellations there too.
    let ones = vec![Scalar::ONE; n];
    check(&vec![p; n], &ones, "one base, all ones");
    check(&pm, &ones, "a point and its negation, all ones");
    check(&two, &ones, "two bases, all ones");
    // Small scalars (digits only in the low windows) over a few bases.
    let small: Vec<Scalar> = (0..n).map(|i| Scalar::from((i % 7) as u64 + 2)).collect();
    let few: Vec<G1Projective> = (0..n).map(|i| [p, q, -p][i % 3]).collect();
    check(&few, &small, "few bases, small scalars");
    // The same in G2.
    let p2 = G2Projective::random(&mut rng);
    check(&vec![p2; 500], &vec![s; 500], "G2: one base, one scalar");
    let pm2: Vec<G2Projective> = (0..501)
        .map(|i| if i % 2 == 0 { p2 } else { -p2 })
        .collect();
    check(&pm2, &vec![s; 501], "G2: a point and its negation");
}

#[test]
fn identity_bases_and_extreme_scalars() {
    let mut rng = rand::thread_rng();
    let n = 2000;
    let mut bases: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
    for i in (0..n).step_by(3) {
        bases[i] = G1Projective::identity();
    }
    let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    check(&bases, &scalars, "identity among the bases");
    check(&bases, &vec![Scalar::ZERO; n], "all zero");
    check(&bases, &vec![Scalar::ONE; n], "all one");
    check(&bases, &vec![-Scalar::ONE; n], "all r - 1");
    let bases2: Vec<G2Projective> = (0..300)
        .map(|i| {
            if i % 4 == 0 {
                G2Projective::identity()
            } else {
                G2Projective::random(&mut rng)
            }
        })
        .collect();
    check(
        &bases2,
        &vec![-Scalar::ONE; 300],
        "G2: identity among the bases, r - 1",
    );
}

#[test]
fn density_filtering_with_both_engines() {
    let mut rng = rand::thread_rng();
    for n in [0usize, 1, 2, 7, 33, 1000, 5000] {
        let scalars = mixed_scalars(n, &mut rng);
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
        let points: Vec<G1Affine> = affine(&bases);
        let b = bytes(&scalars);
        let want = naive(&bases, &used);
        for engine in ENGINES {
            assert_eq!(
                msm_with(engine, &points, &b, Some(&density)),
                want,
                "n = {n}"
            );
        }
        if used.iter().any(|s| !bool::from(s.is_zero())) {
            // Negative twin: one changed used scalar changes the sum.
            let j = (0..n).find(|&j| density.get(j) && !b[j].is_zero()).unwrap();
            let mut bad = b.clone();
            bad[j] = ScalarBytes::from_scalar(&(scalars[j] + Scalar::ONE));
            for engine in ENGINES {
                assert_ne!(msm_with(engine, &points, &bad, Some(&density)), want);
            }
        }
    }
}

#[test]
fn engines_agree_on_many_threads_and_one() {
    // The plan splits points as well as windows when there are many threads; the sum must not
    // depend on the split.
    let mut rng = rand::thread_rng();
    let n = 20_000;
    let bases: Vec<G2Affine> = affine(
        &(0..n)
            .map(|_| G2Projective::random(&mut rng))
            .collect::<Vec<_>>(),
    );
    let b = bytes(&(0..n).map(|_| Scalar::random(&mut rng)).collect::<Vec<_>>());
    let want = msm_with(MsmEngine::Blst, &bases, &b, None);
    for threads in [1, 3, 16] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let got = pool.install(|| msm_with(MsmEngine::Proofline, &bases, &b, None));
        assert_eq!(got, want, "{threads} threads");
    }
}
