//! The embedded store: `jobs.sqlite` and `payloads/` under the data directory.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    before_insert, cancel_with, now_ms, Cancelled, JobRecord, JobState, JobStore, NewJob, Outcome,
    Payloads, Result, StoreError, Submitted, Timings,
};

/// The embedded store: `jobs.sqlite` and `payloads/` under the data directory.
pub struct SqliteStore {
    db: Connection,
    payloads: Payloads,
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
        let payloads = Payloads::open(&dir.join("payloads"))?;
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
}

impl JobStore for SqliteStore {
    fn submit(&mut self, job: NewJob) -> Result<Submitted> {
        let existing = self.one("request_id = ?1", &job.request_id)?;
        if let Some(answer) = before_insert(self, &job, existing)? {
            return Ok(answer);
        }
        let id = self.payloads.new_id(&job.digest);
        // The payload reaches the disk before the row that points at it.
        self.payloads.write(&id, &job.payload)?;
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
            self.payloads.remove(&id);
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
        self.payloads.of_live(self.get(id)?)
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
        let (state, proof, error, t) = outcome.columns();
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
        self.payloads.remove(id);
        Ok(changed == 1)
    }

    fn cancel(&mut self, id: &str) -> Result<Cancelled> {
        cancel_with(self, id, |store| {
            let changed = store.db.execute(
                "UPDATE jobs SET state = 'cancelled', finished_ms = ?2
                 WHERE id = ?1 AND state IN ('queued', 'running')",
                params![id, now_ms() as i64],
            )?;
            if changed == 1 {
                store.payloads.remove(id);
            }
            Ok(changed == 1)
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
            self.payloads.remove(id);
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
