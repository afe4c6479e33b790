//! `msm-bench --record`: each checked measurement appended as a record the docs' renderer reads
//! (on OpenCL: POCL here and in CI, where `CI=true` makes a missing platform a failure).

use std::process::Command;

#[test]
fn msm_bench_records_its_checked_measurements() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("msm.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_msm-bench"))
        .args([
            "--api", "opencl", "--g1", "8", "--g2", "none", "--mix", "dense",
        ])
        .args(["--reps", "1", "--warmup", "0", "--record"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) && stderr.contains("OpenCL") {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI must have an OpenCL platform: {stderr}");
        eprintln!("skipped: no OpenCL platform here ({stderr})");
        return;
    }
    assert!(o.status.success(), "{stderr}");
    let records = proofline_records::read_file(&file).unwrap();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.case, "msm g1 dense sorted c=auto run=auto 2^8");
    assert_eq!(
        (r.table.as_deref(), r.unit.as_str()),
        (Some("msm-bench"), "ms")
    );
    assert!(
        r.ours > 0.0 && r.machine.starts_with("opencl device 0"),
        "{r:?}"
    );
    // Twin: a table without a file to write is a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_msm-bench"))
        .args(["--record-table", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
