//! Bad input gets a typed error that says what is wrong, never a panic.

use proofline_tests::{accelerate_cpu, cpu_stages, prepare_cpu, prove_one, RandomCircuit};
use prover_core::{
    generate_seeded_parameters, prepare_verifying_key, verify_proof, CpuSynthesizer, Error,
    Parameters, PointCheck, PointError, Proof, Synthesizer, VerifyingKey,
};
use rand::{Rng, RngCore};

/// vk fields before the ic count: alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2.
const VK_FIXED: usize = 96 * 3 + 192 * 3;

fn setup() -> (RandomCircuit, Parameters, Vec<u8>) {
    let c = RandomCircuit::new(2, 12, 11, rand::thread_rng().next_u64());
    let params = generate_seeded_parameters(c.shape(), 11).unwrap();
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    (c, params, bytes)
}

/// Offset of the first point of section `k` (0 = ic, 1 = h, 2 = l, ...).
fn section_start(p: &Parameters, k: usize) -> usize {
    let lens = [p.vk.ic.len(), p.h.len(), p.l.len(), p.a.len(), p.b_g1.len()];
    let mut off = VK_FIXED + 4;
    for len in &lens[..k] {
        off += len * 96 + 4;
    }
    off
}

fn both(bytes: &[u8], check: PointCheck) -> [prover_core::Result<Parameters>; 2] {
    [
        Parameters::from_bytes(bytes, check),
        Parameters::read(bytes, check),
    ]
}

#[test]
fn truncated_parameters_are_reported() {
    let (_, params, bytes) = setup();
    let mut rng = rand::thread_rng();
    let mut cuts: Vec<usize> = (0..6).map(|k| section_start(&params, k) - 2).collect();
    cuts.extend((0..20).map(|_| rng.gen_range(0..bytes.len())));
    for cut in cuts {
        for r in both(&bytes[..cut], PointCheck::Checked) {
            match r {
                Err(Error::Truncated { .. }) | Err(Error::LengthExceedsData { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }
    // Positive twin: the whole file reads back equal.
    for r in both(&bytes, PointCheck::Checked) {
        assert_eq!(r.unwrap(), params);
    }
}

#[test]
fn length_prefix_beyond_the_data_is_refused_without_allocating() {
    let (_, params, mut bytes) = setup();
    let h_len_at = section_start(&params, 1) - 4;
    bytes[h_len_at..h_len_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    match Parameters::from_bytes(&bytes, PointCheck::Checked) {
        Err(Error::LengthExceedsData { what, claimed, .. }) => {
            assert_eq!(what, "params.h");
            assert_eq!(claimed, u32::MAX as u64);
        }
        other => panic!("{other:?}"),
    }
    // A file has a known size: the same check before any allocation.
    let path = std::env::temp_dir().join(format!("proofline-bad-{}.params", rand::random::<u64>()));
    std::fs::write(&path, &bytes).unwrap();
    let from_file = Parameters::read_file(&path, PointCheck::Checked);
    std::fs::remove_file(&path).unwrap();
    let e = from_file.unwrap_err();
    assert!(
        matches!(
            e.inner(),
            Error::LengthExceedsData {
                what: "params.h",
                ..
            }
        ),
        "{e:?}"
    );
    // The error names the file.
    assert!(
        e.to_string()
            .starts_with(&format!("{}: params.h: ", path.display())),
        "{e}"
    );
    // A stream cannot know its size: it reads chunk by chunk and runs out of data.
    assert!(matches!(
        Parameters::read(&bytes[..], PointCheck::Checked),
        Err(Error::Truncated { .. })
    ));
}

#[test]
fn trailing_bytes_are_refused() {
    let (_, _, mut bytes) = setup();
    bytes.push(0);
    assert!(matches!(
        Parameters::from_bytes(&bytes, PointCheck::Checked),
        Err(Error::TrailingBytes { extra: 1, .. })
    ));
    let path =
        std::env::temp_dir().join(format!("proofline-trail-{}.params", rand::random::<u64>()));
    std::fs::write(&path, &bytes).unwrap();
    let from_file = Parameters::read_file(&path, PointCheck::Checked);
    // Twin: without the extra byte the file reads back.
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    let good = Parameters::read_file(&path, PointCheck::Checked);
    std::fs::remove_file(&path).unwrap();
    let e = from_file.unwrap_err();
    assert!(
        matches!(e.inner(), Error::TrailingBytes { extra: 1, .. }),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(&path.display().to_string()),
        "{e}"
    );
    assert!(good.is_ok());
}

fn expect_point_error(
    bytes: &[u8],
    check: PointCheck,
    what: &str,
    index: usize,
    reason: PointError,
) {
    for r in both(bytes, check) {
        match r {
            Err(Error::InvalidPoint {
                what: w,
                index: i,
                reason: re,
            }) => assert_eq!((w, i, re), (what, index, reason)),
            other => panic!("expected {what}[{index}] {reason}, got {other:?}"),
        }
    }
}

#[test]
fn points_off_the_curve_are_refused() {
    let (_, params, mut bytes) = setup();
    // Last byte of l[1]'s y coordinate.
    let at = section_start(&params, 2) + 96 + 95;
    bytes[at] ^= 1;
    expect_point_error(
        &bytes,
        PointCheck::Unchecked,
        "params.l",
        1,
        PointError::NotOnCurve,
    );
}

#[test]
fn bad_encodings_are_refused() {
    let (_, params, mut bytes) = setup();
    // The compression flag set in an uncompressed point (blst alone would decode the first half
    // as a compressed point and accept it).
    let at = section_start(&params, 3);
    bytes[at] |= 0x80;
    expect_point_error(
        &bytes,
        PointCheck::Checked,
        "params.a",
        0,
        PointError::BadEncoding,
    );
}

/// A point on the curve y^2 = x^3 + 4 that is not in the prime-order subgroup.
fn point_outside_subgroup() -> [u8; 96] {
    let mut four = blst::blst_fp::default();
    let mut x = blst::blst_fp::default();
    // SAFETY: blst field arithmetic on owned values.
    unsafe {
        blst::blst_fp_from_uint64(&mut four, [4u64, 0, 0, 0, 0, 0].as_ptr());
        for k in 1u64.. {
            blst::blst_fp_from_uint64(&mut x, [k, 0, 0, 0, 0, 0].as_ptr());
            let (mut x2, mut rhs, mut y) = Default::default();
            blst::blst_fp_sqr(&mut x2, &x);
            blst::blst_fp_mul(&mut rhs, &x2, &x);
            blst::blst_fp_add(&mut rhs, &rhs, &four);
            if blst::blst_fp_sqrt(&mut y, &rhs) {
                let p = blst::blst_p1_affine { x, y };
                if blst::blst_p1_affine_on_curve(&p) && !blst::blst_p1_affine_in_g1(&p) {
                    let mut out = [0u8; 96];
                    blst::blst_p1_affine_serialize(out.as_mut_ptr(), &p);
                    return out;
                }
            }
        }
    }
    unreachable!()
}

#[test]
fn points_outside_the_subgroup_are_refused_when_checked() {
    let (_, params, mut bytes) = setup();
    let at = section_start(&params, 1) + 2 * 96;
    bytes[at..at + 96].copy_from_slice(&point_outside_subgroup());
    expect_point_error(
        &bytes,
        PointCheck::Checked,
        "params.h",
        2,
        PointError::NotInSubgroup,
    );
    // Twin: the unchecked read (for trusted files) skips the subgroup check.
    assert!(Parameters::from_bytes(&bytes, PointCheck::Unchecked).is_ok());
}

#[test]
fn the_identity_is_refused_where_forbidden() {
    let (c, params, mut bytes) = setup();
    let mut identity = [0u8; 96];
    identity[0] = 0x40;
    let at = section_start(&params, 0) + 96;
    bytes[at..at + 96].copy_from_slice(&identity);
    expect_point_error(
        &bytes,
        PointCheck::Checked,
        "vk.ic",
        1,
        PointError::Identity,
    );

    // In a proof: A at infinity (compressed: flags 0xc0, rest zero).
    let proof = prove_one(&prepare_cpu(params.clone()), c.clone()).unwrap();
    let mut pb = proof.to_bytes();
    pb[..48].fill(0);
    pb[0] = 0xc0;
    match Proof::from_bytes(&pb) {
        Err(Error::InvalidPoint {
            what: "proof.a",
            reason: PointError::Identity,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // Twin: the untouched proof decodes and verifies.
    let pvk = prepare_verifying_key(&params.vk);
    let back = Proof::from_bytes(&proof.to_bytes()).unwrap();
    assert!(verify_proof(&pvk, &back, &c.public_inputs()).unwrap());
}

#[test]
fn malformed_proofs_and_keys_are_refused() {
    let (c, params, _) = setup();
    let proof = prove_one(&prepare_cpu(params.clone()), c.clone()).unwrap();
    let bytes = proof.to_bytes();
    assert!(matches!(
        Proof::from_bytes(&bytes[..191]),
        Err(Error::Malformed { .. })
    ));
    assert!(matches!(
        Proof::many_from_bytes(&[0u8; 200]),
        Err(Error::Malformed { .. })
    ));
    assert_eq!(
        Proof::many_from_bytes(&[bytes, bytes].concat()).unwrap(),
        vec![proof, proof]
    );
    assert_eq!(
        Proof::many_to_bytes(&[proof, proof]),
        [bytes, bytes].concat()
    );

    let vk_bytes = params.vk.to_bytes();
    assert_eq!(
        VerifyingKey::from_bytes(&vk_bytes, PointCheck::Checked).unwrap(),
        params.vk
    );
    assert!(matches!(
        VerifyingKey::from_bytes(&vk_bytes[..vk_bytes.len() - 1], PointCheck::Checked),
        Err(Error::LengthExceedsData {
            what: "vk.ic",
            claimed: 3,
            ..
        })
    ));
    let mut empty_ic = vk_bytes[..VK_FIXED].to_vec();
    empty_ic.extend_from_slice(&0u32.to_be_bytes());
    assert!(matches!(
        VerifyingKey::from_bytes(&empty_ic, PointCheck::Checked),
        Err(Error::Malformed { .. })
    ));

    // The wrong number of public inputs is an error, not `false`.
    let pvk = prepare_verifying_key(&params.vk);
    assert!(matches!(
        verify_proof(&pvk, &proof, &[]),
        Err(Error::PublicInputCount {
            expected: 2,
            got: 0
        })
    ));
}

#[test]
fn random_corruption_never_panics() {
    let (_, _, bytes) = setup();
    let mut rng = rand::thread_rng();
    for _ in 0..40 {
        let mut b = bytes.clone();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..b.len());
            b[i] = rng.gen();
        }
        // Any outcome but a panic is fine: most corruptions are caught, a few land in a
        // coordinate and give another valid point, which only a wrong proof would reveal.
        for check in [PointCheck::Checked, PointCheck::Unchecked] {
            let _ = Parameters::from_bytes(&b, check);
        }
    }
}

#[test]
fn an_unsatisfied_circuit_is_named() {
    let (c, params, _) = setup();
    let prepared = prepare_cpu(params);
    let mut broken = c.clone();
    broken.break_last = true;
    match prover_core::prove(
        cpu_stages(),
        &prepared,
        vec![c.clone(), broken],
        &mut rand::thread_rng(),
    ) {
        Err(Error::PartitionFailed {
            partition: 1,
            stage: "synthesis",
            source,
        }) => match *source {
            // Two pin constraints come first, then the chain: the last chain constraint fails.
            Error::Unsatisfied { index, annotation } => {
                assert_eq!(index, 2 + 12 - 1);
                assert_eq!(annotation, "c11");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // Twin: the intact circuit proves.
    assert!(prove_one(&prepared, c).is_ok());
}

#[test]
fn a_circuit_of_another_shape_is_handed_back_untouched() {
    let (_, params, _) = setup();
    let prepared = prepare_cpu(params);
    let other = RandomCircuit::new(2, 13, 11, 5);
    let partition = CpuSynthesizer.synthesize(other.clone()).unwrap();
    let witness_before = partition.witness.aux.clone();
    let a_before = partition.evaluations.a.clone();
    let back = accelerate_cpu(&prepared, partition).unwrap_err();
    assert!(
        matches!(
            back.error,
            Error::ShapeMismatch {
                what: "aux variables (l query)",
                circuit: 15,
                params: 14
            }
        ),
        "{:?}",
        back.error
    );
    assert_eq!(back.partition.witness.aux, witness_before);
    assert_eq!(back.partition.evaluations.a, a_before);
    match prove_one(&prepared, other) {
        Err(Error::PartitionFailed {
            stage: "accelerator",
            source,
            ..
        }) => {
            assert!(matches!(*source, Error::ShapeMismatch { .. }))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn temporaries_of_killed_writers_are_removed_and_live_ones_kept() {
    let dir = std::env::temp_dir().join(format!("proofline-stale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("x.params");
    // A pid that is certainly dead: a child that has exited and been reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let live = std::os::unix::process::parent_id();
    let stale = dir.join(format!("x.params.{dead}.0.tmp"));
    let running = dir.join(format!("x.params.{live}.3.tmp"));
    let other_file = dir.join(format!("y.params.{dead}.0.tmp"));
    let not_ours = dir.join(format!("x.params.{dead}.tmp"));
    for f in [&stale, &running, &other_file, &not_ours] {
        std::fs::write(f, b"half a parameter file").unwrap();
    }
    assert_eq!(
        prover_core::groth16::params::remove_stale_temporaries(&target),
        1
    );
    assert!(!stale.exists(), "a dead writer's temporary file stayed");
    // Twins: a live process's, another file's and a name of another pattern stay.
    assert!(running.exists() && other_file.exists() && not_ours.exists());
    // Writing the file (as the generator does) clears the other file's stale one too.
    let other = dir.join("y.params");
    let vk = prover_core::generate_seeded_parameters(RandomCircuit::new(1, 3, 1, 0).shape(), 1)
        .unwrap()
        .vk;
    vk.write_file(&other).unwrap();
    assert!(!other_file.exists() && other.exists());
    assert!(running.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_parameter_path_that_is_not_a_regular_file_is_refused_not_awaited() {
    let dir = std::env::temp_dir().join(format!("proofline-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("p.params");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
    for err in [
        Parameters::read_file(&fifo, PointCheck::Unchecked).unwrap_err(),
        Parameters::read_mmap(&fifo, PointCheck::Unchecked).unwrap_err(),
        VerifyingKey::read_file(&fifo, PointCheck::Unchecked).unwrap_err(),
        Parameters::read_file(&dir, PointCheck::Unchecked).unwrap_err(),
    ] {
        let msg = err.to_string();
        assert!(msg.contains("not a regular file"), "{msg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}
