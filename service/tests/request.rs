//! Every kind's request as Curio sends it is accepted, and each way of getting a field wrong is
//! refused with that field named: never a panic, whatever the bytes.

use base64::Engine as _;
use proofline_service::proto::{Priority, ProofKind, SubmitProofRequest};
use proofline_service::request::{check, prover_id, Invalid, Limits, Work};

fn porep() -> SubmitProofRequest {
    let c1 = br#"{"registered_proof":"StackedDrg2KiBV1_1"}"#;
    let envelope = format!(
        r#"{{"SectorNum": 7, "Phase1Out": "{}", "SectorSize": 2048}}"#,
        base64::engine::general_purpose::STANDARD.encode(c1)
    );
    SubmitProofRequest {
        request_id: "porep-1000-7".into(),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: 5,
        vanilla_proof: envelope.into_bytes(),
        sector_number: 7,
        miner_id: 1000,
        ..Default::default()
    }
}

fn masked(b: u8) -> Vec<u8> {
    let mut r = vec![b; 32];
    r[31] &= 0x3f;
    r
}

fn winning() -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "winpost-1000-ab".into(),
        proof_kind: ProofKind::WinningPost as i32,
        sector_size: 2048,
        registered_proof: 0,
        vanilla_proofs: vec![vec![1, 2, 3]],
        miner_id: 1000,
        randomness: masked(0xff),
        ..Default::default()
    }
}

fn window() -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "wdpost-1000-0".into(),
        proof_kind: ProofKind::WindowPostPartition as i32,
        registered_proof: 13,
        sector_size: 32 << 30,
        ..winning()
    }
}

fn snap() -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: "snap-1000-7".into(),
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        sector_size: 32 << 30,
        registered_proof: 3,
        vanilla_proofs: vec![vec![9; 10]; 16],
        sector_number: 7,
        miner_id: 1000,
        comm_r_old: masked(1),
        comm_r_new: masked(2),
        comm_d_new: masked(3),
        ..Default::default()
    }
}

fn refused(req: &SubmitProofRequest) -> Invalid {
    check(req, &Limits::default()).expect_err("a bad request was accepted")
}

#[test]
fn every_kind_as_curio_sends_it_is_accepted_with_its_default_priority() {
    let a = check(&porep(), &Limits::default()).unwrap();
    assert_eq!(a.priority, Priority::Normal);
    assert!(matches!(&a.work, Work::Porep { c1_json, .. } if c1_json.starts_with(b"{")));
    assert_eq!(
        check(&winning(), &Limits::default()).unwrap().priority,
        Priority::Critical
    );
    let w = check(&window(), &Limits::default()).unwrap();
    assert_eq!(w.priority, Priority::High);
    assert_eq!(w.sector_size, 32 << 30);
    let s = check(&snap(), &Limits::default()).unwrap();
    assert!(
        matches!(&s.work, Work::SnapDeals { partition_proofs, .. } if partition_proofs.len() == 16)
    );
    // An explicit priority is kept.
    let low = SubmitProofRequest {
        priority: Priority::Low as i32,
        ..winning()
    };
    assert_eq!(
        check(&low, &Limits::default()).unwrap().priority,
        Priority::Low
    );
}

#[test]
fn the_digest_tells_another_payload_from_a_resent_one() {
    let a = check(&snap(), &Limits::default()).unwrap();
    let resent = SubmitProofRequest {
        priority: Priority::Critical as i32,
        ..snap()
    };
    assert_eq!(check(&resent, &Limits::default()).unwrap().digest, a.digest);
    let mut other = snap();
    other.vanilla_proofs[15][9] ^= 1;
    assert_ne!(check(&other, &Limits::default()).unwrap().digest, a.digest);
}

#[test]
fn each_wrong_field_is_named() {
    type Case = (
        &'static str,
        fn(&mut SubmitProofRequest),
        SubmitProofRequest,
    );
    let cases: Vec<Case> = vec![
        ("request_id", |r| r.request_id.clear(), porep()),
        ("request_id", |r| r.request_id = "x".repeat(300), porep()),
        ("request_id", |r| r.request_id = "a\0b".into(), porep()),
        ("proof_kind", |r| r.proof_kind = 0, porep()),
        ("proof_kind", |r| r.proof_kind = 99, porep()),
        ("priority", |r| r.priority = -1, porep()),
        ("registered_proof", |r| r.registered_proof = 20, porep()),
        (
            "registered_proof",
            |r| r.registered_proof = u64::MAX,
            snap(),
        ),
        // A window number on a winning request, and the other way round.
        ("registered_proof", |r| r.registered_proof = 5, winning()),
        ("registered_proof", |r| r.registered_proof = 0, window()),
        ("sector_size", |r| r.sector_size = 4096, porep()),
        ("sector_size", |r| r.sector_size = 0, winning()),
        ("vanilla_proof", |r| r.vanilla_proof.clear(), porep()),
        (
            "vanilla_proof",
            |r| r.vanilla_proof = b"not json".to_vec(),
            porep(),
        ),
        (
            "vanilla_proof",
            |r| r.vanilla_proof = br#"{"SectorNum":7,"Phase1Out":"!!","SectorSize":2048}"#.to_vec(),
            porep(),
        ),
        // Base64 of "[1]": JSON, but not an object.
        (
            "vanilla_proof",
            |r| {
                r.vanilla_proof =
                    br#"{"SectorNum":7,"Phase1Out":"WzFd","SectorSize":2048}"#.to_vec()
            },
            porep(),
        ),
        (
            "vanilla_proof",
            |r| {
                r.vanilla_proof =
                    br#"{"SectorNum":7,"Phase1Out":"e30=","SectorSize":4096}"#.to_vec()
            },
            porep(),
        ),
        ("vanilla_proofs", |r| r.vanilla_proofs.clear(), snap()),
        ("vanilla_proofs", |r| r.vanilla_proofs[3].clear(), snap()),
        (
            "vanilla_proofs",
            |r| r.vanilla_proofs = vec![vec![1]; 5000],
            winning(),
        ),
        ("randomness", |r| r.randomness.truncate(31), winning()),
        // Unmasked: above the scalar field's modulus.
        ("randomness", |r| r.randomness = vec![0xff; 32], window()),
        ("partition_index", |r| r.partition_index = 1, winning()),
        ("comm_r_old", |r| r.comm_r_old.clear(), snap()),
        ("comm_r_new", |r| r.comm_r_new = vec![0xff; 32], snap()),
        ("comm_d_new", |r| r.comm_d_new.push(0), snap()),
        ("miner_id", |r| r.miner_id = 0, porep()),
    ];
    for (i, (field, spoil, base)) in cases.into_iter().enumerate() {
        // Its twin: the unspoiled request passes.
        assert!(check(&base, &Limits::default()).is_ok(), "case {i}");
        let mut req = base;
        spoil(&mut req);
        let e = refused(&req);
        assert_eq!(e.field, field, "case {i}: {e}");
        let status = tonic::Status::from(e);
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().starts_with(field),
            "case {i}: {}",
            status.message()
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    use rand::{Rng, RngCore};
    let mut rng = rand::thread_rng();
    for _ in 0..2000 {
        let mut bytes = |n: usize| {
            let mut b = vec![0u8; rng.gen_range(0..n)];
            rng.fill_bytes(&mut b);
            b
        };
        let req = SubmitProofRequest {
            request_id: "r".into(),
            proof_kind: rand::thread_rng().gen_range(-1..6),
            sector_size: [2048, 32 << 30, 7][rand::thread_rng().gen_range(0..3)],
            registered_proof: rand::thread_rng().gen_range(0..25),
            priority: rand::thread_rng().gen_range(-1..6),
            vanilla_proof: bytes(100),
            vanilla_proofs: vec![bytes(10), bytes(10)],
            miner_id: 1000,
            randomness: bytes(40),
            comm_r_old: bytes(40),
            comm_r_new: bytes(40),
            comm_d_new: bytes(40),
            ..Default::default()
        };
        let _ = check(&req, &Limits::default());
    }
}

#[test]
fn prover_ids_are_leb128_left_aligned() {
    assert_eq!(prover_id(0)[..2], [0, 0]);
    assert_eq!(prover_id(1000)[..3], [0xe8, 0x07, 0]);
    assert_eq!(prover_id(127)[..2], [127, 0]);
    assert_eq!(prover_id(128)[..3], [0x80, 0x01, 0]);
    assert!(prover_id(1000)[3..].iter().all(|b| *b == 0));
    let max = prover_id(u64::MAX);
    assert_eq!(max[9], 0x01);
    assert!(max[..9].iter().all(|b| *b == 0xff));
}
