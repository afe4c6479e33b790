//! Mutated valid inputs into every reader of outside bytes (parameter files, verifying keys,
//! proofs, concatenated proofs): each call returns an error or a value, never panics, and a
//! value it returns writes back to exactly the bytes it read. Short runs, so CI stays fast;
//! `PROPTEST_CASES=100000 cargo test --test fuzz` runs longer.

use std::sync::OnceLock;

use proofline_tests::{prepare_cpu, prove_one, RandomCircuit};
use proptest::prelude::*;
use prover_core::{generate_seeded_parameters, Parameters, PointCheck, Proof, VerifyingKey};

fn params_bytes(p: &Parameters) -> Vec<u8> {
    let mut out = Vec::new();
    p.write(&mut out).expect("writing to a Vec");
    out
}

struct Valid {
    params: Vec<u8>,
    vk: Vec<u8>,
    proofs: Vec<u8>,
}

fn valid() -> &'static Valid {
    static VALID: OnceLock<Valid> = OnceLock::new();
    VALID.get_or_init(|| {
        let c = RandomCircuit::new(2, 5, 77, 1);
        let params = generate_seeded_parameters(c.shape(), 77).unwrap();
        let vk = params.vk.to_bytes();
        let params_bytes = params_bytes(&params);
        let prepared = prepare_cpu(params);
        let proofs: Vec<Proof> = (0..2)
            .map(|s| prove_one(&prepared, RandomCircuit::new(2, 5, 77, s + 1)).unwrap())
            .collect();
        Valid {
            params: params_bytes,
            vk,
            proofs: Proof::many_to_bytes(&proofs),
        }
    })
}

/// How a valid input is damaged: bytes xored at positions, then optionally cut short or
/// extended.
#[derive(Debug, Clone)]
struct Damage {
    flips: Vec<(usize, u8)>,
    cut: Option<usize>,
    extra: Vec<u8>,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        proptest::collection::vec((any::<usize>(), 1u8..=255), 0..6),
        proptest::option::of(any::<usize>()),
        proptest::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|(flips, cut, extra)| Damage { flips, cut, extra })
}

fn apply(bytes: &[u8], d: &Damage) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (pos, x) in &d.flips {
        let i = pos % out.len();
        out[i] ^= x;
    }
    if let Some(cut) = d.cut {
        out.truncate(cut % (out.len() + 1));
    }
    out.extend_from_slice(&d.extra);
    out
}

/// Runs `read`, which must not panic; if it returns a value, `write` must give the bytes back.
fn check<T>(
    bytes: &[u8],
    read: impl Fn(&[u8]) -> prover_core::Result<T> + std::panic::RefUnwindSafe,
    write: impl Fn(&T) -> Vec<u8>,
) -> Result<(), TestCaseError> {
    let got = std::panic::catch_unwind(|| read(bytes));
    prop_assert!(got.is_ok(), "the reader panicked");
    if let Ok(Ok(value)) = got {
        prop_assert_eq!(
            write(&value),
            bytes.to_vec(),
            "a value that does not write back"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn damaged_parameter_files_are_errors_not_panics(d in damage(), checked: bool) {
        let check_mode = if checked { PointCheck::Checked } else { PointCheck::Unchecked };
        let bytes = apply(&valid().params, &d);
        check(&bytes, |b| Parameters::from_bytes(b, check_mode), params_bytes)?;
        // The streaming reader stops at the last section (trailing bytes are the caller's): it
        // must not panic, and what it returns writes back to a prefix of the input.
        let streamed = std::panic::catch_unwind(|| Parameters::read(&bytes[..], check_mode));
        prop_assert!(streamed.is_ok(), "the streaming reader panicked");
        if let Ok(Ok(p)) = streamed {
            prop_assert!(bytes.starts_with(&params_bytes(&p)));
        }
    }

    #[test]
    fn damaged_verifying_keys_are_errors_not_panics(d in damage()) {
        let bytes = apply(&valid().vk, &d);
        check(&bytes, |b| VerifyingKey::from_bytes(b, PointCheck::Checked), |k| k.to_bytes())?;
    }

    #[test]
    fn damaged_proofs_are_errors_not_panics(d in damage()) {
        let bytes = apply(&valid().proofs, &d);
        check(&bytes, Proof::many_from_bytes, |p| Proof::many_to_bytes(p))?;
        check(&bytes[..bytes.len().min(Proof::SIZE)], Proof::from_bytes, |p| p.to_bytes().to_vec())?;
    }
}

#[test]
fn undamaged_inputs_read_back_exactly() {
    // Twin of the properties: no damage, every reader returns the value, which writes back.
    let v = valid();
    assert_eq!(
        params_bytes(&Parameters::from_bytes(&v.params, PointCheck::Checked).unwrap()),
        v.params
    );
    assert_eq!(
        VerifyingKey::from_bytes(&v.vk, PointCheck::Checked)
            .unwrap()
            .to_bytes(),
        v.vk
    );
    assert_eq!(
        Proof::many_to_bytes(&Proof::many_from_bytes(&v.proofs).unwrap()),
        v.proofs
    );
}
