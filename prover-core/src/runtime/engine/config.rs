//! The engine's knobs and figures: [`Config`] (validated before anything starts),
//! [`EngineStats`] and its per-device [`DeviceStats`].

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::groth16::params::Parameters;
use crate::runtime::budget::BudgetSize;
use crate::stages::Accelerator;

/// When a partition gives its synthesis permit back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReleasePolicy {
    /// Once the accelerator queue has accepted the partition (the fix; default).
    #[default]
    AfterHandoff,
    /// As soon as synthesis ends: the published bug, kept to show its effect. Only the number of
    /// partitions submitted bounds how many then wait for the accelerator.
    AfterSynthesis,
}

impl ReleasePolicy {
    /// `after-handoff` / `after-synthesis`.
    pub fn name(self) -> &'static str {
        match self {
            ReleasePolicy::AfterHandoff => "after-handoff",
            ReleasePolicy::AfterSynthesis => "after-synthesis",
        }
    }
}

/// The most threads or workers of one kind an engine starts (a typo such as
/// `--synthesis-threads 100000` is refused instead of stalling the machine).
pub const MAX_THREADS: usize = 1024;
/// The most synthesis permits or queue slots (each may hold a whole partition in memory).
pub const MAX_SLOTS: usize = 1 << 16;

/// A lane kept for urgent jobs: synthesis permits, synthesis threads and accelerator-queue
/// slots that only jobs of `min_priority` or more use, so that such a job (a WinningPoSt) never
/// waits for partitions of less urgent ones (a C2) to be synthesized or queued first. Its
/// partitions take the accelerator's next free worker before the shared queue; a partition
/// already on the accelerator finishes first. A job at `min_priority` or more also takes
/// ordinary permits when they are free, and its partitions use the lane's queue either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrgentLane {
    /// Jobs submitted with this priority or more use the lane.
    pub min_priority: i32,
    /// The lane's synthesis permits, threads and queue slots (>= 1).
    pub workers: usize,
}

/// The engine's knobs.
#[derive(Clone)]
pub struct Config {
    /// Synthesis workers (the command line's `--pw`): the synthesis permits, partitions between
    /// the start of synthesis and the hand-off.
    pub synthesis_workers: usize,
    /// When the permit is given back.
    pub release: ReleasePolicy,
    /// Slots of the accelerator queue (>= 1), shared by every device.
    pub queue_depth: usize,
    /// The backend's devices to use (ordinals, no repeats; `[0]` by default).
    pub devices: Vec<usize>,
    /// Accelerator workers per device (each owns a worker context created once).
    pub gpu_workers: usize,
    /// Threads of the finalizer pool (0: one per CPU).
    pub finalizer_threads: usize,
    /// Synthesis threads (0: one per CPU), each running one partition's synthesis at a time,
    /// and as many in the pool that runs the syntheses' parallel parts.
    pub synthesis_threads: usize,
    /// Optional byte budget for the partitions' buffers.
    pub mem_budget: Option<BudgetSize>,
    /// Where a partition that every healthy device handed back runs (`None`: it fails). Set it
    /// to the CPU backend (`backend_cpu::CpuBackend`) for the usual behaviour.
    pub fallback: Option<Arc<dyn Accelerator>>,
    /// Threads of the fallback pool, each with its own worker of the fallback backend.
    pub fallback_threads: usize,
    /// The most partitions in the fallback pool at once, waiting or running (>= 1). A device
    /// that fails everything waits for a slot, so it cannot pour partitions into the pool
    /// faster than the pool drains.
    pub fallback_depth: usize,
    /// Consecutive failures after which a device is taken out of service (>= 1).
    pub max_device_failures: usize,
    /// Check every partition proof before it is reported (on by default): its points are on
    /// the curve and in the subgroup, and it verifies for the partition's public inputs (three
    /// pairings). A device's proof that fails is proved again on the fallback backend and counts
    /// as a failure of the device. Turn it off only to time the proving alone.
    pub verify: bool,
    /// A lane kept for urgent jobs (`None`: every job shares the permits and the queue, and
    /// priorities order only the next partition boundary).
    pub urgent: Option<UrgentLane>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            synthesis_workers: 4,
            release: ReleasePolicy::AfterHandoff,
            queue_depth: 1,
            devices: vec![0],
            gpu_workers: 1,
            finalizer_threads: 0,
            synthesis_threads: 0,
            mem_budget: None,
            fallback: None,
            fallback_threads: 1,
            fallback_depth: 2,
            max_device_failures: 3,
            verify: true,
            urgent: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("synthesis_workers", &self.synthesis_workers)
            .field("release", &self.release)
            .field("queue_depth", &self.queue_depth)
            .field("devices", &self.devices)
            .field("gpu_workers", &self.gpu_workers)
            .field("finalizer_threads", &self.finalizer_threads)
            .field("synthesis_threads", &self.synthesis_threads)
            .field("mem_budget", &self.mem_budget)
            .field(
                "fallback",
                &self.fallback.as_ref().map(|b| b.name().to_string()),
            )
            .field("fallback_threads", &self.fallback_threads)
            .field("fallback_depth", &self.fallback_depth)
            .field("max_device_failures", &self.max_device_failures)
            .field("verify", &self.verify)
            .field("urgent", &self.urgent)
            .finish()
    }
}

impl Config {
    /// Checks every knob against `backend` (its device count) before anything starts.
    pub fn validate(&self, backend: &dyn Accelerator) -> Result<()> {
        let bad = |detail: String| {
            Err(Error::InvalidConfig {
                what: "engine configuration",
                detail,
            })
        };
        for (name, v, max) in [
            ("synthesis_workers", self.synthesis_workers, MAX_SLOTS),
            ("queue_depth", self.queue_depth, MAX_SLOTS),
            ("gpu_workers", self.gpu_workers, MAX_THREADS),
            ("fallback_threads", self.fallback_threads, MAX_THREADS),
            ("fallback_depth", self.fallback_depth, MAX_SLOTS),
            ("max_device_failures", self.max_device_failures, usize::MAX),
        ]
        .into_iter()
        .chain(
            self.urgent
                .map(|l| ("urgent.workers", l.workers, MAX_THREADS)),
        ) {
            if v == 0 || v > max {
                return bad(format!("{name} is {v}; it must be between 1 and {max}"));
            }
        }
        for (name, v) in [
            ("synthesis_threads", self.synthesis_threads),
            ("finalizer_threads", self.finalizer_threads),
        ] {
            if v > MAX_THREADS {
                return bad(format!(
                    "{name} is {v}; it must be at most {MAX_THREADS} (0: one per CPU)"
                ));
            }
        }
        if self.devices.is_empty() {
            return bad("no devices: give at least one device ordinal".into());
        }
        let count = backend.device_count();
        for (i, d) in self.devices.iter().enumerate() {
            if *d >= count {
                return bad(format!(
                    "device {d} does not exist: backend {} has {count} device{} (0..{count})",
                    backend.name(),
                    if count == 1 { "" } else { "s" }
                ));
            }
            if self.devices[..i].contains(d) {
                return bad(format!("device {d} is listed twice"));
            }
        }
        if let Some(fb) = &self.fallback {
            if fb.device_count() == 0 {
                return bad(format!("the fallback backend {} has no device", fb.name()));
            }
        }
        Ok(())
    }
}

/// Host bytes of a partition's large buffers, as the CPU synthesizer allocates them (vectors
/// grown by pushing end with a power-of-two capacity): `(abc, rest)`.
pub fn estimate_partition_bytes(params: &Parameters) -> (u64, u64) {
    estimate_bytes(params.domain_size(), params.l.len(), params.vk.ic.len())
}

/// [`estimate_partition_bytes`] from the sizes alone: the evaluation domain, the aux variables
/// and the inputs (ONE included), for example from [`crate::synthesis::cpu::circuit_size`] before
/// any parameters are loaded.
pub fn estimate_bytes(domain: usize, aux: usize, inputs: usize) -> (u64, u64) {
    let b = estimate_buffers(domain, aux, inputs);
    (b.abc, b.aux + b.input + b.density)
}

/// One partition's host buffers by the ledger's kinds, as synthesis allocates them (vectors
/// grown by pushing end with a power-of-two capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionBytes {
    /// The a, b, c evaluations ([`crate::accounting::ledger::BufferKind::Abc`]).
    pub abc: u64,
    /// The aux assignment.
    pub aux: u64,
    /// The input assignment.
    pub input: u64,
    /// The density bitmaps.
    pub density: u64,
}

impl PartitionBytes {
    /// The kinds and their bytes, in the ledger's order.
    pub fn kinds(&self) -> [(crate::accounting::ledger::BufferKind, u64); 4] {
        use crate::accounting::ledger::BufferKind;
        [
            (BufferKind::Abc, self.abc),
            (BufferKind::Aux, self.aux),
            (BufferKind::Input, self.input),
            (BufferKind::Density, self.density),
        ]
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.abc + self.aux + self.input + self.density
    }
}

/// [`PartitionBytes`] from the sizes alone (see [`estimate_bytes`]).
pub fn estimate_buffers(domain: usize, aux: usize, inputs: usize) -> PartitionBytes {
    let scalars = |n: usize| (n.max(4).next_power_of_two() as u64).saturating_mul(32);
    let words = |bits: usize| (bits.div_ceil(64).max(4).next_power_of_two() * 8) as u64;
    PartitionBytes {
        abc: 3 * scalars(domain),
        aux: scalars(aux),
        input: scalars(inputs),
        density: 2 * words(aux) + words(inputs),
    }
}

/// Figures of one device of an engine's run (serialized as the sweep's `results.json` records
/// them under each point's `devices`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceStats {
    /// The device's ordinal in its backend.
    pub device: usize,
    /// Its name (`cpu:0`, `cuda:1`).
    pub name: String,
    /// Accelerator workers on it.
    #[serde(default)]
    pub workers: usize,
    /// Mean over its workers of the fraction of the time since the first submission spent in
    /// the accelerator stage on this device (fallback work excluded).
    pub busy_fraction: f64,
    /// Seconds its workers spent in the accelerator stage, summed.
    pub accelerator_seconds: f64,
    /// Partitions it completed.
    pub partitions: u64,
    /// Partitions it handed back or panicked on, or whose proof did not verify.
    pub failures: u64,
    /// Partitions whose proof, made from its sums, did not verify (counted in `failures` too).
    #[serde(default)]
    pub rejected: u64,
    /// Partitions it took over from another device that handed them back.
    pub retried: u64,
    /// False once it was taken out of service after consecutive failures.
    pub in_service: bool,
}

/// Figures of an engine's run.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineStats {
    /// Per accelerator worker (device by device, in `Config::devices` order): the fraction of
    /// the time since the first submission that it spent in the accelerator stage.
    pub accelerator_busy: Vec<f64>,
    /// Per device.
    pub devices: Vec<DeviceStats>,
    /// Seconds spent in synthesis, summed over partitions.
    pub synthesis_seconds: f64,
    /// Seconds spent in the accelerator stage on the devices, summed over partitions.
    pub accelerator_seconds: f64,
    /// Seconds spent on the fallback backend, summed over partitions.
    pub fallback_seconds: f64,
    /// Partitions the fallback backend ran.
    pub fallback_partitions: u64,
    /// Seconds spent in the finalizer, summed over partitions.
    pub finalize_seconds: f64,
    /// Partitions settled (proven, failed or skipped), all jobs.
    pub partitions_settled: u64,
    /// Partition proofs checked before they were reported (0 with verification off).
    pub partitions_verified: u64,
    /// Partition proofs that failed the check (from a device, then proved again on the
    /// fallback; or from the CPU, failing the job).
    pub partitions_rejected: u64,
    /// Seconds spent checking proofs, summed over partitions.
    pub verify_seconds: f64,
}

impl EngineStats {
    /// The mean over workers.
    pub fn mean_accelerator_busy(&self) -> f64 {
        if self.accelerator_busy.is_empty() {
            0.0
        } else {
            self.accelerator_busy.iter().sum::<f64>() / self.accelerator_busy.len() as f64
        }
    }
}
