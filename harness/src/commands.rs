//! The commands that are more than a call: `prove`'s and `c2`'s printed figures, `c2` (PoRep C2
//! from a C1 output) and `filecoin seal`. `main.rs` keeps the command line only.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use proofline_filecoin::c1::{read_c1, AnyC1, C1File};
use proofline_filecoin::porep;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use prover_core::accounting::ledger::{BufferKind, ResidentKind, Stage};
use prover_core::units::human_bytes;
use prover_core::PointCheck;

use crate::config::RunConfig;
use crate::filecoin::Job;
use crate::outputs::write_file;
use crate::params_cache::Bar;
use crate::point::{run_jobs, PointOutcome, Prepared};
use crate::preflight::RunFiles;
use crate::say;
use crate::units::{parse_pw, parse_size};
use crate::workloads::{Workload, WorkloadCircuit};

/// `proofline c2`'s options.
#[derive(clap::Args, Debug)]
pub struct C2Args {
    /// The C1 output (JSON).
    #[arg(long, required_unless_present = "plan")]
    pub c1: Option<PathBuf>,
    /// Print the memory plan instead of proving: one partition's host buffers by kind (from the
    /// circuit's counts), the parameters, the C1 output, and the --pw and --mem-budget that fit
    /// --ram. The sector is --sector-size, --variant and --porep-id (or --c1's sector.json).
    #[arg(long)]
    pub plan: bool,
    /// The RAM to plan for (default: this machine's).
    #[arg(long, value_parser = parse_size, requires = "plan")]
    pub ram: Option<u64>,
    /// Where to write the proof (the partitions' 192-byte proofs, concatenated: the bytes
    /// verify_seal takes).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Sector size (needed for a raw C1 output without its sector.json; the wrapper names its
    /// registered proof). The test sizes 4KiB, 16KiB and 32KiB have the production shapes.
    #[arg(long = "sector-size", value_parser = parse_size)]
    pub sector_size: Option<u64>,
    /// The seal proof variant of a raw C1 output: v1, v1_1, synthetic or ni (default: its
    /// sector.json's, else v1_1).
    #[arg(long, value_parser = parse_variant)]
    pub variant: Option<SealVariant>,
    /// The PoRep id of a test size's sector, 64 hex digits (default: its sector.json's, else all
    /// zeros); a registered size uses its registered proof's.
    #[arg(long = "porep-id", value_parser = parse_porep_id)]
    pub porep_id: Option<[u8; 32]>,
    /// Sector number, for verify_seal (default: sector.json next to the C1 file).
    #[arg(long = "sector-id")]
    pub sector_id: Option<u64>,
    /// Prover (miner) id as 64 hex digits, for verify_seal (default: sector.json).
    #[arg(long = "prover-id")]
    pub prover_id: Option<String>,
    /// Synthesis workers.
    #[arg(long, default_value_t = 1, value_parser = parse_pw)]
    pub pw: usize,
    /// How the parameter file is read.
    #[command(flatten)]
    pub params: ParamsLoad,
    /// Append a measurement record of this run (its wall seconds, with the date, commit,
    /// machine and command) to this JSON Lines file, e.g. docs/records/filecoin.jsonl.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// The docs table the record belongs to (`cargo xtask bench-tables`).
    #[arg(long = "record-table", default_value = "c2", requires = "record")]
    pub record_table: String,
    /// The engine and workload options (the workload is the C1 output's sector).
    #[command(flatten)]
    pub run: RunConfig,
}

fn print_peaks<'a>(
    title: &str,
    names: impl Iterator<Item = &'a str>,
    peaks: &std::collections::BTreeMap<String, crate::report::model::CountBytes>,
) {
    say!("{title}");
    for name in names {
        let p = peaks.get(name).copied().unwrap_or_default();
        say!("  {name:<21} {:>4} / {}", p.count, human_bytes(p.bytes));
    }
}

/// Prints a run's figures: times, stage times, ledger peaks, memory, verification.
pub fn print_outcome(o: &PointOutcome) {
    let r = &o.result;
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.3}"));
    say!(
        "wall {} s: {} s per proof, {} s per partition, {} proofs/min; parameters loaded in {} s",
        f(r.wall_seconds),
        f(r.seconds_per_proof),
        f(r.seconds_per_partition),
        f(r.proofs_per_minute),
        f(r.params_load_seconds)
    );
    say!(
                "stage time summed over partitions: synthesis {:.3} s, accelerator {:.3} s, finalize {:.3} s; accelerator workers busy {:.0}%",
                o.stats.synthesis_seconds,
                o.stats.accelerator_seconds,
                o.stats.finalize_seconds,
                100.0 * o.stats.mean_accelerator_busy()
            );
    for d in &o.stats.devices {
        say!(
            "device {}: its workers in the accelerator {:.0}% of the wall time ({:.3} s), {} partitions, {} failures ({} proofs rejected){}",
            d.name,
            100.0 * d.busy_fraction,
            d.accelerator_seconds,
            d.partitions,
            d.failures,
            d.rejected,
            if d.in_service { "" } else { ", out of service" }
        );
    }
    if !o.device_steps.is_empty() {
        let steps: Vec<String> = o
            .device_steps
            .iter()
            .map(|s| format!("{} {:.3} s ({}x)", s.name, s.seconds, s.count))
            .collect();
        say!("device steps, summed: {}", steps.join(", "));
    }
    match r.verify_seconds {
        Some(s) => say!(
            "checked before reporting: {} partition proofs in {s:.3} s ({:.2}% of the stage time \
             summed), {} rejected",
            r.partitions_checked,
            100.0 * s
                / (o.stats.synthesis_seconds
                    + o.stats.accelerator_seconds
                    + o.stats.fallback_seconds
                    + o.stats.finalize_seconds)
                    .max(f64::MIN_POSITIVE),
            r.partitions_rejected
        ),
        None => say!("checked before reporting: off (--no-verify)"),
    }
    if o.stats.fallback_partitions > 0 {
        say!(
            "fallback: {} partitions, {:.3} s",
            o.stats.fallback_partitions,
            o.stats.fallback_seconds
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
    let input = o.ledger.resident(ResidentKind::JobInput);
    if input.count.peak > 0 {
        say!(
            "job input (held by its submitter until the job ends, beside the ledger's \
             partitions): {} job(s), {} at the peak",
            input.count.peak,
            human_bytes(input.bytes.peak)
        );
    }
    let b = |v: Option<u64>| v.map_or("-".into(), human_bytes);
    let above = match (r.peak_rss_bytes, r.baseline_rss_bytes, r.ledger_peak_bytes) {
        (Some(peak), Some(base), Some(ledger)) if ledger > 0 => format!(
            "; RSS above the baseline {} ({:.0}% of the ledger's peak)",
            human_bytes(peak.saturating_sub(base)),
            100.0 * peak.saturating_sub(base) as f64 / ledger as f64
        ),
        _ => String::new(),
    };
    say!(
        "memory: ledger peak {}, peak RSS {}, baseline RSS {} (parameters loaded){above}",
        b(r.ledger_peak_bytes),
        b(r.peak_rss_bytes),
        b(r.baseline_rss_bytes)
    );
    if let Some(peak) = r.device_peak_bytes {
        say!(
            "device memory: ledger peak {} (resident bases and partitions' buffers)",
            human_bytes(peak)
        );
        for d in &r.devices {
            say!(
                "device {} memory: allocated peak {}, driver in use {} at open, peak {} ({} above the baseline)",
                d.engine.name,
                b(d.allocated_peak_bytes),
                b(d.driver_baseline_bytes),
                b(d.driver_peak_bytes),
                b(d.driver_above_baseline()),
            );
        }
    }
    say!(
        "verified: {}/{} jobs, {} partitions{}{}",
        r.proofs_verified,
        r.proofs_verified + r.proofs_failed,
        r.partitions_verified,
        r.seals_verified
            .map(|n| format!(", {n} accepted by filecoin-proofs' verify_seal"))
            .unwrap_or_default(),
        r.error
            .as_ref()
            .map(|e| format!("; first error: {e}"))
            .unwrap_or_default()
    );
}

/// Prints where a command's parameters came from, how they were trusted, and the time to
/// generate (when they were) and read them.
pub fn say_parameters(cached: &proofline_filecoin::CachedParameters) {
    say!(
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
    match (&cached.native_written, &cached.native_unused) {
        (Some(Ok(path)), why) => say!(
            "native copy written to {}{}: later loads map it at the page cache's speed \
             (--no-native-params reads the file alone)",
            path.display(),
            why.as_ref()
                .map(|w| format!(" (the one there was not used: {w})"))
                .unwrap_or_default()
        ),
        (Some(Err(e)), _) => {
            say!("native copy not written ({e}): later loads decode the file again")
        }
        (None, _) => {}
    }
}

/// How `c2` and `snap-prove` read a parameter file they find.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ParamsLoad {
    /// Check every parameter point (curve and subgroup) when reading a parameter file found on
    /// disk (slow on large files; downloaded files were checked by digest when fetched).
    #[arg(long = "check-params")]
    pub check_params: bool,
    /// Decode the parameter file on every load, without writing or mapping its native copy
    /// (`<file>.native`, as large as the file: written after the first read, then mapped and
    /// checked by checksum at the page cache's speed).
    #[arg(long = "no-native-params")]
    pub no_native_params: bool,
}

impl ParamsLoad {
    /// The library's load options.
    pub fn load(&self) -> proofline_filecoin::Load {
        proofline_filecoin::Load {
            check: if self.check_params {
                PointCheck::Checked
            } else {
                PointCheck::Unchecked
            },
            native: !self.no_native_params,
        }
    }
}

/// Checks a proof with filecoin-proofs' `verifier` (its name, for the messages) and writes it
/// to `out` only when accepted: a rejected proof never lands under `--out`, and is an error.
pub fn verify_then_write(
    verifier: &str,
    bytes: &[u8],
    out: Option<&Path>,
    verify: impl FnOnce(&[u8]) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let ok = verify(bytes)?;
    say!(
        "filecoin-proofs {verifier}: {} ({:.3} s)",
        if ok { "accepted" } else { "REJECTED" },
        t.elapsed().as_secs_f64()
    );
    if let (true, Some(out)) = (ok, out) {
        write_file(out, bytes).map_err(anyhow::Error::msg)?;
        say!("proof ({} bytes) written to {}", bytes.len(), out.display());
    }
    anyhow::ensure!(
        ok,
        "{verifier} rejected the proof{}",
        if out.is_some() {
            "; nothing was written to --out"
        } else {
            ""
        }
    );
    Ok(())
}

/// `--variant`'s parser.
pub fn parse_variant(s: &str) -> Result<SealVariant, String> {
    SealVariant::parse(s).map_err(|e| e.to_string())
}

/// `--porep-id`'s parser.
pub fn parse_porep_id(s: &str) -> Result<[u8; 32], String> {
    porep::parse_hex32(s).map_err(|e| e.to_string())
}

/// `proofline filecoin seal`: a sector of random data through C1, its outputs written.
pub fn seal(spec: &SealSpec, miner_id: Option<u64>, out: &Path, force: bool) -> anyhow::Result<()> {
    let run = || -> anyhow::Result<()> {
        // Held while sealing: two seals into one folder would mix their files.
        let _claim =
            crate::outputs::claim_folder("--out", out, false).map_err(anyhow::Error::msg)?;
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
        let t = Instant::now();
        let sectors = out.join("sector");
        let sealed = porep::seal_c1_for(spec, &sectors, miner_id, &mut rand::thread_rng())?;
        let seconds = t.elapsed().as_secs_f64();
        // Through temporary files renamed into place: never half a file under the real name.
        let write = |name: &str, bytes: Vec<u8>| -> anyhow::Result<PathBuf> {
            let path = out.join(name);
            write_file(&path, &bytes).map_err(anyhow::Error::msg)?;
            Ok(path)
        };
        let wrapped = match sealed.wrapped() {
            Some(w) => Some(write("c1.json", serde_json::to_vec(&w?)?)?),
            None => {
                // A test size has no wrapper: no c1.json from an earlier seal may stay beside
                // this sector's files.
                let stale = out.join("c1.json");
                if stale.exists() {
                    std::fs::remove_file(&stale)
                        .with_context(|| format!("removing {}", stale.display()))?;
                }
                None
            }
        };
        let raw = write("c1-raw.json", sealed.c1.to_json()?)?;
        let info = write("sector.json", serde_json::to_vec_pretty(&sealed.info)?)?;
        say!(
            "sealed a {} sector through C1 in {seconds:.1} s: {}, tree shape {}, sector {}",
            human_bytes(spec.sector_size),
            spec.describe(),
            spec.shape().name(),
            sealed.info.sector_id
        );
        match wrapped {
            Some(wrapped) => say!(
                "  {}  C1 output, filecoin-proofs-api wrapper (as Lotus and Curio hand it)",
                wrapped.display()
            ),
            None => say!("  (no c1.json: filecoin-proofs-api has no wrapper for a test size)"),
        }
        say!(
            "  {}  C1 output, filecoin-proofs' raw struct",
            raw.display()
        );
        say!(
            "  {}  sector number, prover id, commitments (for verify_seal)",
            info.display()
        );
        say!("  {}  the sealed replica and its cache", sectors.display());
        Ok(())
    };
    run()
}

/// `proofline c2`: every option checked first, the C1 output read and checked, the partitions
/// proven through the engine, the proof written and checked by `verify_seal`.
pub fn c2(args: C2Args, command_line: &str) -> anyhow::Result<()> {
    if args.plan {
        return crate::plan::c2_plan(&args);
    }
    let started = Instant::now();
    let c1_path = args.c1.clone().context("--c1 is required")?;
    let run = || -> anyhow::Result<()> {
        // Every option first: nothing below may take minutes and then fail on one.
        let cfg = RunConfig {
            circuit: Workload::Porep2k,
            partitions: 1,
            jobs: 1,
            ..args.run.clone().normalized()
        };
        let sector_json = c1_path.with_file_name("sector.json");
        let mut files = RunFiles {
            inputs: vec![c1_path.as_path(), sector_json.as_path()],
            ..RunFiles::default()
        };
        if let Some(out) = &args.out {
            files.outputs.push(("--out", out));
        }
        if let Some(record) = &args.record {
            files.outputs.push(("--record", record));
        }
        crate::preflight::check(&cfg, &files)?;
        let info = porep::SectorInfo::beside(&c1_path)?;
        let (spec, c1) = c2_input(&args, &c1_path, info.as_ref())?;
        let config = spec.config()?;
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
        let circuits = porep::circuits(&config, &c1)?;
        let partitions = circuits.len();
        if let (Some(budget), Some((first, _))) = (cfg.mem_budget, circuits.first()) {
            // The budget against one partition, counted in seconds, before the parameters.
            let size = prover_core::circuit_size(first.clone())?;
            let (abc, rest) = prover_core::runtime::engine::estimate_bytes(
                size.domain_size(),
                size.aux,
                size.inputs,
            );
            let bytes = prover_core::runtime::budget::BudgetSize::from(budget).resolve()?;
            anyhow::ensure!(
                bytes >= abc + rest,
                "--mem-budget {} cannot hold one partition of this sector ({} constraints: {} \
                 of buffers)",
                human_bytes(bytes),
                size.constraints,
                human_bytes(abc + rest)
            );
        }
        say!(
            "C2 of sector {sector_id} ({}, tree shape {}, {partitions} partitions) from {}",
            spec.describe(),
            spec.shape().name(),
            c1_path.display()
        );
        let t = Instant::now();
        let bar = Bar::new("porep", true);
        let cached = porep::parameters_for(&config, args.params.load(), &bar)?;
        bar.finish(format!("{}", cached.path.display()));
        say_parameters(&cached);
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
            // Checked by `verify_seal` below, after the proof is written.
            jobs: vec![Job {
                circuits,
                inputs,
                seal: None,
                input_bytes: c1.parsed_bytes(),
            }],
        };
        let (o, mut proofs) = run_jobs(&cfg, args.pw, prepared, &mut |_, _| {})?;
        print_outcome(&o);
        let proofs = match proofs.pop().context("one job")? {
            Ok(proofs) => proofs,
            Err(e) => return Err(blame_c2(e, &config, &c1, &cached.path)),
        };
        // Non-Interactive PoRep: the partitions' proofs aggregated (SnarkPack, by
        // filecoin-proofs); interactive PoRep: the partitions' proofs as they are.
        let bytes = proofline_filecoin::aggregate::seal_proof(
            &config,
            c1.comm_r(),
            c1.seed(),
            prover_core::Proof::many_to_bytes(&proofs),
        )?;
        let statement = porep::SealStatement::of(&config, &c1, prover_id, sector_id);
        verify_then_write("verify_seal", &bytes, args.out.as_deref(), |b| {
            statement.verify(b)
        })?;
        if let Some(path) = &args.record {
            let record = crate::records::c2_record(
                &human_bytes(spec.sector_size),
                proofs.len(),
                args.pw,
                cfg.backend.name(),
                started.elapsed().as_secs_f64(),
                command_line,
                &args.record_table,
            );
            crate::records::append_all(path, &[record]).map_err(anyhow::Error::msg)?;
            say!("record appended to {}", path.display());
        }
        Ok(())
    };
    run()
}

/// The seal proof and C1 output of a `c2`: the wrapper names its registered proof; a raw C1
/// output takes its size, variant and PoRep id from the options, else from its sector.json, and
/// options that disagree with the file are refused.
fn c2_input(
    args: &C2Args,
    c1_path: &Path,
    info: Option<&porep::SectorInfo>,
) -> anyhow::Result<(SealSpec, AnyC1)> {
    let from_info = info.map(porep::SectorInfo::spec).transpose()?;
    let size = args
        .sector_size
        .or(from_info.as_ref().map(|s| s.sector_size));
    match read_c1(c1_path, size)? {
        C1File::Wrapped(w) => {
            let spec = SealSpec::registered(w.registered_proof);
            if let Some(size) = args.sector_size {
                anyhow::ensure!(
                    size == spec.sector_size,
                    "--sector-size {size} disagrees with the C1 output's {:?}",
                    w.registered_proof
                );
            }
            if let Some(variant) = args.variant {
                anyhow::ensure!(
                    variant == spec.variant,
                    "--variant {} disagrees with the C1 output's {:?}",
                    variant.name(),
                    w.registered_proof
                );
            }
            anyhow::ensure!(
                args.porep_id.is_none(),
                "--porep-id is for a raw C1 output of a test size; the C1 output names its \
                 registered proof ({:?})",
                w.registered_proof
            );
            Ok((spec, AnyC1::from_wrapped(*w)?))
        }
        C1File::Raw(raw) => {
            let size = size.expect("the raw form is read only with a size");
            let variant = args
                .variant
                .or(from_info.as_ref().map(|s| s.variant))
                .unwrap_or(SealVariant::V1_1);
            let porep_id = args.porep_id.or_else(|| {
                from_info
                    .as_ref()
                    .filter(|s| s.registered_proof().is_none())
                    .map(|s| s.porep_id)
            });
            Ok((SealSpec::new(size, variant, porep_id)?, raw))
        }
    }
}

/// Where a failed C2 job's blame goes. When a partition's witness does not satisfy its circuit
/// (found by synthesis, or by checking the C1 output again after proofline's check rejected the
/// CPU's own proof), the C1 output is at fault, not the parameters; otherwise the parameter
/// file is named as the suspect.
fn blame_c2(
    e: prover_core::Error,
    config: &filecoin_proofs::PoRepConfig,
    c1: &AnyC1,
    params: &Path,
) -> anyhow::Error {
    use prover_core::{CpuSynthesizer, Error, Synthesizer};
    let Error::PartitionFailed {
        partition, source, ..
    } = &e
    else {
        return e.into();
    };
    let unsatisfied = match &**source {
        Error::StatementMismatch { position, .. } => {
            return anyhow::anyhow!(
                "partition {partition}: the C1 output's vanilla proofs do not prove the statement \
                 its own seed, ticket and commitments give (public input {position} differs): the \
                 C1 file was altered or damaged; the parameters are not at fault. No proof was \
                 made"
            )
        }
        Error::Unsatisfied { index, annotation } => Some((*index, annotation.clone())),
        Error::ProofRejected { .. } => {
            // Synthesized again with the satisfiability check: seconds, on this failure path only.
            let circuit = porep::circuits(config, c1)
                .ok()
                .and_then(|c| c.into_iter().nth(*partition));
            match circuit.map(|(c, _)| CpuSynthesizer.synthesize(c)) {
                Some(Err(Error::Unsatisfied { index, annotation })) => Some((index, annotation)),
                _ => None,
            }
        }
        _ => return e.into(),
    };
    match unsatisfied {
        Some((index, annotation)) => anyhow::anyhow!(
            "partition {partition}: the C1 output does not satisfy its circuit (constraint {index}, \
             {annotation}): the C1 file was altered or damaged (its seed, ticket, commitments and \
             vanilla proofs disagree); the parameters are not at fault. No proof was written"
        ),
        None => anyhow::anyhow!(
            "{e} (parameter file {}; the C1 output satisfies its circuit, so the parameters are the \
             suspect). No proof was written",
            params.display()
        ),
    }
}
