//! The job store: every accepted job, written (its payload included) before `SubmitProof`
//! answers, so that nothing accepted is lost to a restart. [`JobStore`] is the interface a
//! server uses; [`SqliteStore`] keeps jobs in an SQLite database under the data directory and
//! each payload in a file beside it (`payloads/<digest>.bin`, synced before the row is
//! written), so that a queued job's payload stays on disk until its turn.
//!
//! `request_id` is an idempotency key: the same id with the same payload digest returns the
//! job already stored (queued, running or finished); the same id with another digest is
//! refused ([`Submitted::Conflict`]).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};

/// A store failure (the database or a payload file).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database.
    #[error("job store database: {0}")]
    Db(#[from] rusqlite::Error),
    /// A payload file or the data directory.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
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
    fn code(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Result<Self> {
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

/// The embedded store: `jobs.sqlite` and `payloads/` under the data directory.
pub struct SqliteStore {
    db: Connection,
    payloads: PathBuf,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io { what, source }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const COLUMNS: &str = "id, request_id, digest, kind, priority, state, attempts, proof, error, \
                       submitted_ms, finished_ms, started_ms, srs_load_ms, synthesis_ms, \
                       gpu_compute_ms";

/// The columns of [`Timings`] and the claim time, added to the first layout.
const TIMING_COLUMNS: [&str; 4] = [
    "started_ms",
    "srs_load_ms",
    "synthesis_ms",
    "gpu_compute_ms",
];

fn record(row: &rusqlite::Row<'_>) -> rusqlite::Result<(JobRecord, String)> {
    let digest: Vec<u8> = row.get(2)?;
    let state: String = row.get(5)?;
    let mut d = [0u8; 32];
    if digest.len() == 32 {
        d.copy_from_slice(&digest);
    }
    Ok((
        JobRecord {
            id: row.get(0)?,
            request_id: row.get(1)?,
            digest: d,
            kind: row.get(3)?,
            priority: row.get(4)?,
            state: JobState::Queued,
            attempts: row.get(6)?,
            proof: row.get(7)?,
            error: row.get(8)?,
            submitted_ms: row.get::<_, i64>(9)? as u64,
            finished_ms: row.get::<_, Option<i64>>(10)?.map(|v| v as u64),
            started_ms: row.get::<_, Option<i64>>(11)?.map(|v| v as u64),
            timings: Timings {
                srs_load_ms: row.get::<_, Option<i64>>(12)?.unwrap_or(0) as u64,
                synthesis_ms: row.get::<_, Option<i64>>(13)?.unwrap_or(0) as u64,
                gpu_compute_ms: row.get::<_, Option<i64>>(14)?.unwrap_or(0) as u64,
            },
        },
        state,
    ))
}

impl SqliteStore {
    /// Opens (or creates) the store under `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let payloads = dir.join("payloads");
        std::fs::create_dir_all(&payloads)
            .map_err(io(format!("creating {}", payloads.display())))?;
        let db = Connection::open(dir.join("jobs.sqlite"))?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS jobs (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 id TEXT NOT NULL UNIQUE,
                 request_id TEXT NOT NULL UNIQUE,
                 digest BLOB NOT NULL,
                 kind TEXT NOT NULL,
                 priority INTEGER NOT NULL,
                 state TEXT NOT NULL,
                 attempts INTEGER NOT NULL DEFAULT 0,
                 proof BLOB,
                 error TEXT,
                 submitted_ms INTEGER NOT NULL,
                 finished_ms INTEGER
             );
             CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (state, priority DESC, seq);",
        )?;
        // Columns added since the first layout (a store written before them gains them).
        let have: Vec<String> = db
            .prepare("SELECT name FROM pragma_table_info('jobs')")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for column in TIMING_COLUMNS {
            if !have.iter().any(|h| h == column) {
                db.execute_batch(&format!("ALTER TABLE jobs ADD COLUMN {column} INTEGER"))?;
            }
        }
        Ok(SqliteStore { db, payloads })
    }

    fn payload_path(&self, id: &str) -> PathBuf {
        self.payloads.join(format!("{id}.bin"))
    }

    fn one(&self, sql: &str, arg: &str) -> Result<Option<JobRecord>> {
        let found = self
            .db
            .query_row(
                &format!("SELECT {COLUMNS} FROM jobs WHERE {sql}"),
                [arg],
                record,
            )
            .optional()?;
        found
            .map(|(mut r, state)| {
                r.state = JobState::parse(&state)?;
                Ok(r)
            })
            .transpose()
    }

    fn remove_payload(&self, id: &str) {
        // A payload already gone (a purge racing an end) is not an error.
        let _ = std::fs::remove_file(self.payload_path(id));
    }
}

impl JobStore for SqliteStore {
    fn submit(&mut self, job: NewJob) -> Result<Submitted> {
        if let Some(existing) = self.one("request_id = ?1", &job.request_id)? {
            return Ok(if existing.digest == job.digest {
                Submitted::Existing(existing)
            } else {
                Submitted::Conflict(existing)
            });
        }
        if let Some(max) = job.max_queued {
            let queued: u64 = self.queued()?.iter().map(|q| q.2).sum();
            if queued >= max {
                return Ok(Submitted::Full(queued));
            }
        }
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{}-{}-{n}", now_ms(), hex(&job.digest[..6]));
        // The payload reaches the disk before the row that points at it.
        let path = self.payload_path(&id);
        let tmp = path.with_extension("tmp");
        {
            use std::io::Write;
            let mut f =
                std::fs::File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
            f.write_all(&job.payload)
                .and_then(|()| f.sync_all())
                .map_err(io(format!("writing {}", tmp.display())))?;
        }
        std::fs::rename(&tmp, &path).map_err(io(format!("renaming {}", path.display())))?;
        let inserted = self.db.execute(
            "INSERT INTO jobs (id, request_id, digest, kind, priority, state, submitted_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6)",
            params![
                id,
                job.request_id,
                &job.digest[..],
                job.kind,
                job.priority,
                now_ms() as i64
            ],
        );
        if let Err(e) = inserted {
            self.remove_payload(&id);
            return Err(e.into());
        }
        let stored = self
            .one("id = ?1", &id)?
            .ok_or_else(|| StoreError::Corrupt(format!("job {id} vanished after its insert")))?;
        Ok(Submitted::New(stored))
    }

    fn get(&self, id: &str) -> Result<Option<JobRecord>> {
        self.one("id = ?1", id)
    }

    fn payload(&self, id: &str) -> Result<Option<Vec<u8>>> {
        match self.get(id)? {
            Some(r) if !r.state.is_final() => {
                let path = self.payload_path(id);
                std::fs::read(&path)
                    .map(Some)
                    .map_err(io(format!("reading {}", path.display())))
            }
            _ => Ok(None),
        }
    }

    fn claim_next(&mut self) -> Result<Option<JobRecord>> {
        let tx = self.db.transaction()?;
        let next: Option<String> = tx
            .query_row(
                "SELECT id FROM jobs WHERE state = 'queued' ORDER BY priority DESC, seq LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let Some(id) = next else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?2
             WHERE id = ?1",
            params![&id, now_ms() as i64],
        )?;
        tx.commit()?;
        self.get(&id)
    }

    fn finish(&mut self, id: &str, outcome: Outcome) -> Result<bool> {
        let (state, proof, error, t) = match outcome {
            Outcome::Completed(p, t) => (JobState::Completed, Some(p), None, t),
            Outcome::Failed(e) => (JobState::Failed, None, Some(e), Timings::default()),
        };
        let changed = self.db.execute(
            "UPDATE jobs SET state = ?2, proof = ?3, error = ?4, finished_ms = ?5,
                 srs_load_ms = ?6, synthesis_ms = ?7, gpu_compute_ms = ?8
             WHERE id = ?1 AND state = 'running'",
            params![
                id,
                state.code(),
                proof,
                error,
                now_ms() as i64,
                t.srs_load_ms as i64,
                t.synthesis_ms as i64,
                t.gpu_compute_ms as i64
            ],
        )?;
        self.remove_payload(id);
        Ok(changed == 1)
    }

    fn cancel(&mut self, id: &str) -> Result<Cancelled> {
        let Some(job) = self.get(id)? else {
            return Ok(Cancelled::Unknown);
        };
        if job.state.is_final() {
            return Ok(Cancelled::AlreadyEnded(job.state));
        }
        let changed = self.db.execute(
            "UPDATE jobs SET state = 'cancelled', finished_ms = ?2
             WHERE id = ?1 AND state IN ('queued', 'running')",
            params![id, now_ms() as i64],
        )?;
        if changed == 0 {
            // It ended between the read and the update.
            let now = self.get(id)?.map_or(JobState::Cancelled, |j| j.state);
            return Ok(Cancelled::AlreadyEnded(now));
        }
        self.remove_payload(id);
        Ok(match job.state {
            JobState::Running => Cancelled::WasRunning,
            _ => Cancelled::WasQueued,
        })
    }

    fn requeue_running(&mut self) -> Result<usize> {
        Ok(self.db.execute(
            "UPDATE jobs SET state = 'queued' WHERE state = 'running'",
            [],
        )?)
    }

    fn purge_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let ids: Vec<String> = {
            let mut q = self.db.prepare(
                "SELECT id FROM jobs WHERE state IN ('completed', 'failed', 'cancelled')
                 AND finished_ms < ?1",
            )?;
            let rows = q.query_map([before_ms as i64], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for id in &ids {
            self.db.execute("DELETE FROM jobs WHERE id = ?1", [id])?;
            self.remove_payload(id);
        }
        Ok(ids.len())
    }

    fn queued(&self) -> Result<Vec<(String, i32, u64)>> {
        let mut q = self.db.prepare(
            "SELECT kind, priority, COUNT(*) FROM jobs WHERE state = 'queued'
             GROUP BY kind, priority ORDER BY priority DESC, kind",
        )?;
        let rows = q.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
