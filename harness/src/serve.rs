//! `proofline serve` (the proving service Curio's cuzk client talks to) and `proofline client`
//! (an operator's and a test's client of it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use proofline_service::client::{connect, Client};
use proofline_service::listen::Listen;
use proofline_service::proto::{
    await_proof_response, AwaitProofRequest, CancelProofRequest, EvictSrsRequest,
    GetMetricsRequest, GetStatusRequest, PreloadSrsRequest, Priority, SubmitProofRequest,
};
use proofline_service::prove::ProverOptions;
use proofline_service::request::Limits;
use proofline_service::server::{serve as run_server, ServeOptions};
use proofline_service::store::{BlobLocation, PgOptions};

use crate::backend::{open_backend, BackendOptions};
use crate::commands::ParamsLoad;
use crate::serve_config::{ServeFile, ServeFlags, ServeSettings};
use crate::{say, tell};

/// `proofline serve`'s options. Each may instead be set in the `--config` file (the flag's
/// name without its dashes as the key); a flag given overrides the file.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// A TOML file of settings (`data-dir = "/var/lib/proofline"`, `mem-budget = "64GiB"`, ...).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The settings' flags.
    #[command(flatten)]
    pub flags: ServeFlags,
}

impl ServeArgs {
    /// The settings: these flags over the config file over the defaults.
    pub fn settings(self) -> anyhow::Result<ServeSettings> {
        let file = match &self.config {
            Some(path) => ServeFile::read(path)?,
            None => ServeFile::default(),
        };
        ServeSettings::resolve(self.flags, file).with_context(|| match &self.config {
            Some(p) => format!("proofline serve (with the config file {})", p.display()),
            None => "proofline serve".to_string(),
        })
    }
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

/// This machine's name (`localhost` when the kernel does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `proofline serve`: runs until SIGTERM or SIGINT, then stops as the server's module says.
/// `blob_options`: the S3 settings of `--blob-store` (option name and value).
pub fn serve(args: ServeArgs, blob_options: &[(String, String)]) -> anyhow::Result<()> {
    let s = args.settings()?;
    if let Some(dir) = &s.parameter_cache {
        // Read by filecoin-proofs' settings on their first use, which is after this.
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", dir);
    }
    let backends = open_backend(BackendOptions::new(
        s.backend,
        s.opencl_device.as_deref(),
        s.gpu_mem_limit,
        false,
    )?)?;
    let listen = s
        .listen
        .clone()
        .unwrap_or_else(|| Listen::Unix(s.data_dir.join("proofline.sock")));
    let load = ParamsLoad {
        check_params: s.check_params,
        no_native_params: s.no_native_params,
    }
    .load();
    let options = ServeOptions {
        listen: listen.clone(),
        data_dir: s.data_dir.clone(),
        store: s.store.clone().map(|url| PgOptions {
            url,
            schema: s.store_schema.clone(),
            blobs: match &s.blob_store {
                Some(url) => BlobLocation::S3 {
                    url: url.clone(),
                    options: blob_options.to_vec(),
                },
                None => BlobLocation::Dir(s.blob_dir.clone()),
            },
        }),
        auth_token: s.auth_token_file.as_deref().map(read_token).transpose()?,
        max_message_bytes: usize::try_from(s.max_message_size).context("--max-message-size")?,
        limits: Limits::default(),
        prover: ProverOptions {
            backend: backends.backend,
            fallback: backends.fallback,
            devices: if s.gpus.is_empty() {
                vec![0]
            } else {
                s.gpus.clone()
            },
            gpu_workers: s.gpu_workers,
            synthesis_workers: s.pw,
            urgent_workers: s.urgent_workers,
            mem_budget: s.mem_budget,
            load,
            params_budget: s.params_budget,
        },
        retention: Duration::from_secs(s.retention_hours.saturating_mul(3600)),
        stop_timeout: Duration::from_secs(s.stop_timeout),
        concurrent_jobs: s.concurrent_jobs,
        post_slots: s.post_slots,
        node: s
            .node_id
            .clone()
            .unwrap_or_else(|| format!("{}/{listen}", host_name())),
        lease: Duration::from_secs(s.lease_seconds),
        max_attempts: s.max_attempts,
        max_queued: s.max_queued,
        metrics_listen: s.metrics_listen,
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

/// What a job proves: a PoRep C2 from a C1 output, or a SnapDeals update.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false, id = "what")]
pub struct JobArgs {
    /// A PoRep C2 from this C1 output (filecoin-proofs-api's JSON wrapper, as Curio holds it).
    #[arg(long, group = "what")]
    pub c1: Option<PathBuf>,
    /// A SnapDeals update from this directory (`snap.json` and `vanilla-<k>.bin`, as
    /// `proofline filecoin snap` writes them).
    #[arg(long, group = "what")]
    pub snap: Option<PathBuf>,
    /// Its sector, miner, key and priority.
    #[command(flatten)]
    pub ids: JobIds,
}

/// A job's sector, miner, idempotency key and priority.
#[derive(clap::Args, Debug)]
pub struct JobIds {
    /// The sector number (default with --c1: from the sector.json `proofline filecoin seal`
    /// wrote beside the C1 file; with --snap: 0, which the update proof does not bind).
    #[arg(long = "sector-number")]
    pub sector_number: Option<u64>,
    /// The miner's actor id (with --c1, default: from that sector.json, when it was sealed with
    /// --miner-id; with --snap, required).
    #[arg(long = "miner-id")]
    pub miner_id: Option<u64>,
    /// The idempotency key (default: the input's name, the miner and the sector).
    #[arg(long = "request-id")]
    pub request_id: Option<String>,
    /// low, normal, high or critical (default: the kind's).
    #[arg(long)]
    pub priority: Option<String>,
}

/// `proofline client`'s commands.
#[derive(clap::Subcommand, Debug)]
pub enum ClientCmd {
    /// Submit a PoRep C2 (--c1) or SnapDeals (--snap) job; prints its job id.
    Submit(JobArgs),
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
    /// Submit a PoRep C2 (--c1) or SnapDeals (--snap) job and wait for it.
    Prove {
        /// The job.
        #[command(flatten)]
        job: JobArgs,
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
    /// Load a circuit's parameters now (porep-32g, snap-32g, wpost-32g, winning-32g, ...).
    Preload {
        /// The circuit id.
        circuit: String,
    },
    /// Let a circuit's parameters go.
    Evict {
        /// The circuit id.
        circuit: String,
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

/// The request Curio would send for `job`.
fn request(job: &JobArgs) -> anyhow::Result<SubmitProofRequest> {
    match (&job.c1, &job.snap) {
        (Some(c1), _) => porep_request(c1, &job.ids),
        (None, Some(dir)) => snap_request(dir, &job.ids),
        (None, None) => anyhow::bail!("pass --c1 FILE or --snap DIR"),
    }
}

/// The request for a PoRep C2 of the C1 output at `c1`.
fn porep_request(c1: &Path, ids: &JobIds) -> anyhow::Result<SubmitProofRequest> {
    let bytes = std::fs::read(c1).with_context(|| format!("reading {}", c1.display()))?;
    let info = match (ids.sector_number, ids.miner_id) {
        (Some(_), Some(_)) => None,
        _ => proofline_filecoin::porep::SectorInfo::beside(c1)?,
    };
    let sector_number = ids
        .sector_number
        .or(info.as_ref().map(|i| i.sector_id))
        .context("pass --sector-number (no sector.json beside the C1 file)")?;
    let miner_id = ids
        .miner_id
        .or(info.as_ref().and_then(|i| i.miner_id))
        .context(
            "pass --miner-id (no sector.json beside the C1 file names a miner: seal with \
             `proofline filecoin seal --miner-id`)",
        )?;
    proofline_service::client::porep_request(
        &bytes,
        request_id(ids, c1, miner_id, sector_number),
        sector_number,
        miner_id,
        priority(ids.priority.as_deref())?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", c1.display()))
}

/// The request for the SnapDeals update in `dir`.
fn snap_request(dir: &Path, ids: &JobIds) -> anyhow::Result<SubmitProofRequest> {
    let updated = proofline_filecoin::snap::read_update(dir)?;
    let c = updated.info.commitments()?;
    let sector_number = ids.sector_number.unwrap_or(0);
    let miner_id = ids
        .miner_id
        .context("pass --miner-id with --snap (the request carries the miner)")?;
    proofline_service::client::snap_request(
        updated.info.sector_size,
        [c.comm_r_old, c.comm_r_new, c.comm_d_new],
        updated.vanilla_proofs,
        request_id(ids, dir, miner_id, sector_number),
        sector_number,
        miner_id,
        priority(ids.priority.as_deref())?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))
}

fn request_id(ids: &JobIds, input: &Path, miner_id: u64, sector_number: u64) -> String {
    ids.request_id.clone().unwrap_or_else(|| {
        let name = input
            .file_name()
            .map_or("input".into(), |n| n.to_string_lossy());
        format!("{name}-{miner_id}-{sector_number}")
    })
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
                    .submit_proof(request(&job)?)
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
                    .submit_proof(request(&job)?)
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
            ClientCmd::Preload { circuit } => {
                let r = client
                    .preload_srs(PreloadSrsRequest {
                        circuit_id: circuit.clone(),
                    })
                    .await
                    .map_err(status_error)?
                    .into_inner();
                if r.already_loaded {
                    say!("{circuit}: already loaded");
                } else {
                    say!("{circuit}: loaded in {:.1} s", r.load_time_ms as f64 / 1e3);
                }
                Ok(())
            }
            ClientCmd::Evict { circuit } => {
                let r = client
                    .evict_srs(EvictSrsRequest {
                        circuit_id: circuit.clone(),
                    })
                    .await
                    .map_err(status_error)?
                    .into_inner();
                if r.was_loaded {
                    say!("{circuit}: {} bytes let go", r.freed_bytes);
                } else {
                    say!("{circuit}: was not loaded");
                }
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
