//! The command line under hostile input, through the real binary: a FIFO, a device or an endless
//! file where a command reads a file is refused by name (or, for an optional file, left out with
//! a warning), never waited on or read forever; and each message says its reason once, in words.
//! Every run has a deadline, so a command that waits on its input fails the test instead of
//! hanging it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a run may take: each here takes well under a second on 2 cores.
const DEADLINE: Duration = Duration::from_secs(60);

/// A finished run of the binary.
struct Run {
    success: bool,
    stderr: String,
}

/// Runs `proofline args` with `env`, its output in files under `dir` (a pipe that nobody
/// reads could block it), killed and failed past [`DEADLINE`]. `memory` caps its address
/// space, for a run that could otherwise read without end.
fn run_with(dir: &Path, args: &[&OsStr], env: &[(&str, &str)], memory: Option<u64>) -> Run {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let stem = dir.join(format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let out_path = stem.with_extension("out");
    let err_path = stem.with_extension("err");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proofline"));
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    if let Some(bytes) = memory {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches only the child.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "proofline {:?} did not finish in {} s: it waits on its input; stderr:\n{}",
                args,
                DEADLINE.as_secs(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        success: status.success(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

fn run(dir: &Path, args: &[&OsStr]) -> Run {
    run_with(dir, args, &[], None)
}

fn os<S: AsRef<OsStr> + ?Sized>(s: &S) -> &OsStr {
    s.as_ref()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// `prove` of the smallest dense workload, its parameters under `params`; `pce` picks the
/// pre-compiled synthesis (its matrices cached beside the parameters).
fn prove(dir: &Path, params: &Path, pce: bool) -> Run {
    let mut args = vec![
        os("prove"),
        os("--log2-constraints"),
        os("8"),
        os("--partitions"),
        os("1"),
        os("--jobs"),
        os("1"),
        os("--pw"),
        os("1"),
        os("--params-dir"),
        params.as_os_str(),
    ];
    if pce {
        args.extend([os("--synthesis"), os("pce")]);
    }
    run(dir, &args)
}

/// The one file under `params` whose name ends with `suffix`.
fn file_ending(params: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(params)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

/// A tiny sweep's folder (one point), with its results.json and timeline.
fn sweep(dir: &Path) -> PathBuf {
    let out = dir.join("sweep");
    let r = run(
        dir,
        &[
            os("sweep"),
            os("--pw"),
            os("1"),
            os("--log2-constraints"),
            os("8"),
            os("--partitions"),
            os("1"),
            os("--jobs"),
            os("1"),
            os("--out"),
            out.as_os_str(),
            os("--params-dir"),
            dir.join("params").as_os_str(),
        ],
    );
    assert!(r.success, "{}", r.stderr);
    assert!(out.join("results.json").is_file() && out.join("timeline-pw1.csv").is_file());
    out
}

#[test]
fn a_fifo_as_the_pce_file_beside_real_parameters_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let r = prove(dir.path(), &params, true);
    assert!(r.success, "{}", r.stderr);
    let pce = file_ending(&params, ".pce");
    std::fs::remove_file(&pce).unwrap();
    mkfifo(&pce);
    let r = prove(dir.path(), &params, true);
    assert!(!r.success);
    assert!(
        r.stderr.contains(&format!(
            "error: opening {}: a FIFO, not a regular file",
            pce.display()
        )),
        "{}",
        r.stderr
    );
    // Twin: with the FIFO gone, the matrices are recorded again and the proof is made.
    std::fs::remove_file(&pce).unwrap();
    let r = prove(dir.path(), &params, true);
    assert!(r.success, "{}", r.stderr);
}

/// `report` of a sweep folder whose results.json is `make`'s; its address space is capped, so
/// that a run reading without end fails instead of filling the machine's memory.
fn report_of(make: impl FnOnce(&Path)) -> (PathBuf, Run) {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("sweep");
    std::fs::create_dir(&folder).unwrap();
    let results = folder.join("results.json");
    make(&results);
    let r = run_with(
        dir.path(),
        &[os("report"), folder.as_os_str()],
        &[],
        Some(2 << 30),
    );
    (results, r)
}

#[test]
fn report_refuses_a_fifo_as_results_json() {
    let (results, r) = report_of(mkfifo);
    assert!(!r.success);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: reading {}: a FIFO, not a regular file",
            results.display()
        )
    );
}

#[test]
fn report_refuses_an_endless_or_oversized_results_json() {
    // An endless file: a link to /dev/zero, and one to /dev/urandom.
    for device in ["/dev/zero", "/dev/urandom"] {
        let (results, r) = report_of(|p| std::os::unix::fs::symlink(device, p).unwrap());
        assert!(!r.success);
        assert_eq!(
            r.stderr.trim_end(),
            format!(
                "error: reading {}: a character device, not a regular file",
                results.display()
            )
        );
    }
    // A regular file past what a JSON document may be (sparse: nothing is written or read).
    let (results, r) = report_of(|p| {
        std::fs::File::create(p)
            .unwrap()
            .set_len(300 << 20)
            .unwrap()
    });
    assert!(!r.success);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: reading {}: larger than 256.0 MiB, the most a JSON, CSV or log file may have",
            results.display()
        )
    );
}

#[test]
fn report_leaves_out_a_fifo_timeline_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = sweep(dir.path());
    let timeline = out.join("timeline-pw1.csv");
    std::fs::remove_file(&timeline).unwrap();
    mkfifo(&timeline);
    let r = run(dir.path(), &[os("report"), out.as_os_str()]);
    assert!(r.success, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "warning: reading {}: a FIFO, not a regular file; the report is drawn without this \
             timeline",
            timeline.display()
        )),
        "{}",
        r.stderr
    );
    assert!(out.join("report.svg").is_file());
    // Twin: a timeline that is simply missing (a failed point wrote none) is no warning.
    std::fs::remove_file(&timeline).unwrap();
    let r = run(dir.path(), &[os("report"), out.as_os_str()]);
    assert!(r.success, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[test]
fn a_reason_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("c1.json");
    mkfifo(&fifo);
    let cache = dir.path().join("fil-params");
    let r = run_with(
        dir.path(),
        &[os("c2"), os("--c1"), fifo.as_os_str()],
        &[("FIL_PROOFS_PARAMETER_CACHE", cache.to_str().unwrap())],
        None,
    );
    assert!(!r.success);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "error: reading {}: a FIFO, not a regular file",
            fifo.display()
        )
    );
    assert_eq!(r.stderr.matches("not a regular file").count(), 1);
}

#[test]
fn a_symbolic_link_loop_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("loop");
    std::os::unix::fs::symlink("loop", &params).unwrap();
    let r = prove(dir.path(), &params, false);
    assert!(!r.success);
    assert_eq!(
        r.stderr.trim_end().lines().last().unwrap_or_default(),
        format!(
            "error: creating {}: a loop of symbolic links",
            params.display()
        )
    );
    assert!(!r.stderr.contains("File exists"), "{}", r.stderr);
}

#[test]
fn a_short_pce_file_says_both_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    assert!(prove(dir.path(), &params, true).success);
    let pce = file_ending(&params, ".pce");
    let len = std::fs::metadata(&pce).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pce)
        .unwrap()
        .set_len(len - 8)
        .unwrap();
    let r = prove(dir.path(), &params, true);
    assert!(!r.success);
    assert!(
        r.stderr.contains(&format!(
            "{}: {} bytes, but its header describes {len} bytes",
            pce.display(),
            len - 8
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("Some("), "{}", r.stderr);
}

#[test]
fn a_damaged_parameter_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    assert!(prove(dir.path(), &params, false).success);
    let file = file_ending(&params, ".params");
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let r = prove(dir.path(), &params, false);
    assert!(!r.success);
    let last = r.stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("error: {}: params.b_g2: ", file.display())),
        "{}",
        r.stderr
    );
    assert_eq!(last.matches(file.to_str().unwrap()).count(), 1, "{last}");
}

#[test]
fn a_malformed_ntt_pass_shape_reads_as_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    let r = run_with(
        dir.path(),
        &[
            os("prove"),
            os("--backend"),
            os("opencl"),
            os("--log2-constraints"),
            os("8"),
            os("--partitions"),
            os("1"),
            os("--jobs"),
            os("1"),
            os("--pw"),
            os("1"),
            os("--params-dir"),
            params.as_os_str(),
        ],
        &[("PROOFLINE_GPU_NTT_SHAPE", "bogus")],
        None,
    );
    assert!(!r.success);
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    if !in_ci && r.stderr.contains("could not obtain an OpenCL device") {
        eprintln!("skipped: no OpenCL platform here ({})", r.stderr.trim_end());
        return;
    }
    assert!(
        r.stderr
            .contains("error: invalid NTT pass shape: PROOFLINE_GPU_NTT_SHAPE: \"bogus\""),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("invalid the"), "{}", r.stderr);
}
