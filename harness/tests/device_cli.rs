//! The device commands end to end on OpenCL (POCL in CI, where `CI=true` makes a missing
//! platform a failure): `prove --device-trace` writes a trace whose rows are the device's copies
//! and kernels, and `synthetic` runs a small 32 GiB-shaped partition and says it is not a proof.

use std::process::Command;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Runs `proofline args`; `None` (skipped, reason printed) when there is no OpenCL here and
/// this is not CI.
fn run(args: &[&str]) -> Option<(bool, String)> {
    let o = Command::new(env!("CARGO_BIN_EXE_proofline"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !o.status.success() && text.contains("an OpenCL device") && !in_ci() {
        eprintln!("skipped: no OpenCL here ({text})");
        return None;
    }
    Some((o.status.success(), text))
}

/// A tiny OpenCL workload (two partitions of about 2^8 constraints), with `extra` options.
fn tiny<'a>(params: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--backend",
        "opencl",
        "--partitions",
        "2",
        "--jobs",
        "1",
        "--log2-constraints",
        "8",
        "--params-dir",
        params.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn prove_device_trace_writes_the_devices_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("trace/t.csv");
    // The trace's folder must exist: an output file whose folder is missing is refused.
    std::fs::create_dir(dir.path().join("trace")).unwrap();
    let params = dir.path().join("params");
    let mut args = vec!["prove"];
    args.extend(tiny(
        &params,
        &[
            "--replay",
            "--pw",
            "1",
            "--device-trace",
            csv.to_str().unwrap(),
        ],
    ));
    let Some((ok, out)) = run(&args) else {
        return;
    };
    assert!(ok, "{out}");
    assert!(out.contains("device 0 trace: 2 partitions"), "{out}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert!(rows.iter().any(|r| r.contains(",kernel,")), "{text}");
    assert!(rows.iter().any(|r| r.contains(",copy_in,copy,")), "{text}");
    assert!(
        rows.iter().any(|r| r.contains(",msm_b_g2,kernel,")),
        "{text}"
    );
    let svg = std::fs::read_to_string(csv.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("partition 1, every kernel"));
}

#[test]
fn a_traced_sweep_writes_each_points_device_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let params = dir.path().join("params");
    let mut args = vec!["sweep"];
    args.extend(tiny(
        &params,
        &[
            "--device-trace",
            "--pw",
            "1,2",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    let Some((ok, text)) = run(&args) else {
        return;
    };
    assert!(ok, "{text}");
    for pw in [1, 2] {
        let csv = std::fs::read_to_string(out.join(format!("device-trace-pw{pw}.csv"))).unwrap();
        assert!(
            csv.lines().skip(1).any(|r| r.contains(",kernel,")),
            "pw {pw}: {csv}"
        );
        assert!(out.join(format!("device-trace-pw{pw}.svg")).exists());
    }
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    assert!(results.contains("\"trace\": true"), "{results}");
    // Each point's device has its busy share of its own timeline.
    let v: serde_json::Value = serde_json::from_str(&results).unwrap();
    for p in v["points"].as_array().unwrap() {
        for d in p["devices"].as_array().unwrap() {
            let f = d["trace_busy_fraction"].as_f64();
            assert!(f.is_some_and(|f| f > 0.0 && f <= 1.0), "{d}");
        }
    }
}

/// The `device busy` cell of point `pw`'s row in a sweep's printed table (its columns are
/// right-aligned under their headers, and some cells hold spaces, as `91.5 MiB`).
fn device_busy_cell(text: &str, pw: &str) -> String {
    let header = text
        .lines()
        .find(|l| l.contains("device busy"))
        .unwrap_or_else(|| panic!("no table: {text}"));
    let end = header.find("device busy").unwrap() + "device busy".len();
    let row = text
        .lines()
        .find(|l| l.split_whitespace().take(2).eq([pw, "ok"]))
        .unwrap_or_else(|| panic!("no row for pw {pw}: {text}"));
    row[..end].split_whitespace().last().unwrap().to_string()
}

#[test]
fn a_sweep_times_the_device_by_default_and_shows_its_own_busy_share() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let out = dir.path().join("sweep");
    let mut args = vec!["sweep"];
    args.extend(tiny(
        &params,
        &["--pw", "1", "--out", out.to_str().unwrap()],
    ));
    let Some((ok, text)) = run(&args) else {
        return;
    };
    assert!(ok, "{text}");
    // Timed without --device-trace, but no timeline files written.
    assert!(!out.join("device-trace-pw1.csv").exists());
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&results).unwrap();
    assert_eq!(v["config"]["trace"], true, "{results}");
    assert_eq!(v["config"]["trace_files"], false, "{results}");
    let d = &v["points"][0]["devices"][0];
    let own = d["trace_busy_fraction"]
        .as_f64()
        .expect("the device's own busy share");
    assert!(own > 0.0 && own <= 1.0, "{d}");
    // The table's device busy is that share, not the workers' (the CSV has both).
    assert_eq!(device_busy_cell(&text, "1"), format!("{own:.2}"), "{text}");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(
        col("device_trace_busy_fractions"),
        format!("{own:.2}"),
        "{csv}"
    );
    let workers = d["busy_fraction"].as_f64().unwrap();
    assert_eq!(
        col("device_busy_fractions"),
        format!("{workers:.2}"),
        "{csv}"
    );
    // What bounds the recommended point, read from those shares, is printed and kept.
    let bound = v["recommendation"]["bottleneck"].as_str().expect("a bound");
    assert!(
        text.contains(&format!("bound at that pw: {bound}")),
        "{text}"
    );

    // The twin: --no-device-trace times nothing, and the table says so rather than showing the
    // workers' share as the device's.
    let out = dir.path().join("untimed");
    let mut args = vec!["sweep"];
    args.extend(tiny(
        &params,
        &[
            "--pw",
            "1",
            "--no-device-trace",
            "--out",
            out.to_str().unwrap(),
        ],
    ));
    let (ok, text) = run(&args).expect("OpenCL was there a moment ago");
    assert!(ok, "{text}");
    let results = std::fs::read_to_string(out.join("results.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&results).unwrap();
    assert_eq!(v["config"]["trace"], false, "{results}");
    let d = &v["points"][0]["devices"][0];
    assert!(d.get("trace_busy_fraction").is_none(), "{d}");
    assert_eq!(device_busy_cell(&text, "1"), "-", "{text}");
    // Without the device's own share there is no bound to name.
    assert!(v["recommendation"].get("bottleneck").is_none(), "{results}");
    assert!(!text.contains("bound at that pw"), "{text}");
    // And the two flags together are refused.
    let mut args = vec!["sweep"];
    args.extend(tiny(
        &params,
        &["--pw", "1", "--device-trace", "--no-device-trace"],
    ));
    let (ok, text) = run(&args).expect("a refusal needs no device");
    assert!(!ok && text.contains("--no-device-trace"), "{text}");
}

#[test]
fn prove_prints_the_devices_own_busy_share_without_writing_files() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let mut args = vec!["prove"];
    args.extend(tiny(&params, &["--replay", "--pw", "1"]));
    let Some((ok, out)) = run(&args) else {
        return;
    };
    assert!(ok, "{out}");
    assert!(out.contains("device 0 trace: 2 partitions"), "{out}");
    assert!(out.contains("its workers in the accelerator"), "{out}");
    // The twin: untimed, no trace summary.
    let mut args = vec!["prove"];
    args.extend(tiny(
        &params,
        &["--replay", "--pw", "1", "--no-device-trace"],
    ));
    let (ok, out) = run(&args).expect("OpenCL was there a moment ago");
    assert!(ok, "{out}");
    assert!(!out.contains("device 0 trace"), "{out}");
}

#[test]
fn synthetic_runs_a_small_partition_and_says_it_is_no_proof() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("syn.csv");
    let Some((ok, out)) = run(&[
        "synthetic",
        "--backend",
        "opencl",
        "--log2-domain",
        "10",
        "--partitions",
        "2",
        "--device-trace",
        csv.to_str().unwrap(),
    ]) else {
        return;
    };
    assert!(ok, "{out}");
    assert!(out.contains("a timing workload, not a proof"), "{out}");
    assert!(out.contains("partition 1: accelerator + b_g2"), "{out}");
    assert!(out.contains("device 0 trace: 2 partitions"), "{out}");
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() > 10);
    // Its negative twin: a device limit that cannot hold the bases is refused with the sizes.
    let Some((ok, out)) = run(&[
        "synthetic",
        "--backend",
        "opencl",
        "--log2-domain",
        "16",
        "--partitions",
        "1",
        "--gpu-mem-limit",
        "1MiB",
    ]) else {
        return;
    };
    assert!(
        !ok && out.contains("synthetic key") && !out.contains("panicked"),
        "{out}"
    );
}
