//! The embedded store: `jobs.sqlite` and `payloads/` under the data directory.

use std::path::Path;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::blobs::{self, blob_key, BlobLocation, Blobs};
use super::{
    before_insert, cancel_with, expire_with, io, join_with, new_id, now_ms, payload_of_live, taken,
    Cancelled, ClaimFilter, Expired, JobRecord, JobState, JobStore, NewJob, Node, NodeRecord,
    Outcome, Result, StoreError, Submitted, Timings,
};

/// The embedded store: `jobs.sqlite` and `payloads/` under the data directory.
pub struct SqliteStore {
    db: Connection,
    blobs: Arc<dyn Blobs>,
}

const COLUMNS: &str = "id, request_id, digest, kind, priority, state, attempts, proof, error, \
                       submitted_ms, finished_ms, started_ms, srs_load_ms, synthesis_ms, \
                       gpu_compute_ms, circuit, owner, lease_until_ms, mem_bytes, input_bytes";

/// The columns added to the first layout: the claim time, [`Timings`], the claim's circuit,
/// owner and lease, and the job's memory estimate.
const ADDED_COLUMNS: [(&str, &str); 9] = [
    ("started_ms", "INTEGER"),
    ("srs_load_ms", "INTEGER"),
    ("synthesis_ms", "INTEGER"),
    ("gpu_compute_ms", "INTEGER"),
    ("circuit", "TEXT NOT NULL DEFAULT ''"),
    ("owner", "TEXT"),
    ("lease_until_ms", "INTEGER"),
    ("mem_bytes", "INTEGER NOT NULL DEFAULT 0"),
    ("input_bytes", "INTEGER NOT NULL DEFAULT 0"),
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
            circuit: row.get(15)?,
            owner: row.get(16)?,
            lease_until_ms: row.get::<_, Option<i64>>(17)?.map(|v| v as u64),
            mem_bytes: row.get::<_, i64>(18)?.max(0) as u64,
            input_bytes: row.get::<_, i64>(19)?.max(0) as u64,
        },
        state,
    ))
}

impl SqliteStore {
    /// Locks `dir` (created if missing) for one server: the lock is held while the answer
    /// lives, and a second server on the directory is refused.
    pub fn lock_dir(dir: &Path) -> Result<std::fs::File> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let path = dir.join("server.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(format!("opening {}", path.display())))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(StoreError::Busy(format!(
                "another server uses the data directory {} (stop it, or give this one another \
                 --data-dir)",
                dir.display()
            )));
        }
        Err(io(format!("locking {}", path.display()))(e))
    }

    /// Opens (or creates) the store under `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let blobs: Arc<dyn Blobs> =
            Arc::from(blobs::open(&BlobLocation::Dir(dir.join("payloads")))?);
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
             CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (state, priority DESC, seq);
             CREATE INDEX IF NOT EXISTS jobs_digest ON jobs (digest);
             CREATE TABLE IF NOT EXISTS nodes (
                 name TEXT PRIMARY KEY,
                 instance TEXT NOT NULL,
                 lease_ms INTEGER NOT NULL,
                 heartbeat_ms INTEGER
             );",
        )?;
        // Columns added since the first layout (a store written before them gains them).
        let have: Vec<String> = db
            .prepare("SELECT name FROM pragma_table_info('jobs')")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for (column, ty) in ADDED_COLUMNS {
            if !have.iter().any(|h| h == column) {
                db.execute_batch(&format!("ALTER TABLE jobs ADD COLUMN {column} {ty}"))?;
            }
        }
        let store = SqliteStore { db, blobs };
        // A store written by a version that kept one payload file per job.
        let live: Vec<(String, Vec<u8>)> = store
            .db
            .prepare("SELECT id, digest FROM jobs WHERE state IN ('queued', 'running')")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let live: Vec<(String, [u8; 32])> = live
            .into_iter()
            .filter_map(|(id, d)| Some((id, <[u8; 32]>::try_from(d).ok()?)))
            .collect();
        blobs::adopt_job_files(&*store.blobs, &live)?;
        Ok(store)
    }

    /// Lets job `id`'s payload blob go unless a job that has not ended needs it.
    fn release(&self, id: &str) {
        let digest: Option<Vec<u8>> = self
            .db
            .query_row("SELECT digest FROM jobs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .unwrap_or(None);
        if let Some(digest) = digest.and_then(|d| <[u8; 32]>::try_from(d).ok()) {
            self.release_digest(&digest);
        }
    }

    /// Removes the blob of `digest` unless a job that has not ended needs it. The embedded
    /// store is one server's, and its calls come one at a time: nothing writes the blob between
    /// the look and the removal.
    fn release_digest(&self, digest: &[u8; 32]) {
        let live: rusqlite::Result<bool> = self.db.query_row(
            "SELECT EXISTS (SELECT 1 FROM jobs
                 WHERE digest = ?1 AND state IN ('queued', 'running'))",
            [&digest[..]],
            |r| r.get(0),
        );
        let removed = match live {
            Ok(true) => return,
            Ok(false) => self.blobs.delete(&blob_key(digest)),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = removed {
            eprintln!("warning: letting a payload blob go: {e}");
        }
    }

    /// Removes the jobs that ended before `before_ms`, and lets their blobs go.
    fn purge_jobs_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let ids: Vec<String> = {
            let mut q = self.db.prepare(
                "SELECT id FROM jobs WHERE state IN ('completed', 'failed', 'cancelled')
                 AND finished_ms < ?1",
            )?;
            let rows = q.query_map([before_ms as i64], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for id in &ids {
            // Its blob went when it ended, unless another live job still needed it then.
            self.release(id);
            self.db.execute("DELETE FROM jobs WHERE id = ?1", [id])?;
        }
        Ok(ids.len())
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
        let id = new_id(&job.digest);
        // The payload is whole in its blob before the row that points at it; a live job with
        // the same digest has written it already.
        let key = blob_key(&job.digest);
        if !self.blobs.exists(&key)? {
            self.blobs.put(&key, job.payload)?;
        }
        let inserted = self.db.execute(
            "INSERT INTO jobs
                 (id, request_id, digest, kind, priority, state, submitted_ms, circuit,
                  mem_bytes, input_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8, ?9)",
            params![
                id,
                job.request_id,
                &job.digest[..],
                job.kind,
                job.priority,
                now_ms() as i64,
                job.circuit,
                job.mem_bytes.min(i64::MAX as u64) as i64,
                job.input_bytes.min(i64::MAX as u64) as i64
            ],
        );
        if let Err(e) = inserted {
            self.release_digest(&job.digest);
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
        payload_of_live(&*self.blobs, self.get(id)?)
    }

    fn blobs(&self) -> Arc<dyn Blobs> {
        self.blobs.clone()
    }

    fn join(&mut self, node: &Node, max_attempts: u32) -> Result<Vec<Expired>> {
        join_with(self, node, max_attempts, |store| {
            let now = now_ms() as i64;
            let tx = store.db.transaction()?;
            let other: Option<(String, Option<i64>, i64)> = tx
                .query_row(
                    "SELECT instance, heartbeat_ms, lease_ms FROM nodes WHERE name = ?1",
                    [&node.name],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            if let Some((instance, Some(beat), lease)) = other {
                let age = now.saturating_sub(beat).max(0) as u64;
                if !node.sole && instance != node.instance && age < lease as u64 {
                    return Ok(Some((age, lease as u64)));
                }
            }
            tx.execute(
                "INSERT INTO nodes (name, instance, lease_ms, heartbeat_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (name) DO UPDATE SET instance = ?2, lease_ms = ?3, heartbeat_ms = ?4",
                params![&node.name, &node.instance, node.lease_ms as i64, now],
            )?;
            tx.execute(
                "UPDATE jobs SET lease_until_ms = 0 WHERE owner = ?1 AND state = 'running'",
                [&node.name],
            )?;
            tx.commit()?;
            Ok(None)
        })
    }

    fn claim_next(&mut self, node: &Node, filter: &ClaimFilter) -> Result<Option<JobRecord>> {
        let tx = self.db.transaction()?;
        // The held circuits as a JSON array, so that one statement takes any number of them.
        let held = serde_json::to_string(&filter.held).unwrap_or_else(|_| "[]".into());
        let next: Option<String> = tx
            .query_row(
                "SELECT id FROM jobs WHERE state = 'queued' AND priority >= ?1
                     AND (?4 IS NULL OR (mem_bytes <= ?4 AND input_bytes <= ?5)
                          OR submitted_ms < ?3)
                 ORDER BY priority DESC,
                     (circuit IN (SELECT value FROM json_each(?2)) OR submitted_ms < ?3) DESC,
                     seq
                 LIMIT 1",
                params![
                    filter.min_priority,
                    held,
                    filter.aged_before_ms as i64,
                    filter.room.map(|r| r.total.min(i64::MAX as u64) as i64),
                    filter.room.map(|r| r.input.min(i64::MAX as u64) as i64)
                ],
                |r| r.get(0),
            )
            .optional()?;
        let Some(id) = next else {
            return Ok(None);
        };
        let now = now_ms() as i64;
        tx.execute(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_ms = ?2,
                 owner = ?3, lease_until_ms = ?4
             WHERE id = ?1",
            params![&id, now, &node.name, now + node.lease_ms as i64],
        )?;
        tx.commit()?;
        self.get(&id)
    }

    fn heartbeat(&mut self, node: &Node, running: &[(String, u32)]) -> Result<Vec<(String, u32)>> {
        let now = now_ms() as i64;
        let tx = self.db.transaction()?;
        let mine = tx.execute(
            "UPDATE nodes SET heartbeat_ms = ?3 WHERE name = ?1 AND instance = ?2",
            params![&node.name, &node.instance, now],
        )?;
        if mine != 1 {
            return Err(taken(node));
        }
        let mut owned = Vec::new();
        for (id, attempt) in running {
            let extended = tx.execute(
                "UPDATE jobs SET lease_until_ms = ?4
                 WHERE id = ?1 AND attempts = ?2 AND owner = ?3 AND state = 'running'",
                params![id, attempt, &node.name, now + node.lease_ms as i64],
            )?;
            if extended == 1 {
                owned.push((id.clone(), *attempt));
            }
        }
        tx.commit()?;
        Ok(owned)
    }

    fn expire_leases(&mut self, max_attempts: u32) -> Result<Vec<Expired>> {
        expire_with(
            self,
            max_attempts,
            |store| {
                let mut q = store.db.prepare(
                    "SELECT id, COALESCE(owner, ''), attempts FROM jobs
                     WHERE state = 'running' AND COALESCE(lease_until_ms, 0) < ?1",
                )?;
                let rows =
                    q.query_map([now_ms() as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            },
            |store, id, attempts, reason| {
                let state = match reason {
                    None => JobState::Queued,
                    Some(_) => JobState::Failed,
                };
                let finished = reason.as_ref().map(|_| now_ms() as i64);
                Ok(store.db.execute(
                    "UPDATE jobs SET state = ?3, error = ?4, finished_ms = ?5
                     WHERE id = ?1 AND attempts = ?2 AND state = 'running'
                         AND COALESCE(lease_until_ms, 0) < ?6",
                    params![
                        id,
                        attempts,
                        state.code(),
                        reason,
                        finished,
                        now_ms() as i64
                    ],
                )? == 1)
            },
            |store, id| store.release(id),
        )
    }

    fn next_lease_end(&self) -> Result<Option<u64>> {
        let end: Option<i64> = self.db.query_row(
            "SELECT MIN(COALESCE(lease_until_ms, 0)) FROM jobs WHERE state = 'running'",
            [],
            |r| r.get(0),
        )?;
        Ok(end.map(|e| (e.max(0) as u64).saturating_sub(now_ms())))
    }

    fn leave(&mut self, node: &Node) -> Result<usize> {
        let tx = self.db.transaction()?;
        let mine = tx.execute(
            "UPDATE nodes SET heartbeat_ms = NULL WHERE name = ?1 AND instance = ?2",
            params![&node.name, &node.instance],
        )?;
        let released = if mine == 1 {
            tx.execute(
                "UPDATE jobs SET state = 'queued', attempts = attempts - 1
                 WHERE owner = ?1 AND state = 'running'",
                [&node.name],
            )?
        } else {
            0
        };
        tx.commit()?;
        Ok(released)
    }

    fn finish(&mut self, id: &str, owner: &str, attempt: u32, outcome: Outcome) -> Result<bool> {
        let (state, proof, error, t) = outcome.columns();
        let changed = self.db.execute(
            "UPDATE jobs SET state = ?2, proof = ?3, error = ?4, finished_ms = ?5,
                 srs_load_ms = ?6, synthesis_ms = ?7, gpu_compute_ms = ?8
             WHERE id = ?1 AND state = 'running' AND owner = ?9 AND attempts = ?10",
            params![
                id,
                state.code(),
                proof,
                error,
                now_ms() as i64,
                t.srs_load_ms as i64,
                t.synthesis_ms as i64,
                t.gpu_compute_ms as i64,
                owner,
                attempt
            ],
        )?;
        if changed == 1 {
            self.release(id);
        }
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
                store.release(id);
            }
            Ok(changed == 1)
        })
    }

    fn purge_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let purged = self.purge_jobs_ended_before(before_ms)?;
        blobs::sweep(&*self.blobs, before_ms, |digest| {
            self.release_digest(digest)
        });
        Ok(purged)
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

    fn nodes(&self) -> Result<Vec<NodeRecord>> {
        let now = now_ms() as i64;
        let mut q = self.db.prepare(
            "SELECT n.name, n.heartbeat_ms,
                 (SELECT COUNT(*) FROM jobs j WHERE j.owner = n.name AND j.state = 'running')
             FROM nodes n ORDER BY n.name",
        )?;
        let rows = q.query_map([], |r| {
            Ok(NodeRecord {
                name: r.get(0)?,
                heartbeat_age_ms: r
                    .get::<_, Option<i64>>(1)?
                    .map(|b| now.saturating_sub(b).max(0) as u64),
                running: r.get::<_, i64>(2)? as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn running(&self) -> Result<Vec<(String, u64)>> {
        let mut q = self.db.prepare(
            "SELECT kind, COUNT(*) FROM jobs WHERE state = 'running' GROUP BY kind ORDER BY kind",
        )?;
        let rows = q.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
