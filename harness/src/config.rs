//! The options of a run, resolved: what `results.json` records under `config`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::workloads::{Workload, WorkloadSpec};

/// The compute backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The CPU backend (always built).
    Cpu,
    /// CUDA (cudarc).
    Cuda,
    /// OpenCL (opencl3).
    Opencl,
}

/// `--synthesis`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SynthesisMode {
    /// bellpepper's constraint system, linear combinations built for every partition.
    #[default]
    Cs,
    /// Pre-compiled constraints: witness-only synthesis and a parallel sparse product.
    Pce,
}

impl SynthesisMode {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            SynthesisMode::Cs => "cs",
            SynthesisMode::Pce => "pce",
        }
    }
}

/// `--release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Release {
    /// Permit dropped once the accelerator queue accepts the partition.
    AfterHandoff,
    /// Permit dropped when synthesis ends (the published bug).
    AfterSynthesis,
}

impl Release {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        prover_core::ReleasePolicy::from(self).name()
    }
}

impl BackendKind {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Opencl => "opencl",
        }
    }

    /// What refuses it in a build that leaves it out (built without its cargo feature).
    pub fn not_compiled(self) -> String {
        let name = self.name();
        format!(
            "the {name} backend is not compiled into this build: build with --features {name}, \
             or use --backend cpu"
        )
    }
}

impl From<Release> for prover_core::ReleasePolicy {
    fn from(r: Release) -> Self {
        match r {
            Release::AfterHandoff => prover_core::ReleasePolicy::AfterHandoff,
            Release::AfterSynthesis => prover_core::ReleasePolicy::AfterSynthesis,
        }
    }
}

/// `--mem-budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemBudget {
    /// A size in bytes.
    Bytes(u64),
    /// The cgroup limit or available RAM, minus a margin.
    Auto,
}

impl Serialize for MemBudget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MemBudget::Bytes(b) => s.serialize_u64(*b),
            MemBudget::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for MemBudget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Bytes(u64),
            Word(String),
        }
        match Repr::deserialize(d)? {
            Repr::Bytes(b) => Ok(MemBudget::Bytes(b)),
            Repr::Word(w) if w == "auto" => Ok(MemBudget::Auto),
            Repr::Word(w) => Err(serde::de::Error::custom(format!(
                "mem_budget: `{w}` is neither a byte count nor \"auto\""
            ))),
        }
    }
}

impl From<MemBudget> for prover_core::runtime::budget::BudgetSize {
    fn from(b: MemBudget) -> Self {
        match b {
            MemBudget::Bytes(b) => prover_core::runtime::budget::BudgetSize::Bytes(b),
            MemBudget::Auto => prover_core::runtime::budget::BudgetSize::Auto,
        }
    }
}

/// Parses `auto` or a size.
pub fn parse_mem_budget(s: &str) -> Result<MemBudget, String> {
    if s.eq_ignore_ascii_case("auto") {
        Ok(MemBudget::Auto)
    } else {
        crate::units::parse_size(s).map(MemBudget::Bytes)
    }
}

/// The smallest `--mem-budget` accepted before the workload's own size is known (the smallest
/// partition of any workload takes more).
pub const MIN_MEM_BUDGET: u64 = 1 << 20;

/// The smallest `--gpu-mem-limit`: one G2 bucket set and a few streamed bases.
pub const MIN_GPU_MEM_LIMIT: u64 = 256 << 10;

/// Checks an `--opencl-device` selector (parsed again where the backend opens).
fn gpu_selector(s: &str) -> Result<(), String> {
    #[cfg(feature = "opencl")]
    {
        backend_opencl::Selector::parse(s).map(|_| ())
    }
    #[cfg(not(feature = "opencl"))]
    {
        let _ = s;
        Ok(())
    }
}

/// The most partitions (`--partitions` x `--jobs`) one run takes: every partition's circuit and
/// witness is built before the clock starts.
pub const MAX_RUN_PARTITIONS: usize = 4096;

/// Everything a point of a sweep (or one `prove` run) needs, except the worker count: the
/// command-line options (declared here once, flattened into every command), what `results.json`
/// records under `config`, and what a sweep hands its child processes (as JSON).
#[derive(Debug, Clone, Serialize, Deserialize, clap::Args)]
pub struct RunConfig {
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    pub backend: BackendKind,
    /// Workload circuit.
    #[arg(long, value_enum, default_value_t = Workload::Dense)]
    pub circuit: Workload,
    /// About 2^K constraints per partition.
    #[arg(long = "log2-constraints", default_value_t = 14)]
    pub log2_constraints: u32,
    /// Partitions per job (a C2 proof is a job of 10; Filecoin's 2KiB workloads have 1).
    #[arg(long, default_value_t = 10)]
    pub partitions: usize,
    /// Jobs (proofs) per point.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// When a partition gives its synthesis permit back.
    #[arg(long, value_enum, default_value_t = Release::AfterHandoff)]
    pub release: Release,
    /// Slots of the accelerator queue.
    #[arg(long = "queue-depth", default_value_t = 1)]
    pub queue_depth: usize,
    /// Accelerator workers per device.
    #[arg(long = "gpu-workers", default_value_t = 1)]
    pub gpu_workers: usize,
    /// Devices to use, as ordinals of the backend's device list (comma list; cuda/opencl
    /// only; default: the first).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// OpenCL devices: `PLATFORM[:N]`, a part of a platform's name (`nvidia`, `portable`) and
    /// a device index in it (opencl only; default: every GPU, else every device).
    #[arg(long = "opencl-device")]
    pub opencl_device: Option<String>,
    /// Caps the device memory the GPU backend uses per device (`4GiB`): bases that do not fit
    /// are streamed in chunks and the NTT work is split (cuda/opencl only).
    #[arg(long = "gpu-mem-limit", value_parser = crate::units::parse_size)]
    #[serde(default)]
    pub gpu_mem_limit: Option<u64>,
    /// Synthesis threads (0: one per CPU): partitions synthesized at once, and the threads of
    /// the pool that runs their parallel parts.
    #[arg(long = "synthesis-threads", default_value_t = 0)]
    pub synthesis_threads: usize,
    /// Byte budget for the partitions' buffers: a size (512MiB, 20GiB) or `auto`.
    #[arg(long = "mem-budget", value_parser = parse_mem_budget)]
    pub mem_budget: Option<MemBudget>,
    /// Parameter cache folder.
    #[arg(long = "params-dir", default_value = "target/proofline-params")]
    pub params_dir: PathBuf,
    /// Interval of the ledger/RSS timeline, milliseconds.
    #[arg(long = "sample-ms", default_value_t = 20)]
    pub sample_ms: u64,
    /// Replay: the first partition is synthesized once and every partition is a copy of it
    /// (one statement proved many times), so the accelerator, not synthesis, bounds the run.
    /// A timing workload: the proofs verify, against that one statement's inputs.
    #[arg(long)]
    #[serde(default)]
    pub replay: bool,
    /// How partitions are synthesized: `cs` builds every constraint's linear combinations
    /// (bellpepper's constraint system, one thread per partition); `pce` records the circuit's
    /// matrices once (cached beside the parameters as `<params>.pce`), then runs each circuit for
    /// its witness only and computes a, b, c with a sparse product over all cores.
    #[arg(long, value_enum, default_value_t = SynthesisMode::Cs)]
    #[serde(default)]
    pub synthesis: SynthesisMode,
    /// Do not check each partition proof before the engine reports it (on by default: three
    /// pairings a partition, and a device's proof that fails is proved again on the CPU). For
    /// timing the proving alone; the harness still verifies every job's proofs afterwards,
    /// outside the timed run.
    #[arg(long = "no-verify")]
    #[serde(default)]
    pub no_verify: bool,
    /// Whether the device backend times its queues (every copy and kernel on the device's own
    /// clock), from which each device's busy share is read: on for the cuda and opencl backends
    /// of `sweep` and `prove` unless `--no-device-trace`.
    #[arg(skip)]
    #[serde(default)]
    pub trace: bool,
    /// Whether a sweep's points write their device timeline as files (`sweep --device-trace`:
    /// `device-trace-pw<N>.csv` and `.svg`).
    #[arg(skip)]
    #[serde(default)]
    pub trace_files: bool,
}

impl RunConfig {
    /// The run with its device timing resolved from `--device-trace` (`files`: also write the
    /// timeline) and `--no-device-trace` (`off`): a device backend times its queues unless
    /// `off`; the CPU backend has no queues (its device is its workers), so only `files` asks
    /// it to, which `validate` refuses.
    pub fn with_device_trace(self, files: bool, off: bool) -> Self {
        RunConfig {
            trace: files || (self.backend != BackendKind::Cpu && !off),
            trace_files: files,
            ..self
        }
    }
}

impl RunConfig {
    /// The options as a run uses them: Filecoin's 2KiB workloads have one partition per job
    /// (a sector), whatever `--partitions` says.
    pub fn normalized(self) -> Self {
        RunConfig {
            partitions: if self.circuit.is_filecoin() {
                1
            } else {
                self.partitions
            },
            ..self
        }
    }

    /// The workload.
    pub fn workload(&self) -> WorkloadSpec {
        WorkloadSpec {
            kind: self.circuit,
            log2: self.log2_constraints,
        }
    }

    /// Refuses option combinations that cannot run, with a clear message.
    pub fn validate(&self) -> Result<(), String> {
        match self.backend {
            BackendKind::Cpu => {}
            BackendKind::Cuda => {
                if !cfg!(feature = "cuda") {
                    return Err(self.backend.not_compiled());
                }
            }
            BackendKind::Opencl => {
                if !cfg!(feature = "opencl") {
                    return Err(self.backend.not_compiled());
                }
            }
        }
        if self.backend == BackendKind::Cpu
            && (!self.gpus.is_empty()
                || self.opencl_device.is_some()
                || self.gpu_mem_limit.is_some())
        {
            return Err(
                "--gpus, --opencl-device and --gpu-mem-limit apply to the cuda and opencl backends"
                    .into(),
            );
        }
        if (self.trace || self.trace_files) && self.backend == BackendKind::Cpu {
            return Err(
                "--device-trace traces a device backend: add --backend cuda or --backend opencl"
                    .into(),
            );
        }
        if self.backend != BackendKind::Opencl && self.opencl_device.is_some() {
            return Err("--opencl-device applies to the opencl backend".into());
        }
        if let Some(s) = &self.opencl_device {
            gpu_selector(s)?;
        }
        if self.gpu_mem_limit.is_some_and(|b| b < MIN_GPU_MEM_LIMIT) {
            return Err(format!(
                "--gpu-mem-limit below {} cannot hold an MSM's buckets",
                prover_core::units::human_bytes(MIN_GPU_MEM_LIMIT)
            ));
        }
        if self.partitions == 0 || self.jobs == 0 {
            return Err("--partitions and --jobs must be at least 1".into());
        }
        use prover_core::runtime::engine::{MAX_SLOTS, MAX_THREADS};
        for (name, v, min, max) in [
            ("--partitions", self.partitions, 1, MAX_SLOTS),
            ("--jobs", self.jobs, 1, MAX_SLOTS),
            ("--queue-depth", self.queue_depth, 1, MAX_SLOTS),
            ("--gpu-workers", self.gpu_workers, 1, MAX_THREADS),
            (
                "--synthesis-threads",
                self.synthesis_threads,
                0,
                MAX_THREADS,
            ),
        ] {
            if v < min || v > max {
                return Err(format!("{name} {v}: it must be between {min} and {max}"));
            }
        }
        if self.partitions.saturating_mul(self.jobs) > MAX_RUN_PARTITIONS {
            return Err(format!(
                "--partitions {} x --jobs {} is {} partitions: a run builds every partition's \
                 circuit and witness before it starts, so it takes at most {MAX_RUN_PARTITIONS}; \
                 run fewer jobs",
                self.partitions,
                self.jobs,
                self.partitions.saturating_mul(self.jobs)
            ));
        }
        if let Some(MemBudget::Bytes(b)) = self.mem_budget {
            if b < MIN_MEM_BUDGET {
                return Err(format!(
                    "--mem-budget {b} bytes cannot hold a partition: give at least {}",
                    prover_core::units::human_bytes(MIN_MEM_BUDGET)
                ));
            }
        }
        if self.sample_ms == 0 || self.sample_ms > 60_000 {
            return Err("--sample-ms must be between 1 and 60000".into());
        }
        if !(4..=28).contains(&self.log2_constraints) {
            return Err("--log2-constraints must be between 4 and 28".into());
        }
        Ok(())
    }
}
