//! The sweep runner: one child process per worker count, so that each point's peak RSS is its
//! own; a point whose child dies is recorded with its status and the sweep goes on.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::config::RunConfig;
use crate::outputs::{claim_folder, reason, write_file, FolderClaim};
use crate::report::model::{PointResult, PointStatus};
use crate::report::{
    points_csv, read_timelines, recommend, report_title, table, utc_now, write_svg, Host,
    SweepConfig, SweepResults, SCHEMA,
};
use crate::signals::{interrupted, signal_name, Cooperative};
use prover_core::files::{read_input, InputKind};

/// The sweep's output folder, claimed for this run (see [`crate::outputs::claim_folder`]):
/// `--out` if given (new or empty: a sweep never mixes its files with another's), else a new
/// folder under `target/sweep/` named by the UTC time, with a suffix if a sweep started in the
/// same second took that name.
pub fn output_folder(out: Option<&Path>) -> Result<FolderClaim, String> {
    if let Some(out) = out {
        return claim_folder("--out", out, true);
    }
    let base = PathBuf::from("target/sweep");
    prover_core::files::create_dir_all(&base).map_err(|e| e.to_string())?;
    let stamp = utc_now().1;
    for n in 1..1000 {
        let name = if n == 1 {
            stamp.clone()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = base.join(name);
        // create_dir fails if the folder exists: two sweeps never share one.
        match std::fs::create_dir(&dir) {
            Ok(()) => return claim_folder("--out", &dir, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {}", dir.display(), reason(&e))),
        }
    }
    Err(format!("no free folder name under {}", base.display()))
}

/// Test hook: the child of this worker count panics as it starts, so that tests can check that
/// a child's panic keeps its reason.
pub const PANIC_HOOK_ENV: &str = "PROOFLINE_SWEEP_PANIC_PW";

/// Test hook: the child of this worker count kills itself with SIGKILL once its jobs are
/// submitted, so that tests can check how a dead point is recorded.
pub const KILL_HOOK_ENV: &str = "PROOFLINE_SWEEP_KILL_PW";

struct Exit {
    code: Option<i32>,
    signal: Option<i32>,
    max_rss_bytes: Option<u64>,
}

/// Waits for `pid` with `wait4`, which also gives the child's peak RSS (`ru_maxrss`), even when
/// it was killed.
fn wait4(pid: u32) -> std::io::Result<Exit> {
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if r == pid as libc::pid_t {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
        if interrupted().is_some() {
            // Stop the child; the loop then collects it.
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
    }
    let exited = libc::WIFEXITED(status);
    Ok(Exit {
        code: exited.then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        max_rss_bytes: (usage.ru_maxrss > 0).then(|| usage.ru_maxrss as u64 * 1024),
    })
}

/// A child's standard error: copied to its log file as it comes (a log that cannot be written,
/// on a full disk, is given up on) and its last lines kept, so that the reason a child failed
/// is known even when its log is lost.
fn keep_stderr(stderr: impl std::io::Read, mut log: Option<std::fs::File>) -> Vec<String> {
    use std::io::Write;
    const KEEP: usize = 40;
    let mut tail = std::collections::VecDeque::with_capacity(KEEP);
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
        if let Some(f) = &mut log {
            if f.write_all(&line).is_err() {
                log = None;
            }
        }
        if tail.len() == KEEP {
            tail.pop_front();
        }
        tail.push_back(String::from_utf8_lossy(&line).trim_end().to_string());
        line.clear();
    }
    tail.into()
}

/// Why a child failed, from the last lines of its standard error: a panic's message and place,
/// else its last `error:` line, else its last line.
fn failure_reason(tail: &[String]) -> Option<String> {
    let panic = tail.iter().rposition(|l| l.contains("panicked at"));
    if let Some(i) = panic {
        let place = tail[i]
            .split("panicked at")
            .nth(1)
            .map(|p| p.trim().trim_end_matches(':').to_string())
            .unwrap_or_default();
        let message = tail
            .get(i + 1)
            .filter(|m| !m.trim().is_empty() && !m.starts_with("note:"))
            .cloned()
            .unwrap_or_else(|| "no message".into());
        return Some(format!("panicked: {message} (at {place})"));
    }
    tail.iter()
        .rev()
        .find(|l| l.starts_with("error:"))
        .or_else(|| tail.iter().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_string())
}

/// Runs one point in a child process and records what became of it.
fn run_child(exe: &Path, cfg: &RunConfig, pw: usize, out: &Path, bar: &ProgressBar) -> PointResult {
    let result_path = out.join(format!("point-pw{pw}.json"));
    let timeline_path = out.join(format!("timeline-pw{pw}.csv"));
    let log_path = out.join(format!("point-pw{pw}.log"));
    let failed = |msg: String| {
        let mut p = PointResult::empty(pw, PointStatus::Failed);
        p.error = Some(msg);
        p
    };
    // Without a log (a full disk) the point still runs; its reason is kept from the pipe.
    let log = std::fs::File::create(&log_path).ok();
    let mut cmd = Command::new(exe);
    cmd.arg("point")
        .arg("--pw")
        .arg(pw.to_string())
        .arg("--result")
        .arg(&result_path)
        .arg("--timeline")
        .arg(&timeline_path)
        .arg("--config")
        .arg(serde_json::to_string(cfg).expect("a run configuration serializes"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("starting {}: {e}", exe.display())),
    };
    // Progress lines from the child: "progress <done> <total>".
    let stdout = child.stdout.take().expect("piped");
    let bar2 = bar.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let mut it = line.split_whitespace();
            if let (Some("progress"), Some(d), Some(t)) = (it.next(), it.next(), it.next()) {
                if let (Ok(d), Ok(t)) = (d.parse::<u64>(), t.parse::<u64>()) {
                    bar2.set_length(t);
                    bar2.set_position(d);
                }
            }
        }
    });
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || keep_stderr(stderr, log));
    let exit = wait4(child.id());
    let _ = reader.join();
    let tail = errors.join().unwrap_or_default();
    let exit = match exit {
        Ok(e) => e,
        Err(e) => return failed(format!("waiting for the child: {e}")),
    };
    let mut point = match (exit.code, exit.signal) {
        (Some(0), _) => match read_input(&result_path, InputKind::Document)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                serde_json::from_slice::<PointResult>(&s)
                    .map_err(|e| format!("reading {}: {e}", result_path.display()))
            }) {
            Ok(p) => p,
            Err(e) => failed(e),
        },
        (_, Some(sig)) => {
            let mut p = PointResult::empty(pw, PointStatus::Killed);
            p.signal = Some(sig);
            p.error = Some(match interrupted() {
                Some(by) => format!("interrupted by {}: the point was stopped", signal_name(by)),
                None => format!("killed by {}", signal_name(sig)),
            });
            p
        }
        (code, None) => {
            let status = code.map_or("?".into(), |c| c.to_string());
            failed(match failure_reason(&tail) {
                Some(why) => format!("exited with status {status}: {why}"),
                None => format!("exited with status {status}, saying nothing"),
            })
        }
    };
    // The kernel's figure for the whole child, also known when it was killed.
    if let Some(rss) = exit.max_rss_bytes {
        point.peak_rss_bytes = Some(point.peak_rss_bytes.map_or(rss, |r| r.max(rss)));
    }
    point
}

/// Runs the sweep and writes its outputs under `cfg.out`.
pub fn run_sweep(cfg: &SweepConfig, exe: &Path) -> Result<SweepOutcome, String> {
    cfg.run.validate()?;
    if cfg.pw.is_empty() {
        return Err("--pw gives no worker count".into());
    }
    let (started_at, _) = utc_now();
    // Parameters once, here, with a progress bar: every child then loads them from the cache.
    // A signal meanwhile ends the sweep at once (its partial parameter file removed).
    crate::point::load_parameters(&cfg.run, true).map_err(|e| format!("{e:#}"))?;
    // From here a first signal stops the running child, and the sweep writes what it has.
    let cooperative = Cooperative::start();

    let multi = MultiProgress::new();
    let overall = multi.add(ProgressBar::new(cfg.pw.len() as u64));
    overall.set_style(
        ProgressStyle::with_template(
            "sweep  [{elapsed_precise}] {bar:30} {pos}/{len} points {msg}",
        )
        .expect("a valid template"),
    );
    let mut points = Vec::with_capacity(cfg.pw.len());
    for &pw in &cfg.pw {
        if interrupted().is_some() {
            break;
        }
        overall.set_message(format!("(pw {pw})"));
        let bar = multi.add(ProgressBar::new(0));
        bar.set_style(
            ProgressStyle::with_template(
                "pw {prefix:>4} [{elapsed_precise}] {bar:30} {pos}/{len} partitions",
            )
            .expect("a valid template"),
        );
        bar.set_prefix(pw.to_string());
        let p = run_child(exe, &cfg.run, pw, &cfg.out, &bar);
        bar.finish_and_clear();
        multi.remove(&bar);
        overall.inc(1);
        let line = format!(
            "pw {pw}: {}{}",
            p.status.name(),
            p.error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        // Off a terminal the bars are hidden and so is their println: say it on stderr.
        if multi.is_hidden() {
            crate::tell!("{line}");
        } else {
            let _ = multi.println(line);
        }
        points.push(p);
    }
    overall.finish_and_clear();
    drop(cooperative);

    let mut recommendation = recommend(&points, cfg.ram_limit);
    recommendation.bottleneck = points
        .iter()
        .find(|p| Some(p.pw) == recommendation.pw)
        .and_then(|p| crate::report::bottleneck::bottleneck(p, &cfg.run));
    let results = SweepResults {
        schema: SCHEMA.to_string(),
        git_rev: env!("PROOFLINE_GIT_REV").to_string(),
        host: Host::detect(),
        started_at,
        config: cfg.clone(),
        points,
        recommendation,
    };
    let written = write_outputs(&cfg.out, &cfg.run, &results);
    Ok(SweepOutcome { results, written })
}

/// A finished sweep: its results, and whether its files were all written.
pub struct SweepOutcome {
    /// What was measured.
    pub results: SweepResults,
    /// `Err` names each file that could not be written (a full disk): the results are then
    /// only in the printed table.
    pub written: Result<(), String>,
}

/// Writes results.json, results.csv and report.svg into `out`, each through a temporary file; a
/// file that fails does not stop the others.
fn write_outputs(out: &Path, run: &RunConfig, results: &SweepResults) -> Result<(), String> {
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    let timelines = read_timelines(out, &results.points);
    let failures: Vec<String> = [
        write_file(&out.join("results.json"), json.as_bytes()),
        write_file(
            &out.join("results.csv"),
            points_csv(&results.points).as_bytes(),
        ),
        write_svg(
            &out.join("report.svg"),
            &results.points,
            &timelines,
            &report_title(run),
        ),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The summary printed at the end of a sweep.
pub fn summary(results: &SweepResults) -> String {
    let mut s = table(&results.points);
    s.push_str(&format!(
        "recommendation: {}\n",
        match results.recommendation.pw {
            Some(pw) => format!("pw {pw}: {}", results.recommendation.reason),
            None => format!("none: {}", results.recommendation.reason),
        }
    ));
    if let Some(b) = &results.recommendation.bottleneck {
        s.push_str(&format!("bound at that pw: {b}\n"));
    }
    s.push_str(&format!("results: {}\n", results.config.out.display()));
    s
}
