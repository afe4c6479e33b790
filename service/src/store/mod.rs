//! The job store: every accepted job, written (its payload included) before `SubmitProof`
//! answers, so that nothing accepted is lost to a restart. [`JobStore`] is the interface a
//! server uses. Two stores implement it: [`SqliteStore`] keeps jobs in an SQLite database under
//! the data directory (the default), [`PgStore`] in a PostgreSQL table; both keep each payload
//! in a file of their own directory (`payloads/<job id>.bin`, synced before the row is
//! written), so that a queued job's payload stays on disk until its turn.
//!
//! `request_id` is an idempotency key: the same id with the same payload digest returns the
//! job already stored (queued, running or finished); the same id with another digest is
//! refused ([`Submitted::Conflict`]).

mod payloads;
mod postgres;
mod sqlite;

pub use postgres::{PgOptions, PgStore};
pub use sqlite::SqliteStore;

use payloads::Payloads;

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
    /// Its priority (1 low to 4 critical).
    pub priority: i32,
    /// The request's bytes, kept in a file until the job is admitted.
    pub payload: Vec<u8>,
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
    /// Times it was claimed (a restart puts a running job back in the queue).
    pub attempts: u32,
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

/// Where a server keeps its jobs.
pub trait JobStore: Send {
    /// Stores a job before the request is answered (see the module's idempotency rules).
    fn submit(&mut self, job: NewJob) -> Result<Submitted>;
    /// A job by id.
    fn get(&self, id: &str) -> Result<Option<JobRecord>>;
    /// The payload of a job that has not ended.
    fn payload(&self, id: &str) -> Result<Option<Vec<u8>>>;
    /// Claims the next queued job: the highest priority first, then the oldest.
    fn claim_next(&mut self) -> Result<Option<JobRecord>>;
    /// Ends a running job; `false` when it was not running (cancelled meanwhile: the result is
    /// discarded). The payload file is removed.
    fn finish(&mut self, id: &str, outcome: Outcome) -> Result<bool>;
    /// Cancels a job that has not ended.
    fn cancel(&mut self, id: &str) -> Result<Cancelled>;
    /// Puts every running job back in the queue (at start: a server that stopped mid-job).
    fn requeue_running(&mut self) -> Result<usize>;
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
