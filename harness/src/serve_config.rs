//! `proofline serve`'s settings: each from its flag when given, else from the TOML file
//! `--config` names (the flags' names as keys, `data-dir = "/var/lib/proofline"`), else its
//! default. An unknown key, a value of the wrong type or a malformed size is an error naming the
//! key and the file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use proofline_service::listen::Listen;
use serde::Deserialize;

use crate::commands::ParamsLoad;
use crate::config::BackendKind;
use crate::units::{parse_pw, parse_size};

/// The settings a config file may hold (every one optional).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServeFile {
    /// `unix:///PATH` or `HOST:PORT`.
    pub listen: Option<String>,
    /// The job store's directory.
    pub data_dir: Option<PathBuf>,
    /// A PostgreSQL job store (`postgres://...`) instead of the embedded one.
    pub store: Option<String>,
    /// The PostgreSQL store's schema.
    pub store_schema: Option<String>,
    /// The payload files' directory of a PostgreSQL store.
    pub blob_dir: Option<PathBuf>,
    /// An S3-compatible bucket for a PostgreSQL store's payloads.
    pub blob_store: Option<String>,
    /// The bearer token's file.
    pub auth_token_file: Option<PathBuf>,
    /// The largest gRPC message (`256MiB` or bytes).
    pub max_message_size: Option<Size>,
    /// Synthesis workers.
    pub pw: Option<usize>,
    /// Jobs proven at once.
    pub concurrent_jobs: Option<usize>,
    /// Of those, slots kept for WindowPoSt and WinningPoSt.
    pub post_slots: Option<usize>,
    /// This server's name among the servers sharing its store.
    pub node_id: Option<String>,
    /// Seconds a claim holds without a heartbeat.
    pub lease_seconds: Option<u64>,
    /// Times a job is claimed at most.
    pub max_attempts: Option<u32>,
    /// Synthesis workers kept for WindowPoSt and WinningPoSt (0: none).
    pub urgent_workers: Option<usize>,
    /// The engine's byte budget.
    pub mem_budget: Option<Size>,
    /// Bytes of parameters kept loaded at most.
    pub params_budget: Option<Size>,
    /// Jobs queued at most.
    pub max_queued: Option<u64>,
    /// `HOST:PORT` for `/metrics` and `/status`.
    pub metrics_listen: Option<String>,
    /// Hours a finished job's result is kept.
    pub retention_hours: Option<u64>,
    /// Seconds a stop waits for the running jobs.
    pub stop_timeout: Option<u64>,
    /// `cpu`, `cuda` or `opencl`.
    pub backend: Option<BackendKind>,
    /// Device ordinals.
    pub gpus: Option<Vec<usize>>,
    /// Accelerator workers per device.
    pub gpu_workers: Option<usize>,
    /// OpenCL devices.
    pub opencl_device: Option<String>,
    /// Device memory cap per device.
    pub gpu_mem_limit: Option<Size>,
    /// Where parameter files are (`FIL_PROOFS_PARAMETER_CACHE` when unset).
    pub parameter_cache: Option<PathBuf>,
    /// Check every parameter point.
    pub check_params: Option<bool>,
    /// Never write or map native parameter copies.
    pub no_native_params: Option<bool>,
}

/// A size in a config file: bytes, or a string with a unit (`"64GiB"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// Bytes.
    Bytes(u64),
    /// With a unit.
    Text(String),
}

impl Size {
    fn bytes(&self, key: &str) -> anyhow::Result<u64> {
        match self {
            Size::Bytes(b) => Ok(*b),
            Size::Text(t) => parse_size(t).map_err(|e| anyhow::anyhow!("{key}: {e}")),
        }
    }
}

impl ServeFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("the config file {}", path.display()))
    }

    /// Parses a config file's text.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(toml::from_str(text)?)
    }
}

/// Every setting resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSettings {
    /// Where to listen (none: the socket in the data directory).
    pub listen: Option<Listen>,
    /// The job store's directory.
    pub data_dir: PathBuf,
    /// A PostgreSQL job store's URL (none: the embedded store in the data directory).
    pub store: Option<String>,
    /// The PostgreSQL store's schema (none: the connection's default).
    pub store_schema: Option<String>,
    /// The payload files' directory of a PostgreSQL store.
    pub blob_dir: PathBuf,
    /// An S3-compatible bucket for a PostgreSQL store's payloads (`s3://BUCKET[/PREFIX]`),
    /// instead of the directory.
    pub blob_store: Option<String>,
    /// The bearer token's file.
    pub auth_token_file: Option<PathBuf>,
    /// The largest gRPC message.
    pub max_message_size: u64,
    /// Synthesis workers.
    pub pw: usize,
    /// Jobs proven at once.
    pub concurrent_jobs: usize,
    /// Of those, slots kept for WindowPoSt and WinningPoSt.
    pub post_slots: usize,
    /// This server's name among the servers sharing its store (none: the host's name and the
    /// listen address).
    pub node_id: Option<String>,
    /// Seconds a claim holds without a heartbeat.
    pub lease_seconds: u64,
    /// Times a job is claimed at most.
    pub max_attempts: u32,
    /// Synthesis workers kept for WindowPoSt and WinningPoSt (0: none).
    pub urgent_workers: usize,
    /// The engine's byte budget.
    pub mem_budget: Option<u64>,
    /// Bytes of parameters kept loaded at most.
    pub params_budget: Option<u64>,
    /// Jobs queued at most.
    pub max_queued: Option<u64>,
    /// Where to serve `/metrics` and `/status`.
    pub metrics_listen: Option<SocketAddr>,
    /// Hours a finished job's result is kept.
    pub retention_hours: u64,
    /// Seconds a stop waits for the running jobs.
    pub stop_timeout: u64,
    /// The backend.
    pub backend: BackendKind,
    /// Device ordinals (empty: the first).
    pub gpus: Vec<usize>,
    /// Accelerator workers per device.
    pub gpu_workers: usize,
    /// OpenCL devices.
    pub opencl_device: Option<String>,
    /// Device memory cap per device.
    pub gpu_mem_limit: Option<u64>,
    /// Where parameter files are (none: `FIL_PROOFS_PARAMETER_CACHE` or its default).
    pub parameter_cache: Option<PathBuf>,
    /// Check every parameter point.
    pub check_params: bool,
    /// Never write or map native parameter copies.
    pub no_native_params: bool,
}

/// The flags (`proofline serve --help` shows them), each `None` (or empty, or false) when not
/// given.
#[derive(clap::Args, Debug, Default)]
pub struct ServeFlags {
    /// Where to listen: unix:///PATH (the default, `<data-dir>/proofline.sock`, created
    /// owner-only) or HOST:PORT (TCP).
    #[arg(long)]
    pub listen: Option<Listen>,
    /// The job store's directory (jobs.sqlite and the queued payloads); required, here or in
    /// the config file.
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// Keep the jobs in a PostgreSQL database (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`)
    /// instead of the embedded store; the tables are created at start. Every server given the
    /// same database (and schema) and the same --blob-dir shares one queue [default: the
    /// embedded store in the data directory].
    #[arg(long)]
    pub store: Option<String>,
    /// The schema of the PostgreSQL store's tables, created if missing (letters, digits and _),
    /// so that one database can hold several clusters [default: the connection's default].
    #[arg(long = "store-schema")]
    pub store_schema: Option<String>,
    /// Where a PostgreSQL store keeps queued jobs' payloads, one file per payload digest (in a
    /// folder named by --store-schema, when given): a directory every server of the store
    /// reaches (a shared file system) [default: <data-dir>/payloads].
    #[arg(long = "blob-dir", conflicts_with = "blob_store")]
    pub blob_dir: Option<PathBuf>,
    /// Keep a PostgreSQL store's payloads in an S3-compatible bucket instead of --blob-dir:
    /// `s3://BUCKET[/PREFIX]`, the bucket made beforehand; credentials, region and endpoint
    /// from the AWS_* environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP=true for a plain-HTTP endpoint).
    #[arg(long = "blob-store")]
    pub blob_store: Option<String>,
    /// A file holding the bearer token every call must carry (Curio sends none: with Curio,
    /// listen on the socket or a private address instead).
    #[arg(long = "auth-token-file")]
    pub auth_token_file: Option<PathBuf>,
    /// The largest gRPC message received or sent [default: 256MiB].
    #[arg(long = "max-message-size", value_parser = parse_size)]
    pub max_message_size: Option<u64>,
    /// Partitions synthesized at once (the engine's synthesis workers, shared by every job)
    /// [default: 2].
    #[arg(long, value_parser = parse_pw)]
    pub pw: Option<usize>,
    /// Jobs proven at once: their partitions share the engine, the more urgent job's taken
    /// first at each partition boundary [default: --pw, so that jobs of one partition keep every
    /// synthesis worker busy].
    #[arg(long = "concurrent-jobs", value_parser = parse_pw)]
    pub concurrent_jobs: Option<usize>,
    /// Of the --concurrent-jobs slots, this many only WindowPoSt and WinningPoSt may take, so
    /// that a PoSt never waits for sealing work to finish (less than --concurrent-jobs)
    /// [default: 0].
    #[arg(long = "post-slots")]
    pub post_slots: Option<usize>,
    /// This server's name among the servers sharing a PostgreSQL store: unique among them and
    /// the same across its restarts [default: the host's name and the listen address].
    #[arg(long = "node-id")]
    pub node_id: Option<String>,
    /// Seconds a claimed job stays this server's without a heartbeat (one comes every third of
    /// it): after a server dies, its jobs go to another within about this long [default: 30].
    #[arg(long = "lease-seconds")]
    pub lease_seconds: Option<u64>,
    /// Times a job is claimed at most: a job whose server died that often fails [default: 3].
    #[arg(long = "max-attempts")]
    pub max_attempts: Option<u32>,
    /// Synthesis workers and accelerator queue slots kept for WindowPoSt and WinningPoSt, so
    /// that their partitions pass the C2 partitions already synthesized (0: none) [default: 1].
    #[arg(long = "urgent-workers")]
    pub urgent_workers: Option<usize>,
    /// The engine's byte budget for partitions in flight and admitted job inputs (default:
    /// none).
    #[arg(long = "mem-budget", value_parser = parse_size)]
    pub mem_budget: Option<u64>,
    /// Bytes of parameters kept loaded at most: loading another set lets the least recently
    /// used go (default: every set loaded stays until EvictSRS).
    #[arg(long = "params-budget", value_parser = parse_size)]
    pub params_budget: Option<u64>,
    /// Jobs queued at most: a new job beyond it is RESOURCE_EXHAUSTED (default: no limit).
    #[arg(long = "max-queued")]
    pub max_queued: Option<u64>,
    /// Serve `/metrics` (Prometheus' text format) and `/status` (JSON) over HTTP at HOST:PORT.
    #[arg(long = "metrics-listen")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Hours a finished job's result is kept [default: 24].
    #[arg(long = "retention-hours")]
    pub retention_hours: Option<u64>,
    /// Seconds a stop (SIGTERM, SIGINT) waits for the running jobs before leaving them to the
    /// next start [default: 300].
    #[arg(long = "stop-timeout")]
    pub stop_timeout: Option<u64>,
    /// Where parameter files are (default: FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long = "parameter-cache")]
    pub parameter_cache: Option<PathBuf>,
    /// How parameter files are read.
    #[command(flatten)]
    pub params: ParamsLoad,
    /// Compute backend: cpu, cuda or opencl [default: cpu].
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Devices to use, as ordinals of the backend's device list (comma list; cuda/opencl
    /// only; default: the first).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// Accelerator workers per device [default: 1].
    #[arg(long = "gpu-workers", value_parser = parse_pw)]
    pub gpu_workers: Option<usize>,
    /// OpenCL devices: `PLATFORM[:N]` (opencl only; default: every GPU, else every device).
    #[arg(long = "opencl-device")]
    pub opencl_device: Option<String>,
    /// Caps the device memory the GPU backend uses per device (cuda/opencl only).
    #[arg(long = "gpu-mem-limit", value_parser = parse_size)]
    pub gpu_mem_limit: Option<u64>,
}

fn size(flag: Option<u64>, file: &Option<Size>, key: &str) -> anyhow::Result<Option<u64>> {
    match (flag, file) {
        (Some(v), _) => Ok(Some(v)),
        (None, Some(s)) => s.bytes(key).map(Some),
        (None, None) => Ok(None),
    }
}

fn workers(
    flag: Option<usize>,
    file: Option<usize>,
    key: &str,
    default: usize,
) -> anyhow::Result<usize> {
    match (flag, file) {
        (Some(v), _) => Ok(v),
        (None, Some(v)) => parse_pw(&v.to_string()).map_err(|e| anyhow::anyhow!("{key}: {e}")),
        (None, None) => Ok(default),
    }
}

impl ServeSettings {
    /// `flags` over `file` over the defaults; refuses what cannot run (no data directory,
    /// a zero budget, message size or queue limit, device options on the CPU backend).
    pub fn resolve(flags: ServeFlags, file: ServeFile) -> anyhow::Result<Self> {
        let listen = match (flags.listen, &file.listen) {
            (Some(l), _) => Some(l),
            (None, Some(s)) => Some(s.parse().map_err(|e| anyhow::anyhow!("listen: {e}"))?),
            (None, None) => None,
        };
        let metrics_listen = match (flags.metrics_listen, &file.metrics_listen) {
            (Some(a), _) => Some(a),
            (None, Some(s)) => Some(
                s.parse()
                    .map_err(|e| anyhow::anyhow!("metrics-listen: {s:?}: {e}"))?,
            ),
            (None, None) => None,
        };
        let pw = workers(flags.pw, file.pw, "pw", 2)?;
        let data_dir = flags
            .data_dir
            .or(file.data_dir)
            .context("no data directory: pass --data-dir DIR or set data-dir in --config")?;
        anyhow::ensure!(
            file.blob_dir.is_none() || file.blob_store.is_none(),
            "blob-dir and blob-store in the config file: give one"
        );
        // A --blob-dir flag overrides a blob-store in the file, as a --blob-store flag does a
        // blob-dir.
        let blob_store = match (&flags.blob_dir, flags.blob_store) {
            (_, Some(url)) => Some(url),
            (Some(_), None) => None,
            (None, None) => file.blob_store.clone(),
        };
        let settings = ServeSettings {
            listen,
            store: flags.store.or(file.store),
            store_schema: flags.store_schema.or(file.store_schema),
            blob_dir: flags
                .blob_dir
                .or(file.blob_dir)
                .unwrap_or_else(|| data_dir.join("payloads")),
            blob_store,
            data_dir,
            auth_token_file: flags.auth_token_file.or(file.auth_token_file),
            max_message_size: size(
                flags.max_message_size,
                &file.max_message_size,
                "max-message-size",
            )?
            .unwrap_or(256 << 20),
            pw,
            concurrent_jobs: workers(
                flags.concurrent_jobs,
                file.concurrent_jobs,
                "concurrent-jobs",
                pw,
            )?,
            post_slots: flags.post_slots.or(file.post_slots).unwrap_or(0),
            node_id: flags.node_id.or(file.node_id),
            lease_seconds: flags.lease_seconds.or(file.lease_seconds).unwrap_or(30),
            max_attempts: flags.max_attempts.or(file.max_attempts).unwrap_or(3),
            urgent_workers: flags.urgent_workers.or(file.urgent_workers).unwrap_or(1),
            mem_budget: size(flags.mem_budget, &file.mem_budget, "mem-budget")?,
            params_budget: size(flags.params_budget, &file.params_budget, "params-budget")?,
            max_queued: flags.max_queued.or(file.max_queued),
            metrics_listen,
            retention_hours: flags.retention_hours.or(file.retention_hours).unwrap_or(24),
            stop_timeout: flags.stop_timeout.or(file.stop_timeout).unwrap_or(300),
            backend: flags.backend.or(file.backend).unwrap_or(BackendKind::Cpu),
            gpus: if flags.gpus.is_empty() {
                file.gpus.unwrap_or_default()
            } else {
                flags.gpus
            },
            gpu_workers: workers(flags.gpu_workers, file.gpu_workers, "gpu-workers", 1)?,
            opencl_device: flags.opencl_device.or(file.opencl_device),
            gpu_mem_limit: size(flags.gpu_mem_limit, &file.gpu_mem_limit, "gpu-mem-limit")?,
            parameter_cache: flags.parameter_cache.or(file.parameter_cache),
            check_params: flags.params.check_params || file.check_params.unwrap_or(false),
            no_native_params: flags.params.no_native_params
                || file.no_native_params.unwrap_or(false),
        };
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.store.is_some() || self.store_schema.is_none(),
            "--store-schema (or store-schema in the config file) is for a PostgreSQL --store"
        );
        if let Some(url) = &self.blob_store {
            anyhow::ensure!(
                self.store.is_some(),
                "--blob-store (or blob-store in the config file) is for a PostgreSQL --store (the \
                 embedded store keeps payloads in its data directory)"
            );
            let bucket = url.strip_prefix("s3://").map(|r| r.split('/').next());
            anyhow::ensure!(
                bucket.is_some_and(|b| b.is_some_and(|b| !b.is_empty())),
                "--blob-store (or blob-store in the config file): {url:?} is not \
                 s3://BUCKET[/PREFIX]"
            );
        }
        if let Some(url) = &self.store {
            anyhow::ensure!(
                url.starts_with("postgres://") || url.starts_with("postgresql://"),
                "--store (or store in the config file): {:?} is not a postgres:// URL (the \
                 embedded store needs no --store)",
                url.split('@').next_back().unwrap_or_default()
            );
        }
        anyhow::ensure!(
            self.max_message_size > 0,
            "--max-message-size (or max-message-size in the config file): 0 would refuse every call"
        );
        anyhow::ensure!(
            self.mem_budget != Some(0),
            "--mem-budget (or mem-budget in the config file): 0 cannot hold any partition"
        );
        anyhow::ensure!(
            self.params_budget != Some(0),
            "--params-budget (or params-budget in the config file): 0 cannot hold any parameters"
        );
        anyhow::ensure!(
            self.urgent_workers <= prover_core::runtime::engine::MAX_THREADS,
            "--urgent-workers (or urgent-workers in the config file): {} is more than {}",
            self.urgent_workers,
            prover_core::runtime::engine::MAX_THREADS
        );
        anyhow::ensure!(
            self.post_slots < self.concurrent_jobs,
            "--post-slots (or post-slots in the config file): {} leaves none of the {} \
             --concurrent-jobs slots for sealing work",
            self.post_slots,
            self.concurrent_jobs
        );
        anyhow::ensure!(
            (1..=86_400).contains(&self.lease_seconds),
            "--lease-seconds (or lease-seconds in the config file): {} is not 1 to 86400",
            self.lease_seconds
        );
        anyhow::ensure!(
            (1..=1000).contains(&self.max_attempts),
            "--max-attempts (or max-attempts in the config file): {} is not 1 to 1000",
            self.max_attempts
        );
        if let Some(node) = &self.node_id {
            anyhow::ensure!(
                !node.is_empty() && node.len() <= 200 && !node.chars().any(char::is_control),
                "--node-id (or node-id in the config file): {node:?}: give 1 to 200 characters, \
                 none of them control characters"
            );
        }
        anyhow::ensure!(
            self.max_queued != Some(0),
            "--max-queued (or max-queued in the config file): 0 would refuse every job"
        );
        anyhow::ensure!(
            self.backend != BackendKind::Cpu
                || (self.gpus.is_empty()
                    && self.opencl_device.is_none()
                    && self.gpu_mem_limit.is_none()),
            "--gpus, --opencl-device and --gpu-mem-limit (gpus, opencl-device, gpu-mem-limit in the \
             config file) are for the cuda or opencl backend"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_settings_are_checked() {
        let resolve = |text: &str| {
            ServeSettings::resolve(
                ServeFlags::default(),
                ServeFile::parse(&format!("data-dir = \"/d\"\n{text}")).unwrap(),
            )
        };
        let s = resolve("").unwrap();
        assert_eq!(
            (s.post_slots, s.node_id, s.lease_seconds, s.max_attempts),
            (0, None, 30, 3)
        );
        let s = resolve(
            "concurrent-jobs = 4\npost-slots = 1\nnode-id = \"gpu-7\"\nlease-seconds = 5\n\
             max-attempts = 1",
        )
        .unwrap();
        assert_eq!(
            (
                s.post_slots,
                s.node_id.as_deref(),
                s.lease_seconds,
                s.max_attempts
            ),
            (1, Some("gpu-7"), 5, 1)
        );
        for (text, says) in [
            (
                "concurrent-jobs = 2\npost-slots = 2",
                "leaves none of the 2",
            ),
            ("lease-seconds = 0", "is not 1 to 86400"),
            ("max-attempts = 0", "is not 1 to 1000"),
            ("node-id = \"a\\u0000b\"", "control characters"),
            ("node-id = \"\"", "1 to 200 characters"),
        ] {
            let e = format!("{:#}", resolve(text).unwrap_err());
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn flags_override_the_file_which_overrides_the_defaults() {
        let file = ServeFile::parse(
            r#"
            data-dir = "/var/lib/proofline"
            listen = "127.0.0.1:9820"
            mem-budget = "64GiB"
            params-budget = 1048576
            pw = 4
            concurrent-jobs = 3
            max-queued = 100
            check-params = true
            "#,
        )
        .unwrap();
        let flags = ServeFlags {
            pw: Some(8),
            ..ServeFlags::default()
        };
        let s = ServeSettings::resolve(flags, file).unwrap();
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/proofline"));
        assert_eq!(s.listen, Some("127.0.0.1:9820".parse().unwrap()));
        assert_eq!(s.mem_budget, Some(64 << 30));
        assert_eq!(s.params_budget, Some(1 << 20));
        assert_eq!(s.pw, 8);
        assert_eq!(s.concurrent_jobs, 3);
        assert_eq!(s.urgent_workers, 1);
        assert_eq!(s.max_queued, Some(100));
        assert!(s.check_params);
        assert_eq!(s.max_message_size, 256 << 20);
        assert_eq!(s.retention_hours, 24);
        assert_eq!(s.backend, BackendKind::Cpu);
        // Without concurrent-jobs anywhere, as many jobs as synthesis workers run at once.
        let file = ServeFile::parse("data-dir = \"/d\"\npw = 6\n").unwrap();
        let s = ServeSettings::resolve(ServeFlags::default(), file).unwrap();
        assert_eq!((s.pw, s.concurrent_jobs), (6, 6));
    }

    #[test]
    fn bad_files_and_settings_are_errors_naming_the_key() {
        for (text, key) in [
            ("data-dir = \"/d\"\nmem-budge = \"1GiB\"", "mem-budge"),
            ("data-dir = \"/d\"\npw = \"four\"", "pw"),
            ("data-dir = \"/d\"\nmem-budget = \"lots\"", "mem-budget"),
            ("data-dir = \"/d\"\nmem-budget = 0", "mem-budget"),
            ("data-dir = \"/d\"\nmax-queued = 0", "max-queued"),
            ("data-dir = \"/d\"\npw = 0", "pw"),
            ("data-dir = \"/d\"\ngpus = [0]", "gpus"),
            ("data-dir = \"/d\"\nlisten = \"nowhere\"", "listen"),
            ("data-dir = \"/d\"\nbackend = \"tpu\"", "backend"),
            ("pw = 2", "data-dir"),
            (
                "data-dir = \"/d\"\nstore = \"mysql://u:secret@db/jobs\"",
                "store",
            ),
        ] {
            let e = ServeFile::parse(text)
                .and_then(|f| ServeSettings::resolve(ServeFlags::default(), f))
                .unwrap_err();
            assert!(format!("{e:#}").contains(key), "{text}: {e:#}");
            assert!(!format!("{e:#}").contains("secret"), "a password in {e:#}");
        }
        // Twin: a postgres:// store is taken, its payloads in the data directory by default.
        let file = ServeFile::parse("data-dir = \"/d\"\nstore = \"postgres://p@db/jobs\"").unwrap();
        let s = ServeSettings::resolve(ServeFlags::default(), file).unwrap();
        assert_eq!(s.store.as_deref(), Some("postgres://p@db/jobs"));
        assert_eq!(s.blob_dir, PathBuf::from("/d/payloads"));
        assert_eq!(s.blob_store, None);
    }

    #[test]
    fn a_blob_store_is_an_s3_url_beside_a_postgres_store() {
        for (text, key) in [
            ("data-dir = \"/d\"\nblob-store = \"s3://b/p\"", "PostgreSQL"),
            (
                "data-dir = \"/d\"\nstore = \"postgres://p@db/j\"\nblob-store = \"/mnt/b\"",
                "s3://BUCKET",
            ),
            (
                "data-dir = \"/d\"\nstore = \"postgres://p@db/j\"\nblob-store = \"s3:///p\"",
                "s3://BUCKET",
            ),
        ] {
            let e = ServeFile::parse(text)
                .and_then(|f| ServeSettings::resolve(ServeFlags::default(), f))
                .unwrap_err();
            assert!(format!("{e:#}").contains(key), "{text}: {e:#}");
        }
        let file = ServeFile::parse(
            "data-dir = \"/d\"\nstore = \"postgres://p@db/j\"\nblob-store = \"s3://b/p\"",
        )
        .unwrap();
        let s = ServeSettings::resolve(ServeFlags::default(), file).unwrap();
        assert_eq!(s.blob_store.as_deref(), Some("s3://b/p"));
        // A --blob-dir flag overrides the file's blob-store; the file may not hold both.
        let text = "data-dir = \"/d\"\nstore = \"postgres://p@db/j\"\nblob-store = \"s3://b/p\"";
        let flags = ServeFlags {
            blob_dir: Some(PathBuf::from("/shared")),
            ..ServeFlags::default()
        };
        let s = ServeSettings::resolve(flags, ServeFile::parse(text).unwrap()).unwrap();
        assert_eq!((s.blob_store, s.blob_dir), (None, PathBuf::from("/shared")));
        let both = format!("{text}\nblob-dir = \"/shared\"");
        let e = ServeSettings::resolve(ServeFlags::default(), ServeFile::parse(&both).unwrap())
            .unwrap_err();
        assert!(format!("{e:#}").contains("give one"), "{e:#}");
    }
}
