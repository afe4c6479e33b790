//! Parameter generation on a device against the CPU generator.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use prover_core::groth16::generator::fixed_base::FixedBase;
use prover_core::{generate_parameters, generate_parameters_on, Multiplier, Trapdoor};

use crate::cases;

/// Equal lists, or a panic naming `what`, the first differing index and its scalar position
/// (not the whole lists).
fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: entry {i} differs: {:?} != {:?}", got[i], want[i]);
    }
}

/// Parameter generation on a device: fixed-base products of G1 and G2 equal the CPU's for
/// every window width, edge and random scalars (zeros, one, -1, powers of two and their
/// predecessors, repeats), with a negative twin (another base's table); then whole parameter
/// sets of the suite's circuits generated through `m` are byte-identical to the CPU
/// generator's for the same fresh trapdoor, with a negative twin (another trapdoor).
pub fn check_generator(m: &dyn Multiplier) {
    let mut rng = rand::thread_rng();
    let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(2u64)];
    for k in [1u32, 15, 16, 17, 31, 32, 63, 64, 127, 128, 254] {
        let p = Scalar::from(2u64).pow_vartime([k as u64]);
        scalars.extend([p, p - Scalar::ONE]);
    }
    scalars.extend((0..40).map(|_| Scalar::random(&mut rng)));
    // Zeros (identity products) first, inside and last among a device thread's points.
    scalars.push(Scalar::ZERO);
    scalars.extend_from_within(3..10);
    scalars.push(Scalar::ZERO);
    let g1 = G1Projective::random(&mut rng);
    let g2 = G2Projective::random(&mut rng);
    for window in [2usize, 5, 8, 11, 13, 16] {
        let t1 = FixedBase::with_window(g1, window);
        let got = m.g1(&t1, &scalars).expect("G1 products");
        let want: Vec<G1Affine> = scalars.iter().map(|s| (g1 * s).to_affine()).collect();
        assert_same(&got, &want, &format!("G1 products, window {window}"));
        let other = FixedBase::with_window(g1.double(), window);
        let wrong = m.g1(&other, &scalars).expect("G1 products");
        assert!(wrong != want, "another base's table, window {window}");
        // (G2 tables of the widest windows take seconds to build on the host.)
        if window <= 11 {
            let t2 = FixedBase::with_window(g2, window);
            let got = m.g2(&t2, &scalars).expect("G2 products");
            let want: Vec<G2Affine> = scalars.iter().map(|s| (g2 * s).to_affine()).collect();
            assert_same(&got, &want, &format!("G2 products, window {window}"));
        }
    }
    assert!(m
        .g1(&FixedBase::with_window(g1, 4), &[])
        .unwrap()
        .is_empty());

    let bytes = |p: &prover_core::Parameters| {
        let mut b = Vec::new();
        p.write(&mut b).expect("in memory");
        b
    };
    for c in cases(&mut rng).into_iter().take(3) {
        let trapdoor = Trapdoor::random(&mut rng);
        let cpu = generate_parameters(c.clone(), &trapdoor).expect("CPU parameters");
        let dev = generate_parameters_on(c.clone(), &trapdoor, &(), m).expect("device parameters");
        assert!(
            bytes(&cpu) == bytes(&dev),
            "{}: device parameters differ",
            c.describe()
        );
        let other = Trapdoor::random(&mut rng);
        let dev2 = generate_parameters_on(c.clone(), &other, &(), m).expect("device parameters");
        assert!(
            bytes(&cpu) != bytes(&dev2),
            "{}: trapdoor ignored",
            c.describe()
        );
    }
}
