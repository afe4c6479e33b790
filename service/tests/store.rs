//! The job store keeps what it accepted across a reopen, treats `request_id` as an idempotency
//! key, hands out the highest priority first (oldest first among equals), and never lets a
//! cancelled job's result in: every test runs on both stores, SQLite and PostgreSQL (the server
//! `PROOFLINE_TEST_POSTGRES` names, a schema of its own per test; with `CI=true` a missing
//! server fails the PostgreSQL tests instead of skipping them).

use std::path::PathBuf;

use proofline_service::store::{
    Cancelled, JobState, JobStore, NewJob, Outcome, PgOptions, PgStore, SqliteStore, Submitted,
    Timings,
};

/// Where one test's store lives: a temporary directory (SQLite's database and payloads, or
/// PostgreSQL's payload files) and, for PostgreSQL, the server and schema.
struct Place {
    dir: tempfile::TempDir,
    pg: Option<PgOptions>,
}

impl Place {
    fn sqlite() -> Self {
        Place {
            dir: tempfile::tempdir().unwrap(),
            pg: None,
        }
    }

    /// `None` (the skip printed) without a server, unless CI must have one.
    fn postgres(test: &str) -> Option<Self> {
        let Ok(url) = std::env::var("PROOFLINE_TEST_POSTGRES") else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must test the PostgreSQL store: PROOFLINE_TEST_POSTGRES is not set (.ci/run \
                 starts a server and sets it)"
            );
            eprintln!("skipped: PROOFLINE_TEST_POSTGRES is not set (no PostgreSQL server)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // A schema name is at most 63 bytes.
        let schema = format!(
            "t_{}_{:08x}",
            &test[..test.len().min(40)],
            rand::random::<u32>()
        );
        let blobs = dir.path().join("payloads");
        Some(Place {
            dir,
            pg: Some(PgOptions {
                url,
                schema: Some(schema),
                blobs,
                single_server: false,
            }),
        })
    }

    /// The store, opened (again).
    fn open(&self) -> Box<dyn JobStore> {
        match &self.pg {
            None => Box::new(SqliteStore::open(self.dir.path()).unwrap()),
            Some(pg) => Box::new(PgStore::open(pg).unwrap()),
        }
    }

    /// Where the store keeps payload files.
    fn payloads(&self) -> PathBuf {
        self.dir.path().join("payloads")
    }
}

/// Runs each test function on both stores: `name::sqlite` and `name::postgres`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    super::$name(&super::Place::sqlite());
                }

                #[test]
                fn postgres() {
                    if let Some(place) = super::Place::postgres(stringify!($name)) {
                        super::$name(&place);
                    }
                }
            }
        )*
    };
}

on_both_stores!(
    the_same_request_twice_is_one_job_and_another_payload_is_refused,
    a_full_queue_refuses_new_jobs_but_answers_resent_ones,
    claims_take_the_highest_priority_first_then_the_oldest,
    a_reopened_store_has_every_job_and_requeues_the_running_ones,
    a_cancelled_job_never_runs_and_a_cancelled_running_job_keeps_no_result,
    ended_jobs_are_purged_after_retention_and_queued_ones_kept,
    a_reason_with_a_nul_character_is_stored,
);

/// A failure's reason may quote a client's payload, NUL characters included: stored all the
/// same (PostgreSQL's text holds no NUL, so it is written `\0`), and the job ends.
fn a_reason_with_a_nul_character_is_stored(place: &Place) {
    let mut store = place.open();
    let a = new(store.submit(job("a", 2, b"a")).unwrap());
    store.claim_next().unwrap();
    assert!(store
        .finish(&a.id, Outcome::Failed("unknown variant `x\0y`".into()))
        .unwrap());
    let a = store.get(&a.id).unwrap().unwrap();
    assert_eq!(a.state, JobState::Failed);
    assert_eq!(a.error.as_deref(), Some("unknown variant `x\\0y`"));
}

fn job(request_id: &str, priority: i32, payload: &[u8]) -> NewJob {
    NewJob {
        request_id: request_id.into(),
        digest: *blake2b_simd::Params::new()
            .hash_length(32)
            .hash(payload)
            .as_bytes()
            .first_chunk::<32>()
            .unwrap(),
        kind: "WINNING_POST".into(),
        priority,
        payload: payload.to_vec(),
        max_queued: None,
    }
}

fn new(s: Submitted) -> proofline_service::store::JobRecord {
    match s {
        Submitted::New(r) => r,
        other => panic!("expected a new job, got {other:?}"),
    }
}

fn the_same_request_twice_is_one_job_and_another_payload_is_refused(place: &Place) {
    let mut store = place.open();
    let first = new(store.submit(job("r1", 2, b"payload")).unwrap());
    assert_eq!(first.state, JobState::Queued);
    assert_eq!(store.payload(&first.id).unwrap().unwrap(), b"payload");
    match store.submit(job("r1", 4, b"payload")).unwrap() {
        Submitted::Existing(r) => assert_eq!(r.id, first.id),
        other => panic!("{other:?}"),
    }
    match store.submit(job("r1", 2, b"another payload")).unwrap() {
        Submitted::Conflict(r) => assert_eq!(r.id, first.id),
        other => panic!("{other:?}"),
    }
    // Finished, the same request returns the finished job with its proof and timings.
    let claimed = store.claim_next().unwrap().unwrap();
    assert_eq!(claimed.id, first.id);
    assert!(claimed.started_ms.is_some_and(|s| s >= first.submitted_ms));
    assert_eq!(first.started_ms, None);
    let timings = Timings {
        srs_load_ms: 11,
        synthesis_ms: 22,
        gpu_compute_ms: 33,
    };
    assert!(store
        .finish(&first.id, Outcome::Completed(vec![7; 192], timings))
        .unwrap());
    match store.submit(job("r1", 2, b"payload")).unwrap() {
        Submitted::Existing(r) => {
            assert_eq!(r.state, JobState::Completed);
            assert_eq!(r.proof, Some(vec![7; 192]));
            assert_eq!(r.timings, timings);
        }
        other => panic!("{other:?}"),
    }
    // The payload left with the job's end.
    assert_eq!(store.payload(&first.id).unwrap(), None);
}

fn a_full_queue_refuses_new_jobs_but_answers_resent_ones(place: &Place) {
    let mut store = place.open();
    let limited = |id: &str, payload: &[u8]| NewJob {
        max_queued: Some(2),
        ..job(id, 2, payload)
    };
    let a = new(store.submit(limited("a", b"a")).unwrap());
    new(store.submit(limited("b", b"b")).unwrap());
    match store.submit(limited("c", b"c")).unwrap() {
        Submitted::Full(n) => assert_eq!(n, 2),
        other => panic!("{other:?}"),
    }
    assert!(store.get("c").unwrap().is_none());
    // A resent request is answered whatever the queue holds.
    match store.submit(limited("a", b"a")).unwrap() {
        Submitted::Existing(r) => assert_eq!(r.id, a.id),
        other => panic!("{other:?}"),
    }
    // A claimed job leaves the queue: room for one more.
    store.claim_next().unwrap().unwrap();
    new(store.submit(limited("c", b"c")).unwrap());
    // Without a limit, no refusal.
    new(store.submit(job("d", 2, b"d")).unwrap());
}

fn claims_take_the_highest_priority_first_then_the_oldest(place: &Place) {
    let mut store = place.open();
    let c2a = new(store.submit(job("c2-a", 2, b"a")).unwrap());
    let c2b = new(store.submit(job("c2-b", 2, b"b")).unwrap());
    let winning = new(store.submit(job("win", 4, b"w")).unwrap());
    let low = new(store.submit(job("low", 1, b"l")).unwrap());
    let queued = store.queued().unwrap();
    assert_eq!(queued.iter().map(|q| q.2).sum::<u64>(), 4);
    let order: Vec<String> =
        std::iter::from_fn(|| store.claim_next().unwrap().map(|j| j.id)).collect();
    assert_eq!(order, vec![winning.id, c2a.id, c2b.id, low.id]);
    assert!(store.claim_next().unwrap().is_none());
}

fn a_reopened_store_has_every_job_and_requeues_the_running_ones(place: &Place) {
    let (running, queued) = {
        let mut store = place.open();
        let a = new(store.submit(job("a", 2, b"a")).unwrap());
        let b = new(store.submit(job("b", 2, b"b")).unwrap());
        assert_eq!(store.claim_next().unwrap().unwrap().id, a.id);
        (a, b)
        // Dropped mid-job, as a killed server would leave it.
    };
    let mut store = place.open();
    assert_eq!(
        store.get(&running.id).unwrap().unwrap().state,
        JobState::Running
    );
    assert_eq!(store.requeue_running().unwrap(), 1);
    let again = store.claim_next().unwrap().unwrap();
    assert_eq!(again.id, running.id);
    assert_eq!(again.attempts, 2);
    assert_eq!(store.payload(&queued.id).unwrap().unwrap(), b"b");
}

fn a_cancelled_job_never_runs_and_a_cancelled_running_job_keeps_no_result(place: &Place) {
    let mut store = place.open();
    let a = new(store.submit(job("a", 2, b"a")).unwrap());
    let b = new(store.submit(job("b", 2, b"b")).unwrap());
    assert_eq!(store.cancel(&b.id).unwrap(), Cancelled::WasQueued);
    assert_eq!(store.claim_next().unwrap().unwrap().id, a.id);
    assert!(
        store.claim_next().unwrap().is_none(),
        "a cancelled job was claimed"
    );
    assert_eq!(store.cancel(&a.id).unwrap(), Cancelled::WasRunning);
    assert!(!store
        .finish(&a.id, Outcome::Completed(vec![1; 192], Timings::default()))
        .unwrap());
    let a = store.get(&a.id).unwrap().unwrap();
    assert_eq!((a.state, a.proof), (JobState::Cancelled, None));
    assert_eq!(
        store.cancel(&a.id).unwrap(),
        Cancelled::AlreadyEnded(JobState::Cancelled)
    );
    assert_eq!(store.cancel("no-such-job").unwrap(), Cancelled::Unknown);
    assert_eq!(store.get("no-such-job").unwrap(), None);
}

fn ended_jobs_are_purged_after_retention_and_queued_ones_kept(place: &Place) {
    let mut store = place.open();
    let a = new(store.submit(job("a", 2, b"a")).unwrap());
    let b = new(store.submit(job("b", 2, b"b")).unwrap());
    store.claim_next().unwrap();
    store
        .finish(&a.id, Outcome::Failed("synthesis failed".into()))
        .unwrap();
    let failed = store.get(&a.id).unwrap().unwrap();
    assert_eq!(failed.error.as_deref(), Some("synthesis failed"));
    // Not yet past retention.
    assert_eq!(store.purge_ended_before(0).unwrap(), 0);
    let later = proofline_service::store::now_ms() + 1;
    assert_eq!(store.purge_ended_before(later).unwrap(), 1);
    assert_eq!(store.get(&a.id).unwrap(), None);
    assert!(store.get(&b.id).unwrap().is_some());
    assert_eq!(std::fs::read_dir(place.payloads()).unwrap().count(), 1);
}

#[test]
fn a_store_of_the_first_layout_gains_the_timing_columns_and_keeps_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = rusqlite::Connection::open(dir.path().join("jobs.sqlite")).unwrap();
        db.execute_batch(
            "CREATE TABLE jobs (
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
             INSERT INTO jobs (id, request_id, digest, kind, priority, state, proof,
                               submitted_ms, finished_ms)
             VALUES ('old', 'r-old', x'00', 'WINNING_POST', 4, 'completed', x'0102', 5, 9);",
        )
        .unwrap();
    }
    let mut store = SqliteStore::open(dir.path()).unwrap();
    let old = store.get("old").unwrap().unwrap();
    assert_eq!(old.state, JobState::Completed);
    assert_eq!(old.proof, Some(vec![1, 2]));
    assert_eq!(old.timings, Timings::default());
    assert_eq!(old.started_ms, None);
    // Twin: a job of the new layout records its timings.
    let j = new(store.submit(job("r-new", 2, b"new")).unwrap());
    store.claim_next().unwrap();
    let t = Timings {
        srs_load_ms: 1,
        synthesis_ms: 2,
        gpu_compute_ms: 3,
    };
    assert!(store.finish(&j.id, Outcome::Completed(vec![9], t)).unwrap());
    assert_eq!(store.get(&j.id).unwrap().unwrap().timings, t);
}

#[test]
fn postgres_claimers_take_each_job_once() {
    let Some(place) = Place::postgres("claimers") else {
        return;
    };
    let mut store = place.open();
    let ids: std::collections::BTreeSet<String> = (0..200)
        .map(|i| {
            let payload = format!("job {i}");
            new(store
                .submit(job(&format!("r{i}"), 1 + i % 4, payload.as_bytes()))
                .unwrap())
            .id
        })
        .collect();
    // Four claimers, each with its own connections, as four servers would be.
    let claimed: Vec<Vec<(i32, String)>> = std::thread::scope(|s| {
        let claimers: Vec<_> = (0..4)
            .map(|_| {
                let mut store = place.open();
                s.spawn(move || {
                    std::iter::from_fn(|| store.claim_next().unwrap())
                        .map(|j| (j.priority, j.id))
                        .collect()
                })
            })
            .collect();
        claimers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let all: Vec<&String> = claimed.iter().flatten().map(|(_, id)| id).collect();
    let unique: std::collections::BTreeSet<String> = all.iter().map(|id| id.to_string()).collect();
    assert_eq!(all.len(), 200, "a job was claimed twice or not at all");
    assert_eq!(unique, ids);
    // Each claimer took the highest priority left each time: its own claims never rise.
    for mine in &claimed {
        assert!(mine.windows(2).all(|w| w[0].0 >= w[1].0), "{mine:?}");
    }
    assert!(store.claim_next().unwrap().is_none());
}

#[test]
fn postgres_refuses_a_second_server_on_one_schema() {
    let Some(place) = Place::postgres("one_server") else {
        return;
    };
    let single = PgOptions {
        single_server: true,
        ..place.pg.clone().unwrap()
    };
    let first = PgStore::open(&single).unwrap();
    let err = PgStore::open(&single)
        .err()
        .expect("a second server")
        .to_string();
    assert!(
        err.contains("another proofline server uses this database"),
        "{err}"
    );
    // Twin: once the first has stopped, a server opens it.
    drop(first);
    let t = std::time::Instant::now();
    while let Err(e) = PgStore::open(&single) {
        // The first store's thread lets its connection go as it ends.
        assert!(t.elapsed().as_secs() < 10, "{e}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
