//! PoRep C2 of a 2 KiB sector end to end: filecoin-proofs seals a random sector through C1,
//! proofline generates the parameters (2.7M constraints: the slow part of this test, about two
//! minutes on two cores) and proves the C2 through its engine, and filecoin-proofs'
//! `verify_seal` accepts it; negative twins (a flipped byte, another sector, another prover)
//! are rejected. Also the C1 files in both forms and the errors on bad C1 outputs.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use filecoin_proofs::SECTOR_SIZE_2_KIB;
use proofline_filecoin::porep::{self, C1File};
use proofline_filecoin::{cached_parameters, prove_circuits, Tree2KiB};
use prover_core::accounting::ledger::StageLedger;
use prover_core::stages::Randomness;
use prover_core::{
    prove_with_randomness, Accelerator, CpuSynthesizer, Error, PceSynthesizer, PointCheck,
    Precompiled, Proof, Stages, Synthesizer,
};

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
    let mut rng = rand::thread_rng();
    let sealed = porep::seal_c1(SECTOR_SIZE_2_KIB, sectors.path(), &mut rng).unwrap();
    let other = porep::seal_c1(SECTOR_SIZE_2_KIB, sectors.path(), &mut rng).unwrap();
    let config = sealed.output.registered_proof.as_v1_config();
    let c1 = porep::raw_c1(&sealed.output).unwrap();

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
    assert!(porep::verify_c2::<Tree2KiB>(&config, &c1, prover_id, sector_id, &proof).unwrap());
    assert!(porep::verify_c2::<Tree2KiB>(&config, &c1, prover_id, sector_id, &pce_proof).unwrap());

    // Negative twins: a flipped byte, another sector's C1 output, another prover id.
    let mut flipped = proof.clone();
    flipped[100] ^= 1;
    assert!(
        !porep::verify_c2::<Tree2KiB>(&config, &c1, prover_id, sector_id, &flipped)
            .unwrap_or(false)
    );
    let other_c1 = porep::raw_c1(&other.output).unwrap();
    assert!(!porep::verify_c2::<Tree2KiB>(
        &config,
        &other_c1,
        other.info.prover_id().unwrap(),
        other.info.sector_id,
        &proof
    )
    .unwrap());
    let mut wrong_prover = prover_id;
    wrong_prover[0] ^= 1;
    assert!(!porep::verify_c2::<Tree2KiB>(&config, &c1, wrong_prover, sector_id, &proof).unwrap());

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
    let mut rng = rand::thread_rng();
    let sealed = porep::seal_c1(SECTOR_SIZE_2_KIB, &dir.path().join("a"), &mut rng).unwrap();
    let other = porep::seal_c1(SECTOR_SIZE_2_KIB, &dir.path().join("b"), &mut rng).unwrap();
    let config = sealed.output.registered_proof.as_v1_config();
    let c1 = porep::raw_c1(&sealed.output).unwrap();
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

    let mut wrong = porep::raw_c1(&sealed.output).unwrap();
    wrong.comm_d = porep::raw_c1(&other.output).unwrap().comm_d;
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
    let sealed = porep::seal_c1(
        SECTOR_SIZE_2_KIB,
        &dir.path().join("s"),
        &mut rand::thread_rng(),
    )
    .unwrap();
    let wrapped = dir.path().join("c1.json");
    let raw = dir.path().join("c1-raw.json");
    std::fs::write(&wrapped, serde_json::to_vec(&sealed.output).unwrap()).unwrap();
    std::fs::write(
        &raw,
        serde_json::to_vec(&porep::raw_c1(&sealed.output).unwrap()).unwrap(),
    )
    .unwrap();
    match porep::read_c1(&wrapped).unwrap() {
        C1File::Wrapped(w) => assert_eq!(w.comm_r, sealed.output.comm_r),
        C1File::Raw(_) => panic!("the wrapper was read as the raw form"),
    }
    let raw_c1 = match porep::read_c1(&raw).unwrap() {
        C1File::Raw(r) => r,
        C1File::Wrapped(_) => panic!("the raw form was read as the wrapper"),
    };
    assert_eq!(raw_c1.comm_d, sealed.output.comm_d);

    // A value that is not a canonical field element, anywhere: a clear error naming the field,
    // in both forms (filecoin-proofs would panic on it).
    for (file, form) in [(&wrapped, "wrapper"), (&raw, "raw")] {
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        porep::check_field_elements(&json).unwrap_or_else(|e| panic!("{form}: {e}"));
        let mut damaged = 0;
        for key in ["replica_id", "comm_d", "comm_r"] {
            let mut bad = json.clone();
            bad[key][31] = serde_json::json!(0xff);
            let path = dir.path().join(format!("bad-{key}-{form}.json"));
            std::fs::write(&path, serde_json::to_vec(&bad).unwrap()).unwrap();
            let err = format!("{:#}", porep::read_c1(&path).err().unwrap());
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
        let err = format!("{:#}", porep::read_c1(&path).err().unwrap());
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
    let err = porep::read_c1(&junk).err().unwrap().to_string();
    assert!(err.contains("is not a C1 output"), "{err}");
    let err = porep::read_c1(&dir.path().join("missing.json"))
        .err()
        .unwrap();
    assert!(format!("{err:#}").contains("missing.json"), "{err:#}");

    // A C1 output checked the way seal_commit_phase2 checks it.
    let config = sealed.output.registered_proof.as_v1_config();
    let mut zero_seed = porep::raw_c1(&sealed.output).unwrap();
    zero_seed.seed = [0; 32];
    let err = porep::porep_circuits::<Tree2KiB>(&config, &zero_seed)
        .err()
        .unwrap();
    assert!(err.to_string().contains("seed"), "{err}");
    let mut empty = porep::raw_c1(&sealed.output).unwrap();
    empty.vanilla_proofs.clear();
    let err = porep::porep_circuits::<Tree2KiB>(&config, &empty)
        .err()
        .unwrap();
    assert!(err.to_string().contains("no vanilla proofs"), "{err}");
    // A 32 GiB config for a 2 KiB sector's output: the partition count does not match.
    let wrong = porep::registered_proof(32 << 30).unwrap().as_v1_config();
    let err = porep::porep_circuits::<Tree2KiB>(&wrong, &raw_c1)
        .err()
        .unwrap();
    assert!(err.to_string().contains("partitions"), "{err}");
    // A wrapper whose registered proof disagrees with its proofs' shape.
    let mut mislabeled = sealed.output.clone();
    mislabeled.registered_proof = porep::registered_proof(8 << 20).unwrap();
    let err = porep::raw_c1(&mislabeled).err().unwrap();
    assert!(
        err.to_string().contains("holds proofs of 2048-byte"),
        "{err}"
    );
    // Sizes Filecoin does not have.
    assert!(porep::registered_proof(4096).is_err());
    assert!(porep::parse_hex32("xyz").is_err());
    assert_eq!(porep::parse_hex32(&"ab".repeat(32)).unwrap(), [0xab; 32]);
}
