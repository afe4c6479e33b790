//! The job store keeps what it accepted across a reopen, treats `request_id` as an idempotency
//! key, hands out the highest priority first (oldest first among equals), never lets a
//! cancelled job's result in, and gives each claim a lease: a run-out lease requeues the job (or
//! fails it after its last attempt) and fences the old attempt's result out; a payload is one
//! blob per digest, kept while a job that has not ended needs it. Every test runs on both
//! stores, SQLite and PostgreSQL (the server `PROOFLINE_TEST_POSTGRES` names, a schema of its
//! own per test), and on PostgreSQL with its payloads in an S3-compatible bucket (the endpoint
//! and bucket `PROOFLINE_TEST_S3` names, `http://HOST:PORT/BUCKET`, a prefix of its own per
//! test); with `CI=true` a missing server fails those tests instead of skipping them.

use std::path::PathBuf;

use std::time::Duration;

use proofline_service::store::blobs::{self, blob_key};
use proofline_service::store::{
    BlobLocation, Cancelled, ClaimFilter, JobRecord, JobState, JobStore, MemoryRoom, NewJob, Node,
    Outcome, PgOptions, PgStore, SqliteStore, StoreError, Submitted, Timings,
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
        let url = server("PROOFLINE_TEST_POSTGRES", "a PostgreSQL server")?;
        let dir = tempfile::tempdir().unwrap();
        // A schema name is at most 63 bytes.
        let schema = format!(
            "t_{}_{:08x}",
            &test[..test.len().min(40)],
            rand::random::<u32>()
        );
        let blobs = BlobLocation::Dir(dir.path().join("payloads"));
        Some(Place {
            dir,
            pg: Some(PgOptions {
                url,
                schema: Some(schema),
                blobs,
            }),
        })
    }

    /// PostgreSQL with its payloads in the S3-compatible bucket `PROOFLINE_TEST_S3` names,
    /// under a prefix of this test's own.
    fn postgres_s3(test: &str) -> Option<Self> {
        let mut place = Place::postgres(test)?;
        let bucket = s3_bucket()?;
        let pg = place.pg.as_mut().unwrap();
        pg.blobs = bucket.at(pg.schema.as_deref().unwrap());
        Some(place)
    }

    /// The store's blobs, opened beside it.
    fn blobs(&self) -> Box<dyn blobs::Blobs> {
        let location = match &self.pg {
            None => BlobLocation::Dir(self.payloads()),
            Some(pg) => pg.blob_location(),
        };
        blobs::open(&location).unwrap()
    }

    /// Whether the blob of `job`'s payload is there.
    fn has_blob(&self, job: &JobRecord) -> bool {
        self.blobs().exists(&blob_key(&job.digest)).unwrap()
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

/// The server an environment variable names, or `None` (the skip printed) unless CI must have
/// it.
fn server(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) => Some(v),
        Err(_) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must test with {what}: {var} is not set (.ci/run starts one and sets it)"
            );
            eprintln!("skipped: {var} is not set (no {what})");
            None
        }
    }
}

/// The S3-compatible endpoint and bucket of `PROOFLINE_TEST_S3` (`http://HOST:PORT/BUCKET`).
struct S3Bucket {
    endpoint: String,
    bucket: String,
}

fn s3_bucket() -> Option<S3Bucket> {
    let url = server("PROOFLINE_TEST_S3", "an S3-compatible server")?;
    let (endpoint, bucket) = url
        .rsplit_once('/')
        .filter(|(e, b)| e.starts_with("http") && !b.is_empty())
        .unwrap_or_else(|| panic!("PROOFLINE_TEST_S3={url:?}: expected http://HOST:PORT/BUCKET"));
    Some(S3Bucket {
        endpoint: endpoint.into(),
        bucket: bucket.into(),
    })
}

impl S3Bucket {
    /// Blobs under `prefix` of the bucket (named `bucket`), with the test server's settings.
    fn location(&self, bucket: &str, prefix: &str) -> BlobLocation {
        let options = [
            ("aws_endpoint", self.endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", "proofline-test"),
            ("aws_secret_access_key", "proofline-test"),
        ];
        BlobLocation::S3 {
            url: format!("s3://{bucket}/{prefix}"),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn at(&self, prefix: &str) -> BlobLocation {
        self.location(&self.bucket, prefix)
    }
}

/// Runs each test function on both stores: `name::sqlite`, `name::postgres`, and
/// `name::postgres_s3` (payloads in a bucket).
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

                #[test]
                fn postgres_s3() {
                    if let Some(place) = super::Place::postgres_s3(stringify!($name)) {
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
    a_run_out_lease_requeues_the_job_and_the_old_attempt_cannot_write,
    a_job_fails_when_its_last_attempt_loses_its_lease,
    a_heartbeat_keeps_the_leases_of_the_jobs_its_node_still_owns,
    one_name_is_one_live_node_and_a_leaving_node_lets_its_jobs_go,
    claims_prefer_held_circuits_and_keep_slots_for_urgent_work,
    claims_take_only_jobs_whose_memory_estimate_fits,
    a_payload_is_one_blob_kept_while_a_live_job_needs_it,
);

/// A node named `name` (a fresh instance) whose claims hold `lease_ms`.
fn node(name: &str, lease_ms: u64) -> Node {
    Node {
        name: name.into(),
        instance: format!("{:016x}", rand::random::<u64>()),
        lease_ms,
        sole: false,
    }
}

/// The node most tests claim as: its lease outlasts any test.
fn n1() -> Node {
    Node {
        instance: "n1-instance".into(),
        ..node("n1", 600_000)
    }
}

/// Claims as `node` whatever is next.
fn claim_as(store: &mut Box<dyn JobStore>, node: &Node) -> Option<JobRecord> {
    store
        .claim_next(
            node,
            &ClaimFilter {
                min_priority: i32::MIN,
                ..ClaimFilter::default()
            },
        )
        .unwrap()
}

/// Claims as [`n1`].
fn claim(store: &mut Box<dyn JobStore>) -> Option<JobRecord> {
    claim_as(store, &n1())
}

/// Ends `job` (as claimed by [`n1`]).
fn finish(store: &mut Box<dyn JobStore>, job: &JobRecord, outcome: Outcome) -> bool {
    finish_as(store, &n1(), job, outcome)
}

/// Finishes `job` as `node`.
fn finish_as(
    store: &mut Box<dyn JobStore>,
    node: &Node,
    job: &JobRecord,
    outcome: Outcome,
) -> bool {
    store
        .finish(&job.id, &node.name, job.attempts, outcome)
        .unwrap()
}

fn proof(byte: u8) -> Outcome {
    Outcome::Completed(vec![byte; 192], Timings::default())
}

fn a_run_out_lease_requeues_the_job_and_the_old_attempt_cannot_write(place: &Place) {
    let mut store = place.open();
    let (a, b) = (node("a", 2000), node("b", 60_000));
    store.join(&a, 3).unwrap();
    store.join(&b, 3).unwrap();
    let j = new(store.submit(job("j", 2, b"j")).unwrap());
    // Nothing runs: no lease to end.
    assert_eq!(store.next_lease_end().unwrap(), None);
    let first = claim_as(&mut store, &a).unwrap();
    assert_eq!((first.attempts, first.owner.as_deref()), (1, Some("a")));
    // Its lease ends within the 2 s it was given.
    let left = store.next_lease_end().unwrap().unwrap();
    assert!((1000..=2000).contains(&left), "{left} ms");
    // Twin first: within its lease, and after a heartbeat, the job stays a's.
    assert_eq!(store.expire_leases(3).unwrap(), vec![]);
    let runs = vec![(j.id.clone(), 1)];
    assert_eq!(store.heartbeat(&a, &runs).unwrap(), runs);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(store.expire_leases(3).unwrap(), vec![]);
    // a stops beating: its lease runs out, and b finds the job back in the queue.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(store.next_lease_end().unwrap(), Some(0));
    let expired = store.expire_leases(3).unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!((expired[0].owner.as_str(), expired[0].attempts), ("a", 1));
    assert!(expired[0].requeued);
    assert_eq!(store.get(&j.id).unwrap().unwrap().state, JobState::Queued);
    let second = claim_as(&mut store, &b).unwrap();
    assert_eq!((second.attempts, second.owner.as_deref()), (2, Some("b")));
    // a wakes up with a result: refused, as is a stale owner with the right attempt; b's wins.
    assert!(!store.finish(&j.id, "a", 1, proof(1)).unwrap());
    assert!(!store.finish(&j.id, "a", 2, proof(1)).unwrap());
    assert!(!store.finish(&j.id, "b", 1, proof(1)).unwrap());
    assert_eq!(store.heartbeat(&a, &runs).unwrap(), vec![]);
    assert!(
        store.payload(&j.id).unwrap().is_some(),
        "the new attempt's payload went"
    );
    assert!(store.finish(&j.id, "b", 2, proof(2)).unwrap());
    let done = store.get(&j.id).unwrap().unwrap();
    assert_eq!(
        (done.state, done.proof),
        (JobState::Completed, Some(vec![2; 192]))
    );
    assert!(
        !store.finish(&j.id, "b", 2, proof(3)).unwrap(),
        "written twice"
    );
}

fn a_job_fails_when_its_last_attempt_loses_its_lease(place: &Place) {
    let mut store = place.open();
    let a = node("a", 100);
    store.join(&a, 2).unwrap();
    let j = new(store.submit(job("j", 2, b"j")).unwrap());
    claim_as(&mut store, &a).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // Attempt 1 of 2: back in the queue.
    assert!(store.expire_leases(2).unwrap()[0].requeued);
    assert_eq!(claim_as(&mut store, &a).unwrap().attempts, 2);
    std::thread::sleep(Duration::from_millis(200));
    let last = store.expire_leases(2).unwrap();
    assert!(!last[0].requeued);
    let failed = store.get(&j.id).unwrap().unwrap();
    assert_eq!(failed.state, JobState::Failed);
    let reason = failed.error.unwrap();
    assert!(
        reason.contains("on each of its 2 attempts, the last on node a"),
        "{reason}"
    );
    assert_eq!(store.payload(&j.id).unwrap(), None);
    assert!(claim_as(&mut store, &a).is_none());
}

fn a_heartbeat_keeps_the_leases_of_the_jobs_its_node_still_owns(place: &Place) {
    let mut store = place.open();
    let (a, b) = (node("a", 1500), node("b", 60_000));
    store.join(&a, 3).unwrap();
    store.join(&b, 3).unwrap();
    let ids: Vec<String> = (0..4)
        .map(|i| new(store.submit(job(&format!("r{i}"), 2, &[i])).unwrap()).id)
        .collect();
    claim_as(&mut store, &a).unwrap();
    claim_as(&mut store, &a).unwrap();
    claim_as(&mut store, &b).unwrap();
    // a claims a fourth job but does not run it (the claim's answer was lost on the way).
    claim_as(&mut store, &a).unwrap();
    let runs = vec![(ids[0].clone(), 1), (ids[1].clone(), 1)];
    let mut mine = store.heartbeat(&a, &runs).unwrap();
    mine.sort();
    assert_eq!(mine, runs);
    // Heartbeats past the lease keep the jobs a runs; the one it does not run goes back to the
    // queue.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        store.heartbeat(&a, &runs).unwrap();
    }
    let expired = store.expire_leases(3).unwrap();
    assert_eq!(
        expired.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        vec![ids[3].as_str()]
    );
    assert!(expired[0].requeued);
    // A job cancelled through any node leaves the answer: a stops it.
    store.cancel(&ids[0]).unwrap();
    assert_eq!(
        store.heartbeat(&a, &runs).unwrap(),
        vec![(ids[1].clone(), 1)]
    );
    let nodes = store.nodes().unwrap();
    assert_eq!(
        nodes
            .iter()
            .map(|n| (n.name.as_str(), n.running))
            .collect::<Vec<_>>(),
        vec![("a", 1), ("b", 1)]
    );
    assert!(nodes.iter().all(|n| n.heartbeat_age_ms.is_some()));
    assert_eq!(
        store.running().unwrap(),
        vec![("WINNING_POST".to_string(), 2)]
    );
    // Another process that took a's name (after a stopped answering) ends a's heartbeats.
    std::thread::sleep(Duration::from_millis(1600));
    let a2 = node("a", 1500);
    store.join(&a2, 3).unwrap();
    match store.heartbeat(&a, &runs) {
        Err(StoreError::Busy(e)) => assert!(e.contains("has taken this node's name"), "{e}"),
        other => panic!("{other:?}"),
    }
    // The job a had was let go at a2's join, as a restarted node's are.
    assert_eq!(store.get(&ids[1]).unwrap().unwrap().state, JobState::Queued);
}

fn one_name_is_one_live_node_and_a_leaving_node_lets_its_jobs_go(place: &Place) {
    let mut store = place.open();
    let a = node("a", 2000);
    store.join(&a, 3).unwrap();
    let j = new(store.submit(job("j", 2, b"j")).unwrap());
    claim_as(&mut store, &a).unwrap();
    // While a beats (from another connection, as its own process would), a second process
    // under its name waits two leases, then is refused.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut beating = place.open();
        // A beat now: opening the second connection may have taken longer than the lease.
        beating.heartbeat(&a, &[]).unwrap();
        let (a, stop) = (&a, &stop);
        s.spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                beating.heartbeat(a, &[]).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        let t = std::time::Instant::now();
        let refused = store.join(&node("a", 2000), 3);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match refused {
            Err(StoreError::Busy(e)) => assert!(e.contains("another server runs as node"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(
            t.elapsed() >= Duration::from_millis(4000),
            "{:?}",
            t.elapsed()
        );
    });
    assert_eq!(store.get(&j.id).unwrap().unwrap().state, JobState::Running);
    // a leaves: its job is queued at once, the attempt not counted, and a is listed as gone.
    assert_eq!(store.leave(&a).unwrap(), 1);
    let back = store.get(&j.id).unwrap().unwrap();
    assert_eq!((back.state, back.attempts), (JobState::Queued, 0));
    assert_eq!(store.nodes().unwrap()[0].heartbeat_age_ms, None);
    // Twin: after a left, a new run under its name joins at once (not after a's lease).
    let t = std::time::Instant::now();
    store.join(&node("a", 2000), 3).unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}

fn claims_prefer_held_circuits_and_keep_slots_for_urgent_work(place: &Place) {
    let mut store = place.open();
    let mut submit = |id: &str, priority: i32, circuit: &str| {
        // Apart in time, so that "older than" tells them apart.
        std::thread::sleep(Duration::from_millis(5));
        new(store
            .submit(NewJob {
                circuit: circuit.into(),
                ..job(id, priority, id.as_bytes())
            })
            .unwrap())
    };
    let old = submit("old", 2, "porep-2KiB");
    let held1 = submit("held1", 2, "porep-32GiB");
    let held2 = submit("held2", 2, "porep-32GiB");
    let window = submit("window", 3, "window-32GiB");
    let n = n1();
    let filter = |min_priority: i32, aged_before_ms: u64| ClaimFilter {
        min_priority,
        held: vec!["porep-32GiB".into(), "winning-2KiB".into()],
        aged_before_ms,
        room: None,
    };
    let mut next = |f: ClaimFilter| store.claim_next(&n, &f).unwrap().map(|j| j.id);
    // A slot kept for PoSt takes the WindowPoSt and nothing else.
    assert_eq!(next(filter(3, 0)), Some(window.id));
    assert_eq!(next(filter(3, 0)), None);
    // The held circuit's job goes before the older one of another circuit...
    assert_eq!(next(filter(i32::MIN, 0)), Some(held1.id));
    // ...unless that one has waited long: then it goes in its turn.
    assert_eq!(next(filter(i32::MIN, old.submitted_ms + 1)), Some(old.id));
    assert_eq!(next(filter(i32::MIN, 0)), Some(held2.id));
}

fn claims_take_only_jobs_whose_memory_estimate_fits(place: &Place) {
    let mut store = place.open();
    let gib = 1u64 << 30;
    let mut submit = |id: &str, input_bytes: u64, partition: u64| {
        std::thread::sleep(Duration::from_millis(5));
        new(store
            .submit(NewJob {
                mem_bytes: input_bytes.saturating_add(partition),
                input_bytes,
                ..job(id, 2, id.as_bytes())
            })
            .unwrap())
    };
    let big = submit("big", gib, 39 * gib);
    let small = submit("small", gib, 0);
    let wide = submit("wide", 4 * gib, gib);
    let huge = submit("huge", u64::MAX, 0);
    let late = submit("late", u64::MAX, 0);
    assert_eq!((big.mem_bytes, big.input_bytes), (40 * gib, gib));
    // Stored as the largest estimate the column holds.
    assert_eq!(huge.mem_bytes, i64::MAX as u64);
    let n = n1();
    let within = |total: u64, input: u64| ClaimFilter {
        min_priority: i32::MIN,
        room: Some(MemoryRoom { total, input }),
        ..ClaimFilter::default()
    };
    let mut next = |f: ClaimFilter| store.claim_next(&n, &f).unwrap().map(|j| j.id);
    // The older job does not fit: the one that does goes first.
    assert_eq!(next(within(8 * gib, 8 * gib)), Some(small.id));
    // Its estimate fits but its input does not (beside the running jobs' largest partition).
    assert_eq!(next(within(8 * gib, 3 * gib)), None);
    assert_eq!(next(within(8 * gib, 4 * gib)), Some(wide.id));
    // Room for exactly its estimate is room enough.
    assert_eq!(next(within(40 * gib - 1, 40 * gib)), None);
    assert_eq!(next(within(40 * gib, gib)), Some(big.id));
    assert_eq!(next(within(40 * gib, 40 * gib)), None);
    // A job that waited long is taken whatever its estimate, so that none waits forever.
    let aged = |aged_before_ms: u64| ClaimFilter {
        aged_before_ms,
        ..within(1, 1)
    };
    assert_eq!(next(aged(huge.submitted_ms)), None);
    assert_eq!(next(aged(huge.submitted_ms + 1)), Some(huge.id));
    // No limit takes anything.
    let any = ClaimFilter {
        min_priority: i32::MIN,
        ..ClaimFilter::default()
    };
    assert_eq!(next(any), Some(late.id));
}

/// A failure's reason may quote a client's payload, NUL characters included: stored all the
/// same (PostgreSQL's text holds no NUL, so it is written `\0`), and the job ends.
fn a_reason_with_a_nul_character_is_stored(place: &Place) {
    let mut store = place.open();
    new(store.submit(job("a", 2, b"a")).unwrap());
    let a = claim(&mut store).unwrap();
    assert!(finish(
        &mut store,
        &a,
        Outcome::Failed("unknown variant `x\0y`".into())
    ));
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
        circuit: "winning-2KiB".into(),
        priority,
        payload: std::sync::Arc::new(payload.to_vec()),
        mem_bytes: 0,
        input_bytes: 0,
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
    let claimed = claim(&mut store).unwrap();
    assert_eq!(claimed.id, first.id);
    assert!(claimed.started_ms.is_some_and(|s| s >= first.submitted_ms));
    assert_eq!(first.started_ms, None);
    let timings = Timings {
        srs_load_ms: 11,
        synthesis_ms: 22,
        gpu_compute_ms: 33,
    };
    assert!(finish(
        &mut store,
        &claimed,
        Outcome::Completed(vec![7; 192], timings)
    ));
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
    claim(&mut store).unwrap();
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
    let order: Vec<String> = std::iter::from_fn(|| claim(&mut store).map(|j| j.id)).collect();
    assert_eq!(order, vec![winning.id, c2a.id, c2b.id, low.id]);
    assert!(claim(&mut store).is_none());
}

fn a_reopened_store_has_every_job_and_requeues_the_running_ones(place: &Place) {
    let before = node("n", 300);
    let (running, queued) = {
        let mut store = place.open();
        store.join(&before, 3).unwrap();
        let a = new(store.submit(job("a", 2, b"a")).unwrap());
        let b = new(store.submit(job("b", 2, b"b")).unwrap());
        assert_eq!(claim_as(&mut store, &before).unwrap().id, a.id);
        (a, b)
        // Dropped mid-job, as a killed server would leave it.
    };
    let mut store = place.open();
    assert_eq!(
        store.get(&running.id).unwrap().unwrap().state,
        JobState::Running
    );
    // The node's next run waits for the last one's lease, then takes its job back at once.
    let after = node("n", 300);
    let expired = store.join(&after, 3).unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].id.as_str(), expired[0].requeued),
        (running.id.as_str(), true)
    );
    let again = claim_as(&mut store, &after).unwrap();
    assert_eq!(again.id, running.id);
    assert_eq!(again.attempts, 2);
    assert_eq!(store.payload(&queued.id).unwrap().unwrap(), b"b");
}

fn a_cancelled_job_never_runs_and_a_cancelled_running_job_keeps_no_result(place: &Place) {
    let mut store = place.open();
    let a = new(store.submit(job("a", 2, b"a")).unwrap());
    let b = new(store.submit(job("b", 2, b"b")).unwrap());
    assert_eq!(store.cancel(&b.id).unwrap(), Cancelled::WasQueued);
    let claimed = claim(&mut store).unwrap();
    assert_eq!(claimed.id, a.id);
    assert!(claim(&mut store).is_none(), "a cancelled job was claimed");
    assert_eq!(store.cancel(&a.id).unwrap(), Cancelled::WasRunning);
    assert!(!finish(&mut store, &claimed, proof(1)));
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
    let claimed = claim(&mut store).unwrap();
    assert!(finish(
        &mut store,
        &claimed,
        Outcome::Failed("synthesis failed".into())
    ));
    let failed = store.get(&a.id).unwrap().unwrap();
    assert_eq!(failed.error.as_deref(), Some("synthesis failed"));
    // Not yet past retention.
    assert_eq!(store.purge_ended_before(0).unwrap(), 0);
    let later = proofline_service::store::now_ms() + 1;
    assert_eq!(store.purge_ended_before(later).unwrap(), 1);
    assert_eq!(store.get(&a.id).unwrap(), None);
    assert!(store.get(&b.id).unwrap().is_some());
    assert!(!place.has_blob(&a));
    assert!(place.has_blob(&b));
    // A blob no row points at (its server died before the row) goes at the purge after it was
    // written, not before; the blob of a job still queued stays.
    let stray = job("stray", 2, b"stray");
    let key = blob_key(&stray.digest);
    place
        .blobs()
        .put(&key, std::sync::Arc::new(b"stray".to_vec()))
        .unwrap();
    store.purge_ended_before(0).unwrap();
    assert!(place.blobs().exists(&key).unwrap());
    // Past the second an object store's times are rounded to.
    std::thread::sleep(Duration::from_millis(1100));
    let later = proofline_service::store::now_ms();
    assert_eq!(store.purge_ended_before(later).unwrap(), 0);
    assert!(!place.blobs().exists(&key).unwrap());
    assert!(place.has_blob(&b));
    assert_eq!(store.payload(&b.id).unwrap().unwrap(), b"b");
}

fn a_payload_is_one_blob_kept_while_a_live_job_needs_it(place: &Place) {
    let mut store = place.open();
    // Two requests of one digest (the same proof asked twice), and another.
    let a = new(store.submit(job("a", 2, b"same")).unwrap());
    let b = new(store.submit(job("b", 3, b"same")).unwrap());
    let c = new(store.submit(job("c", 2, b"other")).unwrap());
    assert_eq!(a.digest, b.digest);
    assert!(place.has_blob(&a) && place.has_blob(&c));
    // b first (its priority); its end leaves the blob a still needs.
    let claimed = claim(&mut store).unwrap();
    assert_eq!(claimed.id, b.id);
    assert!(finish(&mut store, &claimed, proof(1)));
    assert!(place.has_blob(&a));
    assert_eq!(store.payload(&a.id).unwrap().unwrap(), b"same");
    assert_eq!(store.payload(&b.id).unwrap(), None);
    // Its twin: the last job of the digest ends, and the blob goes.
    assert_eq!(store.cancel(&a.id).unwrap(), Cancelled::WasQueued);
    assert!(!place.has_blob(&a));
    assert!(place.has_blob(&c));
    // A live job whose blob is gone says so, naming where it looked.
    place.blobs().delete(&blob_key(&c.digest)).unwrap();
    match store.payload(&c.id) {
        Err(StoreError::MissingPayload(what)) => assert!(what.contains(&c.id), "{what}"),
        other => panic!("{other:?}"),
    }
    // The same payload again after its jobs ended is written again.
    let d = new(store.submit(job("d", 2, b"same")).unwrap());
    assert_eq!(store.payload(&d.id).unwrap().unwrap(), b"same");
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
    let mut store: Box<dyn JobStore> = Box::new(store);
    let claimed = claim(&mut store).unwrap();
    let t = Timings {
        srs_load_ms: 1,
        synthesis_ms: 2,
        gpu_compute_ms: 3,
    };
    assert!(finish(&mut store, &claimed, Outcome::Completed(vec![9], t)));
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
                    std::iter::from_fn(|| claim(&mut store))
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
    assert!(claim(&mut store).is_none());
}

/// A database of its own on the test server (dropped at the end), as a second cluster's.
struct Database {
    admin: String,
    name: String,
    url: String,
}

impl Database {
    fn create(url: &str, test: &str) -> Self {
        let name = format!("t_{test}_{:08x}", rand::random::<u32>());
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let (server, _) = base
            .rsplit_once('/')
            .expect("a database URL with a database");
        let url = match query {
            "" => format!("{server}/{name}"),
            q => format!("{server}/{name}?{q}"),
        };
        let db = Database {
            admin: base.to_string(),
            name,
            url,
        };
        db.admin(&format!("CREATE DATABASE {}", db.name));
        db
    }

    fn admin(&self, sql: &str) {
        use sqlx::Connection;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut c = sqlx::PgConnection::connect(&self.admin).await.unwrap();
            sqlx::query(sql).execute(&mut c).await.unwrap();
            c.close().await.unwrap();
        });
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        self.admin(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// Two databases' stores never share one blob location: each would remove the other's payloads
/// as blobs no job of its own needs. The second is refused at open, naming the location; another
/// server of the first database is not, and neither is the second at a location of its own.
fn two_databases_never_share_a_blob_location(place: &Place) {
    let pg = place.pg.as_ref().unwrap();
    let mut first = place.open();
    let j = new(first.submit(job("r1", 1, b"kept")).unwrap());
    let other = Database::create(&pg.url, "two_dbs");
    let mut second = pg.clone();
    second.url = other.url.clone();
    assert_eq!(second.blob_location(), pg.blob_location());
    let err = PgStore::open(&second).err().unwrap().to_string();
    assert!(
        err.contains("another job store") && err.contains(&pg.blob_location().to_string()),
        "{err}"
    );
    // Another server of the first database shares its location.
    let mut again = place.open();
    assert_eq!(again.payload(&j.id).unwrap().unwrap(), b"kept");
    // The second database at a location of its own.
    second.blobs = second.blobs.child("own");
    let mut own: Box<dyn JobStore> = Box::new(PgStore::open(&second).unwrap());
    new(own.submit(job("r1", 1, b"its own")).unwrap());
    drop(own);
    // The first store's payload was never touched.
    let claimed = claim(&mut again).unwrap();
    assert_eq!(claimed.id, j.id);
    assert_eq!(first.payload(&j.id).unwrap().unwrap(), b"kept");
}

#[test]
fn postgres_two_databases_never_share_a_blob_location() {
    if let Some(place) = Place::postgres("two_dbs") {
        two_databases_never_share_a_blob_location(&place);
    }
}

#[test]
fn postgres_s3_two_databases_never_share_a_blob_location() {
    if let Some(place) = Place::postgres_s3("two_dbs") {
        two_databases_never_share_a_blob_location(&place);
    }
}

/// Four servers submit and end jobs of one payload at once: every job's payload is there until
/// it ends (a submit never lands between another server's look for live jobs and its removal of
/// the blob), and once every job has ended the blob is gone.
#[test]
fn postgres_servers_submitting_and_ending_one_payload_never_lose_its_blob() {
    let Some(place) = Place::postgres("one_payload") else {
        return;
    };
    let rounds = 100;
    let ended: Vec<usize> = std::thread::scope(|s| {
        let servers: Vec<_> = (0..4)
            .map(|server| {
                let mut store = place.open();
                let node = Node {
                    name: format!("server-{server}"),
                    ..n1()
                };
                s.spawn(move || {
                    let mut ended = 0;
                    for round in 0..rounds {
                        let request = format!("s{server}-r{round}");
                        let submitted = new(store.submit(job(&request, 2, b"shared")).unwrap());
                        // Whichever job comes next, its payload must be readable now.
                        let Some(next) = claim_as(&mut store, &node) else {
                            continue;
                        };
                        let payload = store.payload(&next.id);
                        assert_eq!(
                            payload.unwrap().as_deref(),
                            Some(&b"shared"[..]),
                            "job {} of {request} (submitted {})",
                            next.id,
                            submitted.id
                        );
                        assert!(finish_as(&mut store, &node, &next, proof(1)));
                        ended += 1;
                    }
                    // What is left queued ends too.
                    while let Some(next) = claim_as(&mut store, &node) {
                        assert_eq!(store.payload(&next.id).unwrap().unwrap(), b"shared");
                        assert!(finish_as(&mut store, &node, &next, proof(1)));
                        ended += 1;
                    }
                    ended
                })
            })
            .collect();
        servers.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(ended.iter().sum::<usize>(), 4 * rounds);
    let digest = job("x", 2, b"shared").digest;
    assert!(!place.blobs().exists(&blob_key(&digest)).unwrap());
}

/// The S3 blob store keeps what it is given, and a bucket that is not there is refused when
/// the store opens, naming it.
#[test]
fn an_s3_blob_store_keeps_blobs_and_refuses_a_missing_bucket() {
    let Some(bucket) = s3_bucket() else {
        return;
    };
    let prefix = format!("blobs-{:08x}", rand::random::<u32>());
    let blobs = blobs::open(&bucket.at(&prefix)).unwrap();
    let payload: Vec<u8> = (0..3 << 20).map(|_| rand::random::<u8>()).collect();
    assert!(!blobs.exists("k.bin").unwrap());
    assert_eq!(blobs.get("k.bin").unwrap(), None);
    blobs
        .put("k.bin", std::sync::Arc::new(payload.clone()))
        .unwrap();
    assert!(blobs.exists("k.bin").unwrap());
    assert_eq!(blobs.get("k.bin").unwrap().unwrap(), payload);
    blobs.delete("k.bin").unwrap();
    assert!(!blobs.exists("k.bin").unwrap());
    // Gone already: not an error.
    blobs.delete("k.bin").unwrap();
    let missing = bucket.location("proofline-no-such-bucket", &prefix);
    let e = blobs::open(&missing)
        .err()
        .expect("a missing bucket opened");
    assert!(
        e.to_string().contains("s3://proofline-no-such-bucket"),
        "{e}"
    );
}

/// A data directory of the layout that kept one payload file per job (`<job id>.bin`): its
/// queued jobs' payloads are taken over at open, named by their digest.
#[test]
fn an_embedded_store_of_per_job_payload_files_keeps_its_queued_payloads() {
    let place = Place::sqlite();
    let (queued, ended) = {
        let mut store = place.open();
        let queued = new(store.submit(job("q", 2, b"queued")).unwrap());
        let ended = new(store.submit(job("e", 1, b"ended")).unwrap());
        assert_eq!(store.cancel(&ended.id).unwrap(), Cancelled::WasQueued);
        (queued, ended)
    };
    let dir = place.payloads();
    std::fs::rename(
        dir.join(blob_key(&queued.digest)),
        dir.join(format!("{}.bin", queued.id)),
    )
    .unwrap();
    assert!(!place.has_blob(&queued));
    let store = place.open();
    assert_eq!(store.payload(&queued.id).unwrap().unwrap(), b"queued");
    assert!(!dir.join(format!("{}.bin", queued.id)).exists());
    assert!(!place.has_blob(&ended));
}
