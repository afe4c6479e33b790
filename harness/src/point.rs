//! One point of a sweep: the workload's jobs through the engine at one worker count, measured.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use backend_cpu::CpuBackend;
use proofline_workloads::replay::Replay;
use prover_core::accounting::ledger::{BufferKind, ResidentKind, Stage};
use prover_core::runtime::budget::BudgetSize;
use prover_core::runtime::sampler::{current_rss, peak_rss, Sample, Sampler};
use prover_core::{
    prepare_verifying_key, verify_proof, verify_proofs_batch, Config, CpuSynthesizer, Engine,
    Error, Parameters, PceSynthesizer, Proof, Synthesizer,
};

use crate::config::{RunConfig, SynthesisMode};
use crate::filecoin::Job;
use crate::params_cache::{cache_path, load_or_generate, Bar};
use crate::report::model::{peaks, DevicePoint, PointResult, PointStatus};

/// A point's result, its timeline and the summed stage times.
pub struct PointOutcome {
    /// The figures.
    pub result: PointResult,
    /// The ledger and RSS over time.
    pub timeline: Vec<Sample>,
    /// The engine's figures.
    pub stats: prover_core::EngineStats,
    /// The ledger at the end (every peak).
    pub ledger: prover_core::accounting::ledger::Snapshot,
    /// The device backend's step times (under `PROOFLINE_GPU_PROFILE=1`; empty otherwise).
    pub device_steps: Vec<prover_core::StepTime>,
    /// The devices' own timeline, when the backend timed its queues (device backends, unless
    /// `--no-device-trace`).
    pub device_trace: Vec<prover_core::DeviceSpan>,
}

/// What a run proves: the parameters and the jobs.
pub struct Prepared {
    /// The parameters.
    pub params: Parameters,
    /// Seconds to load (or generate) them.
    pub params_load_seconds: f64,
    /// The file they came from (named when proofs do not verify).
    pub params_path: PathBuf,
    /// The jobs.
    pub jobs: Vec<Job>,
}

/// The workload's parameters, from its cache (generated there when missing, with a progress
/// bar when `progress` is set): proofline's own cache for the synthetic workloads, the
/// production file names under `FIL_PROOFS_PARAMETER_CACHE` for Filecoin's.
pub fn load_parameters(cfg: &RunConfig, progress: bool) -> anyhow::Result<(Parameters, PathBuf)> {
    if cfg.circuit.is_filecoin() {
        let bar = Bar::new(cfg.circuit.name(), progress);
        let cached = crate::filecoin::parameters(cfg.circuit, &bar)?;
        bar.finish(format!("{}", cached.path.display()));
        return Ok((cached.params, cached.path));
    }
    let spec = cfg.workload();
    // A device backend generates missing parameters on its device (the same bytes).
    let multiplier: Box<dyn prover_core::Multiplier> =
        if cache_path(&cfg.params_dir, &spec).exists() {
            Box::new(prover_core::CpuMultiplier)
        } else {
            crate::backend::multiplier(cfg)?
        };
    let params = load_or_generate(&cfg.params_dir, &spec, progress, &*multiplier)?.0;
    Ok((params, cache_path(&cfg.params_dir, &spec)))
}

/// The workload's parameters and jobs (Filecoin workloads seal their sectors here). A
/// generation progress bar is drawn when `progress` is set.
pub fn prepare(cfg: &RunConfig, progress: bool) -> anyhow::Result<Prepared> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    let spec = cfg.workload();
    let t = Instant::now();
    let (params, params_path) = load_parameters(cfg, progress)?;
    let params_load_seconds = t.elapsed().as_secs_f64();
    if cfg.circuit.is_filecoin() {
        let jobs = crate::filecoin::jobs(cfg.circuit, cfg.jobs)?;
        return Ok(Prepared {
            params,
            params_load_seconds,
            params_path,
            jobs,
        });
    }
    let jobs = if cfg.replay {
        // Every partition the first one's circuit and inputs: whichever synthesis worker
        // comes first, the statement replayed is the one every proof is checked against.
        let (circuit, inputs) = spec.partition(0, 0).context("a synthetic workload")?;
        (0..cfg.jobs)
            .map(|_| Job {
                circuits: vec![circuit.clone(); cfg.partitions],
                inputs: vec![inputs.clone(); cfg.partitions],
                seal: None,
                input_bytes: 0,
            })
            .collect()
    } else {
        (0..cfg.jobs)
            .map(|j| {
                let (circuits, inputs) = (0..cfg.partitions)
                    .map(|p| spec.partition(j, p).context("a synthetic workload"))
                    .collect::<anyhow::Result<Vec<_>>>()?
                    .into_iter()
                    .unzip();
                Ok(Job {
                    circuits,
                    inputs,
                    seal: None,
                    input_bytes: 0,
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    Ok(Prepared {
        params,
        params_load_seconds,
        params_path,
        jobs,
    })
}

/// Runs the workload at `pw` in this process. `progress(done, total)` is called with settled
/// partitions while the jobs run.
pub fn run_point(
    cfg: &RunConfig,
    pw: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<PointOutcome> {
    let prepared = prepare(cfg, false)?;
    Ok(run_jobs(cfg, pw, prepared, progress)?.0)
}

/// What to say when proofs the engine reported do not verify. With the engine's check on, it
/// rejected every proof that failed (and proved a device's again on the CPU), so such a proof
/// means the engine itself is broken; with it off (`--no-verify`), a device fault and a
/// parameter file that decodes but does not belong to the circuit are both suspects.
pub fn unverified_proof(path: &Path, engine_checked: bool) -> String {
    if engine_checked {
        format!(
            "a proof the engine had checked did not verify again afterwards (parameters {}): \
             please report this",
            path.display()
        )
    } else {
        format!(
            "a proof did not verify, and the engine's own check was off (--no-verify): a device \
             fault or the parameter file {} (it decodes, but its points may not fit this \
             circuit) is at fault; run again without --no-verify to have a device's proof \
             checked and proved again on the CPU, which tells the two apart",
            path.display()
        )
    }
}

/// The harness's synthesizer: each partition synthesized (through bellpepper's constraint
/// system, or pre-compiled), or the replay workload's copies.
enum Synth {
    Fresh(CpuSynthesizer),
    Pce(Arc<PceSynthesizer>),
    Replay(Arc<Replay<CpuSynthesizer>>),
}

impl Synthesizer for Synth {
    fn synthesize<C: bellpepper_core::Circuit<blstrs::Scalar>>(
        &self,
        circuit: C,
    ) -> prover_core::Result<prover_core::SynthesizedPartition> {
        match self {
            Synth::Fresh(s) => s.synthesize(circuit),
            Synth::Pce(s) => s.synthesize(circuit),
            Synth::Replay(r) => r.synthesize(circuit),
        }
    }
}

/// A job's partition proofs, or why it failed.
pub type JobResult = Result<Vec<Proof>, Error>;

/// Proves prepared jobs at `pw`, measured; also returns each job's proofs (or its error).
pub fn run_jobs(
    cfg: &RunConfig,
    pw: usize,
    prepared: Prepared,
    progress: &mut dyn FnMut(u64, u64),
) -> anyhow::Result<(PointOutcome, Vec<JobResult>)> {
    let Prepared {
        params,
        params_load_seconds,
        params_path,
        jobs,
    } = prepared;
    let backends = crate::backend::open(cfg)?;
    let pvk = prepare_verifying_key(&params.vk);
    let config = Config {
        synthesis_workers: pw,
        release: cfg.release.into(),
        queue_depth: cfg.queue_depth,
        gpu_workers: cfg.gpu_workers,
        finalizer_threads: 0,
        synthesis_threads: cfg.synthesis_threads,
        mem_budget: cfg.mem_budget.map(BudgetSize::from),
        devices: if cfg.gpus.is_empty() {
            vec![0]
        } else {
            cfg.gpus.clone()
        },
        // A device backend hands failed partitions to the CPU; the CPU backend has no retry.
        fallback: backends.fallback,
        verify: !cfg.no_verify,
        ..Config::default()
    };
    let backend = backends.backend.clone();
    let replay = cfg.replay.then(|| Arc::new(Replay::new(CpuSynthesizer)));
    // The replay workload synthesizes once: the synthesis mode does not matter there.
    let pce = match (&replay, cfg.synthesis) {
        (None, SynthesisMode::Pce) => {
            let first = jobs.first().and_then(|j| j.circuits.first()).cloned();
            let first = first.ok_or_else(|| anyhow::anyhow!("no partition to record"))?;
            Some(crate::pce::synthesizer(cfg, &params_path, first)?)
        }
        _ => None,
    };
    let synthesizer = match (&replay, &pce) {
        (Some(r), _) => Synth::Replay(r.clone()),
        (None, Some(p)) => Synth::Pce(p.clone()),
        (None, None) => Synth::Fresh(CpuSynthesizer),
    };
    let engine = Engine::new(config, synthesizer, backends.backend, Arc::new(CpuBackend))?;
    if let Some(p) = &pce {
        p.attach(engine.ledger());
    }
    if let Some(r) = &replay {
        r.attach(engine.ledger());
        // The one real synthesis happens before the clock starts: the run times the copies.
        if let Some(first) = jobs.first().and_then(|j| j.circuits.first()) {
            r.prime(first.clone())?;
        }
    }
    let prepared = engine.prepare(Arc::new(params))?;
    let baseline = current_rss();
    let sampler = Sampler::start(
        engine.ledger().clone(),
        Duration::from_millis(cfg.sample_ms.max(1)),
    );

    let total = jobs.iter().map(|j| j.circuits.len() as u64).sum::<u64>();
    let n_jobs = jobs.len();
    let mut inputs = Vec::with_capacity(n_jobs);
    let mut seals = Vec::with_capacity(n_jobs);
    let start = Instant::now();
    let mut handles = Vec::with_capacity(n_jobs);
    let mut rng = rand::thread_rng();
    for job in jobs {
        // The input its submitter holds, in the ledger until the job ends.
        let held = (job.input_bytes > 0).then(|| {
            engine
                .ledger()
                .resident(ResidentKind::JobInput, job.input_bytes)
        });
        // Each partition's witness must hold the inputs its statement declares.
        handles.push((
            engine.submit_statement(&prepared, job.circuits, job.inputs.clone(), &mut rng)?,
            held,
        ));
        inputs.push(job.inputs);
        seals.push(job.seal);
    }
    // Jobs are awaited on their own thread, which stamps the end of the last one; this thread
    // reports progress meanwhile.
    let waiter = std::thread::spawn(move || {
        let results: Vec<_> = handles
            .into_iter()
            .map(|(h, held)| {
                let result = h.wait();
                drop(held);
                result
            })
            .collect();
        (results, Instant::now())
    });
    while !waiter.is_finished() {
        progress(engine.stats().partitions_settled, total);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (results, end) = waiter.join().map_err(|_| Error::Panicked {
        stage: "job waiter",
        message: "the thread waiting for the jobs panicked".into(),
    })?;
    let wall = end.duration_since(start).as_secs_f64();
    progress(total, total);
    let stats = engine.stats();
    let timeline = sampler.stop();
    let ledger = engine.ledger().clone();
    engine.shutdown();
    let snap = ledger.snapshot();

    let mut proofs_verified = 0;
    let mut proofs_failed = 0;
    let mut partitions_verified = 0;
    let mut seals_verified = seals.iter().any(Option::is_some).then_some(0);
    let mut first_error = None;
    for (j, (r, xs)) in results.iter().zip(&inputs).enumerate() {
        match r {
            Ok(proofs) => {
                let ok_each: Vec<bool> = if verify_proofs_batch(&pvk, proofs, xs, &mut rng)? {
                    vec![true; proofs.len()]
                } else {
                    proofs
                        .iter()
                        .zip(xs)
                        .map(|(p, x)| verify_proof(&pvk, p, x))
                        .collect::<Result<_, _>>()?
                };
                partitions_verified += ok_each.iter().filter(|b| **b).count() as u64;
                if !ok_each.iter().all(|b| *b) {
                    proofs_failed += 1;
                    first_error
                        .get_or_insert_with(|| unverified_proof(&params_path, !cfg.no_verify));
                } else if let Some(seal) = &seals[j] {
                    match crate::filecoin::verify_seal(seal, proofs) {
                        Ok(true) => {
                            proofs_verified += 1;
                            *seals_verified.get_or_insert(0) += 1;
                        }
                        Ok(false) => {
                            proofs_failed += 1;
                            first_error.get_or_insert_with(|| {
                                format!(
                                    "filecoin-proofs' verify_seal rejected job {j}'s proof, whose \
                                     every partition proofline's verifier accepted: the job's \
                                     sector statement (commitments, ticket, seed, prover, sector \
                                     number) is not the one its circuits were built from"
                                )
                            });
                        }
                        // The job's proofs are good by proofline's verifier; the point still
                        // fails, saying why the second check could not run.
                        Err(e) => {
                            proofs_failed += 1;
                            first_error.get_or_insert_with(|| {
                                format!(
                                    "filecoin-proofs' verify_seal could not check job {j}: {e:#}"
                                )
                            });
                        }
                    }
                } else {
                    proofs_verified += 1;
                }
            }
            Err(e) => {
                proofs_failed += 1;
                first_error.get_or_insert_with(|| match e {
                    // The engine's check rejected a proof: name the parameter file it suspects.
                    Error::PartitionFailed { source, .. }
                        if matches!(**source, Error::ProofRejected { .. }) =>
                    {
                        format!("{e} (parameter file {})", params_path.display())
                    }
                    e => e.to_string(),
                });
            }
        }
    }
    let jobs = n_jobs as f64;
    // A throughput is only a throughput if the proofs are good.
    let timed = |v: f64| (proofs_failed == 0).then_some(v);
    let memory = backend.device_memory();
    let device_trace = backend.device_trace();
    let traced = prover_core::accounting::trace::summarize(&device_trace);
    let stage_peaks = peaks(Stage::ALL.iter().map(|s| (s.name(), snap.stage(*s))));
    let buffer_peaks = peaks(BufferKind::ALL.iter().map(|k| (k.name(), snap.kind(*k))));
    let result = PointResult {
        pw,
        status: if proofs_failed == 0 {
            PointStatus::Ok
        } else {
            PointStatus::Failed
        },
        signal: None,
        error: first_error,
        seconds_per_proof: timed(wall / jobs),
        proofs_per_minute: timed(60.0 * jobs / wall),
        seconds_per_partition: timed(wall / total as f64),
        wall_seconds: Some(wall),
        params_load_seconds: Some(params_load_seconds),
        peak_rss_bytes: peak_rss(),
        baseline_rss_bytes: baseline,
        ledger_peak_bytes: Some(snap.total_bytes.peak),
        device_peak_bytes: (!memory.is_empty()).then_some(snap.device_total.peak),
        replay_source_bytes: replay
            .is_some()
            .then(|| snap.resident(ResidentKind::ReplaySource).bytes.peak),
        pce_matrices_bytes: pce
            .is_some()
            .then(|| snap.resident(ResidentKind::PceMatrices).bytes.peak),
        proofs_verified,
        proofs_failed,
        partitions_verified,
        seals_verified,
        accelerator_busy_fraction: Some(stats.mean_accelerator_busy()),
        devices: stats
            .devices
            .iter()
            .map(|d| DevicePoint::new(d, &memory, &traced))
            .collect(),
        fallback_partitions: stats.fallback_partitions,
        partitions_checked: stats.partitions_verified,
        partitions_rejected: stats.partitions_rejected,
        verify_seconds: (!cfg.no_verify).then_some(stats.verify_seconds),
        stage_peaks,
        buffer_peaks,
    };
    Ok((
        PointOutcome {
            result,
            timeline,
            stats,
            ledger: snap,
            device_steps: backend.step_times(),
            device_trace,
        },
        results,
    ))
}
