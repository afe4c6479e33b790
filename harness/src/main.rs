//! `proofline`: sweep worker counts, run one point, or prove one job.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use harness::commands::{c2, print_outcome, seal, C2Args};
use harness::config::RunConfig;
use harness::console::{stdout_state, Stdout, CLOSED_PIPE_STATUS};
use harness::outputs::write_file;
use harness::point::{prepare, run_jobs, run_point};
use harness::preflight::{parameter_file, RunFiles};
use harness::report::model::PointStatus;
use harness::report::{timeline_csv, SweepConfig};
use harness::signals::{interrupted, signal_name};
use harness::sweep::{output_folder, run_sweep, summary, KILL_HOOK_ENV, PANIC_HOOK_ENV};
use harness::units::{parse_pw, parse_pw_list, parse_size};
use harness::{say, tell};

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

/// Worker counts from `--pw`.
#[derive(Clone, Debug)]
struct PwList(Vec<usize>);

fn parse_pws(s: &str) -> Result<PwList, String> {
    parse_pw_list(s).map(PwList)
}

#[derive(Subcommand)]
enum FilecoinCmd {
    /// Seal a sector of random data through C1 (filecoin-proofs) and write the C1 output:
    /// c1-raw.json, c1.json (filecoin-proofs-api wrapper, registered proofs only) and
    /// sector.json.
    Seal {
        /// 2KiB, 8MiB, 512MiB, or a test size with a production tree shape: 4KiB (8-2-0),
        /// 16KiB (32 GiB's 8-8-0), 32KiB (64 GiB's 8-8-2).
        #[arg(long = "sector-size", value_parser = parse_size)]
        sector_size: u64,
        /// The seal proof variant: v1, v1_1, synthetic or ni.
        #[arg(long, default_value = "v1_1", value_parser = harness::commands::parse_variant)]
        variant: proofline_filecoin::variant::SealVariant,
        /// The PoRep id of a test size (64 hex digits; default all zeros). A registered size
        /// uses its registered proof's.
        #[arg(long = "porep-id", value_parser = harness::commands::parse_porep_id)]
        porep_id: Option<[u8; 32]>,
        /// Seal for this miner actor: the prover id made from its id as Lotus and Curio make
        /// it (default: a random prover id). `proofline client` proves such a sector for it.
        #[arg(long = "miner-id")]
        miner_id: Option<u64>,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Replace a sector sealed there before (its C1 output and sector.json).
        #[arg(long)]
        force: bool,
    },
    /// SnapDeals: seal a sector of random data (pre-commit), update it with new random data
    /// (filecoin-proofs' encode_into) and write the update's vanilla partition proofs as Curio
    /// sends them: snap.json and vanilla-<k>.bin.
    Snap {
        /// 2KiB, 8MiB, 512MiB, or a test size: 4KiB, 16KiB (the 32 GiB shape), 32KiB (64 GiB's).
        #[arg(long = "sector-size", value_parser = parse_size)]
        sector_size: u64,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Replace an update written there before.
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
        /// Write each point's device timeline (cuda/opencl): device-trace-pw<N>.csv and .svg.
        /// The device's queues are timed without it too, for its busy share.
        #[arg(long = "device-trace")]
        device_trace: bool,
        /// Do not time the device's queues (cuda/opencl): the table's device busy is then `-`.
        #[arg(long = "no-device-trace", conflicts_with = "device_trace")]
        no_device_trace: bool,
        /// Append a measurement record per point (seconds per proof, with the date, commit,
        /// machine and command) to this JSON Lines file, e.g. docs/records/sweep.jsonl.
        #[arg(long)]
        record: Option<PathBuf>,
        /// The docs table the records belong to (`cargo xtask bench-tables`).
        #[arg(long = "record-table", default_value = "sweep", requires = "record")]
        record_table: String,
        #[command(flatten)]
        run: RunConfig,
    },
    /// Prove the workload at one worker count in this process and print the figures.
    Prove {
        /// Synthesis workers.
        #[arg(long, default_value_t = 4, value_parser = parse_pw)]
        pw: usize,
        /// Write the device's timeline (cuda/opencl): every copy and kernel timed on the
        /// device's own clock, as this CSV and an SVG beside it. Its busy and idle time are
        /// printed without it too.
        #[arg(long = "device-trace")]
        device_trace: Option<PathBuf>,
        /// Do not time the device's queues (cuda/opencl).
        #[arg(long = "no-device-trace", conflicts_with = "device_trace")]
        no_device_trace: bool,
        /// Sample where the proving time goes (pprof, 199 samples a second, every thread, from
        /// the first job to the last; parameter loading left out) and draw it as a flamegraph
        /// to this SVG file.
        #[arg(long)]
        profile: Option<PathBuf>,
        #[command(flatten)]
        run: RunConfig,
    },
    /// Time a partition shaped like a 32 GiB PoRep's (domain 2^27, about 130M aux variables, a
    /// PoRep witness's mix) on a device backend, against random bases made on the device: a
    /// timing workload, not a proof.
    Synthetic(harness::synthetic::SyntheticArgs),
    /// Prove a PoRep C2 from a C1 output (filecoin-proofs-api's JSON, as Lotus and Curio write
    /// it, or filecoin-proofs' raw JSON) through the engine; check it with verify_seal.
    C2(C2Args),
    /// Prove a SnapDeals update (an empty sector update) from its vanilla partition proofs
    /// through the engine; check it with verify_empty_sector_update_proof.
    SnapProve(harness::snap::SnapProveArgs),
    /// The proving service: cuzk.v1.ProvingEngine (the gRPC contract Curio's [Cuzk] client
    /// speaks) on a unix socket or TCP, jobs kept in a store under --data-dir. Stops on
    /// SIGTERM or SIGINT, leaving queued jobs in the store.
    Serve(harness::serve::ServeArgs),
    /// A client of `proofline serve`: submit, await, prove, status, cancel.
    Client(harness::serve::ClientArgs),
    /// Filecoin sectors for C2 (sealing through C1 with filecoin-proofs).
    Filecoin {
        #[command(subcommand)]
        cmd: FilecoinCmd,
    },
    /// Compile the CUDA kernels for an architecture into the kernel cache, without a GPU (NVRTC
    /// only; one kernel per core at once, each cached on its own): run on a build host and copy
    /// the cache folder, and provers start without the compile (about a minute on 2 cores: see docs/gpu.md). The
    /// cache is $PROOFLINE_KERNEL_CACHE, else
    /// $XDG_CACHE_HOME/proofline/kernels, else ~/.cache/proofline/kernels.
    Kernels {
        /// The devices' architecture: sm_90 (H100, H200), sm_89, sm_80...
        #[arg(long = "cuda-arch", value_parser = harness::backend::parse_cuda_arch)]
        cuda_arch: (i32, i32),
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
        /// The run configuration, as the sweep's JSON.
        #[arg(long)]
        config: String,
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
    harness::signals::install();
    let result = run(cli.command);
    // Standard output closed early (`| head`): the work is done; end quietly, as a process that
    // SIGPIPE ended. Standard output failing otherwise (a full disk) is an error.
    let stdout = stdout_state();
    match result {
        Err(e) => {
            tell!("error: {e:#}");
            ExitCode::FAILURE
        }
        Ok(()) => match stdout {
            Stdout::Fine => ExitCode::SUCCESS,
            Stdout::Closed => ExitCode::from(CLOSED_PIPE_STATUS),
            Stdout::Failed(why) => {
                tell!("error: writing to standard output: {why}");
                ExitCode::FAILURE
            }
        },
    }
}

/// A message error as an `anyhow` one (the library's option checks return `String`s).
fn msg(e: String) -> anyhow::Error {
    anyhow::Error::msg(e)
}

fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Sweep {
            pw,
            ram_limit,
            out,
            device_trace,
            no_device_trace,
            record,
            record_table,
            run,
        } => {
            let run = run
                .normalized()
                .with_device_trace(device_trace, no_device_trace);
            let mut files = RunFiles::default();
            if let Some(record) = &record {
                files.outputs.push(("--record", record));
            }
            harness::preflight::check(&run, &files)?;
            let claim = output_folder(out.as_deref()).map_err(msg)?;
            let cfg = SweepConfig {
                run,
                pw: pw.0,
                ram_limit,
                out: claim.path().to_path_buf(),
            };
            let exe = std::env::current_exe().context("finding this binary")?;
            let outcome = run_sweep(&cfg, &exe).map_err(msg)?;
            drop(claim);
            let results = &outcome.results;
            // The table first: on a full disk it is where the results still are.
            say!("{}", summary(results).trim_end());
            if let Err(e) = outcome.written {
                anyhow::bail!("the results above could not all be written: {e}");
            }
            if let Some(path) = &record {
                let records =
                    harness::records::sweep_records(results, &command_line(), &record_table);
                harness::records::append_all(path, &records).map_err(msg)?;
                say!("{} record(s) appended to {}", records.len(), path.display());
            }
            let ok = results
                .points
                .iter()
                .filter(|p| p.status == PointStatus::Ok)
                .count();
            if let Some(sig) = interrupted() {
                anyhow::bail!(
                    "interrupted by {} after {} of {} points; results so far in {}",
                    signal_name(sig),
                    results.points.len(),
                    cfg.pw.len(),
                    cfg.out.display()
                );
            }
            if ok == 0 {
                anyhow::bail!(
                    "no point succeeded (reasons above and in {}/results.json)",
                    cfg.out.display()
                );
            }
            Ok(())
        }
        Cmd::Kernels { cuda_arch } => {
            let t = std::time::Instant::now();
            let k = harness::backend::cache_cuda_kernels(cuda_arch)?;
            say!(
                "{}: {} kernels compiled in {:.1} s, {} already cached",
                k.folder.display(),
                k.compiled,
                t.elapsed().as_secs_f64(),
                k.cached
            );
            Ok(())
        }
        Cmd::Report { dir } => {
            harness::outputs::check_file("report", &dir.join("report.svg"), &[]).map_err(msg)?;
            let path = harness::report::redraw(&dir).map_err(msg)?;
            say!("{}", path.display());
            Ok(())
        }
        Cmd::Point {
            pw,
            result,
            timeline,
            config,
        } => {
            let cfg: RunConfig =
                serde_json::from_str(&config).context("--config is not a run configuration")?;
            cfg.validate().map_err(msg)?;
            let hook = |var: &str| {
                std::env::var(var)
                    .ok()
                    .and_then(|v| v.parse::<usize>().ok())
            };
            if hook(PANIC_HOOK_ENV) == Some(pw) {
                panic!("a point asked to panic ({PANIC_HOOK_ENV})");
            }
            let kill = hook(KILL_HOOK_ENV) == Some(pw);
            let mut progress = |done: u64, total: u64| {
                // The sweep reads these; if it is gone, nobody does (no panic on a closed pipe).
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "progress {done} {total}");
                if kill && done * 2 >= total {
                    // SAFETY: raising a signal on ourselves.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
            };
            let outcome = run_point(&cfg, pw, &mut progress)?;
            write_file(&timeline, timeline_csv(&outcome.timeline).as_bytes()).map_err(msg)?;
            if cfg.trace_files {
                let path = timeline.with_file_name(format!("device-trace-pw{pw}.csv"));
                let title = format!("{}, pw {pw}", harness::report::report_title(&cfg));
                harness::report::device_trace::write_trace(&path, &outcome.device_trace, &title)
                    .map_err(msg)?;
            }
            let json = serde_json::to_string_pretty(&outcome.result)?;
            write_file(&result, json.as_bytes()).map_err(msg)
        }
        Cmd::Prove {
            pw,
            device_trace,
            no_device_trace,
            profile,
            run,
        } => {
            let cfg = run
                .normalized()
                .with_device_trace(device_trace.is_some(), no_device_trace);
            let params = parameter_file(&cfg);
            let svg = device_trace.as_ref().map(|p| p.with_extension("svg"));
            let mut files = RunFiles {
                inputs: params.iter().map(|p| p.as_path()).collect(),
                ..RunFiles::default()
            };
            if let (Some(csv), Some(svg)) = (&device_trace, &svg) {
                files.outputs.push(("--device-trace", csv));
                files.outputs.push(("--device-trace (its SVG)", svg));
            }
            if let Some(profile) = &profile {
                files.outputs.push(("--profile", profile));
            }
            harness::preflight::check(&cfg, &files)?;
            let spec = cfg.workload();
            let prepared = prepare(&cfg, true)?;
            say!(
                "workload {}{}{} ({}), {} jobs x {} partitions, pw {pw}, release {}; parameters in {:.1} s",
                cfg.circuit.name(),
                if cfg.replay { harness::report::REPLAY_NOTE } else { "" },
                harness::report::synthesis_note(&cfg),
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
            let sampler = profile
                .as_ref()
                .map(|_| harness::profile::Flamegraph::start())
                .transpose()
                .map_err(msg)?;
            let (o, _) = run_jobs(&cfg, pw, prepared, &mut |_, _| {})?;
            print_outcome(&o);
            if let (Some(sampler), Some(path)) = (sampler, &profile) {
                let title = format!("proofline prove, pw {pw}");
                sampler.write(path, &title).map_err(msg)?;
                say!("flamegraph written to {}", path.display());
            }
            if let Some(path) = device_trace {
                let title = format!(
                    "{}, 2^{}, pw {pw}, {} worker(s) a device",
                    cfg.circuit.name(),
                    cfg.log2_constraints,
                    cfg.gpu_workers
                );
                harness::report::device_trace::report_trace(&path, &o.device_trace, &title)
                    .map_err(msg)?;
            } else {
                harness::report::device_trace::trace_summary(&o.device_trace)
                    .iter()
                    .for_each(|l| say!("{l}"));
            }
            anyhow::ensure!(o.result.proofs_failed == 0, "some proofs failed");
            Ok(())
        }
        Cmd::C2(args) => c2(args, &command_line()),
        Cmd::Serve(args) => harness::serve::serve(args, &aws_options()),
        Cmd::Client(args) => harness::serve::client(args),
        Cmd::SnapProve(args) => harness::snap::snap_prove(args),
        Cmd::Synthetic(args) => harness::synthetic::synthetic(args),
        Cmd::Filecoin {
            cmd:
                FilecoinCmd::Seal {
                    sector_size,
                    variant,
                    porep_id,
                    miner_id,
                    out,
                    force,
                },
        } => proofline_filecoin::variant::SealSpec::new(sector_size, variant, porep_id)
            .and_then(|spec| seal(&spec, miner_id, &out, force)),
        Cmd::Filecoin {
            cmd:
                FilecoinCmd::Snap {
                    sector_size,
                    out,
                    force,
                },
        } => harness::snap::snap(sector_size, &out, force),
    }
}

/// This run's command line as a user typed it (`proofline` and its arguments), for records.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("proofline {}", args.join(" "))
}

/// The S3 settings of `serve --blob-store`: every `AWS_*` environment variable, by its name in
/// lower case (`aws_access_key_id`, `aws_region`, `aws_endpoint_url`, `aws_allow_http`, ...), as
/// the object store takes them; others it ignores.
fn aws_options() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_"))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}
