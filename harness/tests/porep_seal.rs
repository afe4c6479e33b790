//! The `porep-2k` workload's proofs checked by filecoin-proofs' `verify_seal`, and its twin: two
//! jobs whose sector statements are swapped prove partitions that proofline's verifier accepts
//! (each against its own circuit's inputs) and that `verify_seal` rejects, so the point fails.
//! The parameters (2.7M constraints, about two minutes on two cores) are generated once under
//! cargo's shared test folder and read from there on later runs.

use clap::Parser;
use harness::config::RunConfig;
use harness::point::{prepare, run_jobs};
use harness::report::model::PointStatus;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    run: RunConfig,
}

fn config() -> RunConfig {
    Cli::parse_from(["t", "--circuit", "porep-2k", "--jobs", "2"])
        .run
        .normalized()
}

#[test]
fn porep_jobs_are_checked_by_verify_seal() {
    // The only test of this binary: it alone sets filecoin-proofs' parameter folder.
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fil-params");
    std::fs::create_dir_all(&cache).unwrap();
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
    let cfg = config();

    let prepared = prepare(&cfg, false).unwrap();
    assert!(prepared.jobs.iter().all(|j| j.seal.is_some()));
    let (o, _) = run_jobs(&cfg, 1, prepared, &mut |_, _| {}).unwrap();
    let r = &o.result;
    assert_eq!(r.status, PointStatus::Ok, "{:?}", r.error);
    assert_eq!(r.proofs_verified, 2);
    assert_eq!(r.seals_verified, Some(2));

    // The twin: each job's statement is the other sector's.
    let mut prepared = prepare(&cfg, false).unwrap();
    let (first, rest) = prepared.jobs.split_at_mut(1);
    std::mem::swap(&mut first[0].seal, &mut rest[0].seal);
    let (o, _) = run_jobs(&cfg, 1, prepared, &mut |_, _| {}).unwrap();
    let r = &o.result;
    assert_eq!(r.status, PointStatus::Failed);
    assert_eq!(
        r.partitions_verified, 2,
        "proofline's verifier accepts both"
    );
    assert_eq!(r.seals_verified, Some(0));
    assert_eq!((r.proofs_verified, r.proofs_failed), (0, 2));
    let error = r.error.as_deref().unwrap_or_default();
    assert!(error.contains("verify_seal rejected"), "{error}");
    assert_eq!(
        r.seconds_per_proof, None,
        "no throughput for rejected proofs"
    );
}
