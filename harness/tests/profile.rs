//! `prove --profile FILE.svg`: a flamegraph of the proving run, sampled by pprof; a path that
//! cannot take it is refused before any work.

use std::process::Command;

#[test]
fn prove_draws_a_flamegraph_of_its_run_and_refuses_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("flame.svg");
    let prove = |profile: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args([
                "prove",
                "--log2-constraints",
                "12",
                "--partitions",
                "2",
                "--jobs",
                "1",
                "--pw",
                "1",
                "--params-dir",
            ])
            .arg(dir.path().join("params"))
            .arg("--profile")
            .arg(profile)
            .output()
            .unwrap()
    };
    let o = prove(&svg);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml") && text.contains("<svg"),
        "not an SVG"
    );
    // The samples name the prover's own functions.
    assert!(
        text.contains("prover_core"),
        "no prover frame in the flamegraph"
    );
    // Twin: a folder is refused before any work, and nothing is written into it.
    let o = prove(dir.path());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--profile") && err.contains("is a folder"),
        "{err}"
    );
}
