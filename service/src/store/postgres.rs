//! The job store on a PostgreSQL server ([`PgStore`]): the same jobs, states and rules as the
//! embedded store, in a table any number of servers can reach, with each payload a blob in a
//! directory or bucket they all reach (written whole before the row that points at it). Claims take
//! the highest priority, then the oldest, in one statement with `FOR UPDATE SKIP LOCKED`, so
//! that two claimers never take one job; `request_id` is one unique key of the table.
//!
//! Leases and heartbeats are timed by the database server's clock, so that nodes whose clocks
//! disagree still agree on when a lease ran out.
//!
//! The queries are plain SQL run at run time (building needs no database); the tables are
//! created (and columns added) at open under an advisory lock. The store's calls are synchronous, like the
//! embedded store's: each runs on the store's own thread and runtime, so that a call from an
//! asynchronous handler never starts a runtime inside another.

use std::str::FromStr;
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, Row};

use super::blobs::{self, blob_key, BlobLocation, Blobs};
use super::on_thread::OnThread;
use super::{
    before_insert, cancel_with, expire_with, join_with, new_id, now_ms, payload_of_live, resent,
    taken, Cancelled, ClaimFilter, Expired, JobRecord, JobState, JobStore, NewJob, Node,
    NodeRecord, Outcome, Result, StoreError, Submitted, Timings,
};

/// Where a [`PgStore`] keeps its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The server: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?...]`.
    pub url: String,
    /// The schema the table lives in (created if missing; `None`: the connection's default).
    pub schema: Option<String>,
    /// Where payloads are kept: a directory or a bucket every server of the database reaches
    /// (the store's blobs are in its folder named by the schema, when one is given).
    pub blobs: BlobLocation,
}

impl PgOptions {
    /// Where the store's blobs are: `blobs`, in the schema's folder when a schema is given, so
    /// that the clusters of one database's schemas never share a blob.
    pub fn blob_location(&self) -> BlobLocation {
        match &self.schema {
            Some(schema) => self.blobs.child(schema),
            None => self.blobs.clone(),
        }
    }
}

/// The database server's clock, in milliseconds since the epoch.
const NOW: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// How long connecting may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The job store on PostgreSQL.
pub struct PgStore {
    db: OnThread<PgPool>,
    blobs: Arc<dyn Blobs>,
}

const COLUMNS: &str = "id, request_id, digest, kind, priority, state, attempts, proof, error, \
                       submitted_ms, finished_ms, started_ms, srs_load_ms, synthesis_ms, \
                       gpu_compute_ms, circuit, owner, lease_until_ms, mem_bytes, input_bytes";

fn record(row: &PgRow) -> Result<JobRecord> {
    let digest: Vec<u8> = row.try_get("digest")?;
    let digest: [u8; 32] = digest
        .try_into()
        .map_err(|_| StoreError::Corrupt("a digest is not 32 bytes".into()))?;
    let ms = |column: &str| -> Result<Option<u64>> {
        Ok(row.try_get::<Option<i64>, _>(column)?.map(|v| v as u64))
    };
    Ok(JobRecord {
        id: row.try_get("id")?,
        request_id: row.try_get("request_id")?,
        digest,
        kind: row.try_get("kind")?,
        priority: row.try_get("priority")?,
        state: JobState::parse(&row.try_get::<String, _>("state")?)?,
        attempts: row.try_get::<i32, _>("attempts")? as u32,
        proof: row.try_get("proof")?,
        error: row.try_get("error")?,
        submitted_ms: row.try_get::<i64, _>("submitted_ms")? as u64,
        finished_ms: ms("finished_ms")?,
        started_ms: ms("started_ms")?,
        timings: Timings {
            srs_load_ms: ms("srs_load_ms")?.unwrap_or(0),
            synthesis_ms: ms("synthesis_ms")?.unwrap_or(0),
            gpu_compute_ms: ms("gpu_compute_ms")?.unwrap_or(0),
        },
        circuit: row.try_get("circuit")?,
        owner: row.try_get("owner")?,
        lease_until_ms: ms("lease_until_ms")?,
        mem_bytes: row.try_get::<i64, _>("mem_bytes")?.max(0) as u64,
        input_bytes: row.try_get::<i64, _>("input_bytes")?.max(0) as u64,
    })
}

/// A schema name as an identifier: letters, digits and `_` only (never quoted from input).
fn schema_name(s: &str) -> Result<&str> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(s)
    } else {
        Err(StoreError::Corrupt(format!(
            "schema {s:?}: use letters, digits and _ (not first), at most 63"
        )))
    }
}

impl PgStore {
    /// Connects, creates the schema and the table if missing, and starts the store's thread.
    pub fn open(options: &PgOptions) -> Result<Self> {
        let mut connect = PgConnectOptions::from_str(&options.url)?;
        // The server notices a dead client within about half a minute, so that the server lock
        // of a host that died goes with it.
        connect = connect.options([
            ("tcp_keepalives_idle", "10"),
            ("tcp_keepalives_interval", "5"),
            ("tcp_keepalives_count", "3"),
        ]);
        if let Some(schema) = options.schema.as_deref().map(schema_name).transpose()? {
            connect = connect.options([("search_path", schema)]);
        }
        // After the schema's check: its name is a folder of the blob location.
        let blobs: Arc<dyn Blobs> = Arc::from(blobs::open(&options.blob_location())?);
        let schema = options.schema.clone();
        let db = OnThread::start(
            "proofline-pg-store",
            "the job store",
            move |runtime| {
                runtime.block_on(async {
                    // One connection first, so that a server that cannot be reached is an
                    // error saying why, not a pool's time-out.
                    let first = tokio::time::timeout(
                        CONNECT_TIMEOUT,
                        sqlx::PgConnection::connect_with(&connect),
                    );
                    let first = first.await.map_err(|_| {
                        StoreError::Busy(format!(
                            "no answer from the PostgreSQL server in {} s",
                            CONNECT_TIMEOUT.as_secs()
                        ))
                    })??;
                    first.close().await?;
                    let pool = PgPoolOptions::new()
                        .max_connections(4)
                        .acquire_timeout(CONNECT_TIMEOUT)
                        .connect_with(connect)
                        .await?;
                    migrate(&pool, schema.as_deref()).await?;
                    Ok(pool)
                })
            },
            // The store is dropped: the connections close.
            |runtime, pool: PgPool| runtime.block_on(pool.close()),
        )?;
        let store_id = db.run(|rt, pool| {
            Ok(rt.block_on(
                sqlx::query_scalar::<_, String>(
                    "SELECT value FROM proofline_meta WHERE key = 'store_id'",
                )
                .fetch_one(pool),
            )?)
        })?;
        blobs::claim_location(&*blobs, &store_id)?;
        Ok(PgStore { db, blobs })
    }

    /// Runs `f` on the store's thread and waits for its answer.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&tokio::runtime::Runtime, &PgPool) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.db.run(f)
    }

    /// Lets job `id`'s payload blob go unless a job that has not ended needs it.
    fn release(&self, id: &str) {
        let key = id.to_string();
        let digest = self.run(move |rt, pool| {
            let row = rt.block_on(
                sqlx::query("SELECT digest FROM proofline_jobs WHERE id = $1")
                    .bind(key)
                    .fetch_optional(pool),
            )?;
            Ok(row.and_then(|r| r.try_get::<Vec<u8>, _>("digest").ok()))
        });
        match digest.map(|d| d.and_then(|d| <[u8; 32]>::try_from(d).ok())) {
            Ok(Some(digest)) => self.release_digest(digest),
            Ok(None) => {}
            Err(e) => eprintln!("warning: letting job {id}'s payload blob go: {e}"),
        }
    }

    /// Removes the blob of `digest` unless a job that has not ended needs it, holding the
    /// digest's row of `proofline_blobs` (which a submit of the same digest holds while it
    /// writes the blob and its job's row), so that no server writes the blob between the look
    /// and the removal.
    fn release_digest(&self, digest: [u8; 32]) {
        let blobs = self.blobs.clone();
        let released = self.run(move |rt, pool| {
            rt.block_on(with_blob_locked(pool, digest, move |tx| {
                Box::pin(async move {
                    let live: bool = sqlx::query_scalar(
                        "SELECT EXISTS (SELECT 1 FROM proofline_jobs
                             WHERE digest = $1 AND state IN ('queued', 'running'))",
                    )
                    .bind(digest.to_vec())
                    .fetch_one(&mut *tx)
                    .await?;
                    if !live {
                        blobs.delete(&blob_key(&digest))?;
                        sqlx::query("DELETE FROM proofline_blobs WHERE digest = $1")
                            .bind(digest.to_vec())
                            .execute(&mut *tx)
                            .await?;
                    }
                    Ok(())
                })
            }))
        });
        if let Err(e) = released {
            eprintln!("warning: letting a payload blob go: {e}");
        }
    }

    /// Removes the jobs that ended before `before_ms`, and lets their blobs go.
    fn purge_jobs_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let digests: Vec<Vec<u8>> = self.run(move |rt, pool| {
            let rows = rt.block_on(
                sqlx::query(
                    "DELETE FROM proofline_jobs
                     WHERE state IN ('completed', 'failed', 'cancelled') AND finished_ms < $1
                     RETURNING digest",
                )
                .bind(before_ms as i64)
                .fetch_all(pool),
            )?;
            rows.iter()
                .map(|r| r.try_get::<Vec<u8>, _>("digest").map_err(StoreError::from))
                .collect()
        })?;
        let purged = digests.len();
        let distinct: std::collections::BTreeSet<Vec<u8>> = digests.into_iter().collect();
        // Their blobs went when they ended, unless another live job still needed them then.
        for digest in distinct {
            if let Ok(digest) = <[u8; 32]>::try_from(digest) {
                self.release_digest(digest);
            }
        }
        Ok(purged)
    }

    fn one(&self, column: &'static str, value: &str) -> Result<Option<JobRecord>> {
        let value = value.to_string();
        self.run(move |rt, pool| {
            let sql = format!("SELECT {COLUMNS} FROM proofline_jobs WHERE {column} = $1");
            let row = rt.block_on(sqlx::query(&sql).bind(value).fetch_optional(pool))?;
            row.as_ref().map(record).transpose()
        })
    }
}

/// What runs while a digest's blob is locked.
type Locked<'c, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>>;

/// Runs `body` in a transaction holding the lock of `digest`'s blob ([`lock_blob`]): committed
/// when it answers, rolled back at once when it fails (a dropped transaction's rollback waits
/// for the connection's next use, and other servers would wait for the lock until then).
async fn with_blob_locked<T>(
    pool: &PgPool,
    digest: [u8; 32],
    body: impl for<'c> FnOnce(&'c mut sqlx::PgConnection) -> Locked<'c, T>,
) -> Result<T> {
    let mut tx = pool.begin().await?;
    let done = match lock_blob(&mut tx, &digest).await {
        Ok(()) => body(&mut tx).await,
        Err(e) => Err(e),
    };
    match done {
        Ok(v) => {
            tx.commit().await?;
            Ok(v)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Takes the row lock of `digest` in `proofline_blobs` (the row made if missing) for the rest of
/// `tx`. A row deleted by the holder it waited for is made again.
async fn lock_blob(tx: &mut sqlx::PgConnection, digest: &[u8; 32]) -> Result<()> {
    loop {
        sqlx::query("INSERT INTO proofline_blobs (digest) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(digest.to_vec())
            .execute(&mut *tx)
            .await?;
        let held = sqlx::query("SELECT digest FROM proofline_blobs WHERE digest = $1 FOR UPDATE")
            .bind(digest.to_vec())
            .fetch_optional(&mut *tx)
            .await?;
        if held.is_some() {
            return Ok(());
        }
    }
}

/// Creates (or brings up to date) the store's tables, and the store's identity: made at its
/// creation, kept in `proofline_meta`, the same for every server of the store.
async fn migrate(pool: &PgPool, schema: Option<&str>) -> Result<()> {
    let mut tx = pool.begin().await?;
    // One server creates the table; the others wait for it and find it there.
    sqlx::query("SELECT pg_advisory_xact_lock(7320091)")
        .execute(&mut *tx)
        .await?;
    if let Some(schema) = schema {
        sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .execute(&mut *tx)
            .await?;
    }
    for statement in [
        "CREATE TABLE IF NOT EXISTS proofline_jobs (
             seq BIGSERIAL PRIMARY KEY,
             id TEXT NOT NULL UNIQUE,
             request_id TEXT NOT NULL UNIQUE,
             digest BYTEA NOT NULL,
             kind TEXT NOT NULL,
             priority INTEGER NOT NULL,
             state TEXT NOT NULL,
             attempts INTEGER NOT NULL DEFAULT 0,
             proof BYTEA,
             error TEXT,
             submitted_ms BIGINT NOT NULL,
             finished_ms BIGINT,
             started_ms BIGINT,
             srs_load_ms BIGINT,
             synthesis_ms BIGINT,
             gpu_compute_ms BIGINT
         )",
        "CREATE INDEX IF NOT EXISTS proofline_jobs_queue
             ON proofline_jobs (state, priority DESC, seq)",
        // Added since the first layout: the claim's circuit, owner and lease.
        "ALTER TABLE proofline_jobs ADD COLUMN IF NOT EXISTS circuit TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE proofline_jobs ADD COLUMN IF NOT EXISTS owner TEXT",
        "ALTER TABLE proofline_jobs ADD COLUMN IF NOT EXISTS lease_until_ms BIGINT",
        // And the job's memory estimate.
        "ALTER TABLE proofline_jobs ADD COLUMN IF NOT EXISTS mem_bytes BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE proofline_jobs ADD COLUMN IF NOT EXISTS input_bytes BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX IF NOT EXISTS proofline_jobs_digest ON proofline_jobs (digest)",
        // A payload blob's lock: held by a submit while it writes the blob and its job's row,
        // and by the removal of a blob no live job needs.
        "CREATE TABLE IF NOT EXISTS proofline_blobs (digest BYTEA PRIMARY KEY)",
        "CREATE TABLE IF NOT EXISTS proofline_nodes (
             name TEXT PRIMARY KEY,
             instance TEXT NOT NULL,
             lease_ms BIGINT NOT NULL,
             heartbeat_ms BIGINT
         )",
        "CREATE TABLE IF NOT EXISTS proofline_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ] {
        sqlx::query(statement).execute(&mut *tx).await?;
    }
    let made = format!(
        "{}:{}-{:016x}",
        schema.unwrap_or("(default schema)"),
        super::now_ms(),
        rand::random::<u64>()
    );
    sqlx::query(
        "INSERT INTO proofline_meta (key, value) VALUES ('store_id', $1) ON CONFLICT DO NOTHING",
    )
    .bind(made)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

impl JobStore for PgStore {
    fn submit(&mut self, job: NewJob) -> Result<Submitted> {
        let existing = self.one("request_id", &job.request_id)?;
        if let Some(answer) = before_insert(self, &job, existing)? {
            return Ok(answer);
        }
        let id = new_id(&job.digest);
        let (row_id, request_id, digest) = (id, job.request_id.clone(), job.digest);
        let blobs = self.blobs.clone();
        let payload = job.payload;
        let inserted = self.run(move |rt, pool| {
            let sql = format!(
                "INSERT INTO proofline_jobs
                     (id, request_id, digest, kind, priority, state, submitted_ms, circuit,
                      mem_bytes, input_bytes)
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9)
                 ON CONFLICT (request_id) DO NOTHING
                 RETURNING {COLUMNS}"
            );
            rt.block_on(with_blob_locked(pool, digest, move |tx| {
                Box::pin(async move {
                    // The payload is whole in its blob before the row that points at it; the
                    // caller, or a job with the same digest, may have written it already.
                    let key = blob_key(&digest);
                    if !blobs.exists(&key)? {
                        blobs.put(&key, payload)?;
                    }
                    let row = sqlx::query(&sql)
                        .bind(row_id)
                        .bind(request_id)
                        .bind(digest.to_vec())
                        .bind(job.kind)
                        .bind(job.priority)
                        .bind(now_ms() as i64)
                        .bind(job.circuit)
                        .bind(job.mem_bytes.min(i64::MAX as u64) as i64)
                        .bind(job.input_bytes.min(i64::MAX as u64) as i64)
                        .fetch_optional(&mut *tx)
                        .await?;
                    row.as_ref().map(record).transpose()
                })
            }))
        });
        match inserted {
            Ok(Some(stored)) => Ok(Submitted::New(stored)),
            other => {
                self.release_digest(job.digest);
                other?;
                // Another server stored the same request_id between the look and the insert.
                let existing = self.one("request_id", &job.request_id)?.ok_or_else(|| {
                    StoreError::Corrupt(format!(
                        "request_id {:?} conflicted but is not stored",
                        job.request_id
                    ))
                })?;
                Ok(resent(existing, &job.digest))
            }
        }
    }

    fn get(&self, id: &str) -> Result<Option<JobRecord>> {
        self.one("id", id)
    }

    fn payload(&self, id: &str) -> Result<Option<Vec<u8>>> {
        payload_of_live(&*self.blobs, self.get(id)?)
    }

    fn blobs(&self) -> Arc<dyn Blobs> {
        self.blobs.clone()
    }

    fn join(&mut self, node: &Node, max_attempts: u32) -> Result<Vec<Expired>> {
        join_with(self, node, max_attempts, |store| {
            let node = node.clone();
            store.run(move |rt, pool| {
                rt.block_on(async {
                    let mut tx = pool.begin().await?;
                    sqlx::query(&format!(
                        "INSERT INTO proofline_nodes (name, instance, lease_ms, heartbeat_ms)
                         VALUES ($1, $2, $3, {NOW}) ON CONFLICT (name) DO NOTHING"
                    ))
                    .bind(&node.name)
                    .bind(&node.instance)
                    .bind(node.lease_ms as i64)
                    .execute(&mut *tx)
                    .await?;
                    let row = sqlx::query(&format!(
                        "SELECT instance, {NOW} - heartbeat_ms AS age, lease_ms
                         FROM proofline_nodes WHERE name = $1 FOR UPDATE"
                    ))
                    .bind(&node.name)
                    .fetch_one(&mut *tx)
                    .await?;
                    let instance: String = row.try_get("instance")?;
                    let age: Option<i64> = row.try_get("age")?;
                    let lease: i64 = row.try_get("lease_ms")?;
                    if let Some(age) = age {
                        if !node.sole && instance != node.instance && age < lease {
                            // At once: a dropped transaction's rollback waits for the
                            // connection's next use, holding the row the other process beats.
                            tx.rollback().await?;
                            return Ok(Some((age.max(0) as u64, lease as u64)));
                        }
                    }
                    sqlx::query(&format!(
                        "UPDATE proofline_nodes SET instance = $2, lease_ms = $3,
                             heartbeat_ms = {NOW} WHERE name = $1"
                    ))
                    .bind(&node.name)
                    .bind(&node.instance)
                    .bind(node.lease_ms as i64)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "UPDATE proofline_jobs SET lease_until_ms = 0
                         WHERE owner = $1 AND state = 'running'",
                    )
                    .bind(&node.name)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(None)
                })
            })
        })
    }

    fn claim_next(&mut self, node: &Node, filter: &ClaimFilter) -> Result<Option<JobRecord>> {
        let (node, filter) = (node.clone(), filter.clone());
        self.run(move |rt, pool| {
            let sql = format!(
                "UPDATE proofline_jobs
                 SET state = 'running', attempts = attempts + 1, started_ms = $1, owner = $2,
                     lease_until_ms = {NOW} + $3
                 WHERE seq = (
                     SELECT seq FROM proofline_jobs WHERE state = 'queued' AND priority >= $4
                         AND ($7::BIGINT IS NULL OR (mem_bytes <= $7 AND input_bytes <= $8)
                              OR submitted_ms < $6)
                     ORDER BY priority DESC,
                         (circuit = ANY($5) OR submitted_ms < $6) DESC,
                         seq
                     LIMIT 1
                     FOR UPDATE SKIP LOCKED)
                 RETURNING {COLUMNS}"
            );
            let row = rt.block_on(
                sqlx::query(&sql)
                    .bind(now_ms() as i64)
                    .bind(node.name)
                    .bind(node.lease_ms as i64)
                    .bind(filter.min_priority)
                    .bind(filter.held)
                    .bind(filter.aged_before_ms as i64)
                    .bind(filter.room.map(|r| r.total.min(i64::MAX as u64) as i64))
                    .bind(filter.room.map(|r| r.input.min(i64::MAX as u64) as i64))
                    .fetch_optional(pool),
            )?;
            row.as_ref().map(record).transpose()
        })
    }

    fn heartbeat(&mut self, node: &Node, running: &[(String, u32)]) -> Result<Vec<(String, u32)>> {
        let node = node.clone();
        let ids: Vec<String> = running.iter().map(|r| r.0.clone()).collect();
        let attempts: Vec<i32> = running.iter().map(|r| r.1 as i32).collect();
        self.run(move |rt, pool| {
            rt.block_on(async {
                let mut tx = pool.begin().await?;
                let mine = sqlx::query(&format!(
                    "UPDATE proofline_nodes SET heartbeat_ms = {NOW}
                     WHERE name = $1 AND instance = $2"
                ))
                .bind(&node.name)
                .bind(&node.instance)
                .execute(&mut *tx)
                .await;
                match mine {
                    Ok(m) if m.rows_affected() == 1 => {}
                    other => {
                        // At once: a dropped transaction's rollback waits for the connection's
                        // next use, holding the node's row.
                        tx.rollback().await?;
                        other?;
                        return Err(taken(&node));
                    }
                }
                let rows = sqlx::query(&format!(
                    "UPDATE proofline_jobs SET lease_until_ms = {NOW} + $2
                     WHERE owner = $1 AND state = 'running'
                       AND (id, attempts) IN (SELECT * FROM UNNEST($3::TEXT[], $4::INT4[]))
                     RETURNING id, attempts"
                ))
                .bind(&node.name)
                .bind(node.lease_ms as i64)
                .bind(ids)
                .bind(attempts)
                .fetch_all(&mut *tx)
                .await;
                let rows = match rows {
                    Ok(rows) => rows,
                    Err(e) => {
                        tx.rollback().await?;
                        return Err(e.into());
                    }
                };
                tx.commit().await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("id")?, r.try_get::<i32, _>("attempts")? as u32)))
                    .collect()
            })
        })
    }

    fn expire_leases(&mut self, max_attempts: u32) -> Result<Vec<Expired>> {
        expire_with(
            self,
            max_attempts,
            |store| {
                store.run(|rt, pool| {
                    let rows = rt.block_on(
                        sqlx::query(&format!(
                            "SELECT id, COALESCE(owner, '') AS owner, attempts
                             FROM proofline_jobs
                             WHERE state = 'running' AND COALESCE(lease_until_ms, 0) < {NOW}"
                        ))
                        .fetch_all(pool),
                    )?;
                    rows.iter()
                        .map(|r| {
                            Ok((
                                r.try_get("id")?,
                                r.try_get("owner")?,
                                r.try_get::<i32, _>("attempts")? as u32,
                            ))
                        })
                        .collect()
                })
            },
            |store, id, attempts, reason| {
                let (id, state) = (
                    id.to_string(),
                    match reason {
                        None => JobState::Queued,
                        Some(_) => JobState::Failed,
                    },
                );
                let finished = reason.as_ref().map(|_| now_ms() as i64);
                store.run(move |rt, pool| {
                    // Fenced by the attempt and the lease, so that a heartbeat or a claim
                    // between the look and this update wins.
                    let done = rt.block_on(
                        sqlx::query(&format!(
                            "UPDATE proofline_jobs SET state = $3, error = $4, finished_ms = $5
                             WHERE id = $1 AND attempts = $2 AND state = 'running'
                                 AND COALESCE(lease_until_ms, 0) < {NOW}"
                        ))
                        .bind(id)
                        .bind(attempts as i32)
                        .bind(state.code())
                        .bind(reason)
                        .bind(finished)
                        .execute(pool),
                    )?;
                    Ok(done.rows_affected() == 1)
                })
            },
            |store, id| store.release(id),
        )
    }

    fn next_lease_end(&self) -> Result<Option<u64>> {
        self.run(|rt, pool| {
            let row = rt.block_on(
                sqlx::query(&format!(
                    "SELECT MIN(COALESCE(lease_until_ms, 0)) - {NOW} AS left_ms
                     FROM proofline_jobs WHERE state = 'running'"
                ))
                .fetch_one(pool),
            )?;
            Ok(row
                .try_get::<Option<i64>, _>("left_ms")?
                .map(|left| left.max(0) as u64))
        })
    }

    fn leave(&mut self, node: &Node) -> Result<usize> {
        let node = node.clone();
        self.run(move |rt, pool| {
            rt.block_on(async {
                let mut tx = pool.begin().await?;
                let mine = sqlx::query(
                    "UPDATE proofline_nodes SET heartbeat_ms = NULL
                     WHERE name = $1 AND instance = $2",
                )
                .bind(&node.name)
                .bind(&node.instance)
                .execute(&mut *tx)
                .await?;
                let released = if mine.rows_affected() == 1 {
                    sqlx::query(
                        "UPDATE proofline_jobs SET state = 'queued', attempts = attempts - 1
                         WHERE owner = $1 AND state = 'running'",
                    )
                    .bind(&node.name)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                } else {
                    0
                };
                tx.commit().await?;
                Ok(released as usize)
            })
        })
    }

    fn finish(&mut self, id: &str, owner: &str, attempt: u32, outcome: Outcome) -> Result<bool> {
        let (state, proof, error, t) = outcome.columns();
        let (key, owner) = (id.to_string(), owner.to_string());
        let changed = self.run(move |rt, pool| {
            let done = rt.block_on(
                sqlx::query(
                    "UPDATE proofline_jobs SET state = $2, proof = $3, error = $4,
                         finished_ms = $5, srs_load_ms = $6, synthesis_ms = $7,
                         gpu_compute_ms = $8
                     WHERE id = $1 AND state = 'running' AND owner = $9 AND attempts = $10",
                )
                .bind(key)
                .bind(state.code())
                .bind(proof)
                .bind(error)
                .bind(now_ms() as i64)
                .bind(t.srs_load_ms as i64)
                .bind(t.synthesis_ms as i64)
                .bind(t.gpu_compute_ms as i64)
                .bind(owner)
                .bind(attempt as i32)
                .execute(pool),
            )?;
            Ok(done.rows_affected())
        })?;
        if changed == 1 {
            self.release(id);
        }
        Ok(changed == 1)
    }

    fn cancel(&mut self, id: &str) -> Result<Cancelled> {
        cancel_with(self, id, |store| {
            let key = id.to_string();
            let changed = store.run(move |rt, pool| {
                let done = rt.block_on(
                    sqlx::query(
                        "UPDATE proofline_jobs SET state = 'cancelled', finished_ms = $2
                         WHERE id = $1 AND state IN ('queued', 'running')",
                    )
                    .bind(key)
                    .bind(now_ms() as i64)
                    .execute(pool),
                )?;
                Ok(done.rows_affected())
            })?;
            if changed == 1 {
                store.release(id);
            }
            Ok(changed == 1)
        })
    }

    fn purge_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let purged = self.purge_jobs_ended_before(before_ms)?;
        blobs::sweep(&*self.blobs, before_ms, |digest| {
            self.release_digest(*digest)
        });
        Ok(purged)
    }

    fn queued(&self) -> Result<Vec<(String, i32, u64)>> {
        self.run(|rt, pool| {
            let rows = rt.block_on(
                sqlx::query(
                    "SELECT kind, priority, COUNT(*) AS n FROM proofline_jobs
                     WHERE state = 'queued'
                     GROUP BY kind, priority ORDER BY priority DESC, kind COLLATE \"C\"",
                )
                .fetch_all(pool),
            )?;
            rows.iter()
                .map(|r| {
                    Ok((
                        r.try_get("kind")?,
                        r.try_get("priority")?,
                        r.try_get::<i64, _>("n")? as u64,
                    ))
                })
                .collect()
        })
    }

    fn nodes(&self) -> Result<Vec<NodeRecord>> {
        self.run(|rt, pool| {
            let rows = rt.block_on(
                sqlx::query(&format!(
                    "SELECT n.name, {NOW} - n.heartbeat_ms AS age,
                         (SELECT COUNT(*) FROM proofline_jobs j
                          WHERE j.owner = n.name AND j.state = 'running') AS running
                     FROM proofline_nodes n ORDER BY n.name COLLATE \"C\""
                ))
                .fetch_all(pool),
            )?;
            rows.iter()
                .map(|r| {
                    Ok(NodeRecord {
                        name: r.try_get("name")?,
                        heartbeat_age_ms: r
                            .try_get::<Option<i64>, _>("age")?
                            .map(|a| a.max(0) as u64),
                        running: r.try_get::<i64, _>("running")? as u64,
                    })
                })
                .collect()
        })
    }

    fn running(&self) -> Result<Vec<(String, u64)>> {
        self.run(|rt, pool| {
            let rows = rt.block_on(
                sqlx::query(
                    "SELECT kind, COUNT(*) AS n FROM proofline_jobs WHERE state = 'running'
                     GROUP BY kind ORDER BY kind COLLATE \"C\"",
                )
                .fetch_all(pool),
            )?;
            rows.iter()
                .map(|r| Ok((r.try_get("kind")?, r.try_get::<i64, _>("n")? as u64)))
                .collect()
        })
    }
}
