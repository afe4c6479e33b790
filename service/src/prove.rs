//! Proving an accepted job: its payload parsed at its turn, its partitions proven by the
//! server's one engine (one ledger, one byte budget for every job and kind), the proof checked by
//! filecoin-proofs' verifier before it is reported. Parameters are loaded once per circuit and
//! kept, prepared on the engine ([`Prover::loaded`]); a job's parsed input is a `job_input`
//! resident entry of the ledger while it is proven.

use std::collections::HashMap;
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
use proofline_filecoin::{aggregate, porep, Load};
use prover_core::accounting::ledger::{ResidentKind, Snapshot};
use prover_core::runtime::budget::BudgetSize;
use prover_core::{CpuSynthesizer, Engine, Parameters, PreparedParameters, Proof};

use crate::registered::PostKind;
use crate::request::{Accepted, Work};

/// How the prover runs jobs.
#[derive(Debug, Clone, Copy)]
pub struct ProverOptions {
    /// Partitions synthesized at once (the engine's synthesis workers).
    pub synthesis_workers: usize,
    /// The engine's byte budget for partitions in flight (none: unbounded).
    pub mem_budget: Option<u64>,
    /// How parameter files are read.
    pub load: Load,
}

/// A job's proof and where its time went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    /// The proof bytes, in the layout filecoin-ffi returns.
    pub proof: Vec<u8>,
    /// Milliseconds loading parameters (0 when they were loaded already).
    pub params_ms: u64,
    /// Milliseconds in the engine (synthesis and the accelerator, every partition).
    pub prove_ms: u64,
}

/// Parameters kept loaded, by circuit id.
#[derive(Debug, Clone)]
pub struct LoadedParameters {
    /// The circuit id (`porep-<size>-<porep id>`, or filecoin-proofs' cache id of a PoSt).
    pub circuit_id: String,
    /// Bytes of the points held.
    pub bytes: u64,
}

/// Proves accepted jobs on the CPU backend, through one engine.
pub struct Prover {
    options: ProverOptions,
    engine: Engine<FilecoinCircuit, CpuSynthesizer>,
    prepared: Mutex<HashMap<String, PreparedParameters>>,
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
                ..Default::default()
            },
            CpuSynthesizer,
            Arc::new(CpuBackend),
            Arc::new(CpuBackend),
        )
        .map_err(|e| format!("starting the engine: {e}"))?;
        Ok(Prover {
            options,
            engine,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// The engine's ledger now: partitions and bytes per stage and kind, resident entries, and
    /// their peaks since the server started.
    pub fn ledger(&self) -> Snapshot {
        self.engine.ledger().snapshot()
    }

    /// The parameters held, by circuit id.
    pub fn loaded(&self) -> Vec<LoadedParameters> {
        let held = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<LoadedParameters> = held
            .iter()
            .map(|(id, p)| LoadedParameters {
                circuit_id: id.clone(),
                bytes: p.params().heap_bytes() as u64,
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// Proves `job` and checks the proof with filecoin-proofs' verifier; the error is the
    /// reason a client reads (`FAILED`).
    pub fn prove(&self, job: &Accepted) -> Result<Proven, String> {
        match &job.work {
            Work::Porep { variant, c1_json } => self.porep(job, *variant, c1_json),
            Work::SnapDeals { .. } => Err("SNAP_DEALS_UPDATE jobs are not served yet".into()),
            Work::Post {
                kind,
                randomness,
                partition,
                sector_proofs,
            } => {
                if *partition != 0 {
                    return Err(format!(
                        "partition_index {partition}: only partition 0 is served yet"
                    ));
                }
                let (typ, api_version) = match kind {
                    PostKind::Winning => (PoStType::Winning, ApiVersion::V1_0_0),
                    PostKind::Window(v) => (PoStType::Window, *v),
                };
                let post = VanillaPost {
                    sector_size: job.sector_size,
                    typ,
                    api_version,
                    randomness: *randomness,
                    prover_id: job.prover_id(),
                    sector_proofs,
                };
                let (circuits, statement) = post.circuits().map_err(chain)?;
                let id = post.parameters_id().map_err(chain)?;
                let t = Instant::now();
                let prepared = self.prepared(&id, || post.parameters().map_err(chain))?;
                let params_ms = t.elapsed().as_millis() as u64;
                let t = Instant::now();
                let proofs = self.run(&prepared, circuits.into_iter().map(Into::into))?;
                let proof = Proof::many_to_bytes(&proofs);
                statement.check(&proof).map_err(chain)?;
                Ok(Proven {
                    proof,
                    params_ms,
                    prove_ms: t.elapsed().as_millis() as u64,
                })
            }
        }
    }

    fn porep(
        &self,
        job: &Accepted,
        variant: SealVariant,
        c1_json: &[u8],
    ) -> Result<Proven, String> {
        let json: serde_json::Value = serde_json::from_slice(c1_json)
            .map_err(|e| format!("vanilla_proof: Phase1Out is not JSON: {e}"))?;
        check_field_elements(&json).map_err(|e| format!("vanilla_proof: {e:#}"))?;
        let wrapped: ApiC1Output = serde_json::from_value(json).map_err(|e| {
            format!("vanilla_proof: Phase1Out is not a SealCommitPhase1Output: {e}")
        })?;
        let spec = SealSpec::registered(wrapped.registered_proof);
        if spec.variant != variant || spec.sector_size != job.sector_size {
            return Err(format!(
                "vanilla_proof: the C1 output names {:?}; the request's registered_proof is {} \
                 of {} bytes",
                wrapped.registered_proof,
                variant.name(),
                job.sector_size
            ));
        }
        let c1 = AnyC1::from_wrapped(wrapped).map_err(|e| format!("vanilla_proof: {e:#}"))?;
        // The parsed C1 output, counted while the job is proven.
        let _input = self
            .engine
            .ledger()
            .resident(ResidentKind::JobInput, c1.parsed_bytes());
        let config = spec.config().map_err(chain)?;
        let circuits = porep::circuits(&config, &c1).map_err(chain)?;
        let id = format!(
            "porep-{}-{}",
            spec.sector_size,
            porep::to_hex(&spec.porep_id)
        );
        let t = Instant::now();
        let prepared = self.prepared(&id, || {
            porep::parameters_for(&config, self.options.load, &())
                .map(|c| c.params)
                .map_err(chain)
        })?;
        let params_ms = t.elapsed().as_millis() as u64;
        let t = Instant::now();
        let proofs = self.run(&prepared, circuits.into_iter().map(|(c, _)| c.into()))?;
        let prove_ms = t.elapsed().as_millis() as u64;
        let proof = aggregate::seal_proof(
            &config,
            c1.comm_r(),
            c1.seed(),
            Proof::many_to_bytes(&proofs),
        )
        .map_err(chain)?;
        let statement = porep::SealStatement::of(&config, &c1, job.prover_id(), job.sector_number);
        match statement.verify(&proof) {
            Ok(true) => Ok(Proven {
                proof,
                params_ms,
                prove_ms,
            }),
            Ok(false) => Err(
                "verify_seal rejected the proof (the C1 output does not prove this sector for \
                 this miner: check sector_number and miner_id); no proof is reported"
                    .into(),
            ),
            Err(e) => Err(format!("verify_seal: {e:#}")),
        }
    }

    /// One job's partitions through the engine.
    fn run(
        &self,
        prepared: &PreparedParameters,
        circuits: impl Iterator<Item = FilecoinCircuit>,
    ) -> Result<Vec<Proof>, String> {
        self.engine
            .submit(prepared, circuits.collect(), &mut rand::thread_rng())
            .and_then(|job| job.wait())
            .map_err(text)
    }

    /// The parameters of `id` prepared on the engine, loaded by `load` the first time.
    fn prepared(
        &self,
        id: &str,
        load: impl FnOnce() -> Result<Parameters, String>,
    ) -> Result<PreparedParameters, String> {
        if let Some(p) = self
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
        {
            return Ok(p.clone());
        }
        let prepared = self.engine.prepare(Arc::new(load()?)).map_err(text)?;
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), prepared.clone());
        Ok(prepared)
    }
}
