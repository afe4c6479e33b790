//! Native parameter files: a mapped copy proves like the decoded file, and a copy that does not
//! match its source (damaged, truncated, made from another file, made with fewer checks, made by
//! another layout) is refused with the reason, never used.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use proofline_tests::{prepare_cpu, prove_one, RandomCircuit};
use prover_core::groth16::native;
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proof, Parameters, PointCheck,
};
use rand::RngCore;

/// A circuit, its parameter file (fresh randomness per run) and that file's native copy.
fn setup(dir: &Path) -> (RandomCircuit, Parameters, PathBuf, PathBuf) {
    let seed = rand::thread_rng().next_u64();
    let c = RandomCircuit::new(2, 40, seed, rand::thread_rng().next_u64());
    let params = generate_seeded_parameters(c.shape(), seed).unwrap();
    let source = dir.join("circuit.params");
    params.write_file(&source).unwrap();
    let copy = native::beside(&source);
    let read = Parameters::read_file(&source, PointCheck::Unchecked).unwrap();
    native::write(&read, &source, PointCheck::Unchecked, &copy).unwrap();
    (c, params, source, copy)
}

fn refusal(copy: &Path, source: &Path, check: PointCheck) -> String {
    match native::open(copy, source, check).unwrap() {
        Ok(_) => panic!("a native copy that does not match was used"),
        Err(why) => why,
    }
}

#[test]
fn a_mapped_copy_equals_the_file_and_proves() {
    let dir = tempfile::tempdir().unwrap();
    let (c, params, source, copy) = setup(dir.path());
    let mapped = native::open(&copy, &source, PointCheck::Unchecked)
        .unwrap()
        .expect("a fresh copy is used");
    assert!(mapped.h.is_mapped() && mapped.b_g2.is_mapped());
    assert_eq!(mapped, params);
    let pvk = prepare_verifying_key(&mapped.vk);
    let inputs = c.public_inputs();
    let proof = prove_one(&prepare_cpu(mapped), c).unwrap();
    assert!(verify_proof(&pvk, &proof, &inputs).unwrap());
    // Its negative twin: the same proof against other inputs.
    let mut other = inputs.clone();
    other[0] += prover_core::blstrs::Scalar::from(1u64);
    assert!(!verify_proof(&pvk, &proof, &other).unwrap());
}

#[test]
fn writing_to_mapped_points_leaves_the_copy_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (_, params, source, copy) = setup(dir.path());
    let mut mapped = native::open(&copy, &source, PointCheck::Unchecked)
        .unwrap()
        .unwrap();
    mapped.h[0] = mapped.h[1];
    assert_ne!(mapped.h[0], params.h[0]);
    let again = native::open(&copy, &source, PointCheck::Unchecked)
        .unwrap()
        .expect("the copy on disk is unchanged");
    assert_eq!(again, params);
}

#[test]
fn a_damaged_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, source, copy) = setup(dir.path());
    let len = std::fs::metadata(&copy).unwrap().len();
    // One flipped bit in the last section (b_g2), then one in the header.
    for (at, says) in [(len - 7, "checksum"), (40, "checksum")] {
        let good = std::fs::read(&copy).unwrap();
        let mut bytes = good.clone();
        bytes[at as usize] ^= 1;
        // Written in place: the file keeps its name, the source keeps its identity.
        let mut f = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&bytes).unwrap();
        drop(f);
        let why = refusal(&copy, &source, PointCheck::Unchecked);
        assert!(why.contains(says), "{why}");
        std::fs::write(&copy, &good).unwrap();
        assert!(native::open(&copy, &source, PointCheck::Unchecked)
            .unwrap()
            .is_ok());
    }
}

#[test]
fn a_truncated_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, source, copy) = setup(dir.path());
    let len = std::fs::metadata(&copy).unwrap().len();
    for keep in [len - 1, 5000, 100, 0] {
        let f = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
        f.set_len(keep).unwrap();
        let why = refusal(&copy, &source, PointCheck::Unchecked);
        assert!(why.contains("truncated"), "{keep}: {why}");
    }
    assert!(refusal(
        &dir.path().join("absent.native"),
        &source,
        PointCheck::Unchecked
    )
    .contains("no native copy"));
}

#[test]
fn a_copy_of_another_file_or_with_fewer_checks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, params, source, copy) = setup(dir.path());
    // Made without the subgroup check: not used for a load that asks for it.
    let why = refusal(&copy, &source, PointCheck::Checked);
    assert!(why.contains("subgroup"), "{why}");
    // The source replaced by another file: the copy is stale.
    let other = generate_seeded_parameters(
        RandomCircuit::new(2, 40, 1, 1).shape(),
        rand::thread_rng().next_u64(),
    )
    .unwrap();
    other.write_file(&source).unwrap();
    let why = refusal(&copy, &source, PointCheck::Unchecked);
    assert!(why.contains("another version"), "{why}");
    // A copy made with the checks serves both kinds of load.
    let read = Parameters::read_file(&source, PointCheck::Checked).unwrap();
    native::write(&read, &source, PointCheck::Checked, &copy).unwrap();
    for check in [PointCheck::Checked, PointCheck::Unchecked] {
        let mapped = native::open(&copy, &source, check).unwrap().unwrap();
        assert_eq!(mapped, other);
        assert_ne!(mapped, params);
    }
    // Not a native file at all.
    std::fs::write(&copy, vec![7u8; 8192]).unwrap();
    assert!(refusal(&copy, &source, PointCheck::Unchecked).contains("not a native"));
}
