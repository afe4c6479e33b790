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
    let status = sweep_command(out, extra, env).status().unwrap();
    assert!(status.success(), "sweep exited with {status}");
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

fn sweep_command(out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Command {
    let params = std::env::temp_dir().join("proofline-test-params");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proofline"));
    cmd.arg("sweep");
    // Defaults for a tiny sweep, unless `extra` gives the option.
    for (flag, value) in [
        ("--pw", "1,2"),
        ("--log2-constraints", "8"),
        ("--partitions", "3"),
        ("--jobs", "2"),
    ] {
        if !extra.contains(&flag) {
            cmd.args([flag, value]);
        }
    }
    cmd.arg("--out")
        .arg(out)
        .arg("--params-dir")
        .arg(&params)
        .args(extra)
        .envs(env.iter().copied());
    cmd
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
    // Per-device figures: the CPU backend's one device.
    for p in points {
        let devices = p["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 1);
        assert_eq!(devices[0]["name"], "cpu:0");
        assert_eq!(devices[0]["partitions"], 6);
        // Untraced: no busy share of a device timeline.
        assert!(devices[0].get("trace_busy_fraction").is_none(), "{p}");
        assert_eq!(p["fallback_partitions"], 0);
    }
    // A results.json of before the device fields is still valid v1.
    let mut old = v.clone();
    for p in old["points"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("devices");
        p.as_object_mut().unwrap().remove("fallback_partitions");
    }
    assert_eq!(errors(&old), Vec::<String>::new());
    assert!(v["recommendation"]["pw"].is_u64());
    // The CPU backend's bound: its accelerator, or synthesis; never a device or host steps.
    let bound = v["recommendation"]["bottleneck"].as_str().unwrap();
    assert!(
        bound.starts_with("the CPU accelerator") || bound.starts_with("synthesis"),
        "{bound}"
    );
    let mut no_bound = v.clone();
    no_bound["recommendation"]
        .as_object_mut()
        .unwrap()
        .remove("bottleneck");
    assert_eq!(
        errors(&no_bound),
        Vec::<String>::new(),
        "older files stay valid"
    );
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
fn a_replay_sweep_proves_copies_of_one_partition_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("sweep");
    let v = sweep(&out, &["--replay"], &[]);
    assert_eq!(errors(&v), Vec::<String>::new());
    assert_eq!(v["config"]["replay"], true);
    for p in v["points"].as_array().unwrap() {
        assert_eq!(p["status"], "ok", "{p}");
        // Every copy proves the first partition's statement, checked against its inputs.
        assert_eq!(p["proofs_verified"], 2);
        assert_eq!(p["partitions_verified"], 6);
        // The copies came from one synthesized partition, counted in the ledger.
        assert!(p["replay_source_bytes"].as_u64().unwrap() > 0, "{p}");
    }
    let svg = std::fs::read_to_string(out.join("report.svg")).unwrap();
    assert!(
        svg.contains("replay (one partition synthesized once"),
        "the plot says so"
    );
    // Negative twin: a plain sweep is not marked.
    let plain = sweep(&dir.path().join("plain"), &["--pw", "1"], &[]);
    assert_eq!(plain["config"]["replay"], false);
    assert!(plain["points"][0].get("replay_source_bytes").is_none());
    let svg = std::fs::read_to_string(dir.path().join("plain/report.svg")).unwrap();
    assert!(!svg.contains("replay"));
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
    let (ok, err) = run(&["sweep", "--gpu-mem-limit", "4GiB", "--pw", "1"]);
    assert!(!ok && err.contains("apply to the cuda and opencl"), "{err}");
    let (ok, err) = run(&[
        "sweep",
        "--backend",
        "opencl",
        "--gpu-mem-limit",
        "lots",
        "--pw",
        "1",
    ]);
    assert!(!ok && err.contains("not a size"), "{err}");
    let (ok, err) = run(&["sweep", "--mem-budget", "lots", "--pw", "1"]);
    assert!(!ok && err.contains("not a size"), "{err}");
    let (ok, err) = run(&["prove", "--queue-depth", "0"]);
    assert!(!ok && err.contains("--queue-depth"), "{err}");
    // Counts that would stall the machine are bounded, before anything starts.
    let (ok, err) = run(&["sweep", "--pw", "18446744073709551615"]);
    assert!(!ok && err.contains("--pw"), "{err}");
    let (ok, err) = run(&["sweep", "--pw", "1", "--synthesis-threads", "100000"]);
    assert!(!ok && err.contains("--synthesis-threads"), "{err}");
    let (ok, err) = run(&["prove", "--pw", "0"]);
    assert!(!ok && err.contains("--pw"), "{err}");
    // The device trace and the synthetic partition need a device backend, and sane sizes.
    for args in [
        &["prove", "--device-trace", "t.csv"][..],
        &["sweep", "--device-trace", "--pw", "1"][..],
    ] {
        let (ok, err) = run(args);
        assert!(
            !ok && err.contains("--device-trace traces a device backend"),
            "{err}"
        );
    }
    let (ok, err) = run(&["synthetic", "--backend", "cpu"]);
    assert!(!ok && err.contains("device backend"), "{err}");
    let (ok, err) = run(&["synthetic", "--backend", "opencl", "--log2-domain", "40"]);
    assert!(!ok && err.contains("--log2-domain"), "{err}");
    let (ok, err) = run(&["synthetic", "--backend", "cuda", "--partitions", "0"]);
    assert!(!ok && err.contains("--partitions"), "{err}");
    let (ok, err) = run(&["synthetic", "--backend", "opencl", "--seed", "-1"]);
    assert!(!ok && !err.contains("panicked"), "{err}");
    for (_, err) in [
        run(&["sweep", "--pw", "18446744073709551615"]),
        run(&["prove", "--synthesis-threads", "100000"]),
    ] {
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_sweep_where_every_point_failed_fails_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    // 1 MiB passes the option check but holds no partition of this workload at 2^14 (a/b/c
    // alone take 1.5 MiB).
    let o = sweep_command(
        &out,
        &["--log2-constraints", "14", "--mem-budget", "1MiB"],
        &[],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("no point succeeded"), "{stderr}");
    // The reason is printed off a terminal too, and under each row of the table.
    assert!(stderr.contains("pw 1: failed"), "{stderr}");
    assert!(stdout.contains("memory budget"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(errors(&v), Vec::<String>::new());
    for p in v["points"].as_array().unwrap() {
        assert_eq!(p["status"], "failed");
        // No throughput for a point whose proofs failed.
        assert!(p["proofs_per_minute"].is_null(), "{p}");
    }
    assert!(v["recommendation"]["pw"].is_null());
}

#[test]
fn a_sweep_never_mixes_its_results_with_another_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("point-pw7.json"), "{}").unwrap();
    let o = sweep_command(&out, &[], &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert!(!out.join("results.json").exists());
    // Twin: an empty folder is fine (covered by the tiny sweep, which creates a new one), and
    // default folders are unique: two made in the same second differ.
    let a = harness::sweep::output_folder(None).unwrap();
    let b = harness::sweep::output_folder(None).unwrap();
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    assert_ne!(pa, pb);
    drop((a, b));
    std::fs::remove_dir(pa).unwrap();
    std::fs::remove_dir(pb).unwrap();
}

#[test]
fn an_interrupted_sweep_stops_its_child_and_writes_what_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    // A workload long enough to be interrupted in its first point.
    let child = sweep_command(
        &out,
        &[
            "--pw",
            "1,2,3",
            "--log2-constraints",
            "12",
            "--partitions",
            "40",
            "--jobs",
            "4",
        ],
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the first point's child runs (its timeline log exists), then SIGTERM the
    // parent alone.
    let log = out.join("point-pw1.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !log.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first point never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    // The signal is named, not numbered (the child is stopped with SIGTERM either way).
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
    assert!(!stderr.contains("signal 15"), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(errors(&v), Vec::<String>::new());
    let points = v["points"].as_array().unwrap();
    assert!(points.len() < 3, "the sweep went on after the interruption");
    // The point's child did not panic on a closed pipe.
    let child_log = std::fs::read_to_string(&log).unwrap();
    assert!(!child_log.contains("panicked"), "{child_log}");
}

#[test]
fn decodable_but_wrong_parameters_are_named_as_suspect() {
    let dir = tempfile::tempdir().unwrap();
    let params_dir = dir.path().join("params");
    let prove = || {
        Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args(["prove", "--pw", "1", "--jobs", "1", "--partitions", "2"])
            .args(["--log2-constraints", "8", "--params-dir"])
            .arg(&params_dir)
            .output()
            .unwrap()
    };
    // Twin first: the cache as generated proves.
    let o = prove();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let file = std::fs::read_dir(&params_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "params"))
        .expect("the cached parameter file");
    // Two valid points swapped: the file still decodes, but the proofs cannot verify.
    let mut params =
        prover_core::Parameters::read_file(&file, prover_core::PointCheck::Checked).unwrap();
    params.h.swap(0, 1);
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    std::fs::write(&file, bytes).unwrap();
    let o = prove();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!o.status.success());
    assert!(
        stdout.contains("suspect") && stdout.contains(file.to_str().unwrap()),
        "{stdout}\n{stderr}"
    );
}

/// `--record` appends one record per point that the docs' renderer reads (the date, commit,
/// machine, command and seconds per proof); a record path that is a folder is refused before
/// any point runs, and `--record-table` alone is a usage error.
#[test]
fn a_sweep_appends_its_records_and_refuses_a_bad_record_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.jsonl");
    let out = dir.path().join("out");
    let args = |record: &Path| -> Vec<String> {
        [
            "sweep",
            "--pw",
            "1..2",
            "--log2-constraints",
            "8",
            "--partitions",
            "1",
            "--jobs",
            "1",
            "--out",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            out.display().to_string(),
            "--record".into(),
            record.display().to_string(),
            "--params-dir".into(),
            dir.path().join("params").display().to_string(),
        ])
        .collect()
    };
    let run = |args: &[String]| {
        Command::new(env!("CARGO_BIN_EXE_proofline"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&args(&file));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = proofline_records::read_file(&file).unwrap();
    assert_eq!(records.len(), 2);
    for (r, pw) in records.iter().zip([1, 2]) {
        assert!(r.case.ends_with(&format!(", pw {pw}")), "{}", r.case);
        assert_eq!(r.table.as_deref(), Some("sweep"));
        assert!(r.ours > 0.0 && r.unit == "s");
        assert!(
            r.command.starts_with("proofline sweep --pw 1..2"),
            "{}",
            r.command
        );
        assert_eq!(r.extra["proofs verified"], "1");
    }
    // Twin: a folder as the record file is refused before any point runs.
    std::fs::remove_dir_all(&out).unwrap();
    let o = run(&args(dir.path()));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--record") && err.contains("is a folder"),
        "{err}"
    );
    assert!(!out.exists(), "no point ran");
    let o = run(&["sweep".into(), "--record-table".into(), "x".into()]);
    assert_eq!(o.status.code(), Some(2));
}
