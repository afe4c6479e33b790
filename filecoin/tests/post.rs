//! WinningPoSt and WindowPoSt on 2 KiB sectors: filecoin-proofs seals the sectors and makes the
//! vanilla proofs, proofline's engine makes the SNARKs with parameters from proofline's
//! generator, and filecoin-proofs' own verifiers check them; negative twins must fail.

mod support;

use std::collections::BTreeMap;

use filecoin_proofs::{
    verify_window_post, verify_winning_post, PoStConfig, PoStType, SECTOR_SIZE_2_KIB,
    WINDOW_POST_CHALLENGE_COUNT, WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT,
};
use proofline_filecoin::seal::{seal_random_sector, SealedSector};
use proofline_filecoin::{
    post_circuits, post_parameters, prove_post, prove_post_on, vanilla_proofs, Tree2KiB,
};
use prover_core::{CpuSynthesizer, Precompiled, Synthesizer};
use storage_proofs_core::api_version::ApiVersion;

/// One parameter cache for the test binary, set before filecoin-proofs reads its settings.
fn init() -> &'static std::path::Path {
    support::param_cache("post")
}

fn sectors(n: usize, prover_id: [u8; 32]) -> (tempfile::TempDir, Vec<SealedSector>) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::thread_rng();
    let s = (0..n)
        .map(|_| {
            seal_random_sector::<Tree2KiB>(dir.path(), SECTOR_SIZE_2_KIB, prover_id, &mut rng)
                .unwrap()
        })
        .collect();
    (dir, s)
}

fn seed() -> [u8; 32] {
    proofline_filecoin::porep::field_bytes(&mut rand::thread_rng())
}

#[test]
fn winning_post_2kib_is_accepted_by_filecoin_proofs() {
    init();
    let prover_id = seed();
    let (_dir, sealed) = sectors(2, prover_id);
    let config = PoStConfig {
        sector_size: SECTOR_SIZE_2_KIB.into(),
        challenge_count: WINNING_POST_CHALLENGE_COUNT,
        sector_count: WINNING_POST_SECTOR_COUNT,
        typ: PoStType::Winning,
        priority: false,
        api_version: ApiVersion::V1_1_0,
    };
    let randomness = seed();
    let params = std::sync::Arc::new(post_parameters::<Tree2KiB>(&config).unwrap().0);
    let s = &sealed[0];
    let vanilla = vanilla_proofs::<Tree2KiB>(
        &config,
        &randomness,
        prover_id,
        &[(s.sector_id, s.private_info().unwrap())],
    )
    .unwrap();
    // Pre-compiled synthesis (matrices recorded from the circuit): the same partition as
    // bellpepper's constraint system gives, so the same proof for the same r and s.
    let (circuit, _) = post_circuits::<Tree2KiB>(&config, &randomness, prover_id, &vanilla)
        .unwrap()
        .remove(0);
    let pce = Precompiled::record(circuit.clone()).unwrap();
    assert_eq!(
        pce.synthesize(circuit.clone()).unwrap(),
        CpuSynthesizer.synthesize(circuit).unwrap()
    );
    let proof =
        prove_post::<Tree2KiB>(&config, &randomness, prover_id, &vanilla, params.clone(), 2)
            .unwrap();
    assert_eq!(proof.len(), 192);
    let public = [(s.sector_id, s.public_info().unwrap())];
    assert!(
        verify_winning_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &proof).unwrap()
    );

    // Twin 1: the same proof for another sector.
    let other = [(sealed[1].sector_id, sealed[1].public_info().unwrap())];
    assert!(
        !verify_winning_post::<Tree2KiB>(&config, &randomness, &other, prover_id, &proof)
            .unwrap_or(false)
    );
    // Twin 2: a flipped byte (either it no longer decodes or it no longer verifies).
    let mut bad = proof.clone();
    bad[100] ^= 1;
    assert!(
        !verify_winning_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &bad)
            .unwrap_or(false)
    );
    // Twin 3: other randomness.
    assert!(
        !verify_winning_post::<Tree2KiB>(&config, &seed(), &public, prover_id, &proof)
            .unwrap_or(false)
    );
}

#[test]
fn window_post_2kib_is_accepted_by_filecoin_proofs() {
    init();
    let prover_id = seed();
    let (_dir, sealed) = sectors(3, prover_id);
    let config = PoStConfig {
        sector_size: SECTOR_SIZE_2_KIB.into(),
        challenge_count: WINDOW_POST_CHALLENGE_COUNT,
        sector_count: 2,
        typ: PoStType::Window,
        priority: false,
        api_version: ApiVersion::V1_1_0,
    };
    let randomness = seed();
    let params = std::sync::Arc::new(post_parameters::<Tree2KiB>(&config).unwrap().0);
    let proven = &sealed[..2];
    let mut private: Vec<_> = proven
        .iter()
        .map(|s| (s.sector_id, s.private_info().unwrap()))
        .collect();
    private.sort_by_key(|s| std::cmp::Reverse(s.0));
    // Seal order is random; the proofs come back in sector-id order whatever the input order.
    let mut vanilla =
        vanilla_proofs::<Tree2KiB>(&config, &randomness, prover_id, &private).unwrap();
    assert!(vanilla[0].sector_id < vanilla[1].sector_id);
    let proof =
        prove_post::<Tree2KiB>(&config, &randomness, prover_id, &vanilla, params.clone(), 2)
            .unwrap();
    assert_eq!(proof.len(), 192);
    // Twin 0: out of order, the prover refuses instead of making a proof that cannot verify.
    vanilla.swap(0, 1);
    let err = prove_post::<Tree2KiB>(&config, &randomness, prover_id, &vanilla, params.clone(), 2)
        .unwrap_err();
    assert!(err.to_string().contains("sector-id order"), "{err}");
    let public: BTreeMap<_, _> = proven
        .iter()
        .map(|s| (s.sector_id, s.public_info().unwrap()))
        .collect();
    assert!(
        verify_window_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &proof).unwrap()
    );

    // Twin 1: one sector replaced by another.
    let swapped: BTreeMap<_, _> = [&sealed[0], &sealed[2]]
        .iter()
        .map(|s| (s.sector_id, s.public_info().unwrap()))
        .collect();
    assert!(
        !verify_window_post::<Tree2KiB>(&config, &randomness, &swapped, prover_id, &proof)
            .unwrap_or(false)
    );
    // Twin 2: a flipped byte.
    let mut bad = proof.clone();
    bad[7] ^= 0x10;
    assert!(
        !verify_window_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &bad)
            .unwrap_or(false)
    );
}

#[test]
fn found_parameter_files_are_trusted_as_asked() {
    init();
    let circuit = || Ok(proofline_workloads::circuits::DenseCircuit::new(40, 2, 5));
    let id = format!("proofline-trust-test-{}", std::process::id());
    let first =
        proofline_filecoin::cached_parameters(&id, circuit, prover_core::PointCheck::Checked, &())
            .unwrap();
    // Written just now: no check, whatever was asked.
    assert!(first.generated);
    assert_eq!(first.trust, proofline_filecoin::Trust::Generated);
    // Found again: its native copy, written after that first read, is mapped...
    let again = proofline_filecoin::cached_parameters(
        &id,
        circuit,
        prover_core::PointCheck::Unchecked,
        &(),
    )
    .unwrap();
    assert!(!again.generated);
    assert_eq!(
        again.trust,
        proofline_filecoin::Trust::Native { checked: false }
    );
    assert!(again.params.h.is_mapped());
    assert_eq!(again.params, first.params);
    // ...and without it, proofline's own file (the marker) is trusted without a check...
    let decoded = proofline_filecoin::cached_parameters(
        &id,
        circuit,
        proofline_filecoin::Load {
            check: prover_core::PointCheck::Unchecked,
            native: false,
        },
        &(),
    )
    .unwrap();
    assert_eq!(decoded.trust, proofline_filecoin::Trust::Generated);
    assert!(!decoded.params.h.is_mapped());
    // ...unless every point is asked to be checked (--check-params), which then happens: the
    // copy made without the check is not used, and one made with it is written.
    let checked =
        proofline_filecoin::cached_parameters(&id, circuit, prover_core::PointCheck::Checked, &())
            .unwrap();
    assert!(
        matches!(checked.trust, proofline_filecoin::Trust::Checked { points_per_second } if points_per_second > 0.0),
        "{:?}",
        checked.trust
    );
    assert!(checked
        .native_unused
        .as_deref()
        .unwrap()
        .contains("subgroup"));
    assert!(matches!(checked.native_written, Some(Ok(_))));
    let mapped_checked =
        proofline_filecoin::cached_parameters(&id, circuit, prover_core::PointCheck::Checked, &())
            .unwrap();
    assert_eq!(
        mapped_checked.trust,
        proofline_filecoin::Trust::Native { checked: true }
    );
    assert_eq!(mapped_checked.params, first.params);
    assert_eq!(checked.params, first.params);
}

/// WindowPoSt (2 sectors, about 22k constraints) proved on the OpenCL backend (POCL in CI), with
/// no fallback: filecoin-proofs' verifier accepts it, the device did every partition, and the
/// same proof does not verify against other randomness.
#[test]
fn window_post_2kib_on_opencl_is_accepted_by_filecoin_proofs() {
    init();
    let env = |name: &str| std::env::var(name).ok();
    let options =
        backend_opencl::OpenClOptions::from_lookup(None, env).expect("the test's settings");
    let missing = backend_opencl::Missing::unless_ci(env("CI").as_deref());
    let Some(backend) = backend_opencl::open_or_skip(options, missing) else {
        return;
    };
    let prover_id = seed();
    let (_dir, sealed) = sectors(2, prover_id);
    let config = PoStConfig {
        sector_size: SECTOR_SIZE_2_KIB.into(),
        challenge_count: WINDOW_POST_CHALLENGE_COUNT,
        sector_count: 2,
        typ: PoStType::Window,
        priority: false,
        api_version: ApiVersion::V1_1_0,
    };
    let randomness = seed();
    let params = std::sync::Arc::new(post_parameters::<Tree2KiB>(&config).unwrap().0);
    let private: Vec<_> = sealed
        .iter()
        .map(|s| (s.sector_id, s.private_info().unwrap()))
        .collect();
    let vanilla = vanilla_proofs::<Tree2KiB>(&config, &randomness, prover_id, &private).unwrap();
    let run = prove_post_on::<Tree2KiB>(
        &config,
        &randomness,
        prover_id,
        &vanilla,
        params,
        1,
        std::sync::Arc::new(backend),
    )
    .unwrap();
    assert_eq!(run.stats.devices[0].partitions, run.proofs.len() as u64);
    assert_eq!(run.stats.fallback_partitions, 0);
    assert!(run.ledger.is_balanced(), "{}", run.ledger);
    let proof = prover_core::Proof::many_to_bytes(&run.proofs);
    let public: BTreeMap<_, _> = sealed
        .iter()
        .map(|s| (s.sector_id, s.public_info().unwrap()))
        .collect();
    assert!(
        verify_window_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &proof).unwrap()
    );
    assert!(
        !verify_window_post::<Tree2KiB>(&config, &seed(), &public, prover_id, &proof)
            .unwrap_or(false)
    );
}
