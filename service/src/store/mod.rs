//! The job store: every accepted job, written (its payload included) before `SubmitProof`
//! answers, so that nothing accepted is lost to a restart. [`JobStore`] is the interface a
//! server uses. Two stores implement it: [`SqliteStore`] keeps jobs in an SQLite database under
//! the data directory (the default), [`PgStore`] in a PostgreSQL table. Payloads are never in a
//! row: each is a blob named by its digest ([`blobs`]: the embedded store's `payloads/`
//! directory; a directory shared by the servers of a PostgreSQL store, or an S3-compatible
//! bucket), written whole before the row that points at it and removed once no job that has not
//! ended needs it, so that a queued job's payload is kept until its turn and stored once however
//! many jobs carry it.
//!
//! `request_id` is an idempotency key: the same id with the same payload digest returns the
//! job already stored (queued, running or finished); the same id with another digest is
//! refused ([`Submitted::Conflict`]).
//!
//! Several servers may share one store (nodes: the PostgreSQL store reached from several
//! machines). A claim makes its node the job's owner for one attempt and gives it a lease;
//! the node's heartbeat extends the leases of the jobs it still owns. A running job whose lease
//! ran out (its node died or hung) goes back to the queue, or fails once it has been tried
//! `max_attempts` times ([`JobStore::expire_leases`]); a result is written only by the owner of
//! the job's current attempt ([`JobStore::finish`]), so a node that lost a job cannot overwrite
//! a newer attempt's result.

pub mod blobs;
mod on_thread;
mod postgres;
mod sqlite;

pub use blobs::BlobLocation;
pub use postgres::{PgOptions, PgStore};
pub use sqlite::SqliteStore;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A store failure (the database or a payload file).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The SQLite database.
    #[error("job store database: {0}")]
    Db(#[from] rusqlite::Error),
    /// The PostgreSQL server.
    #[error("job store database (PostgreSQL): {0}")]
    Pg(#[from] sqlx::Error),
    /// A payload file or the data directory.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The blob store (an S3-compatible bucket).
    #[error("{0}")]
    Blob(String),
    /// A live job's payload blob is not there.
    #[error("{0}")]
    MissingPayload(String),
    /// The store cannot be used now: another server holds it, or its server does not answer.
    #[error("job store: {0}")]
    Busy(String),
    /// A row that does not hold what this version writes.
    #[error("job store: {0}")]
    Corrupt(String),
}

type Result<T> = std::result::Result<T, StoreError>;

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for its turn.
    Queued,
    /// Claimed by a worker.
    Running,
    /// Proven; the proof is kept until the retention period ends.
    Completed,
    /// Failed, with its reason.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl JobState {
    pub(crate) fn code(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "queued" => JobState::Queued,
            "running" => JobState::Running,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            other => return Err(StoreError::Corrupt(format!("unknown job state {other:?}"))),
        })
    }

    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }
}

/// A job to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The client's idempotency key.
    pub request_id: String,
    /// The digest of its proof-relevant fields ([`crate::request::Accepted::digest`]).
    pub digest: [u8; 32],
    /// The proof kind's wire name (`POREP_SEAL_COMMIT`, ...).
    pub kind: String,
    /// The circuit it proves ([`crate::circuits::Circuit::id`]).
    pub circuit: String,
    /// Its priority (1 low to 4 critical).
    pub priority: i32,
    /// The request's bytes, kept in a blob until the job ends (written before the store is
    /// called, where the caller can: [`JobStore::blobs`]).
    pub payload: std::sync::Arc<Vec<u8>>,
    /// The memory it needs at once on a node, in bytes: its input while parsed, and one
    /// partition where the submitting node knows the circuit's size (0: not estimated).
    pub mem_bytes: u64,
    /// Of `mem_bytes`, its input's (the rest is one partition, which jobs on a node share the
    /// room for: see [`MemoryRoom`]).
    pub input_bytes: u64,
    /// Jobs queued at most: a new job beyond it is refused ([`Submitted::Full`]).
    pub max_queued: Option<u64>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The job id the store gave it.
    pub id: String,
    /// The client's idempotency key.
    pub request_id: String,
    /// Its payload digest.
    pub digest: [u8; 32],
    /// The proof kind's wire name.
    pub kind: String,
    /// Its priority.
    pub priority: i32,
    /// Its state.
    pub state: JobState,
    /// Times it was claimed: the current attempt's number while it runs.
    pub attempts: u32,
    /// The circuit it proves (`porep-32GiB`, ...): a node holding its parameters takes it first.
    pub circuit: String,
    /// The node that claimed it last.
    pub owner: Option<String>,
    /// While it runs, when its lease ends (the store's clock, milliseconds since the epoch).
    pub lease_until_ms: Option<u64>,
    /// The memory it needs at once on a node ([`NewJob::mem_bytes`]).
    pub mem_bytes: u64,
    /// Of it, its input's ([`NewJob::input_bytes`]).
    pub input_bytes: u64,
    /// The proof, once completed.
    pub proof: Option<Vec<u8>>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was submitted and when it ended (milliseconds since the Unix epoch).
    pub submitted_ms: u64,
    /// When it ended.
    pub finished_ms: Option<u64>,
    /// When it was last claimed.
    pub started_ms: Option<u64>,
    /// Where a completed job's time went (zeros until it completes).
    pub timings: Timings,
}

/// Where a completed job's time went, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timings {
    /// Loading its parameters (0 when they were held already).
    pub srs_load_ms: u64,
    /// Its partitions' synthesis, summed over the partitions.
    pub synthesis_ms: u64,
    /// Its partitions on the accelerator, summed over the partitions.
    pub gpu_compute_ms: u64,
}

/// What [`JobStore::submit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// A new job, queued.
    New(JobRecord),
    /// The same request sent again: the job already stored.
    Existing(JobRecord),
    /// The same `request_id` with another payload: refused.
    Conflict(JobRecord),
    /// A new job while the queue holds `max_queued` jobs already: refused, nothing stored.
    Full(u64),
}

/// How a job ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Proven: the proof, and where the time went.
    Completed(Vec<u8>, Timings),
    /// Failed, with the reason.
    Failed(String),
}

impl Outcome {
    /// The columns a store writes for it: the state, the proof, the reason and the timings.
    /// A NUL character in the reason (it may quote a client's payload) is written `\0`, since
    /// PostgreSQL's text holds none.
    fn columns(self) -> (JobState, Option<Vec<u8>>, Option<String>, Timings) {
        match self {
            Outcome::Completed(p, t) => (JobState::Completed, Some(p), None, t),
            Outcome::Failed(e) => (
                JobState::Failed,
                None,
                Some(e.replace('\0', "\\0")),
                Timings::default(),
            ),
        }
    }
}

/// What [`JobStore::cancel`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// No such job.
    Unknown,
    /// It had already ended; nothing changed.
    AlreadyEnded(JobState),
    /// It was queued and will never run.
    WasQueued,
    /// It was running: its result will be discarded.
    WasRunning,
}

/// A server sharing a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The name the other nodes see it by: unique among them, the same across its restarts
    /// (a restarted node takes its unfinished jobs back at once).
    pub name: String,
    /// This run of it (random), so that two processes given one name are told apart.
    pub instance: String,
    /// How long its claims hold without a heartbeat, in milliseconds.
    pub lease_ms: u64,
    /// No other process can run under its name (the embedded store's data directory is locked
    /// by this one): a previous run's recent heartbeat is not waited for, since that run is
    /// gone.
    pub sole: bool,
}

/// What a node may claim now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Only jobs of this priority or above (a slot kept for PoSt takes 3, high, and above).
    pub min_priority: i32,
    /// Circuits whose parameters the node holds: their jobs go before older ones of the same
    /// priority.
    pub held: Vec<String>,
    /// Jobs submitted before this time (milliseconds since the epoch) count as held, so that
    /// no job waits behind a stream of another circuit's jobs forever.
    pub aged_before_ms: u64,
    /// Only jobs that fit this room (`None`: any), or that were submitted before
    /// `aged_before_ms`: a large job is not passed over forever by nodes kept busy with small
    /// ones (claimed, it waits for memory on its node).
    pub room: Option<MemoryRoom>,
}

/// The memory a node has for one more job, as its budget admits job inputs: the inputs held
/// plus the largest partition any of their jobs needs must fit. A job fits when its estimate
/// (input and partition) is at most `total` and its input at most `input`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryRoom {
    /// The budget less the running jobs' inputs.
    pub total: u64,
    /// That, less the largest partition of the running jobs.
    pub input: u64,
}

/// A node as the store sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// Its name.
    pub name: String,
    /// Milliseconds since its last heartbeat (by the store's clock); `None` once it left.
    pub heartbeat_age_ms: Option<u64>,
    /// Jobs it owns that are running.
    pub running: u64,
}

/// A running job whose lease ran out, put back in the queue or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    /// The job.
    pub id: String,
    /// The node that had it.
    pub owner: String,
    /// Its attempts so far.
    pub attempts: u32,
    /// Back in the queue (else failed: its attempts were used up).
    pub requeued: bool,
}

/// Where a server keeps its jobs.
pub trait JobStore: Send {
    /// Stores a job before the request is answered (see the module's idempotency rules).
    fn submit(&mut self, job: NewJob) -> Result<Submitted>;
    /// A job by id.
    fn get(&self, id: &str) -> Result<Option<JobRecord>>;
    /// The payload of a job that has not ended.
    fn payload(&self, id: &str) -> Result<Option<Vec<u8>>>;
    /// Where the payloads are: a caller may write a payload's blob ([`blobs::blob_key`])
    /// before [`JobStore::submit`] and read one ([`payload_of_live`]) without holding the
    /// store, so that a large payload's transfer does not hold up the store's other calls.
    fn blobs(&self) -> std::sync::Arc<dyn blobs::Blobs>;
    /// Registers `node` at its start. Another live process under its name (a heartbeat within
    /// that process's lease) is waited for up to two leases, then refused ([`StoreError::Busy`]).
    /// The jobs a previous run of the node left running are let go at once, by the rules of
    /// [`JobStore::expire_leases`].
    fn join(&mut self, node: &Node, max_attempts: u32) -> Result<Vec<Expired>>;
    /// Claims the next queued job `filter` allows for `node`: the highest priority first, then
    /// the jobs of held circuits, then the oldest. The claim is one attempt with a lease.
    fn claim_next(&mut self, node: &Node, filter: &ClaimFilter) -> Result<Option<JobRecord>>;
    /// Extends the leases of the attempts `node` runs (`running`: id and attempt) that it still
    /// owns, and answers those: one of `running` not among them was cancelled or lost. A job
    /// the node owns but no longer runs (its claim's answer or its result lost on the way) is
    /// not extended: its lease runs out and it goes back to the queue. An error when another
    /// process has taken the node's name.
    fn heartbeat(&mut self, node: &Node, running: &[(String, u32)]) -> Result<Vec<(String, u32)>>;
    /// Puts the running jobs whose lease ran out back in the queue, or fails those tried
    /// `max_attempts` times already (their payload removed).
    fn expire_leases(&mut self, max_attempts: u32) -> Result<Vec<Expired>>;
    /// Milliseconds until the earliest lease of a running job runs out, by the store's clock
    /// (0 when one has already); `None` when no job runs.
    fn next_lease_end(&self) -> Result<Option<u64>>;
    /// At a node's stop: its unfinished jobs go back to the queue at once (the attempt not
    /// counted), and it is marked gone.
    fn leave(&mut self, node: &Node) -> Result<usize>;
    /// Ends a running job with the result of attempt `attempt` by node `owner`; `false` when
    /// that attempt no longer holds it (cancelled, or its lease ran out and it was claimed
    /// again or failed): the result is discarded. The payload file is removed when it ends.
    fn finish(&mut self, id: &str, owner: &str, attempt: u32, outcome: Outcome) -> Result<bool>;
    /// Cancels a job that has not ended.
    fn cancel(&mut self, id: &str) -> Result<Cancelled>;
    /// The nodes that joined, by name.
    fn nodes(&self) -> Result<Vec<NodeRecord>>;
    /// Running jobs per kind, on every node.
    fn running(&self) -> Result<Vec<(String, u64)>>;
    /// Removes jobs that ended before `before_ms`, and their payloads.
    fn purge_ended_before(&mut self, before_ms: u64) -> Result<usize>;
    /// Queued jobs per kind and priority.
    fn queued(&self) -> Result<Vec<(String, i32, u64)>>;
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io { what, source }
}

/// How long [`JobStore::join`] waits for another live process under the node's name.
fn join_wait(lease_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(lease_ms.saturating_mul(2))
}

/// The error of a node whose name another process has taken.
fn taken(node: &Node) -> StoreError {
    StoreError::Busy(format!(
        "node {:?}: another server has taken this node's name (this one stopped answering for \
         longer than its lease); its claims are no longer this server's",
        node.name
    ))
}

/// Why a job failed whose lease ran out on its last attempt.
fn lost_reason(owner: &str, attempts: u32) -> String {
    format!(
        "its node stopped answering (the lease ran out) on each of its {attempts} attempts, \
         the last on node {owner}"
    )
}

/// A new job id: the time, the payload digest's first bytes, a counter (unique in a process)
/// and a random part (unique across the servers sharing a store).
fn new_id(digest: &[u8; 32]) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt: u32 = rand::random();
    format!("{}-{}-{n}-{salt:08x}", now_ms(), hex(&digest[..6]))
}

/// The payload of `job` while it has not ended (an ended job's may be gone); a live job's
/// missing blob is [`StoreError::MissingPayload`].
pub fn payload_of_live(
    blobs: &dyn blobs::Blobs,
    job: Option<JobRecord>,
) -> Result<Option<Vec<u8>>> {
    let Some(job) = job.filter(|j| !j.state.is_final()) else {
        return Ok(None);
    };
    let key = blobs::blob_key(&job.digest);
    match blobs.get(&key)? {
        Some(p) => Ok(Some(p)),
        None => Err(StoreError::MissingPayload(format!(
            "{} has no blob {key} for job {}",
            blobs.location(),
            job.id
        ))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a store answers before it writes a new job: the job already stored under the request's
/// id (`existing`: the same payload's job, or a conflict with another), or a full queue; `None`
/// when the job is to be written.
fn before_insert(
    store: &dyn JobStore,
    job: &NewJob,
    existing: Option<JobRecord>,
) -> Result<Option<Submitted>> {
    if let Some(existing) = existing {
        return Ok(Some(resent(existing, &job.digest)));
    }
    if let Some(max) = job.max_queued {
        let queued: u64 = store.queued()?.iter().map(|q| q.2).sum();
        if queued >= max {
            return Ok(Some(Submitted::Full(queued)));
        }
    }
    Ok(None)
}

/// The job stored under a request's id, for the same request sent again: that job if the
/// payload is the same, a conflict if not.
fn resent(existing: JobRecord, digest: &[u8; 32]) -> Submitted {
    if existing.digest == *digest {
        Submitted::Existing(existing)
    } else {
        Submitted::Conflict(existing)
    }
}

/// The join rules around a store's own registration: `take` registers the node unless another
/// live process holds its name (then it answers that process's heartbeat age and lease), and
/// sets the leases of the jobs the node's previous run left running to have run out.
fn join_with<S: JobStore + ?Sized>(
    store: &mut S,
    node: &Node,
    max_attempts: u32,
    mut take: impl FnMut(&mut S) -> Result<Option<(u64, u64)>>,
) -> Result<Vec<Expired>> {
    let waited = std::time::Instant::now();
    let mut told = false;
    loop {
        match take(store)? {
            None => break,
            Some((age, lease)) => {
                if waited.elapsed() > join_wait(lease) {
                    return Err(StoreError::Busy(format!(
                        "another server runs as node {:?} (its last heartbeat {age} ms ago): \
                         give each server its own --node-id, or stop the other",
                        node.name
                    )));
                }
                if !told {
                    eprintln!(
                        "node {:?}: waiting up to {:.1} s for its previous run to stop answering \
                         (its last heartbeat {age} ms ago)",
                        node.name,
                        join_wait(lease).as_secs_f64()
                    );
                    told = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        }
    }
    store.expire_leases(max_attempts)
}

/// The rules around a store's lease expiry: `expired` lists the running jobs whose lease ran
/// out, `end` puts one back in the queue (`None`) or fails it (`Some(reason)`), fenced by its
/// attempt, true if it did; `release` lets a failed job's payload go.
fn expire_with<S: ?Sized>(
    store: &mut S,
    max_attempts: u32,
    expired: impl FnOnce(&mut S) -> Result<Vec<(String, String, u32)>>,
    mut end: impl FnMut(&mut S, &str, u32, Option<String>) -> Result<bool>,
    release: impl Fn(&S, &str),
) -> Result<Vec<Expired>> {
    let mut out = Vec::new();
    for (id, owner, attempts) in expired(store)? {
        let requeued = attempts < max_attempts;
        let reason = (!requeued).then(|| lost_reason(&owner, attempts));
        if end(store, &id, attempts, reason)? {
            if !requeued {
                release(store, &id);
            }
            out.push(Expired {
                id,
                owner,
                attempts,
                requeued,
            });
        }
    }
    Ok(out)
}

/// The cancel rules around a store's own update: `mark` sets the job cancelled if it is still
/// queued or running (and lets its payload go), true if it was.
fn cancel_with<S: JobStore + ?Sized>(
    store: &mut S,
    id: &str,
    mark: impl FnOnce(&mut S) -> Result<bool>,
) -> Result<Cancelled> {
    let Some(job) = store.get(id)? else {
        return Ok(Cancelled::Unknown);
    };
    if job.state.is_final() {
        return Ok(Cancelled::AlreadyEnded(job.state));
    }
    if !mark(store)? {
        // It ended between the read and the update.
        let now = store.get(id)?.map_or(JobState::Cancelled, |j| j.state);
        return Ok(Cancelled::AlreadyEnded(now));
    }
    Ok(match job.state {
        JobState::Running => Cancelled::WasRunning,
        _ => Cancelled::WasQueued,
    })
}
