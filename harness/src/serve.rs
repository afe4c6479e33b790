//! `proofline serve` (the proving service Curio's cuzk client talks to) and `proofline client`
//! (an operator's and a test's client of it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use proofline_service::client::{connect, Client};
use proofline_service::listen::Listen;
use proofline_service::proto::{
    await_proof_response, AwaitProofRequest, CancelProofRequest, GetMetricsRequest,
    GetStatusRequest, Priority, SubmitProofRequest,
};
use proofline_service::prove::ProverOptions;
use proofline_service::request::Limits;
use proofline_service::server::{serve as run_server, ServeOptions};

use crate::commands::ParamsLoad;
use crate::units::{parse_pw, parse_size};
use crate::{say, tell};

/// `proofline serve`'s options.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where to listen: unix:///PATH (the default, `<data-dir>/proofline.sock`, created
    /// owner-only) or HOST:PORT (TCP).
    #[arg(long)]
    pub listen: Option<Listen>,
    /// The job store's directory (jobs.sqlite and the queued payloads).
    #[arg(long = "data-dir")]
    pub data_dir: PathBuf,
    /// A file holding the bearer token every call must carry (Curio sends none: with Curio,
    /// listen on the socket or a private address instead).
    #[arg(long = "auth-token-file")]
    pub auth_token_file: Option<PathBuf>,
    /// The largest gRPC message received or sent.
    #[arg(long = "max-message-size", default_value = "256MiB", value_parser = parse_size)]
    pub max_message_size: u64,
    /// Partitions synthesized at once (the engine's synthesis workers, shared by every job).
    #[arg(long, default_value = "2", value_parser = parse_pw)]
    pub pw: usize,
    /// The engine's byte budget for partitions in flight (default: none).
    #[arg(long = "mem-budget", value_parser = parse_size)]
    pub mem_budget: Option<u64>,
    /// Serve `/metrics` (Prometheus' text format) and `/status` (JSON) over HTTP at HOST:PORT.
    #[arg(long = "metrics-listen")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Hours a finished job's result is kept.
    #[arg(long = "retention-hours", default_value = "24")]
    pub retention_hours: u64,
    /// Seconds a stop (SIGTERM, SIGINT) waits for the running job before leaving it to the
    /// next start.
    #[arg(long = "stop-timeout", default_value = "300")]
    pub stop_timeout: u64,
    /// How parameter files are read.
    #[command(flatten)]
    pub params: ParamsLoad,
}

fn read_token(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    let token = text.trim().to_string();
    anyhow::ensure!(
        !token.is_empty(),
        "the token file {} is empty",
        path.display()
    );
    Ok(token)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `proofline serve`: runs until SIGTERM or SIGINT, then stops as the server's module says.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.max_message_size > 0,
        "--max-message-size 0 would refuse every call"
    );
    anyhow::ensure!(
        args.mem_budget != Some(0),
        "--mem-budget 0 cannot hold any partition"
    );
    let listen = args
        .listen
        .clone()
        .unwrap_or_else(|| Listen::Unix(args.data_dir.join("proofline.sock")));
    let options = ServeOptions {
        listen,
        data_dir: args.data_dir.clone(),
        auth_token: args
            .auth_token_file
            .as_deref()
            .map(read_token)
            .transpose()?,
        max_message_bytes: usize::try_from(args.max_message_size).context("--max-message-size")?,
        limits: Limits::default(),
        prover: ProverOptions {
            synthesis_workers: args.pw,
            mem_budget: args.mem_budget,
            load: args.params.load(),
        },
        retention: Duration::from_secs(args.retention_hours.saturating_mul(3600)),
        stop_timeout: Duration::from_secs(args.stop_timeout),
        metrics_listen: args.metrics_listen,
    };
    // A signal is recorded, not acted on at once: the server stops as its module says.
    let _cooperative = crate::signals::Cooperative::start();
    let stop = async {
        while crate::signals::interrupted().is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tell!(
            "{}: stopping (queued jobs stay in the store)",
            crate::signals::signal_name(crate::signals::interrupted().unwrap_or(0))
        );
    };
    runtime()?.block_on(run_server(options, stop))?;
    Ok(())
}

/// `proofline client`'s options.
#[derive(clap::Args, Debug)]
pub struct ClientArgs {
    /// The server: unix:///PATH or HOST:PORT.
    #[arg(long)]
    pub connect: Listen,
    /// A file holding the server's bearer token.
    #[arg(long = "auth-token-file")]
    pub auth_token_file: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub cmd: ClientCmd,
}

/// What a PoRep job proves: a C1 output and its sector.
#[derive(clap::Args, Debug)]
pub struct PorepJob {
    /// The C1 output (filecoin-proofs-api's JSON wrapper, as Curio holds it).
    #[arg(long)]
    pub c1: PathBuf,
    /// The sector number (default: from the sector.json `proofline filecoin seal` wrote
    /// beside the C1 file).
    #[arg(long = "sector-number")]
    pub sector_number: Option<u64>,
    /// The miner's actor id (default: from that sector.json, when it was sealed with
    /// --miner-id).
    #[arg(long = "miner-id")]
    pub miner_id: Option<u64>,
    /// The idempotency key (default: the C1 file's name and the sector).
    #[arg(long = "request-id")]
    pub request_id: Option<String>,
    /// low, normal, high or critical (default: the kind's).
    #[arg(long)]
    pub priority: Option<String>,
}

/// `proofline client`'s commands.
#[derive(clap::Subcommand, Debug)]
pub enum ClientCmd {
    /// Submit a PoRep C2 job; prints its job id.
    Submit(PorepJob),
    /// Wait for a job; writes its proof to --out when it completed.
    Await {
        /// The job id.
        job: String,
        /// Milliseconds to wait (0: until it ends).
        #[arg(long = "timeout-ms", default_value = "0")]
        timeout_ms: u64,
        /// Where to write the proof.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Submit a PoRep C2 job and wait for it.
    Prove {
        /// The job.
        #[command(flatten)]
        job: PorepJob,
        /// Where to write the proof.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The server's queues, loaded parameters and totals.
    Status,
    /// The server's metrics (Prometheus' text format: the stage ledger live, queues, jobs).
    Metrics,
    /// Cancel a job.
    Cancel {
        /// The job id.
        job: String,
    },
}

fn priority(s: Option<&str>) -> anyhow::Result<Priority> {
    Ok(match s {
        None => Priority::Unspecified,
        Some("low") => Priority::Low,
        Some("normal") => Priority::Normal,
        Some("high") => Priority::High,
        Some("critical") => Priority::Critical,
        Some(other) => anyhow::bail!("--priority {other:?}: low, normal, high or critical"),
    })
}

/// The request Curio would send for a PoRep C2 of `job`'s C1 output.
fn porep_request(job: &PorepJob) -> anyhow::Result<SubmitProofRequest> {
    let bytes = std::fs::read(&job.c1).with_context(|| format!("reading {}", job.c1.display()))?;
    let info = match (job.sector_number, job.miner_id) {
        (Some(_), Some(_)) => None,
        _ => proofline_filecoin::porep::SectorInfo::beside(&job.c1)?,
    };
    let sector_number = job
        .sector_number
        .or(info.as_ref().map(|i| i.sector_id))
        .context("pass --sector-number (no sector.json beside the C1 file)")?;
    let miner_id = job
        .miner_id
        .or(info.as_ref().and_then(|i| i.miner_id))
        .context(
            "pass --miner-id (no sector.json beside the C1 file names a miner: seal with \
             `proofline filecoin seal --miner-id`)",
        )?;
    let request_id = job.request_id.clone().unwrap_or_else(|| {
        let name = job
            .c1
            .file_name()
            .map_or("c1".into(), |n| n.to_string_lossy());
        format!("{name}-{miner_id}-{sector_number}")
    });
    proofline_service::client::porep_request(
        &bytes,
        request_id,
        sector_number,
        miner_id,
        priority(job.priority.as_deref())?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", job.c1.display()))
}

fn status_error(s: tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{:?}: {}", s.code(), s.message())
}

async fn await_and_write(
    client: &mut Client,
    job: String,
    timeout_ms: u64,
    out: Option<&Path>,
) -> anyhow::Result<()> {
    use await_proof_response::Status as S;
    let r = client
        .await_proof(AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms,
        })
        .await
        .map_err(status_error)?
        .into_inner();
    match S::try_from(r.status).unwrap_or(S::Unknown) {
        S::Completed => {
            say!(
                "job {job}: COMPLETED, {} proof bytes in {:.1} s",
                r.proof.len(),
                r.total_ms as f64 / 1e3
            );
            if let Some(out) = out {
                crate::outputs::write_file(out, &r.proof).map_err(anyhow::Error::msg)?;
                say!("proof written to {}", out.display());
            }
            Ok(())
        }
        S::Timeout => anyhow::bail!("job {job}: not finished within {timeout_ms} ms"),
        S::Failed => anyhow::bail!("job {job}: FAILED: {}", r.error_message),
        S::Cancelled => anyhow::bail!("job {job}: CANCELLED"),
        S::Unknown => anyhow::bail!("job {job}: the server answered with no status"),
    }
}

/// `proofline client`.
pub fn client(args: ClientArgs) -> anyhow::Result<()> {
    let token = args
        .auth_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    runtime()?.block_on(async move {
        let mut client = connect(&args.connect, token.as_deref(), 256 << 20)
            .await
            .map_err(anyhow::Error::msg)?;
        match args.cmd {
            ClientCmd::Submit(job) => {
                let r = client
                    .submit_proof(porep_request(&job)?)
                    .await
                    .map_err(status_error)?
                    .into_inner();
                say!("{}", r.job_id);
                Ok(())
            }
            ClientCmd::Await {
                job,
                timeout_ms,
                out,
            } => await_and_write(&mut client, job, timeout_ms, out.as_deref()).await,
            ClientCmd::Prove { job, out } => {
                let r = client
                    .submit_proof(porep_request(&job)?)
                    .await
                    .map_err(status_error)?
                    .into_inner();
                say!(
                    "job {} submitted (queue position {})",
                    r.job_id,
                    r.queue_position
                );
                await_and_write(&mut client, r.job_id, 0, out.as_deref()).await
            }
            ClientCmd::Status => {
                let s = client
                    .get_status(GetStatusRequest {})
                    .await
                    .map_err(status_error)?
                    .into_inner();
                say!(
                    "up {} s; {} proofs completed, {} failed",
                    s.uptime_seconds,
                    s.total_proofs_completed,
                    s.total_proofs_failed
                );
                for q in &s.queues {
                    say!(
                        "  {}: {} queued, {} running",
                        q.proof_kind,
                        q.pending,
                        q.in_progress
                    );
                }
                for p in &s.loaded_srs {
                    say!("  parameters {}: {} bytes", p.circuit_id, p.size_bytes);
                }
                Ok(())
            }
            ClientCmd::Metrics => {
                let m = client
                    .get_metrics(GetMetricsRequest {})
                    .await
                    .map_err(status_error)?
                    .into_inner();
                say!("{}", m.prometheus_text.trim_end());
                Ok(())
            }
            ClientCmd::Cancel { job } => {
                let r = client
                    .cancel_proof(CancelProofRequest {
                        job_id: job.clone(),
                    })
                    .await
                    .map_err(status_error)?
                    .into_inner();
                say!(
                    "job {job} cancelled{}",
                    if r.was_running {
                        " (it was running: its result will be discarded)"
                    } else {
                        ""
                    }
                );
                Ok(())
            }
        }
    })
}
