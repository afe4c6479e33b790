//! `proofline serve` as a real process over a unix socket, driven by `proofline client` and by a
//! gRPC client in this test: a PoRep C2 accepted by `verify_seal`, its negative twins, the
//! idempotency key, hostile requests, a token, a stale and a live socket, SIGKILL mid-job and a
//! restart, SIGTERM.

use std::time::{Duration, Instant};

use proofline_filecoin::filecoin_proofs::PoStType;
use proofline_filecoin::snap;
use proofline_service::client::{connect, snap_request};
use proofline_service::listen::Listen;
use proofline_service::proto::{
    AwaitProofRequest, CancelProofRequest, GetStatusRequest, Priority, ProofKind, ProveRequest,
    SubmitProofRequest,
};

mod serving;
use serving::*;

/// The byte budget the server proves under (a 2 KiB C2 partition holds a few MiB).
const MEM_BUDGET: u64 = 1 << 30;

#[test]
fn porep_c2_through_the_service_verifies_and_bad_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    // verify_seal in this process reads the parameters' verifying keys from the same cache
    // (filecoin-proofs reads the setting once; no other test here calls it).
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
    let data = dir.path().join("data");
    let socket = data.join("proofline.sock");
    let sealed = seal(dir.path(), &cache);
    let sector = sealed.sector.to_string();
    let miner = MINER.to_string();
    let c1 = sealed.c1_path.to_str().unwrap();

    // A stale socket file (no server behind it) is replaced.
    std::fs::create_dir_all(&data).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let mut server = start(&data, &cache, &[]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A second server on the data directory is refused, saying so.
    let o = bin()
        .args(["serve", "--data-dir"])
        .arg(&data)
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("another server uses the data directory"),
        "{}",
        text(&o)
    );
    // A live socket is an error naming it.
    let o = bin()
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("other"))
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("listening on"), "{}", text(&o));

    // SIGKILL while the first job runs (generating the parameters it needs); started again,
    // the job completes once, with a proof that verifies.
    let o = client(
        &socket,
        &[
            "submit",
            "--c1",
            c1,
            "--sector-number",
            &sector,
            "--miner-id",
            &miner,
            "--request-id",
            "crash",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    wait_running(&socket);
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    // Started again with the metrics endpoint on a free loopback port.
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let budget = MEM_BUDGET.to_string();
    let mut server = start(
        &data,
        &cache,
        &[
            "--metrics-listen",
            &metrics_addr,
            "--mem-budget",
            &budget,
            "--concurrent-jobs",
            "2",
        ],
    );
    let restarted_proof = dir.path().join("restarted.bin");
    let o = client(
        &socket,
        &["await", &job, "--out", restarted_proof.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(sealed
        .statement
        .verify(&std::fs::read(&restarted_proof).unwrap())
        .unwrap());
    let o = client(&socket, &["status"]);
    assert!(
        text(&o).contains("1 proofs completed, 0 failed"),
        "{}",
        text(&o)
    );

    // Proven through the service: the proof verify_seal accepts, of the length filecoin-ffi
    // returns for a 2 KiB V1_1 sector (one partition, 192 bytes). The sector number and the
    // miner come from the sector.json beside the C1 file.
    let proof_path = dir.path().join("proof.bin");
    let o = client(
        &socket,
        &["prove", "--c1", c1, "--out", proof_path.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o));
    let proof = std::fs::read(&proof_path).unwrap();
    assert_eq!(proof.len(), 192);
    assert!(sealed.statement.verify(&proof).unwrap());
    let mut flipped = proof.clone();
    flipped[100] ^= 1;
    assert!(!sealed.statement.verify(&flipped).unwrap_or(false));

    // The same request again: the same job, not proven twice.
    let submit = |args: &[&str]| {
        let o = client(&socket, &[&["submit"][..], args].concat());
        (o.status.success(), text(&o))
    };
    let base = ["--c1", c1, "--sector-number", &sector, "--miner-id", &miner];
    let (ok1, id1) = submit(&base);
    let (ok2, id2) = submit(&base);
    assert!(ok1 && ok2, "{id1} {id2}");
    assert_eq!(id1, id2);
    let o = client(&socket, &["await", id1.trim()]);
    assert!(o.status.success(), "{}", text(&o));
    // The same id with another payload is refused.
    let other_sector = (sealed.sector + 1).to_string();
    let (ok, other) = submit(&[
        "--c1",
        c1,
        "--sector-number",
        &other_sector,
        "--miner-id",
        &miner,
        "--request-id",
        "other",
    ]);
    assert!(ok, "{other}");
    let (ok, e) = submit(&[
        "--c1",
        c1,
        "--sector-number",
        &sector,
        "--miner-id",
        &miner,
        "--request-id",
        "other",
    ]);
    assert!(!ok);
    assert!(e.contains("AlreadyExists"), "{e}");
    // That other sector number: verify_seal rejects the proof, and the job fails saying so.
    let failed = client(&socket, &["await", other.trim()]);
    assert!(!failed.status.success());
    assert!(
        text(&failed).contains("verify_seal rejected"),
        "{}",
        text(&failed)
    );

    // Through a gRPC client: hostile requests get their status, and the server keeps proving.
    rt().block_on(async {
        let addr = Listen::Unix(socket.clone());
        let mut c = connect(&addr, None, 256 << 20).await.unwrap();
        // Garbage envelope, a wrong kind/proof pair, a bad scalar, a wrong size.
        let mut garbage = porep_request(&sealed.c1_json, "g1", sealed.sector);
        garbage.vanilla_proof = b"\x00\xffnot json".to_vec();
        let e = code(c.submit_proof(garbage).await);
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("vanilla_proof"), "{e}");
        let mut pair = porep_request(&sealed.c1_json, "g2", sealed.sector);
        pair.proof_kind = ProofKind::WinningPost as i32;
        pair.randomness = vec![0; 32];
        pair.vanilla_proofs = vec![vec![1]];
        let e = code(c.submit_proof(pair).await);
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("registered_proof"), "{e}");
        // A WindowPoSt partition other than 0 of the old API (whose challenges depend on a
        // sector's place): refused at once, naming the field.
        let mut window = porep_request(&sealed.c1_json, "g4", sealed.sector);
        window.proof_kind = ProofKind::WindowPostPartition as i32;
        window.registered_proof = 5; // StackedDrgWindow2KiBV1
        window.vanilla_proof.clear();
        window.randomness = vec![0; 32];
        window.vanilla_proofs = vec![vec![1]];
        window.partition_index = 1;
        let e = code(c.submit_proof(window).await);
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");
        assert!(e.message().contains("partition_index"), "{e}");
        let mut size = porep_request(&sealed.c1_json, "g3", sealed.sector);
        size.sector_size = 4096;
        let e = code(c.submit_proof(size).await);
        assert!(e.message().contains("sector_size"), "{e}");
        // A truncated C1 output inside a well-formed envelope: accepted, then FAILED with the
        // reason (its JSON is parsed at its turn), never COMPLETED.
        let truncated = &sealed.c1_json[..sealed.c1_json.len() / 2];
        let r = submit_and_await(
            &mut c,
            porep_request(truncated, "t1", sealed.sector),
            120_000,
        )
        .await;
        assert_eq!(r.status, 2, "{r:?}"); // FAILED
        assert!(r.proof.is_empty());
        assert!(
            r.error_message.contains("vanilla_proof"),
            "{}",
            r.error_message
        );
        // A C1 output with its seed changed: FAILED, no proof.
        let mut altered: serde_json::Value = serde_json::from_slice(&sealed.c1_json).unwrap();
        let first = altered["seed"][0].as_u64().unwrap();
        altered["seed"][0] = serde_json::json!(first ^ 1);
        let altered = serde_json::to_vec(&altered).unwrap();
        let r = submit_and_await(
            &mut c,
            porep_request(&altered, "t2", sealed.sector),
            120_000,
        )
        .await;
        assert_eq!(r.status, 2, "{r:?}");
        assert!(r.proof.is_empty());
        // Unknown job ids.
        let e = code(
            c.await_proof(AwaitProofRequest {
                job_id: "no-such-job".into(),
                timeout_ms: 10,
            })
            .await,
        );
        assert_eq!(e.code(), tonic::Code::NotFound);
        let e = code(
            c.cancel_proof(CancelProofRequest {
                job_id: "no-such-job".into(),
            })
            .await,
        );
        assert_eq!(e.code(), tonic::Code::NotFound);
        // An oversized message: refused by the transport, the server stays up.
        let mut big = porep_request(&sealed.c1_json, "big", sealed.sector);
        big.vanilla_proofs = vec![vec![7u8; 1 << 20]; 300];
        assert!(c.submit_proof(big).await.is_err());
        let s = c
            .get_status(GetStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(s.total_proofs_completed >= 1, "{s:?}");
        assert!(s.total_proofs_failed >= 3, "{s:?}");
        assert_eq!(s.loaded_srs.len(), 1, "{s:?}");
        assert!(s.loaded_srs[0].size_bytes > 0);
    });

    // WinningPoSt and one WindowPoSt partition from bincode vanilla proofs, as Curio sends
    // them: proofs filecoin-proofs' verifiers accept, of filecoin-ffi's length; tampered and
    // garbage vanilla proofs end FAILED. A WinningPoSt submitted behind queued C2 jobs is
    // proven before them.
    let post = post_inputs(&dir.path().join("post"));
    rt().block_on(async {
        let addr = Listen::Unix(socket.clone());
        let mut c = connect(&addr, None, 256 << 20).await.unwrap();
        let queued: Vec<String> = {
            let mut ids = Vec::new();
            for q in ["q1", "q2", "q3"] {
                let r = c
                    .submit_proof(porep_request(&sealed.c1_json, q, sealed.sector))
                    .await
                    .unwrap();
                ids.push(r.into_inner().job_id);
            }
            ids
        };
        let winning = c
            .submit_proof(post.request(ProofKind::WinningPost, "w1", &post.winning))
            .await
            .unwrap()
            .into_inner()
            .job_id;
        let r = await_done(&mut c, &winning).await;
        assert_eq!(r.status, 1, "{r:?}"); // COMPLETED
        assert_eq!(r.proof.len(), 192);
        // The last C2 queued before it has not finished: the WinningPoSt went first.
        let last = c
            .await_proof(AwaitProofRequest {
                job_id: queued[2].clone(),
                timeout_ms: 1,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(last.status, 4, "{last:?}"); // TIMEOUT: still queued or running
        assert!(post.verify(PoStType::Winning, &r.proof));
        let mut bad = r.proof.clone();
        bad[10] ^= 1;
        assert!(!post.verify(PoStType::Winning, &bad));
        // A WindowPoSt of three sectors is two partitions at 2 KiB (two sectors each), proven
        // one by one as Curio sends them, partition 0 through Prove (submit and await in one
        // call): their proofs concatenated in order are what verify_window_post accepts for
        // the three sectors; either alone, or the two swapped, are not.
        let r = c
            .prove(ProveRequest {
                submit: Some(post.request(
                    ProofKind::WindowPostPartition,
                    "wd1",
                    &post.window[..2],
                )),
            })
            .await
            .unwrap()
            .into_inner()
            .result
            .unwrap();
        assert_eq!(r.status, 1, "{r:?}");
        assert_eq!(r.proof.len(), 192);
        let mut second = post.request(ProofKind::WindowPostPartition, "wd2", &post.window[2..]);
        second.partition_index = 1;
        let r2 = submit_and_await(&mut c, second, 300_000).await;
        assert_eq!(r2.status, 1, "{r2:?}");
        assert_eq!(r2.proof.len(), 192);
        let whole = [r.proof.clone(), r2.proof.clone()].concat();
        assert!(post.verify(PoStType::Window, &whole));
        assert!(!post.verify(
            PoStType::Window,
            &[r2.proof.clone(), r.proof.clone()].concat()
        ));
        assert!(!post.verify(PoStType::Window, &r.proof));
        // Tampered: a byte of the sector's comm_r flipped (bincode: the sector id's 8 bytes,
        // then comm_r's 32); other randomness than the vanilla proofs answer; garbage, not
        // bincode.
        let mut tampered = post.winning.clone();
        tampered[0][9] ^= 1;
        let mut other_randomness = post.request(ProofKind::WinningPost, "w4", &post.winning);
        other_randomness.randomness[0] ^= 1;
        for (id, request) in [
            ("w2", post.request(ProofKind::WinningPost, "w2", &tampered)),
            (
                "w3",
                post.request(ProofKind::WinningPost, "w3", &[vec![1u8, 2, 3]]),
            ),
            ("w4", other_randomness),
        ] {
            let r = submit_and_await(&mut c, request, 300_000).await;
            assert_eq!(r.status, 2, "{id}: {r:?}"); // FAILED
            assert!(r.proof.is_empty());
        }
        for id in &queued {
            let r = await_done(&mut c, id).await;
            assert_eq!(r.status, 1, "{r:?}");
            // Where its time went: its one partition synthesized and proven, after its wait.
            assert!(r.synthesis_ms > 0 && r.gpu_compute_ms > 0, "{r:?}");
            assert!(r.queue_wait_ms + r.gpu_compute_ms <= r.total_ms, "{r:?}");
        }
    });

    // Load: 200 WinningPoSt requests at once from four clients, each awaited; every one
    // COMPLETED with a proof filecoin-proofs accepts, and the ledger's peak within the byte
    // budget the server runs under.
    rt().block_on(async {
        let addr = Listen::Unix(socket.clone());
        let mut tasks = Vec::new();
        for client_no in 0..4 {
            let addr = addr.clone();
            let requests: Vec<SubmitProofRequest> = (0..50)
                .map(|i| {
                    post.request(
                        ProofKind::WinningPost,
                        &format!("load-{client_no}-{i}"),
                        &post.winning,
                    )
                })
                .collect();
            tasks.push(tokio::spawn(async move {
                let mut c = connect(&addr, None, 256 << 20).await.unwrap();
                let mut ids = Vec::new();
                for r in requests {
                    ids.push(c.submit_proof(r).await.unwrap().into_inner().job_id);
                }
                let mut proofs = Vec::new();
                for id in ids {
                    let r = await_done(&mut c, &id).await;
                    assert_eq!(r.status, 1, "{id}: {r:?}");
                    proofs.push(r.proof);
                }
                proofs
            }));
        }
        let mut n = 0;
        for t in tasks {
            for proof in t.await.unwrap() {
                assert!(post.verify(PoStType::Winning, &proof));
                n += 1;
            }
        }
        assert_eq!(n, 200);
    });
    let o = client(&socket, &["metrics"]);
    let peak: f64 = String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix("proofline_ledger_total_bytes_peak ")
                .and_then(|v| v.trim().parse().ok())
        })
        .expect("the ledger's peak in the metrics");
    assert!(peak > 0.0 && peak <= MEM_BUDGET as f64, "{peak}");

    // SnapDeals: an update of a 2 KiB sector, from its partition vanilla proofs and
    // commitments, through `proofline client prove --snap`: the proof
    // verify_empty_sector_update_proof accepts; with another comm_d_new, FAILED.
    let snap_dir = dir.path().join("snap");
    let o = bin()
        .args(["filecoin", "snap", "--sector-size", "2KiB", "--out"])
        .arg(&snap_dir)
        .env("FIL_PROOFS_PARAMETER_CACHE", &cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let snap_proof = dir.path().join("snap.bin");
    let o = client(
        &socket,
        &[
            "prove",
            "--snap",
            snap_dir.to_str().unwrap(),
            "--miner-id",
            &miner,
            "--sector-number",
            "1",
            "--out",
            snap_proof.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let update = snap::read_update(&snap_dir).unwrap();
    let commitments = update.info.commitments().unwrap();
    let proof = std::fs::read(&snap_proof).unwrap();
    assert_eq!(proof.len(), 192 * update.vanilla_proofs.len());
    assert!(snap::verify_update(2048, &commitments, &proof).unwrap());
    let mut other = proof.clone();
    other[5] ^= 1;
    assert!(!snap::verify_update(2048, &commitments, &other).unwrap_or(false));
    rt().block_on(async {
        let addr = Listen::Unix(socket.clone());
        let mut c = connect(&addr, None, 256 << 20).await.unwrap();
        let mut comm_d_new = commitments.comm_d_new;
        comm_d_new[0] ^= 1; // still canonical: the low byte
        let request = snap_request(
            2048,
            [commitments.comm_r_old, commitments.comm_r_new, comm_d_new],
            update.vanilla_proofs.clone(),
            "snap-tampered".into(),
            1,
            MINER,
            Priority::Unspecified,
        )
        .unwrap();
        let r = submit_and_await(&mut c, request, 300_000).await;
        assert_eq!(r.status, 2, "{r:?}"); // FAILED
        assert!(r.proof.is_empty());
    });

    // Cancel: with two jobs running (the server was started with --concurrent-jobs 2), a third
    // queued and cancelled never proves; a running one cancelled stops, ends CANCELLED with no
    // proof, and the other completes. (The ledger is back to zero below.)
    rt().block_on(async {
        let addr = Listen::Unix(socket.clone());
        let mut c = connect(&addr, None, 256 << 20).await.unwrap();
        let mut ids = Vec::new();
        for id in ["c1", "c2", "c3"] {
            ids.push(
                c.submit_proof(porep_request(&sealed.c1_json, id, sealed.sector))
                    .await
                    .unwrap()
                    .into_inner()
                    .job_id,
            );
        }
        let (kept, stopped, queued) = (ids[0].clone(), ids[1].clone(), ids[2].clone());
        let t = Instant::now();
        loop {
            let s = c
                .get_status(GetStatusRequest {})
                .await
                .unwrap()
                .into_inner();
            if s.queues.iter().map(|q| q.in_progress).sum::<u32>() == 2 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "{s:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = c
            .cancel_proof(CancelProofRequest {
                job_id: queued.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!r.was_running);
        let r = c
            .cancel_proof(CancelProofRequest {
                job_id: stopped.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.was_running);
        for id in [&queued, &stopped] {
            let r = await_done(&mut c, id).await;
            assert_eq!(r.status, 3, "{r:?}"); // CANCELLED
            assert!(r.proof.is_empty());
        }
        let r = await_done(&mut c, &kept).await;
        assert_eq!(r.status, 1, "{r:?}");
        assert!(sealed.statement.verify(&r.proof).unwrap());
        // Cancelling again: it has ended.
        let e = code(c.cancel_proof(CancelProofRequest { job_id: queued }).await);
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    });

    // Parameters by the wire's circuit ids: held after their jobs, let go by EvictSRS, loaded
    // again by PreloadSRS; an unknown id is refused naming the field.
    let o = client(&socket, &["status"]);
    for id in ["porep-2k", "winning-2k", "wpost-2k", "snap-2k"] {
        assert!(
            text(&o).contains(&format!("parameters {id}: ")),
            "{id}: {}",
            text(&o)
        );
    }
    let o = client(&socket, &["evict", "porep-2k"]);
    assert!(text(&o).contains("bytes let go"), "{}", text(&o));
    let o = client(&socket, &["evict", "porep-2k"]);
    assert!(text(&o).contains("was not loaded"), "{}", text(&o));
    let o = client(&socket, &["status"]);
    assert!(!text(&o).contains("parameters porep-2k"), "{}", text(&o));
    let o = client(&socket, &["preload", "porep-2k"]);
    assert!(text(&o).contains("loaded in"), "{}", text(&o));
    let o = client(&socket, &["preload", "porep-2k"]);
    assert!(text(&o).contains("already loaded"), "{}", text(&o));
    let o = client(&socket, &["preload", "porep-16k"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("circuit_id"), "{}", text(&o));

    // Metrics, through GetMetrics and over HTTP: every job counted by kind and outcome, the
    // ledger's peaks since the restart, and nothing left in it now that the server is idle.
    let o = client(&socket, &["metrics"]);
    assert!(o.status.success(), "{}", text(&o));
    let m = String::from_utf8_lossy(&o.stdout).into_owned();
    let value = |line: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix(line).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {line} in\n{m}"))
    };
    // Since the restart, C2: the crash job, `prove` (the idempotent pair is that job), q1-q3
    // and c1 completed; the other sector's, the truncated and the altered C1 failed.
    assert_eq!(
        value("proofline_jobs_total{kind=\"POREP_SEAL_COMMIT\",outcome=\"completed\"}"),
        6.0
    );
    assert_eq!(
        value("proofline_jobs_total{kind=\"POREP_SEAL_COMMIT\",outcome=\"failed\"}"),
        3.0
    );
    assert_eq!(
        value("proofline_jobs_total{kind=\"WINNING_POST\",outcome=\"failed\"}"),
        3.0
    );
    assert_eq!(
        value("proofline_proof_duration_seconds_count{kind=\"WINNING_POST\"}"),
        201.0 // w1 and the 200 of the load
    );
    assert_eq!(
        value("proofline_jobs_total{kind=\"WINDOW_POST_PARTITION\",outcome=\"completed\"}"),
        2.0
    );
    for outcome in ["completed", "failed"] {
        assert_eq!(
            value(&format!(
                "proofline_jobs_total{{kind=\"SNAP_DEALS_UPDATE\",outcome=\"{outcome}\"}}"
            )),
            1.0
        );
    }
    assert!(value("proofline_ledger_partitions_peak{stage=\"synthesizing\"}") >= 1.0);
    assert!(value("proofline_ledger_host_bytes_peak{stage=\"synthesizing\"}") > 0.0);
    assert!(value("proofline_ledger_resident_bytes_peak{kind=\"job_input\"}") > 0.0);
    assert_eq!(
        value("proofline_ledger_resident_bytes{kind=\"job_input\"}"),
        0.0
    );
    assert_eq!(value("proofline_ledger_total_bytes"), 0.0);
    for stage in [
        "synthesizing",
        "awaiting_accelerator",
        "on_accelerator",
        "finalizing",
    ] {
        assert_eq!(
            value(&format!("proofline_ledger_partitions{{stage=\"{stage}\"}}")),
            0.0
        );
    }
    assert!(value("proofline_parameters_bytes") > 0.0);
    let http = |path: &str| -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&metrics_addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let page = http("/metrics");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("proofline_ledger_partitions{stage=\"synthesizing\"} 0"),
        "{page}"
    );
    let status = http("/status");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let body = &status[status.find("\r\n\r\n").unwrap() + 4..];
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    // Six C2, 201 WinningPoSt, two WindowPoSt partitions and the update; the three C2, three
    // WinningPoSt and one update twins.
    assert_eq!(json["completed"], 210, "{json}");
    assert_eq!(json["failed"], 7, "{json}");
    assert!(json["ledger"]["stages"]["synthesizing"]["partitions_peak"].as_u64() >= Some(1));

    // SIGTERM: the server stops, exits 0 and removes its socket.
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!socket.exists());

    // A budget too small for a job's input beside one of its partitions: the job fails, and
    // says so, before its payload is parsed (its twin: every C2 above, under 1 GiB, completed).
    let _server = start(&data, &cache, &["--mem-budget", "64KiB"]);
    let small = dir.path().join("small-budget.bin");
    let o = client(
        &socket,
        &[
            "prove",
            "--c1",
            c1,
            "--request-id",
            "small-budget",
            "--out",
            small.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("exceed the memory budget (0.1 MiB): raise --mem-budget"),
        "{}",
        text(&o)
    );
    assert!(!small.exists());
}

/// The status of a call that must fail.
fn code<T: std::fmt::Debug>(r: Result<T, tonic::Status>) -> tonic::Status {
    r.unwrap_err()
}

#[test]
fn the_socket_path_and_the_token_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("params");
    // A socket path that is a directory: a clear error, no panic.
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("proofline.sock")).unwrap();
    let o = bin()
        .args(["serve", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("is a directory"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    // Sizes of zero: refused at start, naming the option.
    for (option, value) in [("--mem-budget", "0"), ("--max-message-size", "0")] {
        let o = bin()
            .args(["serve", "--data-dir"])
            .arg(dir.path().join("zero"))
            .args([option, value])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{option} {value}");
        assert!(text(&o).contains(option), "{}", text(&o));
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
    }
    // A config file with a key it does not know, or a bad value: refused, naming the key.
    for (body, key) in [
        ("mem-budgett = \"1GiB\"\n", "mem-budgett"),
        ("mem-budget = \"lots\"\n", "mem-budget"),
        ("concurrent-jobs = 0\n", "concurrent-jobs"),
    ] {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, body).unwrap();
        let o = bin()
            .args(["serve", "--data-dir"])
            .arg(dir.path().join("bad"))
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{body}");
        assert!(text(&o).contains(key), "{}", text(&o));
        assert!(text(&o).contains("bad.toml"), "{}", text(&o));
    }
    // With a token, set in a config file: a call without it, or with another, is
    // UNAUTHENTICATED; with it, answered.
    let data = dir.path().join("with-token");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "auth-token-file = {:?}\nmax-queued = 10\n",
            token.to_str().unwrap()
        ),
    )
    .unwrap();
    let _server = start(&data, &cache, &["--config", config.to_str().unwrap()]);
    let socket = data.join("proofline.sock");
    let o = client(&socket, &["status"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("Unauthenticated"), "{}", text(&o));
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "other").unwrap();
    let o = client(
        &socket,
        &["--auth-token-file", wrong.to_str().unwrap(), "status"],
    );
    assert!(text(&o).contains("Unauthenticated"), "{}", text(&o));
    let o = client(
        &socket,
        &["--auth-token-file", token.to_str().unwrap(), "status"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("0 proofs completed"), "{}", text(&o));
}
