//! `proofline serve` nodes sharing one PostgreSQL store on this machine: the rate of 2 KiB C2 and
//! of WinningPoSt with one, two and three nodes (jobs submitted to the nodes in turn, each
//! awaited on another node than the one it was submitted to, every proof checked by
//! filecoin-proofs' verifiers before its time counts), how the claims spread over the nodes,
//! and the time from a node's death (SIGKILL, mid-job) to its job's completion on another.
//!
//! ```sh
//! cargo build --profile test -p harness --bin proofline --example cluster_bench
//! target/debug/examples/cluster_bench --proofline target/debug/proofline \
//!   --postgres postgres://USER@HOST:PORT/DB --dir target/cluster-bench \
//!   [--nodes 1,2,3] [--c2 12] [--post 30] [--record docs/records/service.jsonl]
//! ```
//!
//! The nodes share this machine's cores, so more nodes do not mean more compute here: the
//! figures show what the shared store costs and how evenly the nodes take work, not a cluster's
//! scaling.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use clap::Parser;
use proofline_records::{Provenance, Record};
use proofline_service::client::{porep_request, Client};
use proofline_service::proto::{GetMetricsRequest, GetStatusRequest, Priority};

mod bench_service;
use bench_service::*;

#[derive(Parser, Debug)]
struct Args {
    /// The `proofline` binary.
    #[arg(long)]
    proofline: PathBuf,
    /// The PostgreSQL server (`postgres://USER@HOST:PORT/DB`); each run uses a schema of its own.
    #[arg(long)]
    postgres: String,
    /// The working folder (sectors, parameters, the nodes' data and blobs).
    #[arg(long)]
    dir: PathBuf,
    /// Node counts to measure (0: none, only a node's death).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    nodes: Vec<usize>,
    /// Synthesis workers per node.
    #[arg(long, default_value_t = 1)]
    pw: usize,
    /// C2 jobs per node count.
    #[arg(long, default_value_t = 12)]
    c2: usize,
    /// WinningPoSt jobs per node count.
    #[arg(long, default_value_t = 30)]
    post: usize,
    /// Deaths measured (the figure is their median).
    #[arg(long, default_value_t = 3)]
    deaths: usize,
    /// The nodes' lease, in seconds (the death-to-completion figure depends on it).
    #[arg(long = "lease-seconds", default_value_t = 5)]
    lease_seconds: u64,
    /// Append the figures as records to this JSON Lines file.
    #[arg(long)]
    record: Option<PathBuf>,
}

/// `count` nodes on one fresh schema and blob folder, parameters preloaded.
struct Cluster {
    nodes: Vec<Server>,
    sockets: Vec<PathBuf>,
}

impl Cluster {
    fn start(args: &Args, dir: &Path, count: usize) -> Result<Cluster> {
        let schema = format!("cluster_bench_{:08x}", rand::random::<u32>());
        let run_dir = dir.join(&schema);
        let mut cluster = Cluster {
            nodes: Vec::new(),
            sockets: Vec::new(),
        };
        for i in 0..count {
            cluster.add(args, dir, &run_dir, &schema, i)?;
        }
        Ok(cluster)
    }

    /// Starts node `i` and waits for its socket.
    fn add(
        &mut self,
        args: &Args,
        dir: &Path,
        run_dir: &Path,
        schema: &str,
        i: usize,
    ) -> Result<()> {
        let data = run_dir.join(format!("node-{i}"));
        let socket = data.join("proofline.sock");
        let child = Command::new(&args.proofline)
            .env("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"))
            .args(["serve", "--data-dir"])
            .arg(&data)
            .args([
                "--store",
                &args.postgres,
                "--store-schema",
                schema,
                "--blob-dir",
            ])
            .arg(run_dir.join("blobs"))
            .args([
                "--node-id",
                &format!("node-{i}"),
                "--pw",
                &args.pw.to_string(),
            ])
            .args(["--lease-seconds", &args.lease_seconds.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        self.nodes.push(Server(child));
        let t = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            ensure!(
                t.elapsed() < Duration::from_secs(120),
                "node {i} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.sockets.push(socket);
        Ok(())
    }

    async fn clients(&self) -> Result<Vec<Client>> {
        let mut clients = Vec::new();
        for s in &self.sockets {
            clients.push(warm_client(s).await?);
        }
        Ok(clients)
    }
}

/// Each node's claims so far.
async fn claims(clients: &mut [Client]) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for c in clients {
        let text = c
            .get_metrics(GetMetricsRequest {})
            .await?
            .into_inner()
            .prometheus_text;
        out.push(metric(&text, "proofline_claims_total").unwrap_or(0.0));
    }
    Ok(out)
}

/// Submits `jobs` to the nodes in turn, awaits each on the next node, checks each proof:
/// proofs per minute, and each node's share of the claims.
async fn rate(
    clients: &mut [Client],
    jobs: usize,
    request: impl Fn(usize) -> Result<proofline_service::proto::SubmitProofRequest>,
    check: impl Fn(&[u8]) -> Result<()>,
) -> Result<(f64, Vec<f64>)> {
    let before = claims(clients).await?;
    let n = clients.len();
    let t = Instant::now();
    let mut ids = Vec::new();
    for i in 0..jobs {
        ids.push(
            clients[i % n]
                .submit_proof(request(i)?)
                .await?
                .into_inner()
                .job_id,
        );
    }
    for (i, id) in ids.into_iter().enumerate() {
        check(&await_proof(&mut clients[(i + 1) % n], id).await?)?;
    }
    let per_minute = jobs as f64 * 60.0 / t.elapsed().as_secs_f64();
    let after = claims(clients).await?;
    let share = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    Ok((per_minute, share))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = std::path::absolute(&args.dir)?;
    std::fs::create_dir_all(dir.join("params"))?;
    // This process verifies with filecoin-proofs, which reads its parameter folder from here.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"));
    let sector = Sector::prepare(&args.proofline, &dir)?;
    let post = Post::new(&dir.join("post"))?;
    let rt = tokio::runtime::Runtime::new()?;
    let run_id = rand::random::<u32>();
    let c2_request = |i: usize| {
        porep_request(
            &sector.c1_json,
            format!("c2-{run_id:08x}-{i}"),
            sector.info.sector_id,
            MINER,
            Priority::Unspecified,
        )
        .map_err(anyhow::Error::msg)
    };
    let c2_check = |proof: &[u8]| -> Result<()> {
        ensure!(
            sector.statement.verify(proof)?,
            "a C2 proof does not verify"
        );
        Ok(())
    };
    let mut figures: Vec<(String, &str, &str, f64)> = Vec::new();
    for &count in args.nodes.iter().filter(|&&n| n > 0) {
        let cluster = Cluster::start(&args, &dir, count)?;
        let (c2, post_rate, c2_share, post_share) = rt.block_on(async {
            let mut clients = cluster.clients().await?;
            // One of each first, so that every node has run its kernels once.
            rate(&mut clients, count, |i| c2_request(1_000_000 + i), c2_check).await?;
            let (c2, c2_share) = rate(&mut clients, args.c2, c2_request, c2_check).await?;
            let (post_rate, post_share) = rate(
                &mut clients,
                args.post,
                |i| Ok(post.request(&format!("post-{run_id:08x}-{count}-{i}"))),
                |p| post.verify(p),
            )
            .await?;
            anyhow::Ok((c2, post_rate, c2_share, post_share))
        })?;
        println!(
            "{count} node(s): 2 KiB C2 {c2:.1} proofs/min (claims per node {c2_share:?}); \
             WinningPoSt {post_rate:.1} proofs/min (claims per node {post_share:?})"
        );
        figures.push((
            format!("2 KiB C2, {count} node(s) on one PostgreSQL store"),
            "proofs per minute",
            "proofs/min",
            c2,
        ));
        figures.push((
            format!("WinningPoSt, {count} node(s) on one PostgreSQL store"),
            "proofs per minute",
            "proofs/min",
            post_rate,
        ));
    }

    // A node's death: two nodes; a C2 submitted to node 0 (which claims it: a submit wakes its
    // own worker at once), node 0 killed while it runs, the job awaited on node 1; then, beside
    // it, one C2 on node 1 alone (one proof's time).
    let mut deaths = Vec::new();
    let mut alone = Vec::new();
    for round in 0..args.deaths {
        let mut cluster = Cluster::start(&args, &dir, 2)?;
        let (recovered, one) = rt.block_on(async {
            let mut clients = cluster.clients().await?;
            let before = claims(&mut clients).await?;
            let id = clients[0]
                .submit_proof(c2_request(2_000_000 + 2 * round)?)
                .await?
                .into_inner()
                .job_id;
            let t = Instant::now();
            loop {
                let s = clients[0]
                    .get_status(GetStatusRequest {})
                    .await?
                    .into_inner();
                if s.queues.iter().any(|q| q.in_progress > 0) {
                    break;
                }
                ensure!(t.elapsed() < Duration::from_secs(60), "the job never ran");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let after = claims(&mut clients).await?;
            ensure!(
                after[0] > before[0],
                "node 1 claimed the job, not node 0: run again"
            );
            let node0 = cluster.nodes.remove(0);
            drop(node0); // SIGKILL
            let died = Instant::now();
            let proof = await_proof(&mut clients[1], id).await?;
            let recovered = died.elapsed().as_secs_f64();
            c2_check(&proof)?;
            let t = Instant::now();
            let proof = prove(&mut clients[1], c2_request(2_000_001 + 2 * round)?).await?;
            let one = t.elapsed().as_secs_f64();
            c2_check(&proof)?;
            anyhow::Ok((recovered, one))
        })?;
        drop(cluster);
        println!(
            "a node killed mid-job: its job completed on another {recovered:.1} s later; one C2 \
             alone {one:.1} s (lease {} s)",
            args.lease_seconds
        );
        deaths.push(recovered);
        alone.push(one);
    }
    if !deaths.is_empty() {
        let (death, one) = (median(&mut deaths), median(&mut alone));
        let target = args.lease_seconds as f64 + one;
        println!(
            "death to completion: median {death:.1} s of {}; target: the lease plus one proof, \
             {target:.1} s",
            args.deaths
        );
        figures.push((
            format!(
                "a node's death to its 2 KiB C2's completion on another (lease {} s, median of {})",
                args.lease_seconds, args.deaths
            ),
            "seconds",
            "s",
            death,
        ));
        figures.push((
            format!(
                "target beside it: the lease plus one 2 KiB C2 alone (lease {} s)",
                args.lease_seconds
            ),
            "seconds",
            "s",
            target,
        ));
    }

    if let Some(path) = &args.record {
        let p = Provenance::here();
        let command = format!(
            "cargo build --profile test -p harness --bin proofline --example cluster_bench && {}",
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        for (case, metric_name, unit, ours) in figures {
            let r = Record {
                date: p.date.clone(),
                commit: p.commit.clone(),
                machine: p.machine.clone(),
                command: command.clone(),
                table: Some("cluster".into()),
                case,
                metric: metric_name.into(),
                unit: unit.into(),
                ours: proofline_records::significant(ours, 3),
                peers: vec![],
                extra: BTreeMap::new(),
                note: None,
                headline: None,
            };
            r.check().map_err(anyhow::Error::msg)?;
            proofline_records::append(path, &r)?;
        }
        println!("records appended to {}", path.display());
    }
    Ok(())
}
