//! The pre-compiled synthesizer against today's: the same partitions, the same errors, and
//! cache files that round-trip and refuse damage.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::synthesis::cpu::CpuSynthesizer;
use crate::synthesis::test_circuit::ChainCircuit;

fn fresh_seed() -> u64 {
    rand::thread_rng().gen()
}

fn assert_same(p: &SynthesizedPartition, q: &SynthesizedPartition) {
    assert_eq!(p.evaluations.a, q.evaluations.a, "a");
    assert_eq!(p.evaluations.b, q.evaluations.b, "b");
    assert_eq!(p.evaluations.c, q.evaluations.c, "c");
    let (w, v) = (&p.witness, &q.witness);
    assert_eq!(w.input, v.input, "input");
    assert_eq!(w.aux, v.aux, "aux");
    assert_eq!(w.a_aux_density, v.a_aux_density, "A aux density");
    assert_eq!(w.b_input_density, v.b_input_density, "B input density");
    assert_eq!(w.b_aux_density, v.b_aux_density, "B aux density");
}

/// A circuit with every kind of term: inputs and aux in A, B and C, coefficients 1, -1, small
/// and random, a repeated coefficient, a term that cancels out, an unused variable, the ONE in
/// B, and a child system merged with `extend`. `seed` picks the witness (not the shape);
/// `broken` makes constraint "c3" fail.
#[derive(Clone)]
struct Mixed {
    seed: u64,
    broken: bool,
}

impl Circuit<Scalar> for Mixed {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        let (x, y) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let k = Scalar::from(5u64);
        let px = cs.alloc_input(|| "x", || Ok(x))?;
        let a = cs.alloc(|| "a", || Ok(y))?;
        let _unused = cs.alloc(|| "unused", || Ok(Scalar::from(7u64)))?;
        // c1: (x + 5a) * 1 = t
        let t = cs.alloc(|| "t", || Ok(x + k * y))?;
        cs.enforce(
            || "c1",
            |lc| lc + px + (k, a),
            |lc| lc + CS::one(),
            |lc| lc + t,
        );
        // c2: (t - a + a) * (-a) = -(t * a), with a term that cancels out.
        let u = cs.alloc(|| "u", || Ok(-(x + k * y) * y))?;
        cs.enforce(|| "c2", |lc| lc + t - a + a, |lc| lc - a, |lc| lc + u);
        // c3: r a * r a = w, with a full-size coefficient (fixed: it is part of the shape) used
        // twice.
        let r = Scalar::random(ChaCha20Rng::seed_from_u64(99));
        let w = if self.broken {
            Scalar::ONE
        } else {
            r * y * r * y
        };
        let wv = cs.alloc(|| "w", || Ok(w))?;
        cs.enforce(|| "c3", |lc| lc + (r, a), |lc| lc + (r, a), |lc| lc + wv);
        if CS::is_extensible() {
            let mut child = CS::new();
            child.alloc_input(|| "child ONE", || Ok(Scalar::ONE))?;
            let q = child.alloc_input(|| "q", || Ok(Scalar::from(3u64)))?;
            let s = child.alloc(|| "s", || Ok(Scalar::from(9u64)))?;
            child.enforce(
                || "child",
                |lc| lc + q,
                |lc| lc + (Scalar::from(3u64), CS::one()),
                |lc| lc + s,
            );
            cs.extend(&child);
        }
        Ok(())
    }
}

#[test]
fn pce_partitions_equal_todays_on_a_mixed_circuit() {
    let seed = fresh_seed();
    let pce = Precompiled::record(Mixed {
        seed,
        broken: false,
    })
    .unwrap();
    let m = pce.matrices();
    // ONE, x, q; and the input constraints.
    assert_eq!(m.inputs, 3);
    assert_eq!(m.constraints(), 4 + 3);
    // The random coefficient is stored once; 5 and 3 once each.
    assert_eq!(m.table_len(), 3);
    for s in [seed, seed.wrapping_add(1)] {
        let want = CpuSynthesizer
            .synthesize(Mixed {
                seed: s,
                broken: false,
            })
            .unwrap();
        let got = pce
            .synthesize(Mixed {
                seed: s,
                broken: false,
            })
            .unwrap();
        assert_same(&got, &want);
    }
}

/// Dense is one chain, so the helper evaluates its constraints beside the witness: 2^15 of
/// them, two steps of the stream and more.
#[test]
fn pce_partitions_equal_todays_on_dense() {
    let seed = fresh_seed();
    let shape = ChainCircuit::new(1 << 15, 3, seed);
    let pce = Precompiled::record(shape.clone()).unwrap();
    let c = shape.with_witness(seed ^ 1);
    let (got, want) = (
        pce.synthesize(c.clone()).unwrap(),
        CpuSynthesizer.synthesize(c).unwrap(),
    );
    assert_same(&got, &want);
    // The evaluations hold what they would whole (the ledger counts their capacity).
    assert_eq!(got.evaluations.heap_bytes(), want.evaluations.heap_bytes());
    // Twin: another shape's matrices give other evaluations, caught as unsatisfied.
    let other = ChainCircuit::new(1 << 15, 3, seed ^ 2).with_witness(seed ^ 1);
    assert!(matches!(
        pce.synthesize(other),
        Err(Error::Unsatisfied { .. })
    ));
}

#[test]
fn an_unsatisfied_witness_is_the_same_named_error() {
    let seed = fresh_seed();
    let pce = Precompiled::record(Mixed {
        seed,
        broken: false,
    })
    .unwrap();
    let circuit = Mixed { seed, broken: true };
    let want = CpuSynthesizer.synthesize(circuit.clone()).unwrap_err();
    let got = pce.synthesize(circuit).unwrap_err();
    match (&got, &want) {
        (
            Error::Unsatisfied { index, annotation },
            Error::Unsatisfied {
                index: i,
                annotation: a,
            },
        ) => {
            assert_eq!((index, annotation.as_str()), (i, a.as_str()));
            assert_eq!(annotation, "c3");
        }
        _ => panic!("expected two Unsatisfied errors, got {got:?} and {want:?}"),
    }
}

#[test]
fn a_circuit_of_another_size_is_a_clear_error() {
    let pce = Precompiled::record(ChainCircuit::new(100, 2, 1)).unwrap();
    let bigger = ChainCircuit::new(101, 2, 1).with_witness(3);
    let e = pce.synthesize(bigger).unwrap_err();
    assert!(
        matches!(e, Error::PrecompiledMismatch { what: "constraints", circuit, recorded } if circuit == recorded + 1),
        "{e}"
    );
    let more_inputs = ChainCircuit::new(100, 3, 1).with_witness(3);
    assert!(matches!(
        pce.synthesize(more_inputs),
        Err(Error::PrecompiledMismatch { .. })
    ));
    // Twin: the recorded size is accepted.
    pce.synthesize(ChainCircuit::new(100, 2, 1).with_witness(3))
        .unwrap();
}

#[test]
fn cache_files_round_trip_and_name_constraints_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.pce");
    let seed = fresh_seed();
    let (recorded, origin) = Precompiled::load_or_record(
        &path,
        Mixed {
            seed,
            broken: false,
        },
    )
    .unwrap();
    assert_eq!(origin, Origin::Recorded);
    let (loaded, origin) = Precompiled::load_or_record(
        &path,
        Mixed {
            seed,
            broken: false,
        },
    )
    .unwrap();
    assert_eq!(origin, Origin::Loaded);
    assert_eq!(loaded.matrices(), recorded.matrices());
    let e = loaded.synthesize(Mixed { seed, broken: true }).unwrap_err();
    assert!(
        matches!(&e, Error::Unsatisfied { index: 2, annotation } if annotation == "c3"),
        "{e}"
    );
}

#[test]
fn damaged_cache_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.pce");
    let pce = Precompiled::record(ChainCircuit::new(64, 2, 5)).unwrap();
    pce.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    Precompiled::load(&path).unwrap();
    // Every header byte (the magic and ten sizes), one bit each.
    for i in 0..88 {
        let mut bad = good.clone();
        bad[i] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let e = Precompiled::load(&path).expect_err("a damaged header must be refused");
        assert!(matches!(e, Error::Malformed { .. }), "header byte {i}: {e}");
    }
    let mut rng = ChaCha20Rng::seed_from_u64(fresh_seed());
    // The names are last, unchecked (they only name a failing constraint): damage before them.
    let names_bytes = match &pce.names {
        NameSource::Memory(n) => n.len() * 8 + n.blob.len(),
        NameSource::File(_) => unreachable!("recorded in memory"),
    };
    let names_start = good.len() - names_bytes;
    for trial in 0..40 {
        let mut bad = good.clone();
        match trial % 4 {
            // Truncated, or grown.
            0 => bad.truncate(rng.gen_range(0..good.len())),
            1 => bad.extend_from_slice(&[0u8; 8]),
            // One flipped bit in the header or the matrices.
            _ => {
                let i = rng.gen_range(0..names_start);
                bad[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        std::fs::write(&path, &bad).unwrap();
        let e = Precompiled::load(&path).expect_err("a damaged file must be refused");
        assert!(
            matches!(e, Error::Malformed { .. } | Error::Io { .. }),
            "trial {trial}: {e}"
        );
    }
}

#[test]
fn a_cache_file_of_the_wrong_length_says_both_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.pce");
    Precompiled::record(ChainCircuit::new(64, 2, 5))
        .unwrap()
        .save(&path)
        .unwrap();
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&path, &good[..good.len() - 8]).unwrap();
    let e = Precompiled::load(&path).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "{}: {} bytes, but its header describes {} bytes",
            path.display(),
            good.len() - 8,
            good.len()
        )),
        "{e}"
    );
    assert!(!e.contains("Some("), "{e}");
    // Twin: the whole file loads.
    std::fs::write(&path, &good).unwrap();
    Precompiled::load(&path).unwrap();
}

#[test]
fn a_fifo_in_place_of_the_cache_file_is_refused_not_awaited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dense.pce");
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = Precompiled::load_or_record(&path, ChainCircuit::new(64, 2, 5))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("opening {}: a FIFO, not a regular file", path.display())
    );
}
