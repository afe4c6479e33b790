//! `proofline`: sweep worker counts, run one point, or prove one job.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use harness::config::{parse_mem_budget, BackendKind, MemBudget, Release, RunConfig};
use harness::filecoin::Job;
use harness::params_cache::Bar;
use harness::point::PointStatus;
use harness::point::{prepare, run_jobs, run_point, Prepared};
use harness::report::{timeline_csv, SweepConfig};
use harness::sweep::{interrupted, output_folder, run_sweep, summary, write_file, KILL_HOOK_ENV};
use harness::units::{parse_pw, parse_pw_list, parse_size};
use harness::workloads::Workload;
use harness::workloads::WorkloadCircuit;
use proofline_filecoin::{porep, Tree2KiB};
use prover_core::ledger::{human_bytes, BufferKind, Stage};
use prover_core::PointCheck;
use std::path::Path;
use std::time::Instant;

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
            // Filecoin's 2KiB circuits have one partition per sector.
            partitions: if self.circuit.is_filecoin() {
                1
            } else {
                self.partitions
            },
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

#[derive(Args)]
struct C2Args {
    /// The C1 output (JSON).
    #[arg(long)]
    c1: PathBuf,
    /// Where to write the proof (the partitions' 192-byte proofs, concatenated: the bytes
    /// verify_seal takes).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Sector size (needed for a raw C1 output; the wrapper names its registered proof).
    #[arg(long = "sector-size", value_parser = parse_size)]
    sector_size: Option<u64>,
    /// Sector number, for verify_seal (default: sector.json next to the C1 file).
    #[arg(long = "sector-id")]
    sector_id: Option<u64>,
    /// Prover (miner) id as 64 hex digits, for verify_seal (default: sector.json).
    #[arg(long = "prover-id")]
    prover_id: Option<String>,
    /// Synthesis workers.
    #[arg(long, default_value_t = 1, value_parser = parse_pw)]
    pw: usize,
    /// Check every parameter point (curve and subgroup) when reading a parameter file found on
    /// disk (slow on large files; downloaded files were checked by digest when fetched).
    #[arg(long = "check-params")]
    check_params: bool,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum FilecoinCmd {
    /// Seal a sector of random data through C1 (filecoin-proofs) and write the C1 output in both
    /// forms: c1.json (filecoin-proofs-api wrapper), c1-raw.json, and sector.json.
    Seal {
        /// 2KiB, 8MiB or 512MiB.
        #[arg(long = "sector-size", value_parser = parse_size)]
        sector_size: u64,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Replace a sector sealed there before (its C1 output and sector.json).
        #[arg(long)]
        force: bool,
    },
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
        #[arg(long, default_value_t = 4, value_parser = parse_pw)]
        pw: usize,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Prove a PoRep C2 from a C1 output (filecoin-proofs-api's JSON, as Lotus and Curio write
    /// it, or filecoin-proofs' raw JSON) through the engine; check it with verify_seal.
    C2(C2Args),
    /// Filecoin sectors for C2 (sealing through C1 with filecoin-proofs).
    Filecoin {
        #[command(subcommand)]
        cmd: FilecoinCmd,
    },
    /// Draw report.svg again from a sweep folder (results.json and the timelines).
    Report {
        /// The sweep's output folder.
        dir: PathBuf,
    },
    /// One point of a sweep (what the sweep runs in each child process).
    #[command(hide = true)]
    Point {
        #[arg(long, value_parser = parse_pw)]
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

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Sweep {
            pw,
            ram_limit,
            out,
            run,
        } => {
            let run = run.resolve();
            run.validate()?;
            let out = output_folder(out.as_deref())?;
            let cfg = SweepConfig {
                run,
                pw: pw.0,
                ram_limit,
                out,
            };
            let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
            let results = run_sweep(&cfg, &exe)?;
            print!("{}", summary(&results));
            let ok = results
                .points
                .iter()
                .filter(|p| p.status == PointStatus::Ok)
                .count();
            if interrupted() {
                return Err(format!(
                    "interrupted after {} of {} points; results so far in {}",
                    results.points.len(),
                    cfg.pw.len(),
                    cfg.out.display()
                ));
            }
            if ok == 0 {
                return Err(format!(
                    "no point succeeded (reasons above and in {}/results.json)",
                    cfg.out.display()
                ));
            }
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
                // The sweep reads these; if it is gone, nobody does (no panic on a closed pipe).
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "progress {done} {total}");
                if kill && done * 2 >= total {
                    // SAFETY: raising a signal on ourselves.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
            };
            let outcome = run_point(&cfg, pw, &mut progress).map_err(|e| format!("{e:#}"))?;
            write_file(&timeline, timeline_csv(&outcome.timeline).as_bytes())?;
            let json = serde_json::to_string_pretty(&outcome.result).map_err(|e| e.to_string())?;
            write_file(&result, json.as_bytes())
        }
        Cmd::Prove { pw, run } => {
            let cfg = run.resolve();
            let spec = cfg.workload();
            let prepared = prepare(&cfg, true).map_err(|e| format!("{e:#}"))?;
            println!(
                "workload {} ({}), {} jobs x {} partitions, pw {pw}, release {}; parameters in {:.1} s",
                cfg.circuit.name(),
                if cfg.circuit.is_filecoin() {
                    "Filecoin, 2KiB sectors".to_string()
                } else {
                    format!("2^{} target, {} per partition", cfg.log2_constraints, spec.cache_key())
                },
                prepared.jobs.len(),
                prepared.jobs.first().map_or(0, |j| j.circuits.len()),
                cfg.release.name(),
                prepared.params_load_seconds,
            );
            let (o, _) =
                run_jobs(&cfg, pw, prepared, &mut |_, _| {}).map_err(|e| format!("{e:#}"))?;
            print_outcome(&o);
            let r = &o.result;
            if r.proofs_failed > 0 {
                return Err("some proofs failed".into());
            }
            Ok(())
        }
        Cmd::C2(args) => c2(args),
        Cmd::Filecoin {
            cmd:
                FilecoinCmd::Seal {
                    sector_size,
                    out,
                    force,
                },
        } => seal(sector_size, &out, force),
    }
}

/// Prints a run's figures: times, stage times, ledger peaks, memory, verification.
fn print_outcome(o: &harness::point::PointOutcome) {
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
    for d in &o.stats.devices {
        println!(
            "device {}: busy {:.0}%, {:.3} s in the accelerator, {} partitions, {} failures{}",
            d.name,
            100.0 * d.busy_fraction,
            d.accelerator_seconds,
            d.partitions,
            d.failures,
            if d.in_service { "" } else { ", out of service" }
        );
    }
    if o.stats.fallback_partitions > 0 {
        println!(
            "fallback: {} partitions, {:.3} s",
            o.stats.fallback_partitions, o.stats.fallback_seconds
        );
    }
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
}

/// `proofline filecoin seal`.
fn seal(sector_size: u64, out: &Path, force: bool) -> Result<(), String> {
    let run = || -> anyhow::Result<()> {
        let owned = ["c1.json", "c1-raw.json", "sector.json", "sector"];
        let existing: Vec<&str> = owned
            .iter()
            .copied()
            .filter(|n| out.join(n).exists())
            .collect();
        if !existing.is_empty() {
            anyhow::ensure!(
                force,
                "{} holds a sealed sector already ({}): pass --force to replace it, or give \
                 another --out",
                out.display(),
                existing.join(", ")
            );
            let sector = out.join("sector");
            if sector.is_dir() {
                std::fs::remove_dir_all(&sector)
                    .with_context(|| format!("removing {}", sector.display()))?;
            }
        }
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let t = Instant::now();
        let sectors = out.join("sector");
        let sealed = porep::seal_c1(sector_size, &sectors, &mut rand::thread_rng())?;
        let seconds = t.elapsed().as_secs_f64();
        // Through temporary files renamed into place: never half a file under the real name.
        let write = |name: &str, bytes: Vec<u8>| -> anyhow::Result<PathBuf> {
            let path = out.join(name);
            write_file(&path, &bytes).map_err(anyhow::Error::msg)?;
            Ok(path)
        };
        let wrapped = write("c1.json", serde_json::to_vec(&sealed.output)?)?;
        let raw = write(
            "c1-raw.json",
            serde_json::to_vec(&porep::raw_c1(&sealed.output)?)?,
        )?;
        let info = write("sector.json", serde_json::to_vec_pretty(&sealed.info)?)?;
        println!(
            "sealed a {} sector ({:?}, sector {}) through C1 in {seconds:.1} s",
            human_bytes(sector_size),
            sealed.info.registered_proof,
            sealed.info.sector_id
        );
        println!(
            "  {}  C1 output, filecoin-proofs-api wrapper (as Lotus and Curio hand it)",
            wrapped.display()
        );
        println!(
            "  {}  C1 output, filecoin-proofs' raw struct",
            raw.display()
        );
        println!(
            "  {}  sector number, prover id, commitments (for verify_seal)",
            info.display()
        );
        println!("  {}  the sealed replica and its cache", sectors.display());
        Ok(())
    };
    run().map_err(|e| format!("{e:#}"))
}

/// `proofline c2`.
fn c2(args: C2Args) -> Result<(), String> {
    let run = || -> anyhow::Result<()> {
        // Every option first: nothing below may take minutes and then fail on one.
        let cfg = RunConfig {
            circuit: Workload::Porep2k,
            partitions: 1,
            jobs: 1,
            ..args.run.clone().resolve()
        };
        cfg.validate().map_err(anyhow::Error::msg)?;
        if let Some(out) = &args.out {
            anyhow::ensure!(
                !out.is_dir(),
                "--out {} is a folder: give the path of the proof file to write",
                out.display()
            );
            let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
            if let Some(parent) = parent {
                anyhow::ensure!(
                    parent.is_dir(),
                    "--out {}: the folder {} does not exist",
                    out.display(),
                    parent.display()
                );
            }
        }
        let (config, c1) = match porep::read_c1(&args.c1)? {
            porep::C1File::Wrapped(w) => {
                if let Some(size) = args.sector_size {
                    anyhow::ensure!(
                        size == u64::from(w.registered_proof.sector_size()),
                        "--sector-size {size} disagrees with the C1 output's {:?}",
                        w.registered_proof
                    );
                }
                let config = w.registered_proof.as_v1_config();
                (config, porep::raw_c1(&w)?)
            }
            porep::C1File::Raw(raw) => {
                let size = args
                    .sector_size
                    .context("a raw C1 output does not say its sector size: pass --sector-size")?;
                (porep::registered_proof(size)?.as_v1_config(), *raw)
            }
        };
        let sector_json = args.c1.with_file_name("sector.json");
        let info: Option<porep::SectorInfo> = if sector_json.exists() {
            Some(
                serde_json::from_slice(&prover_core::params::read_regular_file(&sector_json)?)
                    .with_context(|| format!("reading {}", sector_json.display()))?,
            )
        } else {
            None
        };
        let sector_id = match (args.sector_id, &info) {
            (Some(id), _) => id,
            (None, Some(i)) => i.sector_id,
            (None, None) => anyhow::bail!(
                "verify_seal needs the sector number and prover id: pass --sector-id and \
                 --prover-id, or keep the sector.json that `proofline filecoin seal` wrote next \
                 to the C1 file"
            ),
        };
        let prover_id = match (&args.prover_id, &info) {
            (Some(hex), _) => porep::parse_hex32(hex).context("--prover-id")?,
            (None, Some(i)) => i.prover_id()?,
            (None, None) => anyhow::bail!("pass --prover-id (32 bytes in hex)"),
        };
        let circuits = porep::porep_circuits::<Tree2KiB>(&config, &c1)?;
        let partitions = circuits.len();
        if let (Some(budget), Some((first, _))) = (cfg.mem_budget, circuits.first()) {
            // The budget against one partition, counted in seconds, before the parameters.
            let size = prover_core::circuit_size(first.clone())?;
            let (abc, rest) =
                prover_core::engine::estimate_bytes(size.domain_size(), size.aux, size.inputs);
            let bytes = match budget {
                MemBudget::Bytes(b) => b,
                MemBudget::Auto => prover_core::budget::BudgetSize::Auto.resolve()?,
            };
            anyhow::ensure!(
                bytes >= abc + rest,
                "--mem-budget {} cannot hold one partition of this sector ({} constraints: {} \
                 of buffers)",
                human_bytes(bytes),
                size.constraints,
                human_bytes(abc + rest)
            );
        }
        println!(
            "C2 of sector {sector_id} ({} bytes, {partitions} partitions) from {}",
            u64::from(config.sector_size),
            args.c1.display()
        );
        let t = Instant::now();
        let bar = Bar::new("porep", true);
        let cached = porep::parameters::<Tree2KiB>(
            &config,
            if args.check_params {
                PointCheck::Checked
            } else {
                PointCheck::Unchecked
            },
            &bar,
        )?;
        bar.finish(format!("{}", cached.path.display()));
        println!(
            "parameters {} ({}): {}{}; read in {:.1} s",
            cached.path.display(),
            human_bytes(cached.params.heap_bytes() as u64),
            cached.trust,
            if cached.generated {
                format!(" in {:.1} s", cached.generate_seconds)
            } else {
                String::new()
            },
            cached.read_seconds
        );
        let params_load_seconds = t.elapsed().as_secs_f64();
        let (circuits, inputs) = circuits
            .into_iter()
            .map(|(c, x)| (WorkloadCircuit::Porep(Box::new(c)), x))
            .unzip();
        let cfg = RunConfig { partitions, ..cfg };
        let prepared = Prepared {
            params: cached.params,
            params_load_seconds,
            params_path: cached.path.clone(),
            jobs: vec![Job { circuits, inputs }],
        };
        let (o, mut proofs) = run_jobs(&cfg, args.pw, prepared, &mut |_, _| {})?;
        print_outcome(&o);
        let proofs = proofs.pop().context("one job")??;
        let bytes = prover_core::Proof::many_to_bytes(&proofs);
        if let Some(out) = &args.out {
            write_file(out, &bytes).map_err(anyhow::Error::msg)?;
            println!("proof ({} bytes) written to {}", bytes.len(), out.display());
        }
        let t = Instant::now();
        let ok = porep::verify_c2::<Tree2KiB>(&config, &c1, prover_id, sector_id, &bytes)?;
        println!(
            "filecoin-proofs verify_seal: {} ({:.3} s)",
            if ok { "accepted" } else { "REJECTED" },
            t.elapsed().as_secs_f64()
        );
        anyhow::ensure!(ok, "verify_seal rejected the proof");
        Ok(())
    };
    run().map_err(|e| format!("{e:#}"))
}
