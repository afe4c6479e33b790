//! The proving service against cold processes, side by side on one machine: 2 KiB PoRep C2
//! through `proofline serve` (parameters and kernels warm) against `proofline c2` once per
//! sector, and against filecoin-proofs' `seal_commit_phase2` (`porep_bench c2-filecoin`, when
//! given); the latency of a WinningPoSt with the server idle and with C2 jobs queued (p50, p99);
//! the server's peak RSS beside the ledger's peak and the parameters it holds. Every proof is
//! checked (`verify_seal`, `verify_winning_post`) before its time counts.
//!
//! ```sh
//! cargo build --profile test -p harness --bin proofline --example service_bench
//! cargo build --profile test -p proofline-filecoin --example porep_bench   # the peer (optional)
//! target/debug/examples/service_bench --proofline target/debug/proofline \
//!   --porep-bench target/debug/examples/porep_bench --dir target/service-bench \
//!   [--backend cuda] [--record docs/records/service.jsonl]
//! ```
//!
//! Parameters come from `DIR/params` (generated on the first run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Parser;
use proofline_records::{Peer, Provenance, Record};
use proofline_service::client::porep_request;
use proofline_service::proto::{AwaitProofRequest, GetMetricsRequest, Priority};

mod bench_service;
use bench_service::*;

#[derive(Parser, Debug)]
struct Args {
    /// The `proofline` binary.
    #[arg(long)]
    proofline: PathBuf,
    /// filecoin-proofs' side (`porep_bench` of proofline-filecoin's examples), if measured.
    #[arg(long = "porep-bench")]
    porep_bench: Option<PathBuf>,
    /// The working folder (sector, parameters, the server's data).
    #[arg(long)]
    dir: PathBuf,
    /// cpu, cuda or opencl, for the server and the cold processes alike.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Synthesis workers, for the server and the cold processes alike.
    #[arg(long, default_value_t = 2)]
    pw: usize,
    /// C2 proofs per way of proving.
    #[arg(long, default_value_t = 6)]
    c2: usize,
    /// WinningPoSt proofs per latency figure.
    #[arg(long, default_value_t = 20)]
    post: usize,
    /// Unfinished C2 jobs each WinningPoSt of the loaded figure is submitted behind.
    #[arg(long, default_value_t = 2)]
    behind: usize,
    /// Append the figures as records to this JSON Lines file.
    #[arg(long)]
    record: Option<PathBuf>,
    /// The device the backend runs on, named in the records' machine (`NVIDIA H200`).
    #[arg(long, default_value = "")]
    device: String,
    /// More flags for `proofline serve`, space-separated (`--concurrent-jobs 8 --gpu-workers 2`),
    /// named in the records' cases.
    #[arg(long = "serve-args", default_value = "", allow_hyphen_values = true)]
    serve_args: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = std::path::absolute(&args.dir)?;
    let params = dir.join("params");
    std::fs::create_dir_all(&params)?;
    // This process verifies with filecoin-proofs, which reads its parameter folder from here.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
    let bin = |b: &Path| {
        let mut c = Command::new(b);
        c.env("FIL_PROOFS_PARAMETER_CACHE", &params);
        c
    };
    let pw = args.pw.to_string();

    // The sector, sealed for the miner (once per folder).
    let Sector {
        c1_dir,
        c1_json,
        info,
        statement,
    } = Sector::prepare(&args.proofline, &dir)?;
    let post = Post::new(&dir.join("post"))?;

    // Cold: one process per proof (the first run also generates missing parameters and
    // writes their native copies: it is not counted).
    let c2 = |out: &Path| -> Result<f64> {
        let t = Instant::now();
        run(bin(&args.proofline)
            .args(["c2", "--c1"])
            .arg(c1_dir.join("c1.json"))
            .args(["--backend", &args.backend, "--pw", &pw, "--out"])
            .arg(out))?;
        let s = t.elapsed().as_secs_f64();
        ensure!(
            statement.verify(&std::fs::read(out)?)?,
            "a cold proof does not verify"
        );
        Ok(s)
    };
    let out = dir.join("proof.bin");
    c2(&out)?;
    let mut cold: Vec<f64> = (0..args.c2).map(|_| c2(&out)).collect::<Result<_>>()?;
    let cold_median = median(&mut cold);
    println!(
        "cold proofline c2: median {cold_median:.2} s of {}",
        args.c2
    );

    // filecoin-proofs' seal_commit_phase2: each porep_bench run proves twice in one process.
    let mut peer: Vec<f64> = Vec::new();
    if let Some(pb) = &args.porep_bench {
        for _ in 0..args.c2.div_ceil(2) {
            let text = run(bin(pb).args(["c2-filecoin"]).arg(&c1_dir))?;
            for line in text.lines() {
                if let Some(rest) = line.strip_prefix("step c2-filecoin-") {
                    let s: f64 = rest
                        .split_whitespace()
                        .nth(2)
                        .and_then(|v| v.parse().ok())
                        .context("porep_bench's step line")?;
                    peer.push(s);
                }
            }
        }
        println!(
            "filecoin-proofs seal_commit_phase2: median {:.2} s of {}",
            median(&mut peer),
            peer.len()
        );
    }

    // Warm: one server, parameters preloaded.
    let data = dir.join("data");
    let _ = std::fs::remove_dir_all(&data);
    let socket = data.join("proofline.sock");
    let server = Server(
        bin(&args.proofline)
            .args(["serve", "--data-dir"])
            .arg(&data)
            .args(["--backend", &args.backend, "--pw", &pw])
            .args(args.serve_args.split_whitespace())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    let t = Instant::now();
    while !socket.exists() {
        ensure!(
            t.elapsed() < Duration::from_secs(120),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Runtime::new()?;
    let warm = rt.block_on(async {
        let mut c = warm_client(&socket).await?;
        let request = |id: String| {
            porep_request(&c1_json, id, info.sector_id, MINER, Priority::Unspecified)
                .map_err(anyhow::Error::msg)
        };
        eprintln!("warm: parameters preloaded");
        // One at a time: each proof's latency.
        let mut one = Vec::new();
        for i in 0..args.c2 {
            let t = Instant::now();
            let proof = prove(&mut c, request(format!("one-{i}"))?).await?;
            one.push(t.elapsed().as_secs_f64());
            ensure!(statement.verify(&proof)?, "a warm proof does not verify");
        }
        // All at once: the rate.
        let t = Instant::now();
        let mut ids = Vec::new();
        for i in 0..args.c2 {
            ids.push(
                c.submit_proof(request(format!("all-{i}"))?)
                    .await?
                    .into_inner()
                    .job_id,
            );
        }
        for id in ids {
            let proof = await_proof(&mut c, id).await?;
            ensure!(statement.verify(&proof)?, "a warm proof does not verify");
        }
        let rate = args.c2 as f64 * 60.0 / t.elapsed().as_secs_f64();
        eprintln!("warm: one at a time {one:?} s; {rate:.2} proofs/min at once");
        // WinningPoSt idle, then behind C2 jobs.
        let mut idle = Vec::new();
        for i in 0..args.post {
            let t = Instant::now();
            let proof = prove(&mut c, post.request(&format!("idle-{i}"))).await?;
            idle.push(t.elapsed().as_secs_f64());
            post.verify(&proof)?;
        }
        eprintln!("WinningPoSt idle: {idle:?} s");
        // Behind C2 jobs: before each WinningPoSt, the unfinished C2 jobs are topped up to
        // --behind, so that every one is submitted with C2 work queued or running.
        let mut outstanding: Vec<String> = Vec::new();
        let mut all_c2: Vec<String> = Vec::new();
        let mut loaded = Vec::new();
        for i in 0..args.post {
            let mut still = Vec::new();
            for id in outstanding {
                let r = c
                    .await_proof(AwaitProofRequest {
                        job_id: id.clone(),
                        timeout_ms: 1,
                    })
                    .await?
                    .into_inner();
                if r.status == 4 {
                    still.push(id); // TIMEOUT: queued or running
                }
            }
            outstanding = still;
            while outstanding.len() < args.behind {
                let id = c
                    .submit_proof(request(format!("load-{i}-{}", all_c2.len()))?)
                    .await?
                    .into_inner()
                    .job_id;
                outstanding.push(id.clone());
                all_c2.push(id);
            }
            let t = Instant::now();
            let proof = prove(&mut c, post.request(&format!("loaded-{i}"))).await?;
            loaded.push(t.elapsed().as_secs_f64());
            post.verify(&proof)?;
        }
        for id in &all_c2 {
            let proof = await_proof(&mut c, id.clone()).await?;
            ensure!(statement.verify(&proof)?, "a warm proof does not verify");
        }
        let metrics = c
            .get_metrics(GetMetricsRequest {})
            .await?
            .into_inner()
            .prometheus_text;
        anyhow::Ok((one, rate, idle, loaded, all_c2.len(), metrics))
    })?;
    let (mut one, rate, mut idle, mut loaded, c2_behind, metrics) = warm;
    let server_rss = peak_rss_of(server.0.id()).context("the server's peak RSS")?;
    drop(server);
    let one_median = median(&mut one);
    let cold_rate = 60.0 / cold_median;
    let ledger_peak = metric(&metrics, "proofline_ledger_total_bytes_peak").unwrap_or(0.0);
    let params_bytes = metric(&metrics, "proofline_parameters_bytes").unwrap_or(0.0);
    let (idle50, idle99) = (percentile(&mut idle, 50.0), percentile(&mut idle, 99.0));
    let (load50, load99) = (percentile(&mut loaded, 50.0), percentile(&mut loaded, 99.0));
    println!(
        "warm serve: one at a time median {one_median:.2} s; {} at once {rate:.2} proofs/min \
         (cold c2 {cold_rate:.2} proofs/min: {:.2} x)",
        args.c2,
        rate / cold_rate
    );
    println!(
        "WinningPoSt: idle p50 {idle50:.3} s p99 {idle99:.3} s; each behind {} unfinished C2 \
         jobs ({c2_behind} C2 in all) p50 {load50:.3} s p99 {load99:.3} s; target p99 <= {:.3} s \
         (idle p99 + one 2 KiB C2, one partition)",
        args.behind,
        idle99 + one_median
    );
    println!(
        "server peak RSS {:.1} MiB; ledger peak {:.1} MiB, parameters held {:.1} MiB",
        server_rss as f64 / 1048576.0,
        ledger_peak / 1048576.0,
        params_bytes / 1048576.0
    );

    if let Some(path) = &args.record {
        let p = Provenance::here().with_device(&args.device);
        // How the binaries were built (the test profile is the release one's optimisation),
        // then this run's own command line.
        let command = format!(
            "cargo build --profile test -p harness --bin proofline --example service_bench && \
             cargo build --profile test -p proofline-filecoin --example porep_bench && {}",
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        let record = |case: &str, metric: &str, unit: &str, ours: f64, peers: Vec<Peer>| Record {
            date: p.date.clone(),
            commit: p.commit.clone(),
            machine: p.machine.clone(),
            command: command.clone(),
            table: Some("service".into()),
            case: case.into(),
            metric: metric.into(),
            unit: unit.into(),
            ours: proofline_records::significant(ours, 3),
            peers,
            extra: BTreeMap::new(),
            note: None,
            headline: None,
        };
        let backend = match args.serve_args.trim() {
            "" => args.backend.clone(),
            more => format!("{} {more}", args.backend),
        };
        let mut peers = vec![Peer {
            name: "proofline c2, one process per proof".into(),
            value: proofline_records::significant(cold_rate, 3),
        }];
        if !peer.is_empty() {
            peers.push(Peer {
                name: "filecoin-proofs seal_commit_phase2".into(),
                value: proofline_records::significant(60.0 / median(&mut peer), 3),
            });
        }
        for r in [
            record(
                &format!("2 KiB C2 through serve, {} at once ({backend})", args.c2),
                "proofs per minute",
                "proofs/min",
                rate,
                peers,
            ),
            record(
                &format!("WinningPoSt latency, idle ({backend})"),
                &format!("p99 of {}", args.post),
                "s",
                idle99,
                vec![],
            ),
            record(
                &format!(
                    "WinningPoSt latency, behind {} unfinished C2 jobs ({backend})",
                    args.behind
                ),
                &format!("p99 of {}", args.post),
                "s",
                load99,
                vec![],
            ),
            record(
                &format!("server peak RSS ({backend})"),
                "VmHWM after the runs",
                "MiB",
                server_rss as f64 / 1048576.0,
                vec![],
            ),
        ] {
            r.check().map_err(anyhow::Error::msg)?;
            proofline_records::append(path, &r)?;
        }
        println!("records appended to {}", path.display());
    }
    Ok(())
}
