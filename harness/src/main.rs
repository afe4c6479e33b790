//! `proofline`: sweep worker counts, run one point, or prove one job.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use harness::config::{parse_mem_budget, BackendKind, MemBudget, Release, RunConfig};
use harness::point::run_point;
use harness::report::{timeline_csv, utc_now, SweepConfig};
use harness::sweep::{run_sweep, summary, KILL_HOOK_ENV};
use harness::units::{parse_pw_list, parse_size};
use harness::workloads::Workload;
use prover_core::ledger::{human_bytes, BufferKind, Stage};

#[derive(Parser)]
#[command(
    name = "proofline",
    about = "Partitioned Groth16 proving on BLS12-381, measured",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    backend: BackendKind,
    /// Workload circuit.
    #[arg(long, value_enum, default_value_t = Workload::Dense)]
    circuit: Workload,
    /// About 2^K constraints per partition.
    #[arg(long = "log2-constraints", default_value_t = 14)]
    log2_constraints: u32,
    /// Partitions per job (a C2 proof is a job of 10).
    #[arg(long, default_value_t = 10)]
    partitions: usize,
    /// Jobs (proofs) per point.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// When a partition gives its synthesis permit back.
    #[arg(long, value_enum, default_value_t = Release::AfterHandoff)]
    release: Release,
    /// Slots of the accelerator queue.
    #[arg(long = "queue-depth", default_value_t = 1)]
    queue_depth: usize,
    /// Accelerator workers per device.
    #[arg(long = "gpu-workers", default_value_t = 1)]
    gpu_workers: usize,
    /// GPUs to use (comma list; cuda/opencl only).
    #[arg(long, value_delimiter = ',')]
    gpus: Vec<usize>,
    /// OpenCL device index (opencl only).
    #[arg(long = "opencl-device")]
    opencl_device: Option<usize>,
    /// Synthesis threads (0: one per CPU).
    #[arg(long = "synthesis-threads", default_value_t = 0)]
    synthesis_threads: usize,
    /// Byte budget for the partitions' buffers: a size (512MiB, 20GiB) or `auto`.
    #[arg(long = "mem-budget", value_parser = parse_mem_budget)]
    mem_budget: Option<MemBudget>,
    /// Parameter cache folder.
    #[arg(long = "params-dir", default_value = "target/proofline-params")]
    params_dir: PathBuf,
    /// Interval of the ledger/RSS timeline, milliseconds.
    #[arg(long = "sample-ms", default_value_t = 20)]
    sample_ms: u64,
}

impl RunArgs {
    fn resolve(self) -> RunConfig {
        RunConfig {
            backend: self.backend,
            circuit: self.circuit,
            log2_constraints: self.log2_constraints,
            partitions: self.partitions,
            jobs: self.jobs,
            release: self.release,
            queue_depth: self.queue_depth,
            gpu_workers: self.gpu_workers,
            gpus: self.gpus,
            opencl_device: self.opencl_device,
            synthesis_threads: self.synthesis_threads,
            mem_budget: self.mem_budget,
            params_dir: self.params_dir,
            sample_ms: self.sample_ms,
        }
    }
}

/// Worker counts from `--pw`.
#[derive(Clone, Debug)]
struct PwList(Vec<usize>);

fn parse_pws(s: &str) -> Result<PwList, String> {
    parse_pw_list(s).map(PwList)
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the workload once per worker count, each in a fresh process; write results.json,
    /// results.csv, timeline-pw<N>.csv and report.svg; print a table and a recommendation.
    Sweep {
        /// Worker counts: 10..15 (inclusive), 10..=15, or 10,12,15.
        #[arg(long, value_parser = parse_pws, default_value = "10..15")]
        pw: PwList,
        /// RAM available to the prover, for the recommendation (e.g. 20GiB).
        #[arg(long = "ram-limit", value_parser = parse_size)]
        ram_limit: Option<u64>,
        /// Output folder (default: target/sweep/<UTC time>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Prove the workload at one worker count in this process and print the figures.
    Prove {
        /// Synthesis workers.
        #[arg(long, default_value_t = 4)]
        pw: usize,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Draw report.svg again from a sweep folder (results.json and the timelines).
    Report {
        /// The sweep's output folder.
        dir: PathBuf,
    },
    /// One point of a sweep (what the sweep runs in each child process).
    #[command(hide = true)]
    Point {
        #[arg(long)]
        pw: usize,
        /// Where to write the point's JSON.
        #[arg(long)]
        result: PathBuf,
        /// Where to write the timeline CSV.
        #[arg(long)]
        timeline: PathBuf,
        #[command(flatten)]
        run: RunArgs,
    },
}

/// Large buffers (a/b/c, witnesses) must go back to the system when freed, or the RSS of a
/// long-running prover keeps what the ledger has long released. glibc raises its mmap threshold
/// each time a mapped chunk is freed, after which buffers of that size come from the heap and
/// stay resident; a fixed threshold turns that off (docs/sweep.md has the measurement). A
/// `MALLOC_MMAP_THRESHOLD_` set by the user wins.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}

fn main() -> ExitCode {
    fix_mmap_threshold();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_peaks<'a>(
    title: &str,
    names: impl Iterator<Item = &'a str>,
    peaks: &std::collections::BTreeMap<String, harness::point::CountBytes>,
) {
    println!("{title}");
    for name in names {
        let p = peaks.get(name).copied().unwrap_or_default();
        println!("  {name:<21} {:>4} / {}", p.count, human_bytes(p.bytes));
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(&format!(": {x}"));
        src = x.source();
    }
    s
}

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Sweep {
            pw,
            ram_limit,
            out,
            run,
        } => {
            let out = out.unwrap_or_else(|| PathBuf::from("target/sweep").join(utc_now().1));
            let cfg = SweepConfig {
                run: run.resolve(),
                pw: pw.0,
                ram_limit,
                out,
            };
            let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
            let results = run_sweep(&cfg, &exe)?;
            print!("{}", summary(&results));
            Ok(())
        }
        Cmd::Report { dir } => {
            let path = harness::report::redraw(&dir)?;
            println!("{}", path.display());
            Ok(())
        }
        Cmd::Point {
            pw,
            result,
            timeline,
            run,
        } => {
            let cfg = run.resolve();
            let kill = std::env::var(KILL_HOOK_ENV)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                == Some(pw);
            let mut progress = |done: u64, total: u64| {
                println!("progress {done} {total}");
                if kill && done * 2 >= total {
                    // SAFETY: raising a signal on ourselves.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
            };
            let outcome = run_point(&cfg, pw, &mut progress).map_err(|e| chain(&e))?;
            std::fs::write(&timeline, timeline_csv(&outcome.timeline))
                .map_err(|e| format!("writing {}: {e}", timeline.display()))?;
            let json = serde_json::to_string_pretty(&outcome.result).map_err(|e| e.to_string())?;
            std::fs::write(&result, json).map_err(|e| format!("writing {}: {e}", result.display()))
        }
        Cmd::Prove { pw, run } => {
            let cfg = run.resolve();
            cfg.validate()?;
            let spec = cfg.workload();
            let (_, cached) = harness::params_cache::load_or_generate(&cfg.params_dir, &spec, true)
                .map_err(|e| chain(&e))?;
            println!(
                "workload {} (2^{} target, {} per partition), {} jobs x {} partitions, pw {pw}, release {}; parameters {}",
                cfg.circuit.name(),
                cfg.log2_constraints,
                spec.cache_key(),
                cfg.jobs,
                cfg.partitions,
                cfg.release.name(),
                if cached { "from the cache" } else { "generated" }
            );
            let o = run_point(&cfg, pw, &mut |_, _| {}).map_err(|e| chain(&e))?;
            let r = &o.result;
            let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3}"));
            println!(
                "wall {} s: {} s per proof, {} s per partition, {} proofs/min; parameters loaded in {} s",
                f(r.wall_seconds),
                f(r.seconds_per_proof),
                f(r.seconds_per_partition),
                f(r.proofs_per_minute),
                f(r.params_load_seconds)
            );
            println!(
                "stage time summed over partitions: synthesis {:.3} s, accelerator {:.3} s, finalize {:.3} s; accelerator busy {:.0}%",
                o.stats.synthesis_seconds,
                o.stats.accelerator_seconds,
                o.stats.finalize_seconds,
                100.0 * o.stats.mean_accelerator_busy()
            );
            print_peaks(
                "stage peaks (partitions / bytes):",
                Stage::ALL.iter().map(|s| s.name()),
                &r.stage_peaks,
            );
            print_peaks(
                "buffer peaks (buffers / bytes):",
                BufferKind::ALL.iter().map(|k| k.name()),
                &r.buffer_peaks,
            );
            let b = |v: Option<u64>| v.map_or("-".into(), human_bytes);
            println!(
                "memory: ledger peak {}, peak RSS {}, baseline RSS {} (parameters loaded)",
                b(r.ledger_peak_bytes),
                b(r.peak_rss_bytes),
                b(r.baseline_rss_bytes)
            );
            println!(
                "verified: {}/{} jobs, {} partitions{}",
                r.proofs_verified,
                r.proofs_verified + r.proofs_failed,
                r.partitions_verified,
                r.error
                    .as_ref()
                    .map(|e| format!("; first error: {e}"))
                    .unwrap_or_default()
            );
            if r.proofs_failed > 0 {
                return Err("some proofs failed".into());
            }
            Ok(())
        }
    }
}
