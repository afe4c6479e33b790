//! The sweep runner: one child process per worker count, so that each point's peak RSS is its
//! own; a point whose child dies is recorded with its status and the sweep goes on.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::config::RunConfig;
use crate::point::{PointResult, PointStatus};
use crate::report::{
    points_csv, read_timelines, recommend, report_title, table, utc_now, write_svg, Host,
    SweepConfig, SweepResults, SCHEMA,
};

/// Set by SIGINT or SIGTERM: the sweep stops its running child and writes what it has.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT and SIGTERM (without `SA_RESTART`, so that a wait for a child returns).
fn catch_interruptions() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic; sigaction gets valid pointers.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Whether the sweep was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Writes `bytes` to `path` through a temporary file renamed into place: a full disk or a kill
/// never leaves a half-written file under the real name.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    prover_core::params::write_atomically(path, |w| {
        std::io::Write::write_all(w, bytes)
            .map_err(|e| prover_core::Error::io(format!("writing {}", path.display()), e))
    })
    .map_err(|e| e.to_string())
}

/// The sweep's output folder: `--out` if given (new or empty: a sweep never mixes its files
/// with another's), else a new folder under `target/sweep/` named by the UTC time, with a
/// suffix if a sweep started in the same second took that name.
pub fn output_folder(out: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(out) = out {
        if out.exists() {
            let mut entries =
                std::fs::read_dir(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
            if entries.next().is_some() {
                return Err(format!(
                    "--out {} is not empty: a sweep writes its own results.json, timelines and \
                     report there and would mix them with what is there; give a new or empty \
                     folder",
                    out.display()
                ));
            }
        } else {
            std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
        }
        return Ok(out.to_path_buf());
    }
    let base = PathBuf::from("target/sweep");
    std::fs::create_dir_all(&base).map_err(|e| format!("creating {}: {e}", base.display()))?;
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
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
    }
    Err(format!("no free folder name under {}", base.display()))
}

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
        if interrupted() {
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

fn last_line(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().and_then(|s| {
        s.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    })
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
    let log = match std::fs::File::create(&log_path) {
        Ok(f) => f,
        Err(e) => return failed(format!("creating {}: {e}", log_path.display())),
    };
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
        .stderr(Stdio::from(log));
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
    let exit = wait4(child.id());
    let _ = reader.join();
    let exit = match exit {
        Ok(e) => e,
        Err(e) => return failed(format!("waiting for the child: {e}")),
    };
    let mut point = match (exit.code, exit.signal) {
        (Some(0), _) => match std::fs::read_to_string(&result_path)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<PointResult>(&s).map_err(|e| e.to_string()))
        {
            Ok(p) => p,
            Err(e) => failed(format!("reading {}: {e}", result_path.display())),
        },
        (_, Some(sig)) => {
            let mut p = PointResult::empty(pw, PointStatus::Killed);
            p.signal = Some(sig);
            p.error = Some(if interrupted() {
                format!("interrupted (signal {sig})")
            } else {
                format!("killed by signal {sig}")
            });
            p
        }
        (code, None) => failed(last_line(&log_path).unwrap_or_else(|| {
            format!(
                "exited with status {}",
                code.map_or("?".into(), |c| c.to_string())
            )
        })),
    };
    // The kernel's figure for the whole child, also known when it was killed.
    if let Some(rss) = exit.max_rss_bytes {
        point.peak_rss_bytes = Some(point.peak_rss_bytes.map_or(rss, |r| r.max(rss)));
    }
    point
}

/// Runs the sweep and writes its outputs under `cfg.out`.
pub fn run_sweep(cfg: &SweepConfig, exe: &Path) -> Result<SweepResults, String> {
    cfg.run.validate()?;
    if cfg.pw.is_empty() {
        return Err("--pw gives no worker count".into());
    }
    let (started_at, _) = utc_now();
    catch_interruptions();
    // Parameters once, here, with a progress bar: every child then loads them from the cache.
    crate::point::load_parameters(&cfg.run, true).map_err(|e| format!("{e:#}"))?;

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
        if interrupted() {
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
            eprintln!("{line}");
        } else {
            let _ = multi.println(line);
        }
        points.push(p);
    }
    overall.finish_and_clear();

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
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let p = cfg.out.join(name);
        write_file(&p, text.as_bytes())?;
        Ok(p)
    };
    write(
        "results.json",
        &serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?,
    )?;
    write("results.csv", &points_csv(&results.points))?;
    let timelines = read_timelines(&cfg.out, &results.points);
    let title = report_title(&cfg.run);
    write_svg(
        &cfg.out.join("report.svg"),
        &results.points,
        &timelines,
        &title,
    )?;
    Ok(results)
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
