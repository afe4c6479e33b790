//! The options of a run, resolved: what `results.json` records under `config`.

use std::path::PathBuf;

use serde::Serialize;

use crate::workloads::{Workload, WorkloadSpec};

/// The compute backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The CPU backend (always built).
    Cpu,
    /// CUDA (cudarc).
    Cuda,
    /// OpenCL (opencl3).
    Opencl,
}

/// `--release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
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

/// Checks a synthesis worker count (`--pw`).
pub fn validate_pw(pw: usize) -> Result<(), String> {
    let max = prover_core::engine::MAX_SLOTS;
    if pw == 0 || pw > max {
        return Err(format!("--pw {pw}: it must be between 1 and {max}"));
    }
    Ok(())
}

/// Everything a point of a sweep (or one `prove` run) needs, except the worker count.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    /// `--backend`.
    pub backend: BackendKind,
    /// `--circuit`.
    pub circuit: Workload,
    /// `--log2-constraints`.
    pub log2_constraints: u32,
    /// `--partitions` (per job).
    pub partitions: usize,
    /// `--jobs`.
    pub jobs: usize,
    /// `--release`.
    pub release: Release,
    /// `--queue-depth`.
    pub queue_depth: usize,
    /// `--gpu-workers` (per device).
    pub gpu_workers: usize,
    /// `--gpus`.
    pub gpus: Vec<usize>,
    /// `--opencl-device`.
    pub opencl_device: Option<usize>,
    /// `--synthesis-threads` (0: one per CPU).
    pub synthesis_threads: usize,
    /// `--mem-budget`.
    pub mem_budget: Option<MemBudget>,
    /// `--params-dir`.
    pub params_dir: PathBuf,
    /// `--sample-ms`: the timeline's interval.
    pub sample_ms: u64,
}

impl RunConfig {
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
                return Err("the CUDA backend is not built yet: use --backend cpu".into())
            }
            BackendKind::Opencl => {
                return Err("the OpenCL backend is not built yet: use --backend cpu".into())
            }
        }
        if self.backend == BackendKind::Cpu
            && (!self.gpus.is_empty() || self.opencl_device.is_some())
        {
            return Err("--gpus and --opencl-device apply to the cuda and opencl backends".into());
        }
        if self.partitions == 0 || self.jobs == 0 {
            return Err("--partitions and --jobs must be at least 1".into());
        }
        use prover_core::engine::{MAX_SLOTS, MAX_THREADS};
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
        if let Some(MemBudget::Bytes(b)) = self.mem_budget {
            if b < MIN_MEM_BUDGET {
                return Err(format!(
                    "--mem-budget {b} bytes cannot hold a partition: give at least {}",
                    prover_core::ledger::human_bytes(MIN_MEM_BUDGET)
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
