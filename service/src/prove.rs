//! Proving an accepted job: its payload parsed at its turn, its partitions proven by the
//! server's one engine (one ledger, one byte budget for every job and kind), the proof checked by
//! filecoin-proofs' verifier before it is reported. Parameters are loaded once per circuit and
//! kept, prepared on the engine ([`Prover::loaded`]); a job's payload is parsed only once it is
//! admitted under the engine's byte budget ([`crate::admission`]), and its parsed input is a
//! `job_input` resident entry of the ledger until its last partition has been synthesized.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use backend_cpu::CpuBackend;
use filecoin_proofs_api::seal::SealCommitPhase1Output as ApiC1Output;
use proofline_filecoin::any_circuit::FilecoinCircuit;
use proofline_filecoin::c1::{check_field_elements, AnyC1};
use proofline_filecoin::filecoin_proofs::PoStType;
use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::vanilla_post::VanillaPost;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_filecoin::{aggregate, porep, snap, Load};
use prover_core::accounting::ledger::Snapshot;
use prover_core::runtime::budget::BudgetSize;
use prover_core::{
    Accelerator, CpuSynthesizer, Engine, JobCanceller, Parameters, PreparedParameters, Proof,
    UrgentLane,
};

use crate::admission::{Admission, Admitted};
use crate::circuits::Circuit;
use crate::registered::PostKind;
use crate::request::{prover_id, vanilla_bytes, Accepted, Work};
use crate::store::Timings;

/// How the prover runs jobs.
#[derive(Clone)]
pub struct ProverOptions {
    /// The accelerator backend (the CPU's, or a device backend opened by the caller).
    pub backend: Arc<dyn Accelerator>,
    /// Where a device hands back a partition it failed (`None` for the CPU backend).
    pub fallback: Option<Arc<dyn Accelerator>>,
    /// The backend's devices to use (ordinals).
    pub devices: Vec<usize>,
    /// Accelerator workers per device.
    pub gpu_workers: usize,
    /// Partitions synthesized at once (the engine's synthesis workers).
    pub synthesis_workers: usize,
    /// Synthesis workers and accelerator queue slots kept for jobs of high priority or more
    /// (WindowPoSt, WinningPoSt), so that their partitions pass the C2 partitions already
    /// synthesized and queued (0: none; see [`prover_core::UrgentLane`]).
    pub urgent_workers: usize,
    /// The engine's byte budget for partitions in flight and admitted job inputs (none:
    /// unbounded).
    pub mem_budget: Option<u64>,
    /// How parameter files are read.
    pub load: Load,
    /// Bytes of parameters held at most (none: every set loaded stays until evicted).
    pub params_budget: Option<u64>,
}

impl std::fmt::Debug for ProverOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProverOptions")
            .field("backend", &self.backend.name())
            .field("fallback", &self.fallback.as_ref().map(|b| b.name()))
            .field("devices", &self.devices)
            .field("gpu_workers", &self.gpu_workers)
            .field("synthesis_workers", &self.synthesis_workers)
            .field("urgent_workers", &self.urgent_workers)
            .field("mem_budget", &self.mem_budget)
            .field("load", &self.load)
            .field("params_budget", &self.params_budget)
            .finish()
    }
}

/// A job's proof and where its time went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    /// The proof bytes, in the layout filecoin-ffi returns.
    pub proof: Vec<u8>,
    /// Where the time went: parameters loaded, synthesis and the accelerator.
    pub timings: Timings,
}

/// Cancels one job's proving from another thread: before its partitions reach the engine, or
/// there (queued partitions dropped, running ones discarded at their next stage boundary, what
/// they hold freed).
#[derive(Default)]
pub struct CancelToken {
    cancelled: AtomicBool,
    engine_job: Mutex<Option<JobCanceller>>,
}

impl CancelToken {
    /// Cancels the job.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        if let Some(c) = lock(&self.engine_job).as_ref() {
            c.cancel();
        }
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn check(&self) -> Result<(), String> {
        if self.is_cancelled() {
            Err(CANCELLED.into())
        } else {
            Ok(())
        }
    }

    /// Binds the engine's job; a cancel that came first cancels it now.
    fn attach(&self, c: JobCanceller) {
        let mut slot = lock(&self.engine_job);
        if self.is_cancelled() {
            c.cancel();
        }
        *slot = Some(c);
    }
}

/// The reason of a job cancelled while it was proven.
pub const CANCELLED: &str = "cancelled";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parameters kept loaded, by circuit id.
#[derive(Debug, Clone)]
pub struct LoadedParameters {
    /// The circuit id (see [`crate::circuits`]).
    pub circuit_id: String,
    /// Bytes of the points held.
    pub bytes: u64,
}

/// How one job runs in the engine: its priority, its cancel, its parameters prepared and the
/// time they took to load.
struct Run<'a> {
    priority: i32,
    cancel: &'a CancelToken,
    prepared: PreparedParameters,
    params_ms: u64,
}

/// The sector and miner a job proves for.
#[derive(Clone, Copy)]
struct Subject {
    sector_size: u64,
    sector_number: u64,
    prover_id: [u8; 32],
}

/// Proves accepted jobs through one engine, on the backend its options name.
pub struct Prover {
    options: ProverOptions,
    engine: Engine<FilecoinCircuit, CpuSynthesizer>,
    /// Job inputs admitted under the engine's budget.
    admission: Arc<Admission>,
    /// By circuit id.
    held: Mutex<HashMap<String, Held>>,
    /// Held while a parameter set loads, so that two jobs of one circuit load it once.
    loading: Mutex<()>,
    /// One partition's bytes in the budget, by circuit id: learned when its parameters load,
    /// kept after they are let go.
    partition_bytes: Mutex<HashMap<String, u64>>,
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn chain(e: anyhow::Error) -> String {
    format!("{e:#}")
}

impl Prover {
    /// A prover with its engine started and nothing loaded.
    pub fn new(options: ProverOptions) -> Result<Self, String> {
        let engine = Engine::new(
            prover_core::Config {
                synthesis_workers: options.synthesis_workers,
                mem_budget: options.mem_budget.map(BudgetSize::Bytes),
                devices: options.devices.clone(),
                gpu_workers: options.gpu_workers,
                fallback: options.fallback.clone(),
                urgent: (options.urgent_workers > 0).then_some(UrgentLane {
                    min_priority: crate::proto::Priority::High as i32,
                    workers: options.urgent_workers,
                }),
                ..Default::default()
            },
            CpuSynthesizer,
            options.backend.clone(),
            Arc::new(CpuBackend),
        )
        .map_err(|e| format!("starting the engine: {e}"))?;
        let admission = Admission::new(engine.budget().cloned(), engine.ledger().clone());
        Ok(Prover {
            options,
            engine,
            admission,
            held: Mutex::new(HashMap::new()),
            loading: Mutex::new(()),
            partition_bytes: Mutex::new(HashMap::new()),
        })
    }

    /// The engine's ledger now: partitions and bytes per stage and kind, resident entries, and
    /// their peaks since the server started.
    pub fn ledger(&self) -> Snapshot {
        self.engine.ledger().snapshot()
    }

    /// The parameters held, by circuit id.
    pub fn loaded(&self) -> Vec<LoadedParameters> {
        let mut out: Vec<LoadedParameters> = lock(&self.held)
            .iter()
            .map(|(id, h)| LoadedParameters {
                circuit_id: id.clone(),
                bytes: h.bytes,
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// The memory budget's capacity in bytes (`None`: no budget).
    pub fn budget_capacity(&self) -> Option<u64> {
        self.engine.budget().map(|b| b.capacity())
    }

    /// The memory `job` needs under the budget: its input while parsed ([`input_reservation`])
    /// and one partition, where this prover has loaded the circuit's parameters once (else 0).
    pub fn estimate(&self, job: &Accepted) -> Estimate {
        let partition = lock(&self.partition_bytes)
            .get(&Circuit::of(job).id())
            .copied()
            .unwrap_or(0);
        Estimate {
            input: input_reservation(job),
            partition,
        }
    }

    /// Loads `circuit`'s parameters unless they are held; true if they were.
    pub fn preload(&self, circuit: Circuit) -> Result<bool, String> {
        self.prepared(circuit).map(|(_, held)| held)
    }

    /// Lets `circuit`'s parameters go: the bytes they held, or `None` if they were not held.
    /// A job proving with them keeps them until it ends.
    pub fn evict(&self, circuit: Circuit) -> Option<u64> {
        lock(&self.held).remove(&circuit.id()).map(|h| h.bytes)
    }

    /// Proves `job` and checks the proof with filecoin-proofs' verifier; the error is the
    /// reason a client reads (`FAILED`). Its parameters are loaded (unless held), its payload
    /// admitted under the budget and only then parsed; its partitions enter the engine at the
    /// job's priority, interleaved with other jobs' at partition boundaries; `cancel` stops it.
    pub fn prove(&self, job: Accepted, cancel: &CancelToken) -> Result<Proven, String> {
        cancel.check()?;
        let t = Instant::now();
        let (prepared, _) = self.prepared(Circuit::of(&job))?;
        let params_ms = t.elapsed().as_millis() as u64;
        let input = self.admission.admit(
            input_reservation(&job),
            self.engine.partition_bytes(&prepared),
            || cancel.check(),
        )?;
        let subject = Subject {
            sector_size: job.sector_size,
            sector_number: job.sector_number,
            prover_id: prover_id(job.miner_id),
        };
        let run = Run {
            priority: job.priority as i32,
            cancel,
            prepared,
            params_ms,
        };
        match job.work {
            Work::Porep { variant, c1_json } => self.porep(subject, variant, c1_json, input, &run),
            Work::SnapDeals {
                commitments,
                partition_proofs,
            } => self.snap(subject, &commitments, partition_proofs, input, &run),
            Work::Post {
                kind,
                randomness,
                partition: _,
                sector_proofs,
            } => {
                let (typ, api_version) = match kind {
                    PostKind::Winning => (PoStType::Winning, ApiVersion::V1_0_0),
                    PostKind::Window(v) => (PoStType::Window, v),
                };
                let post = VanillaPost {
                    sector_size: subject.sector_size,
                    typ,
                    api_version,
                    randomness,
                    prover_id: subject.prover_id,
                    sector_proofs: &sector_proofs,
                };
                // A WindowPoSt partition's circuit and public inputs depend only on its own
                // sectors (the request's check allows partitions > 0 only at API 1.2, whose
                // challenges do not depend on a sector's place; filecoin-proofs'
                // `generate_single_window_post_with_vanilla` proves any partition as the first
                // of a one-partition PoSt): partition k is proven, and checked, as the
                // one-partition PoSt of its sectors; the whole PoSt verifies with the
                // partitions' proofs concatenated in order.
                let (circuits, statement) = post.circuits().map_err(chain)?;
                let input = counted(input, sector_proofs);
                let proven = self.run(circuits.into_iter().map(Into::into), &run, input)?;
                statement.check(&proven.proof).map_err(chain)?;
                Ok(proven)
            }
        }
    }

    fn porep(
        &self,
        subject: Subject,
        variant: SealVariant,
        c1_json: Vec<u8>,
        mut input: Admitted,
        run: &Run<'_>,
    ) -> Result<Proven, String> {
        // Checked and parsed from the text, never held as a JSON document (about nine times
        // the text).
        check_field_elements(&c1_json).map_err(|e| format!("vanilla_proof: {e:#}"))?;
        let wrapped: ApiC1Output = serde_json::from_slice(&c1_json).map_err(|e| {
            format!("vanilla_proof: Phase1Out is not a SealCommitPhase1Output: {e}")
        })?;
        drop(c1_json);
        let spec = SealSpec::registered(wrapped.registered_proof);
        if spec.variant != variant || spec.sector_size != subject.sector_size {
            return Err(format!(
                "vanilla_proof: the C1 output names {:?}; the request's registered_proof is {} \
                 of {} bytes",
                wrapped.registered_proof,
                variant.name(),
                subject.sector_size
            ));
        }
        let c1 = AnyC1::from_wrapped(wrapped).map_err(|e| format!("vanilla_proof: {e:#}"))?;
        let config = spec.config().map_err(chain)?;
        let circuits = porep::circuits(&config, &c1).map_err(chain)?;
        let statement =
            porep::SealStatement::of(&config, &c1, subject.prover_id, subject.sector_number);
        let (comm_r, seed, parsed) = (c1.comm_r(), c1.seed(), c1.parsed_bytes());
        drop(c1);
        // The circuits hold the vanilla proofs now, as many bytes as the parsed C1 output.
        input.count(parsed);
        let partitions = self.run(circuits.into_iter().map(|(c, _)| c.into()), run, input)?;
        let proof =
            aggregate::seal_proof(&config, comm_r, seed, partitions.proof).map_err(chain)?;
        match statement.verify(&proof) {
            Ok(true) => Ok(Proven {
                proof,
                ..partitions
            }),
            Ok(false) => Err(
                "verify_seal rejected the proof (the C1 output does not prove this sector for \
                 this miner: check sector_number and miner_id); no proof is reported"
                    .into(),
            ),
            Err(e) => Err(format!("verify_seal: {e:#}")),
        }
    }

    fn snap(
        &self,
        subject: Subject,
        commitments: &[[u8; 32]; 3],
        partition_proofs: Vec<Vec<u8>>,
        input: Admitted,
        run: &Run<'_>,
    ) -> Result<Proven, String> {
        let size = subject.sector_size;
        let commitments = snap::Commitments {
            comm_r_old: commitments[0],
            comm_r_new: commitments[1],
            comm_d_new: commitments[2],
        };
        let circuits = snap::circuits(size, &commitments, &partition_proofs)
            .map_err(|e| format!("vanilla_proofs: {e:#}"))?;
        let input = counted(input, partition_proofs);
        let proven = self.run(circuits.into_iter().map(|(c, _)| c.into()), run, input)?;
        match snap::verify_update(size, &commitments, &proven.proof) {
            Ok(true) => Ok(proven),
            Ok(false) => Err(
                "verify_empty_sector_update_proof rejected the proof (the vanilla proofs do not \
                 prove these commitments); no proof is reported"
                    .into(),
            ),
            Err(e) => Err(format!("verify_empty_sector_update_proof: {e:#}")),
        }
    }

    /// The job's partitions through the engine at its priority, its admitted input held until
    /// the last of them has been synthesized: the partitions' proofs concatenated, not yet
    /// checked.
    fn run(
        &self,
        circuits: impl Iterator<Item = FilecoinCircuit>,
        run: &Run<'_>,
        input: Admitted,
    ) -> Result<Proven, String> {
        run.cancel.check()?;
        let handle = self
            .engine
            .submit_holding(
                &run.prepared,
                circuits.collect(),
                run.priority,
                Box::new(input),
                &mut rand::thread_rng(),
            )
            .map_err(text)?;
        run.cancel.attach(handle.canceller());
        let (result, times) = handle.wait_timed();
        let proofs = match result {
            Ok(proofs) => proofs,
            Err(prover_core::Error::Cancelled) => return Err(CANCELLED.into()),
            Err(e) => return Err(text(e)),
        };
        Ok(Proven {
            proof: Proof::many_to_bytes(&proofs),
            timings: Timings {
                srs_load_ms: run.params_ms,
                synthesis_ms: times.synthesis.as_millis() as u64,
                gpu_compute_ms: times.accelerator.as_millis() as u64,
            },
        })
    }

    /// `circuit`'s parameters prepared on the engine, loaded the first time (and true if they
    /// were held already). With a parameter budget, the least recently used sets are let go
    /// until the new one fits (a set in use stays with its jobs until they end).
    fn prepared(&self, circuit: Circuit) -> Result<(PreparedParameters, bool), String> {
        let id = circuit.id();
        let take = |held: &mut HashMap<String, Held>| {
            held.get_mut(&id).map(|h| {
                h.last_used = Instant::now();
                h.prepared.clone()
            })
        };
        if let Some(p) = take(&mut lock(&self.held)) {
            return Ok((p, true));
        }
        let _loading = lock(&self.loading);
        if let Some(p) = take(&mut lock(&self.held)) {
            return Ok((p, true));
        }
        let prepared = self
            .engine
            .prepare(Arc::new(self.load(circuit)?))
            .map_err(text)?;
        let bytes = prepared.params().heap_bytes() as u64;
        lock(&self.partition_bytes).insert(id.clone(), self.engine.partition_bytes(&prepared));
        let mut held = lock(&self.held);
        if let Some(budget) = self.options.params_budget {
            while held.values().map(|h| h.bytes).sum::<u64>() + bytes > budget {
                let Some(lru) = held
                    .iter()
                    .min_by_key(|(_, h)| h.last_used)
                    .map(|(c, _)| c.clone())
                else {
                    break;
                };
                held.remove(&lru);
                eprintln!("parameters {lru} let go (least recently used) to make room for {id}");
            }
        }
        held.insert(
            id,
            Held {
                prepared: prepared.clone(),
                bytes,
                last_used: Instant::now(),
            },
        );
        Ok((prepared, false))
    }

    /// Reads (or, at a test size, generates) `circuit`'s parameters.
    fn load(&self, circuit: Circuit) -> Result<Parameters, String> {
        let load = self.options.load;
        match circuit {
            Circuit::Porep {
                variant,
                sector_size,
            } => {
                let config = SealSpec::new(sector_size, variant, None)
                    .and_then(|s| s.config())
                    .map_err(chain)?;
                porep::parameters_for(&config, load, &())
                    .map(|c| c.params)
                    .map_err(chain)
            }
            Circuit::Snap { sector_size } => snap::update_parameters(sector_size, load, &())
                .map(|c| c.params)
                .map_err(chain),
            Circuit::Window { api, sector_size } => {
                post_parameters(sector_size, PoStType::Window, api)
            }
            Circuit::Winning { sector_size } => {
                post_parameters(sector_size, PoStType::Winning, ApiVersion::V1_0_0)
            }
        }
    }
}

fn post_parameters(
    sector_size: u64,
    typ: PoStType,
    api_version: ApiVersion,
) -> Result<Parameters, String> {
    VanillaPost {
        sector_size,
        typ,
        api_version,
        randomness: [0; 32],
        prover_id: [0; 32],
        sector_proofs: &[],
    }
    .parameters()
    .map_err(chain)
}

/// `input` counted as the vanilla proofs its circuits now hold (as many bytes as their bincode
/// form, which is let go here).
fn counted(mut input: Admitted, vanilla: Vec<Vec<u8>>) -> Admitted {
    input.count(vanilla_bytes(&vanilla));
    input
}

/// The memory a job needs under the budget, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Its input while parsed.
    pub input: u64,
    /// One of its partitions (0: not known).
    pub partition: u64,
}

/// What a job's input reserves from the budget while it is parsed: the payload and its parsed
/// form beside it (a parsed form is no larger than its payload: a C1 output's is about a
/// quarter of its JSON); once parsed, the parsed form alone is kept (`Admitted::count`).
fn input_reservation(job: &Accepted) -> u64 {
    job.work.payload_bytes().saturating_mul(2)
}

/// A parameter set held, prepared on the engine.
struct Held {
    prepared: PreparedParameters,
    bytes: u64,
    last_used: Instant,
}
