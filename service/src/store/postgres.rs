//! The job store on a PostgreSQL server ([`PgStore`]): the same jobs, states and rules as the
//! embedded store, in a table any number of servers can reach, with each payload in a file of a
//! blob directory beside it (synced before the row that points at it is written). Claims take
//! the highest priority, then the oldest, in one statement with `FOR UPDATE SKIP LOCKED`, so
//! that two claimers never take one job; `request_id` is one unique key of the table.
//!
//! The queries are plain SQL run at run time (building needs no database); the table is
//! created at open under an advisory lock. The store's calls are synchronous, like the
//! embedded store's: each runs on the store's own thread and runtime, so that a call from an
//! asynchronous handler never starts a runtime inside another.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::mpsc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Connection, Row};

use super::{
    before_insert, cancel_with, io, now_ms, resent, Cancelled, JobRecord, JobState, JobStore,
    NewJob, Outcome, Payloads, Result, StoreError, Submitted, Timings,
};

/// Where a [`PgStore`] keeps its jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The server: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?...]`.
    pub url: String,
    /// The schema the table lives in (created if missing; `None`: the connection's default).
    pub schema: Option<String>,
    /// The blob directory: one file per queued or running job's payload.
    pub blobs: PathBuf,
    /// Hold the schema's server lock while the store is open, so that a second server on the
    /// same database and schema is refused: a starting server puts every running job back in
    /// the queue, which is right only while it is the one server (several servers sharing a
    /// database need leases, not built yet). Off for tests that open several handles.
    pub single_server: bool,
}

/// How long connecting may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

type Call = Box<dyn FnOnce(&tokio::runtime::Runtime, &PgPool) + Send>;

/// The job store on PostgreSQL.
pub struct PgStore {
    calls: mpsc::Sender<Call>,
    payloads: Payloads,
}

const COLUMNS: &str = "id, request_id, digest, kind, priority, state, attempts, proof, error, \
                       submitted_ms, finished_ms, started_ms, srs_load_ms, synthesis_ms, \
                       gpu_compute_ms";

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
        let payloads = Payloads::open(&options.blobs)?;
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
        let (ready, started) = mpsc::sync_channel::<Result<()>>(1);
        let (calls, inbox) = mpsc::channel::<Call>();
        let options = options.clone();
        // Everything asynchronous happens on the store's thread, so that opening the store
        // from an asynchronous task never starts a runtime inside another.
        std::thread::Builder::new()
            .name("proofline-pg-store".into())
            .spawn(move || {
                let opened = (|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(io("starting the job store's runtime".into()))?;
                    let (pool, lock) = runtime.block_on(async {
                        // One connection first, so that a server that cannot be reached is
                        // an error saying why, not a pool's time-out.
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
                        migrate(&pool, options.schema.as_deref()).await?;
                        // The server lock is a session's: its connection stays open with the
                        // store.
                        let lock = match options.single_server {
                            true => Some(server_lock(&pool, &options).await?),
                            false => None,
                        };
                        Ok::<_, StoreError>((pool, lock))
                    })?;
                    Ok((runtime, pool, lock))
                })();
                let (runtime, pool, lock) = match opened {
                    Ok(open) => {
                        let _ = ready.send(Ok(()));
                        open
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                for call in inbox {
                    call(&runtime, &pool);
                }
                // The store is dropped: the lock's session ends, and the connections close.
                if let Some(lock) = lock {
                    let _ = runtime.block_on(lock.close());
                }
                runtime.block_on(pool.close());
            })
            .map_err(io("starting the job store's thread".into()))?;
        started
            .recv()
            .map_err(|_| StoreError::Corrupt("the job store's thread has stopped".into()))??;
        Ok(PgStore { calls, payloads })
    }

    /// Runs `f` on the store's thread and waits for its answer.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&tokio::runtime::Runtime, &PgPool) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let call: Call = Box::new(move |rt, pool| {
            let _ = tx.send(f(rt, pool));
        });
        let gone = || StoreError::Corrupt("the job store's thread has stopped".into());
        self.calls.send(call).map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
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

async fn server_lock(pool: &PgPool, options: &PgOptions) -> Result<sqlx::PgConnection> {
    // Detached from the pool, so that the lock's session is never handed to another call.
    let mut conn = pool.acquire().await?.detach();
    let locked: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_lock(7320092, hashtext(current_schema()))")
            .fetch_one(&mut conn)
            .await?;
    if locked {
        Ok(conn)
    } else {
        Err(StoreError::Busy(format!(
            "another proofline server uses this database{}: several servers on one database \
             are not supported yet (stop the other, or give this one its own database)",
            options
                .schema
                .as_deref()
                .map(|s| format!(" (schema {s})"))
                .unwrap_or_default()
        )))
    }
}

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
    ] {
        sqlx::query(statement).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

impl JobStore for PgStore {
    fn submit(&mut self, job: NewJob) -> Result<Submitted> {
        let existing = self.one("request_id", &job.request_id)?;
        if let Some(answer) = before_insert(self, &job, existing)? {
            return Ok(answer);
        }
        let id = self.payloads.new_id(&job.digest);
        // The payload reaches the disk before the row that points at it.
        self.payloads.write(&id, &job.payload)?;
        let (row_id, request_id) = (id.clone(), job.request_id.clone());
        let inserted = self.run(move |rt, pool| {
            let sql = format!(
                "INSERT INTO proofline_jobs
                     (id, request_id, digest, kind, priority, state, submitted_ms)
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6)
                 ON CONFLICT (request_id) DO NOTHING
                 RETURNING {COLUMNS}"
            );
            let row = rt.block_on(
                sqlx::query(&sql)
                    .bind(row_id)
                    .bind(request_id)
                    .bind(job.digest.to_vec())
                    .bind(job.kind)
                    .bind(job.priority)
                    .bind(now_ms() as i64)
                    .fetch_optional(pool),
            )?;
            row.as_ref().map(record).transpose()
        });
        match inserted {
            Ok(Some(stored)) => Ok(Submitted::New(stored)),
            other => {
                self.payloads.remove(&id);
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
        self.payloads.of_live(self.get(id)?)
    }

    fn claim_next(&mut self) -> Result<Option<JobRecord>> {
        self.run(|rt, pool| {
            let sql = format!(
                "UPDATE proofline_jobs
                 SET state = 'running', attempts = attempts + 1, started_ms = $1
                 WHERE seq = (
                     SELECT seq FROM proofline_jobs WHERE state = 'queued'
                     ORDER BY priority DESC, seq LIMIT 1
                     FOR UPDATE SKIP LOCKED)
                 RETURNING {COLUMNS}"
            );
            let row = rt.block_on(sqlx::query(&sql).bind(now_ms() as i64).fetch_optional(pool))?;
            row.as_ref().map(record).transpose()
        })
    }

    fn finish(&mut self, id: &str, outcome: Outcome) -> Result<bool> {
        let (state, proof, error, t) = outcome.columns();
        let key = id.to_string();
        let changed = self.run(move |rt, pool| {
            let done = rt.block_on(
                sqlx::query(
                    "UPDATE proofline_jobs SET state = $2, proof = $3, error = $4,
                         finished_ms = $5, srs_load_ms = $6, synthesis_ms = $7,
                         gpu_compute_ms = $8
                     WHERE id = $1 AND state = 'running'",
                )
                .bind(key)
                .bind(state.code())
                .bind(proof)
                .bind(error)
                .bind(now_ms() as i64)
                .bind(t.srs_load_ms as i64)
                .bind(t.synthesis_ms as i64)
                .bind(t.gpu_compute_ms as i64)
                .execute(pool),
            )?;
            Ok(done.rows_affected())
        })?;
        self.payloads.remove(id);
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
                store.payloads.remove(id);
            }
            Ok(changed == 1)
        })
    }

    fn requeue_running(&mut self) -> Result<usize> {
        self.run(|rt, pool| {
            let done = rt.block_on(
                sqlx::query("UPDATE proofline_jobs SET state = 'queued' WHERE state = 'running'")
                    .execute(pool),
            )?;
            Ok(done.rows_affected() as usize)
        })
    }

    fn purge_ended_before(&mut self, before_ms: u64) -> Result<usize> {
        let ids: Vec<String> = self.run(move |rt, pool| {
            let rows = rt.block_on(
                sqlx::query(
                    "DELETE FROM proofline_jobs
                     WHERE state IN ('completed', 'failed', 'cancelled') AND finished_ms < $1
                     RETURNING id",
                )
                .bind(before_ms as i64)
                .fetch_all(pool),
            )?;
            rows.iter()
                .map(|r| r.try_get::<String, _>("id").map_err(StoreError::from))
                .collect()
        })?;
        for id in &ids {
            self.payloads.remove(id);
        }
        Ok(ids.len())
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
}
