//! `proofline filecoin seal` and the errors of `proofline c2` through the real binary (the C2
//! proof itself is tested in filecoin/tests/porep.rs; these stop before any parameters are
//! needed), and a WindowPoSt sweep point.

use std::path::Path;
use std::process::{Command, Output};

fn proofline(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proofline"))
        .args(args)
        .env("FIL_PROOFS_PARAMETER_CACHE", cache)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn seal_writes_both_c1_forms_and_c2_refuses_what_it_cannot_verify() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    let out = dir.path().join("c1");
    let o = proofline(
        &[
            "filecoin",
            "seal",
            "--sector-size",
            "2KiB",
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["c1.json", "c1-raw.json", "sector.json"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("sector.json")).unwrap()).unwrap();
    assert_eq!(info["registered_proof"], "StackedDrg2KiBV1_1");
    assert_eq!(info["sector_size"], 2048);

    // A raw C1 output does not say its sector size: without its sector.json, c2 asks for it.
    let raw_alone = dir.path().join("raw-alone");
    std::fs::create_dir_all(&raw_alone).unwrap();
    std::fs::copy(out.join("c1-raw.json"), raw_alone.join("c1-raw.json")).unwrap();
    let o = proofline(
        &[
            "c2",
            "--c1",
            raw_alone.join("c1-raw.json").to_str().unwrap(),
        ],
        &cache,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--sector-size"), "{}", stderr(&o));
    // A variant or PoRep id that disagrees with the wrapper's registered proof.
    for extra in [
        &["--variant", "synthetic"][..],
        &["--porep-id", &"00".repeat(32)][..],
    ] {
        let o = proofline(
            &[
                &["c2", "--c1", out.join("c1.json").to_str().unwrap()][..],
                extra,
            ]
            .concat(),
            &cache,
        );
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("disagrees") || stderr(&o).contains("registered proof"),
            "{extra:?}: {}",
            stderr(&o)
        );
    }
    // A sector size that disagrees with the wrapper's registered proof.
    let o = proofline(
        &[
            "c2",
            "--c1",
            out.join("c1.json").to_str().unwrap(),
            "--sector-size",
            "8MiB",
        ],
        &cache,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("disagrees"), "{}", stderr(&o));
    // Without sector.json, verify_seal's sector number and prover id must be given.
    let alone = dir.path().join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::copy(out.join("c1.json"), alone.join("c1.json")).unwrap();
    let o = proofline(
        &["c2", "--c1", alone.join("c1.json").to_str().unwrap()],
        &cache,
    );
    assert!(!o.status.success());
    // The whole message, so that a lost line continuation shows.
    assert_eq!(
        stderr(&o).lines().last().unwrap_or_default(),
        "error: verify_seal needs the sector number and prover id: pass --sector-id and \
         --prover-id, or keep the sector.json that `proofline filecoin seal` wrote next to the \
         C1 file",
        "{}",
        stderr(&o)
    );
    // A file that is not a C1 output, and one that does not exist.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "[1, 2, 3]").unwrap();
    let o = proofline(&["c2", "--c1", junk.to_str().unwrap()], &cache);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is not a C1 output"), "{}", stderr(&o));
    let o = proofline(&["c2", "--c1", "/nonexistent/c1.json"], &cache);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("/nonexistent/c1.json"),
        "{}",
        stderr(&o)
    );
    // Sizes Filecoin does not have, and a variant it does not have.
    for (size, variant, expect) in [
        ("8KiB", "v1_1", "no Filecoin sector of 8192 bytes"),
        ("3000", "v1_1", "no Filecoin sector of 3000 bytes"),
        ("4KiB", "v2", "no seal proof variant `v2`"),
    ] {
        let o = proofline(
            &[
                "filecoin",
                "seal",
                "--sector-size",
                size,
                "--variant",
                variant,
                "--out",
                dir.path().join("x").to_str().unwrap(),
            ],
            &cache,
        );
        assert!(!o.status.success());
        assert!(stderr(&o).contains(expect), "{}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
    // Nothing panicked.
    assert!(!stderr(&o).contains("panicked"));

    // Engine options are checked before anything else (before minutes of parameters): each
    // fails fast, names the option, and generates nothing.
    let c1 = out.join("c1.json");
    let c1 = c1.to_str().unwrap();
    let a_folder = dir.path().to_str().unwrap();
    for (extra, expect) in [
        (
            &["--backend", "opencl", "--opencl-device", "pocl:x"][..],
            "not a device index",
        ),
        (
            &["--backend", "cuda", "--gpu-mem-limit", "1KiB"][..],
            "--gpu-mem-limit",
        ),
        (&["--opencl-device", "pocl"][..], "--opencl-device"),
        (&["--gpus", "0,1"][..], "--gpus"),
        (&["--pw", "0"][..], "--pw"),
        (&["--pw", "18446744073709551615"][..], "--pw"),
        (&["--queue-depth", "0"][..], "--queue-depth"),
        (
            &["--synthesis-threads", "100000"][..],
            "--synthesis-threads",
        ),
        (&["--mem-budget", "1KiB"][..], "--mem-budget"),
        (&["--mem-budget", "2MiB"][..], "cannot hold one partition"),
        (&["--out", a_folder][..], "is a folder"),
        (&["--record", a_folder][..], "is a folder"),
        (
            &["--out", "/nonexistent/dir/proof.bin"][..],
            "does not exist",
        ),
    ] {
        let mut args = vec!["c2", "--c1", c1];
        args.extend_from_slice(extra);
        let t = std::time::Instant::now();
        let o = proofline(&args, &cache);
        let err = stderr(&o);
        // 1: refused by proofline; 2: refused by the option parser. Never 101 (a panic).
        assert!(matches!(o.status.code(), Some(1 | 2)), "{extra:?}: {err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert!(
            t.elapsed().as_secs() < 60,
            "{extra:?} took {:?}",
            t.elapsed()
        );
    }
    // A C1 output with a value that is not a field element: an error naming it, exit 1.
    let mut bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c1.json")).unwrap()).unwrap();
    bad["replica_id"][31] = serde_json::json!(0xff);
    let bad_path = out.join("bad-c1.json");
    std::fs::write(&bad_path, serde_json::to_vec(&bad).unwrap()).unwrap();
    let o = proofline(&["c2", "--c1", bad_path.to_str().unwrap()], &cache);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("replica_id"), "{}", stderr(&o));
    // A FIFO where the C1 file should be: refused at once, no hang.
    let fifo = dir.path().join("fifo.json");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string and mode.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let o = proofline(&["c2", "--c1", fifo.to_str().unwrap()], &cache);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    // Sealing again into the same folder needs --force; nothing there was replaced.
    let before = std::fs::read(out.join("c1.json")).unwrap();
    let o = proofline(
        &[
            "filecoin",
            "seal",
            "--sector-size",
            "2KiB",
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(std::fs::read(out.join("c1.json")).unwrap(), before);
    // No parameters were generated by any of these.
    assert!(!cache.exists() || std::fs::read_dir(&cache).unwrap().next().is_none());
}

#[test]
fn c2_blames_an_altered_c1_and_finishes_its_proof_behind_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    let out = dir.path().join("c1");
    let o = Command::new(env!("CARGO_BIN_EXE_proofline"))
        .args(["filecoin", "seal", "--sector-size", "2KiB", "--out"])
        .arg(&out)
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Standard output closed after three lines: the proof is still made, checked by
    // verify_seal and written, and the command ends as a closed pipe's writer does.
    let proof = dir.path().join("proof.bin");
    let records = dir.path().join("c2.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_proofline"))
        .arg("c2")
        .arg("--c1")
        .arg(out.join("c1.json"))
        .arg("--out")
        .arg(&proof)
        .arg("--record")
        .arg(&records)
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    }
    drop(reader);
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(o.status.code(), Some(141), "{e}");
    assert_eq!(std::fs::metadata(&proof).unwrap().len(), 192, "{e}");
    // Its record: the wall seconds of a proof verify_seal accepted.
    let recorded = proofline_records::read_file(&records).unwrap();
    assert_eq!(recorded.len(), 1, "{e}");
    assert_eq!(recorded[0].table.as_deref(), Some("c2"));
    assert!(
        recorded[0]
            .case
            .starts_with("2.0 KiB PoRep C2, 1 partition, cpu backend, pw 1"),
        "{}",
        recorded[0].case
    );
    assert!(recorded[0].ours > 0.0 && recorded[0].unit == "s");
    // The C1 output with its seed changed: its vanilla proofs no longer prove its statement.
    // The C1 is blamed (not the parameters, which proved the original), and nothing is written.
    let mut altered: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c1.json")).unwrap()).unwrap();
    let first = altered["seed"][0].as_u64().unwrap();
    altered["seed"][0] = serde_json::json!(first ^ 1);
    let altered_path = out.join("c1-altered.json");
    std::fs::write(&altered_path, serde_json::to_vec(&altered).unwrap()).unwrap();
    let rejected = dir.path().join("rejected.bin");
    let o = Command::new(env!("CARGO_BIN_EXE_proofline"))
        .arg("c2")
        .arg("--c1")
        .arg(&altered_path)
        .arg("--out")
        .arg(&rejected)
        .arg("--record")
        .arg(&records)
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("the C1 file was altered or damaged"), "{e}");
    assert!(!e.contains("parameter file"), "{e}");
    assert!(!rejected.exists(), "a rejected proof was written");
    // Nor is a failed run recorded.
    assert_eq!(proofline_records::read_file(&records).unwrap().len(), 1);
}

#[test]
fn window_post_sweep_point_proves_real_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let o = proofline(
        &[
            "sweep",
            "--circuit",
            "window-post-2k",
            "--pw",
            "1",
            "--jobs",
            "2",
            "--out",
            out.to_str().unwrap(),
        ],
        &dir.path().join("params"),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let point = &results["points"][0];
    assert_eq!(point["status"], "ok", "{point}");
    assert_eq!(point["proofs_verified"], 2);
    assert_eq!(point["partitions_verified"], 2);
    assert_eq!(results["config"]["circuit"], "window-post-2k");
    assert_eq!(results["config"]["partitions"], 1);
}

/// A test size (16 KiB, the 32 GiB tree shape) seals with a PoRep id: the raw C1 output and
/// sector.json, no wrapper (filecoin-proofs-api has none for it). `c2` reads its size, variant
/// and PoRep id from sector.json and builds its circuits: a budget too small for one of its
/// partitions is the first thing to stop it, before any parameters.
#[test]
fn a_test_size_seals_and_c2_reads_it_from_sector_json() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    let out = dir.path().join("c1");
    let porep_id = "ab".repeat(32);
    let o = proofline(
        &[
            "filecoin",
            "seal",
            "--sector-size",
            "16KiB",
            "--porep-id",
            &porep_id,
            "--out",
            out.to_str().unwrap(),
        ],
        &cache,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("8-8-0"), "{said}");
    assert!(out.join("c1-raw.json").exists() && !out.join("c1.json").exists());
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("sector.json")).unwrap()).unwrap();
    assert_eq!(info["sector_size"], 16384);
    assert_eq!(info["variant"], "v1_1");
    assert_eq!(info["porep_id"], porep_id.as_str());
    assert!(info.get("registered_proof").is_none());

    let raw = out.join("c1-raw.json");
    let o = proofline(
        &["c2", "--c1", raw.to_str().unwrap(), "--mem-budget", "1MiB"],
        &cache,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot hold one partition of this sector"),
        "{}",
        stderr(&o)
    );
    assert!(!cache.exists() || std::fs::read_dir(&cache).unwrap().next().is_none());
    // Its twin: another sector size given for the same file is not its shape.
    let o = proofline(
        &["c2", "--c1", raw.to_str().unwrap(), "--sector-size", "2KiB"],
        &cache,
    );
    assert!(!o.status.success());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a C1 output"), "{}", stderr(&o));
}

/// `c2 --plan` prints a 2 KiB C2's plan from the circuit's counts and fits it to --ram; a RAM
/// too small for one partition is an error saying so. `snap-prove` and `filecoin snap` refuse
/// what they cannot use, naming it, without panicking.
#[test]
fn plan_and_snap_commands_refuse_what_they_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    let o = proofline(
        &["c2", "--plan", "--sector-size", "2KiB", "--ram", "64GiB"],
        &cache,
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    for expect in [
        "1 partition of",
        "abc",
        "density",
        "is not in the cache",
        "--pw 1",
    ] {
        assert!(said.contains(expect), "{expect}: {said}");
    }
    let o = proofline(
        &["c2", "--plan", "--sector-size", "2KiB", "--ram", "100MiB"],
        &cache,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("does not hold"), "{}", stderr(&o));
    let o = proofline(&["c2", "--plan"], &cache);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--sector-size"), "{}", stderr(&o));

    let o = proofline(
        &[
            "snap-prove",
            "--dir",
            dir.path().join("none").to_str().unwrap(),
        ],
        &cache,
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("snap.json"), "{}", stderr(&o));
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("snap.json"),
        r#"{"sector_size": 2048, "comm_r_old": "zz", "comm_r_new": "00", "comm_d_new": "00"}"#,
    )
    .unwrap();
    let o = proofline(&["snap-prove", "--dir", bad.to_str().unwrap()], &cache);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("vanilla-0.bin"), "{}", stderr(&o));
    std::fs::write(bad.join("vanilla-0.bin"), b"not a proof").unwrap();
    let o = proofline(&["snap-prove", "--dir", bad.to_str().unwrap()], &cache);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("comm_r_old"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    let o = proofline(
        &[
            "filecoin",
            "snap",
            "--sector-size",
            "1GiB",
            "--out",
            dir.path().join("s").to_str().unwrap(),
        ],
        &cache,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("SnapDeals has no 1GiB"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("s").exists());
}
