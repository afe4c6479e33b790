//! Servers sharing one PostgreSQL store, as real processes on loopback: a second process under
//! a live node's name is refused; a job submitted to one node that dies (SIGKILL) mid-job is
//! proven by another once the lease runs out, once, with a proof verify_seal accepts; a
//! request_id holds across nodes; the nodes ride out a database restart mid-run; a
//! WinningPoSt submitted behind queued C2 jobs is claimed first; and a load of jobs submitted
//! to three nodes in turn is proven by all of them, each job once, every proof checked. The
//! payloads are in the S3-compatible bucket `PROOFLINE_TEST_S3` names (`http://HOST:PORT/BUCKET`;
//! required with `CI=true`), else in one blob directory.

use std::process::Command;
use std::time::Instant;

use proofline_filecoin::filecoin_proofs::PoStType;
use proofline_service::client::connect;
use proofline_service::listen::Listen;
use proofline_service::proto::{AwaitProofRequest, ProofKind};

mod serving;
use serving::*;

/// Restarts the test database server (the command `PROOFLINE_TEST_POSTGRES_RESTART` names:
/// `.ci/run` writes one); without one, outside CI, drops every connection to the test database
/// but psql's own instead, which is what the servers see of a restart.
fn restart_database(url: &str) {
    if let Ok(restart) = std::env::var("PROOFLINE_TEST_POSTGRES_RESTART") {
        let o = Command::new(&restart).output().unwrap();
        assert!(o.status.success(), "{restart}: {}", text(&o));
        return;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must restart the test database: PROOFLINE_TEST_POSTGRES_RESTART is not set"
    );
    eprintln!("PROOFLINE_TEST_POSTGRES_RESTART is not set: dropping the connections instead");
    let o = Command::new("psql")
        .arg(url)
        .args(["-v", "ON_ERROR_STOP=1", "-At", "-c"])
        .arg(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
             AND datname = current_database()",
        )
        .output()
        .expect("psql (PostgreSQL's client) runs");
    assert!(o.status.success(), "{}", text(&o));
    let n: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(n >= 2, "only {n} connections were dropped");
}

#[test]
fn servers_on_one_postgresql_share_the_queue_and_take_over_a_dead_ones_jobs() {
    let Some(url) = test_postgres() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    // verify_seal in this process reads the parameters' verifying keys from the same cache.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
    let sealed = seal(dir.path(), &cache);
    // Two nodes, each with its own data directory (its socket), one database schema and one
    // bucket prefix (or blob directory); leases of 2 s.
    let schema = format!("svc_{:08x}", rand::random::<u32>());
    let blobs = match s3_bucket() {
        Some((endpoint, bucket)) => {
            // The nodes read their S3 settings from these, as a provider's would.
            for (k, v) in [
                ("AWS_ENDPOINT_URL", endpoint.as_str()),
                ("AWS_ALLOW_HTTP", "true"),
                ("AWS_REGION", "us-east-1"),
                ("AWS_ACCESS_KEY_ID", "proofline-test"),
                ("AWS_SECRET_ACCESS_KEY", "proofline-test"),
            ] {
                std::env::set_var(k, v);
            }
            [
                "--blob-store".to_string(),
                format!("s3://{bucket}/{schema}"),
            ]
        }
        None => [
            "--blob-dir".to_string(),
            dir.path().join("blobs").to_str().unwrap().to_string(),
        ],
    };
    let node = |name: &str| -> Vec<String> {
        let mut args: Vec<String> = ["--store", url.as_str(), "--store-schema", &schema]
            .map(String::from)
            .to_vec();
        args.extend(blobs.iter().cloned());
        args.extend(["--node-id", name, "--lease-seconds", "2"].map(String::from));
        args
    };
    if blobs[0] == "--blob-store" {
        // A bucket that is not there stops the server at start, naming it.
        let o = bin()
            .args(["serve", "--data-dir"])
            .arg(dir.path().join("no-bucket"))
            .args(["--store", &url, "--store-schema", &schema])
            .args(["--blob-store", "s3://proofline-no-such-bucket/x"])
            .output()
            .unwrap();
        assert!(!o.status.success());
        assert!(
            text(&o).contains("s3://proofline-no-such-bucket/x"),
            "{}",
            text(&o)
        );
    }
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let (socket_a, socket_b) = (data_a.join("proofline.sock"), data_b.join("proofline.sock"));
    let mut a = start(&data_a, &cache, &args(&node("a")));
    // A second process under a live node's name waits two leases, then is refused.
    let o = bin()
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("a2"))
        .args(args(&node("a")))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("another server runs as node \"a\""),
        "{}",
        text(&o)
    );
    // A job goes through the PostgreSQL store: a C1 output that is no C1 output is stored,
    // claimed and failed with the reason.
    let bad = rt().block_on(async {
        let mut c = connect(&Listen::Unix(socket_a.clone()), None, 256 << 20)
            .await
            .unwrap();
        let r = submit_and_await(&mut c, porep_request(b"{}", "pg-bad", 1), 300_000).await;
        assert_eq!(r.status, 2, "{r:?}"); // FAILED
        assert!(r.error_message.contains("vanilla_proof"), "{r:?}");
        r.job_id
    });
    // A C2 submitted to a, which dies (SIGKILL) while it proves it (its first job: it is
    // generating the parameters).
    let request = porep_request(&sealed.c1_json, "pg-crash", sealed.sector);
    let job = rt().block_on(async {
        let mut c = connect(&Listen::Unix(socket_a.clone()), None, 256 << 20)
            .await
            .unwrap();
        c.submit_proof(request.clone())
            .await
            .unwrap()
            .into_inner()
            .job_id
    });
    wait_running(&socket_a);
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let died = Instant::now();
    // b, started after, finds the job once a's lease runs out and proves it: one result, a
    // proof verify_seal accepts.
    let b = start(&data_b, &cache, &args(&node("b")));
    let o = client(&socket_b, &["await", &job]);
    assert!(o.status.success(), "{}", text(&o));
    let recovered = died.elapsed();
    eprintln!(
        "a's job completed on b {:.1} s after a died",
        recovered.as_secs_f64()
    );
    let (proof, again) = rt().block_on(async {
        let mut c = connect(&Listen::Unix(socket_b.clone()), None, 256 << 20)
            .await
            .unwrap();
        let r = await_done(&mut c, &job).await;
        assert_eq!(r.status, 1, "{r:?}"); // COMPLETED
                                          // The same request sent to b is the job a accepted: request_id holds across nodes.
        let again = c.submit_proof(request.clone()).await.unwrap().into_inner();
        (r.proof, again)
    });
    assert!(sealed.statement.verify(&proof).unwrap());
    assert_eq!(again.job_id, job);
    assert_eq!(metric(&socket_b, "proofline_retries_total"), 1.0);
    assert_eq!(metric(&socket_b, "proofline_lease_expiries_total"), 1.0);
    // a restarts under its name: it joins at once (its last heartbeat is older than its
    // lease), and answers for the jobs of every node.
    let a = start(&data_a, &cache, &args(&node("a")));
    let o = client(&socket_a, &["await", &bad]);
    assert!(text(&o).contains("vanilla_proof"), "{}", text(&o));
    let o = client(&socket_a, &["await", "no-such-job"]);
    assert!(!o.status.success());
    assert!(!text(&o).contains("vanilla_proof"), "{}", text(&o));
    // c joins: three nodes.
    let data_c = dir.path().join("c");
    let socket_c = data_c.join("proofline.sock");
    let c = start(&data_c, &cache, &args(&node("c")));
    let post = post_inputs(&dir.path().join("post"));
    let sockets = [socket_a.clone(), socket_b.clone(), socket_c.clone()];
    // Claims, less retries: a job's first claims.
    let first_claims = |s: &std::path::PathBuf| {
        metric(s, "proofline_claims_total") - metric(s, "proofline_retries_total")
    };
    let claims_before: Vec<f64> = sockets.iter().map(first_claims).collect();
    let (c2_jobs, post_jobs) = (6, 150);
    rt().block_on(async {
        let mut clients = Vec::new();
        for s in &sockets {
            clients.push(
                connect(&Listen::Unix(s.clone()), None, 256 << 20)
                    .await
                    .unwrap(),
            );
        }
        // C2 jobs submitted to the nodes in turn, more than they run at once, then a
        // WinningPoSt: it is claimed before the queued C2 jobs and ends before the last of them.
        let mut c2_ids = Vec::new();
        for i in 0..c2_jobs {
            let r = porep_request(&sealed.c1_json, &format!("pg-load-{i}"), sealed.sector);
            c2_ids.push(
                clients[i % 3]
                    .submit_proof(r)
                    .await
                    .unwrap()
                    .into_inner()
                    .job_id,
            );
        }
        // The database restarts under the running jobs: the nodes reconnect on their own, and
        // nothing is lost (a result finished meanwhile is written once the database is back).
        restart_database(&url);
        let winning = post.request(ProofKind::WinningPost, "pg-winning", &post.winning);
        let id = clients[0]
            .submit_proof(winning)
            .await
            .unwrap()
            .into_inner()
            .job_id;
        let r = await_done(&mut clients[1], &id).await;
        assert_eq!(r.status, 1, "{r:?}");
        assert!(post.verify(PoStType::Winning, &r.proof));
        let mut unfinished = 0;
        for id in &c2_ids {
            let r = clients[2]
                .await_proof(AwaitProofRequest {
                    job_id: id.clone(),
                    timeout_ms: 1,
                })
                .await
                .unwrap()
                .into_inner();
            unfinished += usize::from(r.status == 4); // TIMEOUT: queued or running
        }
        assert!(unfinished > 0, "every C2 job ended before the WinningPoSt");
        // A load of small jobs: WinningPoSt submitted to the nodes in turn, each awaited on
        // another node: every one completed once, with a proof filecoin-proofs accepts.
        let mut post_ids = Vec::new();
        for i in 0..post_jobs {
            let r = post.request(
                ProofKind::WinningPost,
                &format!("pg-post-{i}"),
                &post.winning,
            );
            post_ids.push(
                clients[i % 3]
                    .submit_proof(r)
                    .await
                    .unwrap()
                    .into_inner()
                    .job_id,
            );
        }
        for (i, id) in post_ids.iter().enumerate() {
            let r = await_done(&mut clients[(i + 1) % 3], id).await;
            assert_eq!(r.status, 1, "{r:?}");
            assert!(post.verify(PoStType::Winning, &r.proof));
        }
        for (i, id) in c2_ids.iter().enumerate() {
            let r = await_done(&mut clients[(i + 1) % 3], id).await;
            assert_eq!(r.status, 1, "{r:?}");
            assert!(sealed.statement.verify(&r.proof).unwrap());
        }
    });
    // Each job claimed once for the first time (a job whose lease ran out while the
    // database restarted is claimed again, as a retry), and the work spread over the nodes.
    let claimed: Vec<f64> = sockets
        .iter()
        .zip(&claims_before)
        .map(|(s, before)| first_claims(s) - before)
        .collect();
    assert_eq!(
        claimed.iter().sum::<f64>(),
        (c2_jobs + 1 + post_jobs) as f64,
        "{claimed:?}"
    );
    assert!(
        claimed.iter().all(|&n| n >= 1.0),
        "a node took no job: {claimed:?}"
    );
    drop((a, b, c));
}
