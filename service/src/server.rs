//! The server: `cuzk.v1.ProvingEngine` over a unix socket or TCP, jobs written to the store
//! before `SubmitProof` answers, and a worker that claims them (highest priority first, then the
//! oldest) while fewer than `concurrent_jobs` are being proven, or one more when it is more
//! urgent than every running job; each claimed job's partitions go
//! into the one engine at the job's priority, so a more urgent job's partitions are taken at the
//! next partition boundary. A stop (the future [`serve`] is given) stops accepting, lets the
//! running jobs finish up to a timeout, puts those left unfinished back in the queue and leaves
//! queued jobs in the store.
//!
//! The server is one node of the store's servers (one, with the embedded store; any number
//! sharing a PostgreSQL store): it claims jobs with a lease, its heartbeat (the `heartbeat`
//! module) keeps the leases of the jobs it runs and lets other nodes' run-out leases go, and it
//! writes a result only while it still owns the job's attempt.

// tonic's `Status` is what every RPC returns on error; boxing it here would only be unboxed again.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prost::Message;
use tonic::{Request, Response, Status};

use crate::circuits::Circuit;
use crate::listen::{bind_unix, Listen};
use crate::metrics::{Metrics, Scrape};
use crate::proto::proving_engine_server::{ProvingEngine, ProvingEngineServer};
use crate::proto::{
    await_proof_response, AwaitProofRequest, AwaitProofResponse, CancelProofRequest,
    CancelProofResponse, EvictSrsRequest, EvictSrsResponse, GetMetricsRequest, GetMetricsResponse,
    GetStatusRequest, GetStatusResponse, PreloadSrsRequest, PreloadSrsResponse, ProofKind,
    ProveRequest, ProveResponse, QueueStatus, SrsStatus, SubmitProofRequest, SubmitProofResponse,
};
use crate::prove::{CancelToken, Estimate, Prover, ProverOptions};
use crate::request::{check, Limits};
use crate::store::blobs::blob_key;
use crate::store::{
    now_ms, payload_of_live, Cancelled, ClaimFilter, JobRecord, JobState, JobStore, MemoryRoom,
    NewJob, Node, Outcome, PgOptions, PgStore, SqliteStore, StoreError, Submitted,
};
use prover_core::accounting::ledger::Stage;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where it listens.
    pub listen: Listen,
    /// The store's directory (the embedded store's database and payloads).
    pub data_dir: PathBuf,
    /// A PostgreSQL store instead of the embedded one.
    pub store: Option<PgOptions>,
    /// The bearer token every call must carry, when set.
    pub auth_token: Option<String>,
    /// The largest message received or sent.
    pub max_message_bytes: usize,
    /// Limits on a request's contents.
    pub limits: Limits,
    /// How jobs are proven.
    pub prover: ProverOptions,
    /// How long a finished job's result is kept.
    pub retention: Duration,
    /// How long a stop waits for the running jobs.
    pub stop_timeout: Duration,
    /// Jobs proven at once (their partitions interleaved in the engine by priority).
    pub concurrent_jobs: usize,
    /// Of those, slots only WindowPoSt and WinningPoSt (priority high and above) may take.
    pub post_slots: usize,
    /// This server's name among the servers sharing its store, the same across its restarts.
    pub node: String,
    /// How long a claim holds without a heartbeat (heartbeats come every third of it).
    pub lease: Duration,
    /// Times a job is claimed at most: a job whose lease ran out that often fails.
    pub max_attempts: u32,
    /// Jobs queued at most (a new one beyond it is `RESOURCE_EXHAUSTED`); none: no limit.
    pub max_queued: Option<u64>,
    /// Where to serve `/metrics` and `/status` over HTTP, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// A failure to start or run the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address.
    #[error("{0}")]
    Listen(String),
    /// The job store.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The gRPC transport.
    #[error("gRPC transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The engine.
    #[error("{0}")]
    Engine(String),
}

/// What the RPCs, the worker and the heartbeat share.
pub(crate) struct Shared {
    pub(crate) store: Mutex<Box<dyn JobStore>>,
    /// This server among the store's nodes.
    pub(crate) node: Node,
    pub(crate) max_attempts: u32,
    prover: Prover,
    limits: Limits,
    max_queued: Option<u64>,
    started: Instant,
    /// The worker waits here for work.
    wake: (Mutex<()>, Condvar),
    /// Awaiting calls wait here for a job to end.
    pub(crate) ended: tokio::sync::Notify,
    pub(crate) stop: AtomicBool,
    /// Set once the stop has waited for the running jobs: the heartbeat ends.
    pub(crate) done: AtomicBool,
    /// Jobs being proven, by id: their kind, attempt and how to cancel them.
    pub(crate) running: Mutex<BTreeMap<String, RunningJob>>,
    completed: AtomicU64,
    failed: AtomicU64,
    pub(crate) metrics: Metrics,
}

pub(crate) struct RunningJob {
    kind: String,
    priority: i32,
    /// Its memory estimate: input and one partition.
    estimate: Estimate,
    /// The attempt this node runs.
    pub(crate) attempt: u32,
    pub(crate) cancel: Arc<CancelToken>,
    /// Set when the heartbeat found the job no longer this attempt's (cancelled elsewhere, or
    /// its lease ran out).
    pub(crate) lost: Arc<AtomicBool>,
}

pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

impl Shared {
    /// The metrics' text exposition now.
    fn metrics_text(&self) -> Result<String, String> {
        let (queued, nodes) = {
            let store = self.store();
            let queued = store.queued().map_err(|e| e.to_string())?;
            (queued, store.nodes().map_err(|e| e.to_string())?)
        };
        let running = self.running_kinds();
        let ledger = self.prover.ledger();
        Ok(self.metrics.render(&Scrape {
            ledger: &ledger,
            queued: &queued,
            running: &running,
            parameters_bytes: self.prover.loaded().iter().map(|p| p.bytes).sum(),
            uptime_seconds: self.started.elapsed().as_secs(),
            nodes: &nodes,
        }))
    }

    /// The server's state as JSON (`/status`).
    fn status_json(&self) -> Result<serde_json::Value, String> {
        let (queued, nodes) = {
            let store = self.store();
            let queued = store.queued().map_err(|e| e.to_string())?;
            (queued, store.nodes().map_err(|e| e.to_string())?)
        };
        let running: Vec<serde_json::Value> = lock(&self.running)
            .iter()
            .map(|(id, r)| serde_json::json!({"job_id": id, "kind": r.kind}))
            .collect();
        let l = self.prover.ledger();
        let stages: serde_json::Map<String, serde_json::Value> = Stage::ALL
            .iter()
            .map(|&st| {
                let u = l.stage(st);
                (
                    st.name().to_string(),
                    serde_json::json!({
                        "partitions": u.count.live,
                        "partitions_peak": u.count.peak,
                        "host_bytes": u.bytes.live,
                        "host_bytes_peak": u.bytes.peak,
                        "device_bytes": l.stage_device(st).live,
                        "device_bytes_peak": l.stage_device(st).peak,
                    }),
                )
            })
            .collect();
        Ok(serde_json::json!({
            "node": self.node.name,
            "nodes": nodes
                .iter()
                .map(|n| serde_json::json!({
                    "node": n.name,
                    "live": n.heartbeat_age_ms.is_some_and(|a| a < self.node.lease_ms),
                    "heartbeat_age_ms": n.heartbeat_age_ms,
                    "running": n.running,
                }))
                .collect::<Vec<_>>(),
            "uptime_seconds": self.started.elapsed().as_secs(),
            "completed": self.completed.load(Ordering::Relaxed),
            "failed": self.failed.load(Ordering::Relaxed),
            "running": running,
            "queued": queued
                .iter()
                .map(|(kind, priority, n)| serde_json::json!({
                    "kind": kind, "priority": priority, "jobs": n
                }))
                .collect::<Vec<_>>(),
            "parameters": self
                .prover
                .loaded()
                .iter()
                .map(|p| serde_json::json!({"circuit_id": p.circuit_id, "bytes": p.bytes}))
                .collect::<Vec<_>>(),
            "ledger": {
                "stages": stages,
                "total_bytes": l.total_bytes.live,
                "total_bytes_peak": l.total_bytes.peak,
                "device_bytes": l.device_bytes.live,
                "device_bytes_peak": l.device_bytes.peak,
            },
        }))
    }

    fn running_kinds(&self) -> Vec<String> {
        lock(&self.running)
            .values()
            .map(|r| r.kind.clone())
            .collect()
    }

    pub(crate) fn store(&self) -> MutexGuard<'_, Box<dyn JobStore>> {
        lock(&self.store)
    }

    pub(crate) fn wake_worker(&self) {
        let _g = lock(&self.wake.0);
        self.wake.1.notify_all();
    }

    fn get(&self, id: &str) -> Result<JobRecord, Status> {
        if id.is_empty() {
            return Err(Status::invalid_argument("job_id: empty"));
        }
        self.store()
            .get(id)
            .map_err(internal)?
            .ok_or_else(|| Status::not_found(format!("job_id: no job {id:?}")))
    }

    fn submit(&self, req: &SubmitProofRequest) -> Result<SubmitProofResponse, Status> {
        let accepted = check(req, &self.limits)?;
        // The payload's blob first, without holding the store, so that a large payload's
        // transfer holds up no other call (a heartbeat among them). Named by its digest, it may
        // be written twice; the store writes it again if a removal came in between.
        let payload = Arc::new(req.encode_to_vec());
        let blobs = self.store().blobs();
        blobs
            .put(&blob_key(&accepted.digest), payload.clone())
            .map_err(internal)?;
        let estimate = self.prover.estimate(&accepted);
        let mut store = self.store();
        let queued_before: u64 = store.queued().map_err(internal)?.iter().map(|q| q.2).sum();
        let submitted = store
            .submit(NewJob {
                request_id: accepted.request_id.clone(),
                digest: accepted.digest,
                kind: kind_name(req.proof_kind),
                circuit: Circuit::of(&accepted).id(),
                priority: accepted.priority as i32,
                payload,
                mem_bytes: estimate.input.saturating_add(estimate.partition),
                input_bytes: estimate.input,
                max_queued: self.max_queued,
            })
            .map_err(internal)?;
        drop(store);
        let job = match submitted {
            Submitted::New(job) => {
                self.wake_worker();
                job
            }
            Submitted::Existing(job) => job,
            Submitted::Conflict(job) => {
                return Err(Status::already_exists(format!(
                    "request_id: {:?} was submitted with another payload (job {})",
                    job.request_id, job.id
                )))
            }
            Submitted::Full(n) => {
                return Err(Status::resource_exhausted(format!(
                    "the queue holds {n} jobs, its limit (--max-queued): submit again later"
                )))
            }
        };
        Ok(SubmitProofResponse {
            queue_position: if job.state == JobState::Queued {
                queued_before.min(u32::MAX as u64) as u32
            } else {
                0
            },
            job_id: job.id,
            assigned_gpu: String::new(),
        })
    }

    async fn await_job(&self, id: &str, timeout_ms: u64) -> Result<AwaitProofResponse, Status> {
        let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
        loop {
            // Registered before the look, so that an end between the two is not missed.
            let ended = self.ended.notified();
            let job = self.get(id)?;
            if job.state.is_final() {
                return Ok(response(job));
            }
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) => left.min(Duration::from_secs(1)),
                    None => {
                        return Ok(AwaitProofResponse {
                            job_id: job.id,
                            status: await_proof_response::Status::Timeout as i32,
                            ..Default::default()
                        })
                    }
                },
                None => Duration::from_secs(1),
            };
            let _ = tokio::time::timeout(wait, ended).await;
        }
    }
}

fn kind_name(kind: i32) -> String {
    ProofKind::try_from(kind)
        .map(|k| k.as_str_name().to_string())
        .unwrap_or_else(|_| format!("KIND_{kind}"))
}

fn response(job: JobRecord) -> AwaitProofResponse {
    use await_proof_response::Status as S;
    let status = match job.state {
        JobState::Completed => S::Completed,
        JobState::Failed => S::Failed,
        JobState::Cancelled => S::Cancelled,
        JobState::Queued | JobState::Running => S::Unknown,
    };
    AwaitProofResponse {
        status: status as i32,
        proof: job.proof.unwrap_or_default(),
        error_message: job.error.unwrap_or_default(),
        total_ms: job
            .finished_ms
            .map_or(0, |f| f.saturating_sub(job.submitted_ms)),
        queue_wait_ms: job
            .started_ms
            .map_or(0, |s| s.saturating_sub(job.submitted_ms)),
        srs_load_ms: job.timings.srs_load_ms,
        synthesis_ms: job.timings.synthesis_ms,
        gpu_compute_ms: job.timings.gpu_compute_ms,
        job_id: job.id,
    }
}

struct Service(Arc<Shared>);

#[tonic::async_trait]
impl ProvingEngine for Service {
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        let shared = self.0.clone();
        let req = request.into_inner();
        // The store syncs the payload to disk: off the async threads.
        tokio::task::spawn_blocking(move || shared.submit(&req))
            .await
            .map_err(internal)?
            .map(Response::new)
    }

    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        let req = request.into_inner();
        self.0
            .await_job(&req.job_id, req.timeout_ms)
            .await
            .map(Response::new)
    }

    async fn prove(
        &self,
        request: Request<ProveRequest>,
    ) -> Result<Response<ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("submit: missing"))?;
        let shared = self.0.clone();
        let submitted = tokio::task::spawn_blocking(move || shared.submit(&submit))
            .await
            .map_err(internal)??;
        let result = self.0.await_job(&submitted.job_id, 0).await?;
        Ok(Response::new(ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let id = request.into_inner().job_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("job_id: empty"));
        }
        let outcome = self.0.store().cancel(&id).map_err(internal)?;
        match outcome {
            Cancelled::Unknown => Err(Status::not_found(format!("job_id: no job {id:?}"))),
            Cancelled::AlreadyEnded(state) => Err(Status::failed_precondition(format!(
                "job {id} has ended already ({state:?})"
            ))),
            Cancelled::WasQueued | Cancelled::WasRunning => {
                // A running job stops: its queued partitions are dropped, those in flight
                // discarded at their next stage boundary, and their budget released.
                if let Some(r) = lock(&self.0.running).get(&id) {
                    r.cancel.cancel();
                }
                self.0.ended.notify_waiters();
                Ok(Response::new(CancelProofResponse {
                    was_running: outcome == Cancelled::WasRunning,
                }))
            }
        }
    }

    async fn get_status(
        &self,
        _request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let shared = &self.0;
        let queued = shared.store().queued().map_err(internal)?;
        let mut queues: BTreeMap<String, QueueStatus> = BTreeMap::new();
        for (kind, _priority, n) in queued {
            let q = queues.entry(kind.clone()).or_insert_with(|| QueueStatus {
                proof_kind: kind,
                ..Default::default()
            });
            q.pending += n.min(u32::MAX as u64) as u32;
        }
        // Every node's running jobs, not only this one's.
        let running = shared.store().running().map_err(internal)?;
        for (kind, n) in running {
            queues
                .entry(kind.clone())
                .or_insert_with(|| QueueStatus {
                    proof_kind: kind,
                    ..Default::default()
                })
                .in_progress += n.min(u32::MAX as u64) as u32;
        }
        Ok(Response::new(GetStatusResponse {
            gpus: Vec::new(),
            loaded_srs: shared
                .prover
                .loaded()
                .into_iter()
                .map(|p| SrsStatus {
                    circuit_id: p.circuit_id,
                    tier: crate::proto::srs_status::Tier::Hot as i32,
                    size_bytes: p.bytes,
                    ref_count: 0,
                })
                .collect(),
            queues: queues.into_values().collect(),
            total_proofs_completed: shared.completed.load(Ordering::Relaxed),
            total_proofs_failed: shared.failed.load(Ordering::Relaxed),
            uptime_seconds: shared.started.elapsed().as_secs(),
            pinned_memory_bytes: 0,
            pinned_memory_limit_bytes: 0,
        }))
    }

    async fn get_metrics(
        &self,
        _request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let shared = self.0.clone();
        let text = tokio::task::spawn_blocking(move || shared.metrics_text())
            .await
            .map_err(internal)?
            .map_err(Status::internal)?;
        Ok(Response::new(GetMetricsResponse {
            prometheus_text: text,
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<PreloadSrsRequest>,
    ) -> Result<Response<PreloadSrsResponse>, Status> {
        let circuit =
            Circuit::parse(&request.into_inner().circuit_id).map_err(Status::invalid_argument)?;
        let shared = self.0.clone();
        let t = Instant::now();
        // Reading (or generating) parameters blocks: off the async threads.
        let held = tokio::task::spawn_blocking(move || shared.prover.preload(circuit))
            .await
            .map_err(internal)?
            .map_err(|e| Status::internal(format!("loading {}: {e}", circuit.id())))?;
        Ok(Response::new(PreloadSrsResponse {
            already_loaded: held,
            load_time_ms: if held {
                0
            } else {
                t.elapsed().as_millis() as u64
            },
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let circuit =
            Circuit::parse(&request.into_inner().circuit_id).map_err(Status::invalid_argument)?;
        let freed = self.0.prover.evict(circuit);
        Ok(Response::new(EvictSrsResponse {
            was_loaded: freed.is_some(),
            freed_bytes: freed.unwrap_or(0),
        }))
    }
}

/// Checks the bearer token of every call.
#[derive(Clone)]
struct Auth(Option<Arc<str>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(token) = &self.0 else {
            return Ok(req);
        };
        let given = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => Ok(req),
            Some(_) => Err(Status::unauthenticated("the bearer token is wrong")),
            None => Err(Status::unauthenticated(
                "this server requires a bearer token (authorization: Bearer <token>)",
            )),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Jobs submitted this long ago are claimed in their turn even by a node that holds another
/// circuit's parameters.
const HELD_PREFERENCE: Duration = Duration::from_secs(600);

/// Claims jobs while fewer than `slots` are being proven (`post_slots` of them for PoSt only),
/// each proven on its own thread, until told to stop; then waits for the running ones.
fn worker(shared: Arc<Shared>, retention: Duration, slots: usize, post_slots: usize) {
    let mut last_purge = Instant::now() - Duration::from_secs(3600);
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        if last_purge.elapsed() > Duration::from_secs(60) {
            let before = now_ms().saturating_sub(retention.as_millis() as u64);
            if let Err(e) = shared.store().purge_ended_before(before) {
                eprintln!("warning: purging ended jobs: {e}");
            }
            last_purge = Instant::now();
        }
        threads.retain(|t| !t.is_finished());
        let idle = |shared: &Shared| {
            let g = lock(&shared.wake.0);
            let _ = shared.wake.1.wait_timeout(g, Duration::from_millis(500));
        };
        let Some(min_priority) = room_for_next(&shared, slots, post_slots) else {
            idle(&shared);
            continue;
        };
        let claimed = claim(&shared, min_priority);
        let job = match claimed {
            Ok(Some(job)) => job,
            Ok(None) => {
                idle(&shared);
                continue;
            }
            Err(e) => {
                eprintln!("error: claiming a job: {e}");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        shared.metrics.claimed(job.attempts);
        let cancel = Arc::new(CancelToken::default());
        let lost = Arc::new(AtomicBool::new(false));
        let earlier = lock(&shared.running).insert(
            job.id.clone(),
            RunningJob {
                kind: job.kind.clone(),
                priority: job.priority,
                estimate: Estimate {
                    input: job.input_bytes,
                    partition: job.mem_bytes.saturating_sub(job.input_bytes),
                },
                attempt: job.attempts,
                cancel: cancel.clone(),
                lost: lost.clone(),
            },
        );
        if let Some(earlier) = earlier {
            // This node's earlier attempt lost its lease and the job came back to it.
            earlier.lost.store(true, Ordering::Release);
            earlier.cancel.cancel();
        }
        let id = job.id.clone();
        let spawned = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("proofline-job-{}", &id[..id.len().min(8)]))
                .spawn(move || prove_claimed(&shared, &job, &cancel, &lost))
        };
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                // The job stays running in the store; its lease runs out, and it runs again.
                eprintln!("error: starting job {id}'s thread: {e}");
                lock(&shared.running).remove(&id);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
}

/// The lowest priority the worker may claim now, if any: every job while fewer than
/// `slots - post_slots` jobs run; WindowPoSt and WinningPoSt (high and above) while fewer than
/// `slots` run; once they are full, one more job above every running job's priority (a
/// WinningPoSt behind full slots of C2 jobs joins them at once, and its partitions go first at
/// the engine's next partition boundary).
fn room_for_next(shared: &Shared, slots: usize, post_slots: usize) -> Option<i32> {
    let running: Vec<i32> = lock(&shared.running).values().map(|r| r.priority).collect();
    if running.len() < slots.saturating_sub(post_slots) {
        return Some(i32::MIN);
    }
    if running.len() < slots {
        return Some(crate::proto::Priority::High as i32);
    }
    if running.len() > slots {
        return None;
    }
    running
        .iter()
        .copied()
        .max()
        .map(|top| top.saturating_add(1))
}

/// Claims the next job of priority `min_priority` or above whose memory estimate fits the room
/// the budget has beside the estimates of the jobs this node runs. WindowPoSt and WinningPoSt
/// (high and above) are not weighed: their partitions are small and go first at the engine's
/// next partition boundary. Nor is anything while the node runs nothing: a job larger than the
/// whole budget is then claimed and fails with admission's reason, rather than wait forever.
fn claim(shared: &Shared, min_priority: i32) -> Result<Option<JobRecord>, StoreError> {
    let mut filter = ClaimFilter {
        min_priority,
        held: shared
            .prover
            .loaded()
            .into_iter()
            .map(|p| p.circuit_id)
            .collect(),
        aged_before_ms: now_ms().saturating_sub(HELD_PREFERENCE.as_millis() as u64),
        room: None,
    };
    let high = crate::proto::Priority::High as i32;
    let committed: Vec<Estimate> = lock(&shared.running).values().map(|r| r.estimate).collect();
    let Some(room) = claim_room(shared.prover.budget_capacity(), &committed, min_priority) else {
        return shared.store().claim_next(&shared.node, &filter);
    };
    // PoSt first, unweighed (the order a single claim would give: highest priority first).
    let post = ClaimFilter {
        min_priority: high,
        ..filter.clone()
    };
    if let Some(job) = shared.store().claim_next(&shared.node, &post)? {
        return Ok(Some(job));
    }
    filter.room = Some(room);
    shared.store().claim_next(&shared.node, &filter)
}

/// The room a claim of priority `min_priority` or above may take beside running jobs of
/// `committed` estimates, under a budget of `capacity` bytes, by admission's rule (the inputs
/// held plus the largest partition of their jobs fit the budget); `None` when nothing is
/// weighed (no budget, nothing running, or a claim of PoSt only).
fn claim_room(
    capacity: Option<u64>,
    committed: &[Estimate],
    min_priority: i32,
) -> Option<MemoryRoom> {
    let capacity = capacity?;
    if committed.is_empty() || min_priority >= crate::proto::Priority::High as i32 {
        return None;
    }
    let inputs = committed
        .iter()
        .fold(0u64, |a, e| a.saturating_add(e.input));
    let largest = committed.iter().map(|e| e.partition).max().unwrap_or(0);
    let total = capacity.saturating_sub(inputs);
    Some(MemoryRoom {
        total,
        input: total.saturating_sub(largest),
    })
}

/// Proves a claimed job and records its outcome, if this attempt still owns it.
fn prove_claimed(shared: &Shared, job: &JobRecord, cancel: &CancelToken, lost: &AtomicBool) {
    let started = Instant::now();
    if let Some(outcome) = run_job(shared, job, cancel) {
        record(shared, job, outcome, started, lost);
    }
    {
        let mut running = lock(&shared.running);
        if running
            .get(&job.id)
            .is_some_and(|r| r.attempt == job.attempts)
        {
            running.remove(&job.id);
        }
    }
    shared.ended.notify_waiters();
    shared.wake_worker();
}

/// Writes a proven job's outcome, if this attempt still owns the job, and counts it.
fn record(shared: &Shared, job: &JobRecord, outcome: Outcome, started: Instant, lost: &AtomicBool) {
    let ok = matches!(outcome, Outcome::Completed(..));
    // The database may be away for a moment (restarting): the result is written once it is
    // back, for as long as the job's lease would hold.
    let give_up = Instant::now() + Duration::from_millis(shared.node.lease_ms);
    let mut retried = false;
    let finished = loop {
        let tried =
            shared
                .store()
                .finish(&job.id, &shared.node.name, job.attempts, outcome.clone());
        match tried {
            Err(e) if Instant::now() < give_up => {
                eprintln!("error: recording job {}: {e} (trying again)", job.id);
                retried = true;
                std::thread::sleep(Duration::from_millis(500));
            }
            // A try whose answer was lost may have written it: then it is this attempt's.
            Ok(false) if retried => {
                let written = shared.store().get(&job.id).ok().flatten().is_some_and(|j| {
                    j.state.is_final()
                        && j.state != JobState::Cancelled
                        && j.owner.as_deref() == Some(shared.node.name.as_str())
                        && j.attempts == job.attempts
                });
                break Ok(written);
            }
            other => break other,
        }
    };
    match finished {
        Ok(true) => {
            let (n, name) = if ok {
                (&shared.completed, "completed")
            } else {
                (&shared.failed, "failed")
            };
            n.fetch_add(1, Ordering::Relaxed);
            shared
                .metrics
                .ended(&job.kind, name, started.elapsed().as_secs_f64());
        }
        Ok(false) => {
            // Cancelled while it ran, or this attempt lost its lease: the result is discarded.
            let cancelled = shared
                .store()
                .get(&job.id)
                .ok()
                .flatten()
                .is_some_and(|j| j.state == JobState::Cancelled);
            if !cancelled {
                lost.store(true, Ordering::Release);
                eprintln!(
                    "job {}: attempt {} no longer holds the job (its lease ran out); its result \
                     was discarded",
                    job.id, job.attempts
                );
            }
        }
        Err(e) => eprintln!("error: recording job {}: {e}", job.id),
    }
    if lost.load(Ordering::Acquire) {
        shared.metrics.lease_lost();
    }
}

/// Proves a claimed job: its outcome, or `None` when the store cannot be read now (the job is
/// left to its lease, and runs again once it runs out).
fn run_job(shared: &Shared, job: &JobRecord, cancel: &CancelToken) -> Option<Outcome> {
    // Read without holding the store (see `Shared::submit`).
    let (record, blobs) = {
        let store = shared.store();
        (store.get(&job.id), store.blobs())
    };
    let payload = match record.and_then(|r| payload_of_live(&*blobs, r)) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Some(Outcome::Failed(
                "the job ended before its payload was read".into(),
            ))
        }
        Err(StoreError::MissingPayload(what)) => {
            return Some(Outcome::Failed(format!(
                "the job's payload is missing ({what}): servers sharing a store need one shared \
                 --blob-dir or --blob-store"
            )))
        }
        Err(e) => {
            eprintln!(
                "error: reading job {}'s payload: {e}; it runs again when its lease runs out",
                job.id
            );
            return None;
        }
    };
    let accepted = SubmitProofRequest::decode(payload.as_slice())
        .map_err(|e| format!("the stored request does not decode: {e}"))
        .and_then(|req| check(&req, &shared.limits).map_err(|e| e.to_string()));
    let mut accepted = match accepted {
        Ok(a) => a,
        Err(e) => return Some(Outcome::Failed(e)),
    };
    // A payload is stored once per digest of its proof-relevant fields: the blob may be another
    // request's with the same proof, so the job's own priority is the stored one.
    if let Some(p) = crate::proto::Priority::try_from(job.priority)
        .ok()
        .filter(|p| *p != crate::proto::Priority::Unspecified)
    {
        accepted.priority = p;
    }
    drop(payload);
    let prover = &shared.prover;
    // A panic in a proof fails its job, not the server.
    Some(
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            prover.prove(accepted, cancel)
        })) {
            Ok(Ok(proven)) => Outcome::Completed(proven.proof, proven.timings),
            Ok(Err(reason)) => Outcome::Failed(reason),
            Err(_) => Outcome::Failed("the prover panicked on this job".into()),
        },
    )
}

/// `/metrics` (Prometheus' text format) and `/status` (JSON) over HTTP.
fn http_routes(shared: Arc<Shared>) -> axum::Router {
    use axum::http::{header, StatusCode};
    use axum::routing::get;
    let metrics = {
        let shared = shared.clone();
        move || {
            let shared = shared.clone();
            async move {
                match tokio::task::spawn_blocking(move || shared.metrics_text()).await {
                    Ok(Ok(text)) => (
                        StatusCode::OK,
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        text,
                    ),
                    Ok(Err(e)) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        e,
                    ),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        e.to_string(),
                    ),
                }
            }
        }
    };
    let status = move || {
        let shared = shared.clone();
        async move {
            match tokio::task::spawn_blocking(move || shared.status_json()).await {
                Ok(Ok(v)) => (StatusCode::OK, axum::Json(v)),
                Ok(Err(e)) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(serde_json::json!({ "error": e })),
                ),
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(serde_json::json!({ "error": e.to_string() })),
                ),
            }
        }
    };
    axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
}

/// Runs the server until `stop` resolves.
pub async fn serve(
    options: ServeOptions,
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    // The embedded store is one server's: its data directory stays locked while it runs.
    let (mut store, _data_dir_lock): (Box<dyn JobStore>, _) = match &options.store {
        None => {
            let lock = SqliteStore::lock_dir(&options.data_dir)?;
            (Box::new(SqliteStore::open(&options.data_dir)?), Some(lock))
        }
        Some(pg) => (Box::new(PgStore::open(pg)?), None),
    };
    let node = Node {
        name: options.node.clone(),
        instance: format!("{:016x}", rand::random::<u64>()),
        lease_ms: options.lease.as_millis().max(1) as u64,
        sole: options.store.is_none(),
    };
    let expired = store.join(&node, options.max_attempts.max(1))?;
    crate::heartbeat::report(&expired);
    let shared = Arc::new(Shared {
        store: Mutex::new(store),
        node,
        max_attempts: options.max_attempts.max(1),
        prover: Prover::new(options.prover).map_err(ServeError::Engine)?,
        limits: options.limits,
        max_queued: options.max_queued,
        started: Instant::now(),
        wake: (Mutex::new(()), Condvar::new()),
        ended: tokio::sync::Notify::new(),
        stop: AtomicBool::new(false),
        done: AtomicBool::new(false),
        running: Mutex::new(BTreeMap::new()),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        metrics: Metrics::default(),
    });
    for _ in &expired {
        shared.metrics.lease_expired();
    }
    let auth = Auth(options.auth_token.as_deref().map(Arc::from));
    let svc = ProvingEngineServer::new(Service(shared.clone()))
        .max_decoding_message_size(options.max_message_bytes)
        .max_encoding_message_size(options.max_message_bytes);
    let svc = tonic::service::interceptor::InterceptedService::new(svc, auth);
    let router = tonic::transport::Server::builder().add_service(svc);
    // Bound before the worker starts, so that a bad address fails at once.
    enum Bound {
        Unix(tokio::net::UnixListener),
        Tcp(tokio::net::TcpListener),
    }
    let bound = match &options.listen {
        Listen::Unix(path) => Bound::Unix(bind_unix(path).map_err(ServeError::Listen)?),
        Listen::Tcp(addr) => Bound::Tcp(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ServeError::Listen(format!("binding {addr}: {e}")))?,
        ),
    };
    let worker_thread = {
        let shared = shared.clone();
        let (retention, slots) = (options.retention, options.concurrent_jobs.max(1));
        let post_slots = options.post_slots.min(slots);
        std::thread::Builder::new()
            .name("proofline-worker".into())
            .spawn(move || worker(shared, retention, slots, post_slots))
            .map_err(|e| ServeError::Listen(format!("starting the worker: {e}")))?
    };
    let heartbeat_thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("proofline-heartbeat".into())
            .spawn(move || crate::heartbeat::run(&shared))
            .map_err(|e| ServeError::Listen(format!("starting the heartbeat: {e}")))?
    };
    if let Some(addr) = options.metrics_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Listen(format!("binding the metrics address {addr}: {e}")))?;
        let app = http_routes(shared.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("error: the metrics endpoint stopped: {e}");
            }
        });
        eprintln!("proofline serve: metrics on http://{addr}/metrics and /status");
    }
    eprintln!("proofline serve: listening on {}", options.listen);
    let served = match bound {
        Bound::Unix(l) => {
            router
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::UnixListenerStream::new(l),
                    stop,
                )
                .await
        }
        Bound::Tcp(l) => {
            router
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(l),
                    stop,
                )
                .await
        }
    };
    // Stopping: no new calls; the running jobs may finish within the timeout.
    shared.stop.store(true, Ordering::Release);
    shared.wake_worker();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = worker_thread.join();
        let _ = tx.send(());
    });
    if rx.recv_timeout(options.stop_timeout).is_err() {
        for id in lock(&shared.running).keys() {
            eprintln!(
                "stopping with job {id} unfinished after {:?}: it goes back to the queue",
                options.stop_timeout
            );
        }
    }
    shared.done.store(true, Ordering::Release);
    let _ = heartbeat_thread.join();
    // Unfinished jobs go back to the queue now, not when their lease runs out; their proving
    // stops.
    for r in lock(&shared.running).values() {
        r.cancel.cancel();
    }
    if let Err(e) = shared.store().leave(&shared.node) {
        eprintln!("error: leaving the store's nodes: {e}");
    }
    if let Listen::Unix(path) = &options.listen {
        let _ = std::fs::remove_file(path);
    }
    served?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{claim_room, Estimate, MemoryRoom};
    use crate::proto::Priority;

    #[test]
    fn claims_are_weighed_against_the_room_the_running_jobs_leave() {
        let normal = Priority::Normal as i32;
        let gib = 1u64 << 30;
        let job = |input: u64, partition: u64| Estimate { input, partition };
        let room = |total: u64, input: u64| Some(MemoryRoom { total, input });
        // The budget less the running jobs' inputs; for the input, less their largest
        // partition too (one partition of theirs or the new job's must fit beside the inputs).
        assert_eq!(
            claim_room(
                Some(64 * gib),
                &[job(2 * gib, 20 * gib), job(gib, 30 * gib)],
                normal
            ),
            room(61 * gib, 31 * gib)
        );
        // Two jobs of 1 GiB inputs and 10 GiB partitions fit a 22 GiB budget together, as
        // admission lets them: 1 + 1 + 10 <= 22.
        let r = claim_room(Some(22 * gib), &[job(gib, 10 * gib)], normal).unwrap();
        assert!(11 * gib <= r.total && gib <= r.input);
        // A third does not fit beside two: the input's room is gone.
        let r = claim_room(
            Some(12 * gib),
            &[job(gib, 10 * gib), job(gib, 10 * gib)],
            normal,
        );
        assert_eq!(r, room(10 * gib, 0));
        assert_eq!(
            claim_room(Some(gib), &[job(u64::MAX, 1)], normal),
            room(0, 0)
        );
        // Not weighed: no budget, an idle node, or PoSt.
        assert_eq!(claim_room(None, &[job(gib, gib)], normal), None);
        assert_eq!(claim_room(Some(64 * gib), &[], normal), None);
        assert_eq!(
            claim_room(Some(64 * gib), &[job(gib, 60 * gib)], Priority::High as i32),
            None
        );
    }
}
