//! PoRep C2 of a 2 KiB sector end to end: filecoin-proofs seals a random sector through C1,
//! proofline generates the parameters (2.7M constraints: the slow part of this test, about two
//! minutes on two cores) and proves the C2 through its engine, and filecoin-proofs'
//! `verify_seal` accepts it; negative twins (a flipped byte, another sector, another prover)
//! are rejected. Also the C1 files in both forms and the errors on bad C1 outputs.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use filecoin_proofs::{SealCommitPhase1Output, SECTOR_SIZE_2_KIB};
use proofline_filecoin::c1::{check_field_elements, read_c1, AnyC1, C1File};
use proofline_filecoin::porep::{self, SealStatement, SealedC1};
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_filecoin::{cached_parameters, prove_circuits, Tree2KiB};
use prover_core::accounting::ledger::StageLedger;
use prover_core::stages::Randomness;
use prover_core::{
    prove_with_randomness, Accelerator, CpuSynthesizer, Error, PceSynthesizer, PointCheck,
    Precompiled, Proof, Stages, Synthesizer,
};

fn seal_2k(dir: &std::path::Path) -> SealedC1 {
    let spec = SealSpec::new(SECTOR_SIZE_2_KIB, SealVariant::V1_1, None).unwrap();
    porep::seal_c1(&spec, dir, &mut rand::thread_rng()).unwrap()
}

fn raw(sealed: &SealedC1) -> SealCommitPhase1Output<Tree2KiB> {
    sealed.c1.clone().into_tree().unwrap()
}

fn verify(
    config: &filecoin_proofs::PoRepConfig,
    c1: &SealCommitPhase1Output<Tree2KiB>,
    prover_id: [u8; 32],
    sector_id: u64,
    proof: &[u8],
) -> anyhow::Result<bool> {
    SealStatement {
        config: config.clone(),
        comm_r: c1.comm_r,
        comm_d: c1.comm_d,
        ticket: c1.ticket,
        seed: c1.seed,
        prover_id,
        sector_id,
    }
    .verify(proof)
}

/// Pre-compiled synthesis (matrices recorded from the circuit) proves the same bytes as
/// bellpepper's constraint system for the same r and s; returns that proof.
fn same_bytes_with_precompiled_synthesis(
    circuits: &[porep::PorepCircuit<Tree2KiB>],
    params: Arc<prover_core::Parameters>,
) -> Vec<u8> {
    let pce = Precompiled::record(circuits[0].clone()).unwrap();
    let pce = PceSynthesizer::new(Arc::new(pce));
    let prepared = CpuBackend.prepare(params, &StageLedger::new()).unwrap();
    let rs: Vec<_> = circuits
        .iter()
        .map(|_| Randomness::random(&mut rand::thread_rng()))
        .collect();
    let cs = Stages {
        synthesizer: &CpuSynthesizer,
        accelerator: &CpuBackend,
        finalizer: &CpuBackend,
    };
    let with_pce = Stages {
        synthesizer: &pce,
        accelerator: &CpuBackend,
        finalizer: &CpuBackend,
    };
    let a = prove_with_randomness(cs, &prepared, circuits.to_vec(), &rs).unwrap();
    let b = prove_with_randomness(with_pce, &prepared, circuits.to_vec(), &rs).unwrap();
    let (a, b) = (Proof::many_to_bytes(&a), Proof::many_to_bytes(&b));
    assert_eq!(a, b, "pre-compiled synthesis proved other bytes");
    b
}

#[test]
fn porep_2kib_c2_is_accepted_by_verify_seal() {
    let cache = tempfile::tempdir().unwrap();
    // The only test of this binary that touches filecoin-proofs' settings.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", cache.path());
    let sectors = tempfile::tempdir().unwrap();
    let sealed = seal_2k(sectors.path());
    let other = seal_2k(sectors.path());
    let config = sealed.config().unwrap();
    let c1 = raw(&sealed);

    let cached = porep::parameters::<Tree2KiB>(&config, PointCheck::Unchecked, &()).unwrap();
    assert!(cached.generated);
    assert!(cached.path.exists());

    let circuits = porep::porep_circuits::<Tree2KiB>(&config, &c1).unwrap();
    assert_eq!(circuits.len(), 1, "a 2 KiB sector proves one partition");
    let (circuits, _inputs): (Vec<_>, Vec<_>) = circuits.into_iter().unzip();
    let params = Arc::new(cached.params);
    let pce_proof = same_bytes_with_precompiled_synthesis(&circuits, params.clone());
    let run = prove_circuits(circuits, params, 1).unwrap();
    let proof = prover_core::Proof::many_to_bytes(&run.proofs);
    assert_eq!(proof.len(), 192);
    // The ledger balanced back to zero after the job.
    assert_eq!(run.ledger.total_bytes.live, 0);

    let prover_id = sealed.info.prover_id().unwrap();
    let sector_id = sealed.info.sector_id;
    assert!(verify(&config, &c1, prover_id, sector_id, &proof).unwrap());
    assert!(verify(&config, &c1, prover_id, sector_id, &pce_proof).unwrap());

    // Negative twins: a flipped byte, another sector's C1 output, another prover id.
    let mut flipped = proof.clone();
    flipped[100] ^= 1;
    assert!(!verify(&config, &c1, prover_id, sector_id, &flipped).unwrap_or(false));
    let other_c1 = raw(&other);
    assert!(!verify(
        &config,
        &other_c1,
        other.info.prover_id().unwrap(),
        other.info.sector_id,
        &proof
    )
    .unwrap());
    let mut wrong_prover = prover_id;
    wrong_prover[0] ^= 1;
    assert!(!verify(&config, &c1, wrong_prover, sector_id, &proof).unwrap());

    // The parameters are found (not generated) the second time, with their .vk next to them.
    let id = porep::cache_id::<Tree2KiB>(&config).unwrap();
    let again = cached_parameters(
        &id,
        || -> anyhow::Result<porep::PorepCircuit<Tree2KiB>> { panic!("must not generate") },
        PointCheck::Unchecked,
        &(),
    )
    .unwrap();
    assert!(!again.generated);
    assert!(again.path.with_extension("vk").exists());
}

/// Pre-compiled synthesis assigns a partition's challenges each on its own thread; the partition
/// is the one bellpepper's constraint system gives, value for value. Its twin: a C1 output with
/// another sector's comm_d fails inside the challenges (their inclusion proofs' root), and both
/// synthesizers name the same first failing constraint.
#[test]
fn precompiled_synthesis_assigns_the_challenges_in_parallel_to_the_same_partition() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_2k(&dir.path().join("a"));
    let other = seal_2k(&dir.path().join("b"));
    let config = sealed.config().unwrap();
    let c1 = raw(&sealed);
    let (circuit, _) = porep::porep_circuits::<Tree2KiB>(&config, &c1)
        .unwrap()
        .remove(0);
    match &circuit {
        porep::PorepCircuit::Partition(p) => assert!(
            p.challenges() > 1,
            "one challenge: the parallel path would not run"
        ),
        porep::PorepCircuit::Blank(_) => panic!("a C1 output gave a blank circuit"),
    }
    let pce = Precompiled::record(circuit.clone()).unwrap();
    assert_eq!(
        pce.synthesize(circuit.clone()).unwrap(),
        CpuSynthesizer.synthesize(circuit).unwrap()
    );

    let mut wrong = raw(&sealed);
    wrong.comm_d = raw(&other).comm_d;
    let (bad, _) = porep::porep_circuits::<Tree2KiB>(&config, &wrong)
        .unwrap()
        .remove(0);
    let by_pce = pce.synthesize(bad.clone()).unwrap_err();
    let by_cs = CpuSynthesizer.synthesize(bad).unwrap_err();
    // The first to fail is a challenge's comm_d inclusion check (the por gadget's root).
    assert!(
        matches!(&by_pce, Error::Unsatisfied { annotation, .. } if annotation.contains("root")),
        "expected an unsatisfied root check, got {by_pce}"
    );
    assert_eq!(by_pce.to_string(), by_cs.to_string());
}

#[test]
fn c1_files_round_trip_in_both_forms_and_bad_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_2k(&dir.path().join("s"));
    let wrapped = dir.path().join("c1.json");
    let raw_file = dir.path().join("c1-raw.json");
    let api = sealed.wrapped().unwrap().unwrap();
    std::fs::write(&wrapped, serde_json::to_vec(&api).unwrap()).unwrap();
    std::fs::write(&raw_file, sealed.c1.to_json().unwrap()).unwrap();
    match read_c1(&wrapped, None).unwrap() {
        C1File::Wrapped(w) => assert_eq!(w.comm_r, sealed.c1.comm_r()),
        C1File::Raw(_) => panic!("the wrapper was read as the raw form"),
    }
    let raw_c1 = match read_c1(&raw_file, Some(SECTOR_SIZE_2_KIB)).unwrap() {
        C1File::Raw(r) => r.into_tree::<Tree2KiB>().unwrap(),
        C1File::Wrapped(_) => panic!("the raw form was read as the wrapper"),
    };
    assert_eq!(raw_c1.comm_d, sealed.c1.comm_d());
    // The raw form does not say its size: without one, an error that asks for it.
    let err = read_c1(&raw_file, None).err().unwrap().to_string();
    assert!(err.contains("--sector-size"), "{err}");
    // Read as another shape, it is not a C1 output of that shape.
    let err = read_c1(&raw_file, Some(16 << 10))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("16KiB"), "{err}");

    // A value that is not a canonical field element, anywhere: a clear error naming the field,
    // in both forms (filecoin-proofs would panic on it).
    for (file, form) in [(&wrapped, "wrapper"), (&raw_file, "raw")] {
        let text = std::fs::read(file).unwrap();
        check_field_elements(&text).unwrap_or_else(|e| panic!("{form}: {e}"));
        let json: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let mut damaged = 0;
        for key in ["replica_id", "comm_d", "comm_r"] {
            let mut bad = json.clone();
            bad[key][31] = serde_json::json!(0xff);
            let path = dir.path().join(format!("bad-{key}-{form}.json"));
            std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
            let err = format!(
                "{:#}",
                read_c1(&path, Some(SECTOR_SIZE_2_KIB)).err().unwrap()
            );
            assert!(
                err.contains(key) && err.contains("canonical"),
                "{form}: {err}"
            );
            damaged += 1;
        }
        // One deep inside the vanilla proofs: the first 32-byte array found there.
        let mut bad = json.clone();
        fn first_node(v: &mut serde_json::Value) -> Option<&mut serde_json::Value> {
            match v {
                serde_json::Value::Array(a)
                    if a.len() == 32 && a.iter().all(|x| x.as_u64().is_some_and(|b| b < 256)) =>
                {
                    Some(v)
                }
                serde_json::Value::Array(a) => a.iter_mut().find_map(first_node),
                serde_json::Value::Object(m) => m.values_mut().find_map(first_node),
                _ => None,
            }
        }
        let node = first_node(&mut bad["vanilla_proofs"]).expect("a tree node in the proofs");
        node[31] = serde_json::json!(0xff);
        let path = dir.path().join(format!("bad-node-{form}.json"));
        std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
        let err = format!(
            "{:#}",
            read_c1(&path, Some(SECTOR_SIZE_2_KIB)).err().unwrap()
        );
        assert!(
            err.contains("vanilla_proofs") && err.contains("canonical"),
            "{form}: {err}"
        );
        assert_eq!(damaged, 3);
    }

    // A production parameter file is checked by its published digest: a file under a listed
    // name with other contents is refused, naming it; an unlisted name is not checked.
    let listed = storage_proofs_core::parameter_cache::PARAMETERS
        .keys()
        .find(|k| k.ends_with(".params"))
        .unwrap();
    let fake = dir.path().join(listed);
    std::fs::write(&fake, b"not the published parameters").unwrap();
    let err = format!(
        "{:#}",
        proofline_filecoin::check_published_digest(&fake).unwrap_err()
    );
    assert!(
        err.contains("does not match the digest") && err.contains(listed.as_str()),
        "{err}"
    );
    let unlisted = dir.path().join("v28-not-a-published-file.params");
    std::fs::write(&unlisted, b"anything").unwrap();
    assert_eq!(
        proofline_filecoin::check_published_digest(&unlisted).unwrap(),
        None
    );

    // Not a C1 output: a clear error naming the file, no panic.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, b"{\"hello\": 1}").unwrap();
    let err = read_c1(&junk, Some(SECTOR_SIZE_2_KIB))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("is not a C1 output"), "{err}");
    let err = read_c1(&dir.path().join("missing.json"), None)
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("missing.json"), "{err:#}");

    // A C1 output checked the way seal_commit_phase2 checks it.
    let config = sealed.config().unwrap();
    let mut zero_seed = raw(&sealed);
    zero_seed.seed = [0; 32];
    let err = porep::porep_circuits::<Tree2KiB>(&config, &zero_seed)
        .err()
        .unwrap();
    assert!(err.to_string().contains("seed"), "{err}");
    let mut empty = raw(&sealed);
    empty.vanilla_proofs.clear();
    let err = porep::porep_circuits::<Tree2KiB>(&config, &empty)
        .err()
        .unwrap();
    assert!(err.to_string().contains("no vanilla proofs"), "{err}");
    // A 32 GiB config for a 2 KiB sector's output: the partition count does not match.
    let wrong = SealSpec::new(32 << 30, SealVariant::V1_1, None)
        .unwrap()
        .config()
        .unwrap();
    let err = porep::porep_circuits::<Tree2KiB>(&wrong, &raw_c1)
        .err()
        .unwrap();
    assert!(err.to_string().contains("partitions"), "{err}");
    // A wrapper whose registered proof disagrees with its proofs' shape.
    let mut mislabeled = api.clone();
    mislabeled.registered_proof = SealVariant::V1_1.registered(8 << 20).unwrap();
    let err = AnyC1::from_wrapped(mislabeled).err().unwrap();
    assert!(
        err.to_string().contains("holds proofs of 2048-byte"),
        "{err}"
    );
    // Sizes Filecoin does not have.
    assert!(SealSpec::new(8 << 10, SealVariant::V1_1, None).is_err());
    assert!(porep::parse_hex32("xyz").is_err());
    assert_eq!(porep::parse_hex32(&"ab".repeat(32)).unwrap(), [0xab; 32]);
}
