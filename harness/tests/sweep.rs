//! The sweep end to end through the real binary: a tiny sweep of two points whose output is
//! checked against the JSON Schema in docs/, and a point killed on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

fn schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/sweep.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn sweep(out: &Path, extra: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let params = std::env::temp_dir().join("proofline-test-params");
    let status = Command::new(env!("CARGO_BIN_EXE_proofline"))
        .args([
            "sweep",
            "--pw",
            "1,2",
            "--log2-constraints",
            "8",
            "--partitions",
            "3",
            "--jobs",
            "2",
        ])
        .arg("--out")
        .arg(out)
        .arg("--params-dir")
        .arg(&params)
        .args(extra)
        .envs(env.iter().copied())
        .status()
        .unwrap();
    assert!(status.success(), "sweep exited with {status}");
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

fn errors(v: &serde_json::Value) -> Vec<String> {
    schema()
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

#[test]
fn a_tiny_sweep_meets_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("sweep");
    let v = sweep(&out, &["--ram-limit", "64GiB"], &[]);
    assert_eq!(errors(&v), Vec::<String>::new());
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, pw) in points.iter().zip([1, 2]) {
        assert_eq!(p["pw"], pw);
        assert_eq!(p["status"], "ok", "{p}");
        assert_eq!(p["proofs_verified"], 2);
        assert_eq!(p["partitions_verified"], 6);
        assert!(p["ledger_peak_bytes"].as_u64().unwrap() > 0);
        assert!(p["peak_rss_bytes"].as_u64().unwrap() >= p["baseline_rss_bytes"].as_u64().unwrap());
        // The bound of the default policy, from the ledger's own peaks.
        let pre = p["stage_peaks"]["synthesizing"]["count"].as_u64().unwrap();
        assert!(pre <= pw);
        let timeline = std::fs::read_to_string(out.join(format!("timeline-pw{pw}.csv"))).unwrap();
        assert!(timeline.starts_with("t_seconds,rss_bytes,synthesizing_count,synthesizing_bytes,"));
        assert!(timeline.lines().count() >= 2);
    }
    assert!(v["recommendation"]["pw"].is_u64());
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3);
    let svg = std::fs::read_to_string(out.join("report.svg")).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("proofs per minute")
            && svg.contains("awaiting_accelerator")
    );

    // Negative twins: the schema rejects a broken document.
    let mut bad = v.clone();
    bad["schema"] = "proofline.sweep.v0".into();
    assert!(!errors(&bad).is_empty());
    let mut bad = v.clone();
    bad["points"][0]["status"] = "fine".into();
    assert!(!errors(&bad).is_empty());
    let mut bad = v;
    bad["points"][0]
        .as_object_mut()
        .unwrap()
        .remove("stage_peaks");
    assert!(!errors(&bad).is_empty());
}

#[test]
fn a_killed_point_is_recorded_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let v = sweep(&out, &[], &[("PROOFLINE_SWEEP_KILL_PW", "1")]);
    assert_eq!(errors(&v), Vec::<String>::new());
    let points = v["points"].as_array().unwrap();
    assert_eq!(points[0]["status"], "killed");
    assert_eq!(points[0]["signal"], 9);
    assert!(
        points[0]["peak_rss_bytes"].as_u64().unwrap() > 0,
        "rusage still gives the peak"
    );
    assert_eq!(points[1]["status"], "ok");
    assert_eq!(v["recommendation"]["pw"], 2);
}

#[test]
fn bad_options_are_refused_with_a_message() {
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args(args)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (ok, err) = run(&["sweep", "--pw", "5..2"]);
    assert!(!ok && err.contains("empty range"), "{err}");
    let (ok, err) = run(&["sweep", "--backend", "cuda", "--pw", "1"]);
    assert!(!ok && err.contains("not built yet"), "{err}");
    let (ok, err) = run(&["sweep", "--mem-budget", "lots", "--pw", "1"]);
    assert!(!ok && err.contains("not a size"), "{err}");
    let (ok, err) = run(&["prove", "--queue-depth", "0"]);
    assert!(!ok && err.contains("--queue-depth"), "{err}");
}
