//! Servers sharing one PostgreSQL store, as real processes on loopback: a second process under
//! a live node's name is refused; a job submitted to one node that dies (SIGKILL) mid-job is
//! proven by another once the lease runs out, once, with a proof verify_seal accepts; a
//! request_id holds across nodes; the nodes ride out dropped database connections; and jobs
//! submitted to each node are proven by both, each once.

use std::process::Command;
use std::time::Instant;

use proofline_service::client::connect;
use proofline_service::listen::Listen;

mod serving;
use serving::*;

/// Drops every connection to the test database but psql's own, as a database restart would.
fn drop_database_connections(url: &str) {
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
    // blob directory; leases of 2 s.
    let schema = format!("svc_{:08x}", rand::random::<u32>());
    let blobs = dir.path().join("blobs");
    let node = |name: &str| -> Vec<String> {
        [
            "--store",
            url.as_str(),
            "--store-schema",
            &schema,
            "--blob-dir",
            blobs.to_str().unwrap(),
            "--node-id",
            name,
            "--lease-seconds",
            "2",
        ]
        .map(String::from)
        .to_vec()
    };
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
    // The database drops every connection (as when it restarts): the nodes reconnect. Then
    // jobs submitted to each node in turn are proven by both, each once, every proof checked.
    drop_database_connections(&url);
    let sockets = [socket_a.clone(), socket_b.clone()];
    let claims_before: Vec<f64> = sockets
        .iter()
        .map(|s| metric(s, "proofline_claims_total"))
        .collect();
    let jobs = 6;
    rt().block_on(async {
        let mut clients = Vec::new();
        for s in &sockets {
            clients.push(
                connect(&Listen::Unix(s.clone()), None, 256 << 20)
                    .await
                    .unwrap(),
            );
        }
        let mut ids = Vec::new();
        for i in 0..jobs {
            let r = porep_request(&sealed.c1_json, &format!("pg-load-{i}"), sealed.sector);
            ids.push(
                clients[i % 2]
                    .submit_proof(r)
                    .await
                    .unwrap()
                    .into_inner()
                    .job_id,
            );
        }
        for (i, id) in ids.iter().enumerate() {
            // Awaited on the other node than the one it was submitted to.
            let r = await_done(&mut clients[(i + 1) % 2], id).await;
            assert_eq!(r.status, 1, "{r:?}");
            assert!(sealed.statement.verify(&r.proof).unwrap());
        }
    });
    let claimed: Vec<f64> = sockets
        .iter()
        .zip(&claims_before)
        .map(|(s, before)| metric(s, "proofline_claims_total") - before)
        .collect();
    assert_eq!(claimed.iter().sum::<f64>(), jobs as f64, "{claimed:?}");
    assert!(
        claimed.iter().all(|&n| n >= 1.0),
        "one node took every job: {claimed:?}"
    );
    drop((a, b));
}
