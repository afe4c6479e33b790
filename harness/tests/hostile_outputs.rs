//! The output side of the command line under hostile use, through the real binary: an output
//! never replaces an input or something that is not a regular file, output folders are claimed
//! by one run, a full disk leaves no partial file under a final name and still shows the
//! results, printing never panics, a child's panic keeps its reason, a signal during parameter
//! generation ends the run at once without partial files, and every check runs before the slow
//! work.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn proofline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proofline"))
}

/// The options of a tiny dense run whose parameters live in `params`.
fn tiny(params: &Path) -> Vec<String> {
    [
        "--log2-constraints",
        "8",
        "--partitions",
        "3",
        "--jobs",
        "2",
        "--params-dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([params.display().to_string()])
    .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs a tiny `prove` once, so that `params` holds every file the tiny workload reads.
fn warm(params: &Path) {
    let o = proofline()
        .arg("prove")
        .args(tiny(params))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Files in `dir` (recursively) whose names end in `.tmp`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                found.extend(temporaries(&p));
            } else if p.to_string_lossy().ends_with(".tmp") {
                found.push(p);
            }
        }
    }
    found
}

/// Caps the size of any file the command writes at `bytes`, as a nearly full disk would: a
/// write past it fails with EFBIG (SIGXFSZ ignored, so the write returns the error).
fn file_size_limit(cmd: &mut Command, bytes: u64) {
    // SAFETY: setrlimit and signal are async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_fifo())
        .unwrap_or(false)
}

#[test]
fn an_output_never_replaces_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let c1 = dir.path().join("c1.json");
    std::fs::write(&c1, b"{\"a C1 output\": true}").unwrap();
    let before = std::fs::read(&c1).unwrap();
    // The same path, and another name for the same file.
    let link = dir.path().join("proof.bin");
    std::fs::hard_link(&c1, &link).unwrap();
    for out in [&c1, &link] {
        let o = proofline()
            .args(["c2", "--c1"])
            .arg(&c1)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("is the input"), "{e}");
        assert_eq!(std::fs::read(&c1).unwrap(), before);
    }
    // Twin: another path is checked no further than the C1 output itself (which is no C1).
    let o = proofline()
        .args(["c2", "--c1"])
        .arg(&c1)
        .arg("--out")
        .arg(dir.path().join("other.bin"))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(
        !e.contains("is the input") && e.contains("not a C1 output"),
        "{e}"
    );
}

#[test]
fn an_output_never_replaces_what_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let c1 = dir.path().join("c1.json");
    std::fs::write(&c1, b"{}").unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let o = proofline()
        .args(["c2", "--c1"])
        .arg(&c1)
        .arg("--out")
        .arg(&fifo)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("not a regular file"), "{e}");
    assert!(is_fifo(&fifo), "the FIFO was replaced");
    // `--device-trace` into a FIFO, a folder, or /proc: refused before any parameter is made.
    for (target, says) in [
        (fifo.clone(), "not a regular file"),
        (dir.path().to_path_buf(), "is a folder"),
        (PathBuf::from("/proc/self/trace.csv"), "cannot write in"),
    ] {
        let o = proofline()
            .args(["prove", "--backend", "opencl", "--device-trace"])
            .arg(&target)
            .args(tiny(&params))
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains(says), "{target:?}: {e}");
        assert!(!params.exists(), "parameters were made before the check");
    }
    assert!(is_fifo(&fifo));
}

#[test]
fn an_output_path_is_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let c1 = dir.path().join("c1.json");
    std::fs::write(&c1, b"{}").unwrap();
    // The C1 file is no C1 output: the --out check must come first, or this says so instead.
    for (out, says) in [
        ("/proc/self/proof.bin", "cannot write in /proc/self"),
        ("/no/such/folder/proof.bin", "does not exist"),
    ] {
        let o = proofline()
            .args(["c2", "--c1"])
            .arg(&c1)
            .args(["--out", out])
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains(says) && !e.contains("not a C1 output"), "{e}");
    }
    // A sweep folder whose name is not UTF-8 is refused at once (results record it as text).
    let bad = dir
        .path()
        .join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"out-\xff"));
    let params = dir.path().join("params");
    let o = proofline()
        .arg("sweep")
        .arg("--out")
        .arg(&bad)
        .args(tiny(&params))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("not valid UTF-8"), "{e}");
    assert!(!params.exists() && !bad.exists());
}

#[test]
fn two_sweeps_never_share_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    warm(&params);
    let out = dir.path().join("dup");
    let start = || {
        proofline()
            .arg("sweep")
            .args(["--pw", "1"])
            .arg("--out")
            .arg(&out)
            .args(tiny(&params))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "a: {}\nb: {}", stderr(&a), stderr(&b));
    let loser = if a.status.success() { &b } else { &a };
    let e = stderr(loser);
    assert!(
        e.contains("another run is writing there") || e.contains("is not empty"),
        "{e}"
    );
    assert!(out.join("results.json").exists());
    assert!(!out.join(harness::outputs::LOCK_NAME).exists());
    // A lock left by a run that is still writing names it, and the folder is refused.
    let held = dir.path().join("held");
    std::fs::create_dir(&held).unwrap();
    std::fs::write(held.join(harness::outputs::LOCK_NAME), "4242\n").unwrap();
    let o = proofline()
        .arg("sweep")
        .arg("--out")
        .arg(&held)
        .args(tiny(&params))
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!o.status.success() && e.contains("4242"), "{e}");
}

#[test]
fn a_full_disk_leaves_no_partial_file_and_the_results_are_still_shown() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    warm(&params);
    // A sweep whose files fit under the cap but whose report.svg (tens of KiB) does not.
    let out = dir.path().join("sweep");
    let mut cmd = proofline();
    cmd.arg("sweep")
        .args(["--pw", "1"])
        .arg("--out")
        .arg(&out)
        .args(tiny(&params));
    file_size_limit(&mut cmd, 16 << 10);
    let o = cmd.output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("report.svg"), "the error names the file: {e}");
    assert!(
        stdout(&o).contains("recommendation:"),
        "the table is printed: {}",
        stdout(&o)
    );
    assert!(!out.join("report.svg").exists(), "a partial report.svg");
    assert!(out.join("results.json").exists());
    assert_eq!(temporaries(&out), Vec::<PathBuf>::new());
    // `report` into the same cap: the same, and its twin without the cap draws it.
    let mut cmd = proofline();
    cmd.arg("report").arg(&out);
    file_size_limit(&mut cmd, 16 << 10);
    let o = cmd.output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("report.svg"), "{e}");
    assert!(!out.join("report.svg").exists());
    assert_eq!(temporaries(&out), Vec::<PathBuf>::new());
    let o = proofline().arg("report").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata(out.join("report.svg")).unwrap().len() > 16 << 10);
}

#[test]
fn printing_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    warm(&params);
    // Standard output closed after its first line: the proof is still made and checked, and the
    // command ends as a closed pipe's writer does.
    let mut child = proofline()
        .arg("prove")
        .args(tiny(&params))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.starts_with("workload"), "{first}");
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(o.status.code(), Some(141), "{e}");
    // A full standard output is an error that says so.
    let o = proofline()
        .arg("prove")
        .args(tiny(&params))
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("writing to standard output"), "{e}");
    // A full standard error: the sweep still succeeds and writes its results.
    let out = dir.path().join("sweep");
    let o = proofline()
        .arg("sweep")
        .args(["--pw", "1"])
        .arg("--out")
        .arg(&out)
        .args(tiny(&params))
        .stderr(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(out.join("results.json").exists());
    // Twin: with a reader, everything is printed and the status is 0.
    let o = proofline()
        .arg("prove")
        .args(tiny(&params))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(stdout(&o).contains("verified: 2/2 jobs"), "{}", stdout(&o));
}

#[test]
fn a_childs_panic_keeps_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    warm(&params);
    let out = dir.path().join("sweep");
    // Hardly anything can be written (the lock's few bytes; not the child's log): the reason
    // comes through the pipe.
    std::fs::create_dir(&out).unwrap();
    let mut cmd = proofline();
    cmd.arg("sweep")
        .args(["--pw", "1"])
        .arg("--out")
        .arg(&out)
        .args(tiny(&params))
        .env(harness::sweep::PANIC_HOOK_ENV, "1");
    file_size_limit(&mut cmd, 64);
    let o = cmd.output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("exited with status 101: panicked: a point asked to panic"),
        "{e}"
    );
    // Twin: a point that fails with an error keeps that error.
    let o = proofline()
        .arg("sweep")
        .args(["--pw", "1"])
        .arg("--out")
        .arg(dir.path().join("other"))
        .args(tiny(&params))
        .env(harness::sweep::PANIC_HOOK_ENV, "2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_signal_during_parameter_generation_ends_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let out = dir.path().join("sweep");
    // Parameters that take far longer to make than the test waits.
    let mut child = proofline()
        .arg("sweep")
        .args(["--pw", "1", "--log2-constraints", "20"])
        .arg("--out")
        .arg(&out)
        .arg("--params-dir")
        .arg(&params)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the generation's progress on standard error.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !line.contains("points to compute") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0,
            "no generation"
        );
        assert!(Instant::now() < deadline, "no generation started");
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("still running 20 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {rest}");
    assert!(rest.contains("interrupted (SIGINT)"), "{rest}");
    assert_eq!(temporaries(&params), Vec::<PathBuf>::new());
}

#[test]
fn a_run_of_unbounded_size_is_refused_at_once() {
    let o = proofline()
        .args(["prove", "--partitions", "4096", "--jobs", "4096"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("at most 4096"), "{e}");
    // Twin: the bound itself passes that check and meets the next one (nothing runs here).
    let o = proofline()
        .args(["prove", "--partitions", "64", "--jobs", "64"])
        .args(["--log2-constraints", "3"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(
        !e.contains("at most 4096") && e.contains("--log2-constraints"),
        "{e}"
    );
}
