//! The sweep's data model: one point's figures as `results.json` records them
//! ([`PointResult`], see docs/sweep.md for every field), with its devices' figures
//! ([`DevicePoint`]: the engine's [`DeviceStats`] and the backend's memory and trace figures).

use std::collections::BTreeMap;

use prover_core::DeviceStats;
use serde::{Deserialize, Serialize};

/// A count and bytes (peaks in reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountBytes {
    /// Partitions or buffers.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What became of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointStatus {
    /// Every job proved and verified.
    Ok,
    /// A job failed or did not verify, or the point could not run (`error` says why).
    Failed,
    /// The point's process was killed by a signal (`signal`).
    Killed,
}

impl PointStatus {
    /// The spelling in reports.
    pub fn name(self) -> &'static str {
        match self {
            PointStatus::Ok => "ok",
            PointStatus::Failed => "failed",
            PointStatus::Killed => "killed",
        }
    }
}

/// One point of `results.json` (see docs/sweep.md for every field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// Worker count.
    pub pw: usize,
    /// `ok`, `failed` or `killed`.
    pub status: PointStatus,
    /// The signal that killed the point's process (status `killed`).
    pub signal: Option<i32>,
    /// What failed (status `failed`).
    pub error: Option<String>,
    /// Wall seconds per job (a job's whole proof).
    pub seconds_per_proof: Option<f64>,
    /// Jobs per minute.
    pub proofs_per_minute: Option<f64>,
    /// Wall seconds per partition.
    pub seconds_per_partition: Option<f64>,
    /// First job submitted to last job done.
    pub wall_seconds: Option<f64>,
    /// Loading the parameters (excluded from the wall time).
    pub params_load_seconds: Option<f64>,
    /// Peak resident set of the point's process.
    pub peak_rss_bytes: Option<u64>,
    /// Resident set after the parameters were loaded, before the first job.
    pub baseline_rss_bytes: Option<u64>,
    /// The ledger's peak of total live bytes.
    pub ledger_peak_bytes: Option<u64>,
    /// The ledger's peak of device bytes at one moment (resident bases and partitions' device
    /// buffers, over all devices); absent for backends without device memory and in files
    /// written before it was reported.
    #[serde(default)]
    pub device_peak_bytes: Option<u64>,
    /// With `--replay`: the bytes of the one synthesized partition every partition copies
    /// (the ledger's `replay_source` entry); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_source_bytes: Option<u64>,
    /// With `--synthesis pce`: the bytes of the recorded matrices shared by the synthesis
    /// workers (the ledger's `pce_matrices` entry); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pce_matrices_bytes: Option<u64>,
    /// Jobs whose every partition proof verified.
    pub proofs_verified: u64,
    /// Jobs that failed or did not verify.
    pub proofs_failed: u64,
    /// Partition proofs that verified.
    pub partitions_verified: u64,
    /// `porep-2k`: jobs whose proof filecoin-proofs' `verify_seal` accepted (checked once every
    /// partition verified; a rejection fails the job). Absent for other workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seals_verified: Option<u64>,
    /// Mean fraction of the wall time the accelerator workers were busy.
    pub accelerator_busy_fraction: Option<f64>,
    /// Per device: busy fraction, stage time, partitions, failures (absent in files written
    /// before devices were reported).
    #[serde(default)]
    pub devices: Vec<DevicePoint>,
    /// Partitions the fallback backend ran.
    #[serde(default)]
    pub fallback_partitions: u64,
    /// Partition proofs the engine checked before reporting them (0 under `--no-verify`).
    #[serde(default)]
    pub partitions_checked: u64,
    /// Partition proofs the engine's check rejected.
    #[serde(default)]
    pub partitions_rejected: u64,
    /// Seconds the engine spent checking proofs, summed over partitions (`null` under
    /// `--no-verify`).
    #[serde(default)]
    pub verify_seconds: Option<f64>,
    /// Per stage: peak partitions and peak bytes.
    pub stage_peaks: BTreeMap<String, CountBytes>,
    /// Per buffer kind: peak buffers and peak bytes.
    pub buffer_peaks: BTreeMap<String, CountBytes>,
}

impl PointResult {
    /// A point that produced no measurement.
    pub fn empty(pw: usize, status: PointStatus) -> Self {
        PointResult {
            pw,
            status,
            signal: None,
            error: None,
            seconds_per_proof: None,
            proofs_per_minute: None,
            seconds_per_partition: None,
            wall_seconds: None,
            params_load_seconds: None,
            peak_rss_bytes: None,
            baseline_rss_bytes: None,
            ledger_peak_bytes: None,
            device_peak_bytes: None,
            replay_source_bytes: None,
            pce_matrices_bytes: None,
            proofs_verified: 0,
            proofs_failed: 0,
            partitions_verified: 0,
            seals_verified: None,
            accelerator_busy_fraction: None,
            devices: Vec::new(),
            fallback_partitions: 0,
            partitions_checked: 0,
            partitions_rejected: 0,
            verify_seconds: None,
            stage_peaks: BTreeMap::new(),
            buffer_peaks: BTreeMap::new(),
        }
    }
}

/// One device's figures in a point: the engine's, with the backend's memory and trace figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevicePoint {
    /// The engine's figures (ordinal, name, busy fraction, partitions, failures...).
    #[serde(flatten)]
    pub engine: DeviceStats,
    /// The most bytes the backend had allocated on it at one moment.
    #[serde(default)]
    pub allocated_peak_bytes: Option<u64>,
    /// Bytes the driver reported in use when the backend opened it (CUDA; not OpenCL).
    #[serde(default)]
    pub driver_baseline_bytes: Option<u64>,
    /// The most bytes the driver reported in use, read after each allocation.
    #[serde(default)]
    pub driver_peak_bytes: Option<u64>,
    /// From the device's own timeline (device backends, unless `--no-device-trace`): the
    /// fraction of the trace's window in which a copy or kernel ran on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_busy_fraction: Option<f64>,
    /// From the same timeline: the fraction of its window in which a kernel ran (copies left
    /// out; a copy's span can include host work the driver waits for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_kernel_busy_fraction: Option<f64>,
}

impl DevicePoint {
    /// A device's engine figures with its memory figures (where its backend reports them)
    /// and its busy share of its own timeline (where it was traced).
    pub(crate) fn new(
        d: &prover_core::DeviceStats,
        memory: &[prover_core::DeviceMemory],
        traced: &[prover_core::TraceSummary],
    ) -> Self {
        let m = memory.iter().find(|m| m.device == d.device);
        let t = traced
            .iter()
            .find(|t| t.device == d.device && t.window > 0.0);
        DevicePoint {
            engine: d.clone(),
            allocated_peak_bytes: m.map(|m| m.allocated_peak),
            driver_baseline_bytes: m.and_then(|m| m.driver_baseline),
            driver_peak_bytes: m.and_then(|m| m.driver_peak),
            trace_busy_fraction: t.map(prover_core::TraceSummary::busy_fraction),
            trace_kernel_busy_fraction: t.map(prover_core::TraceSummary::kernel_busy_fraction),
        }
    }

    /// What the driver saw in use at its peak beyond its baseline.
    pub fn driver_above_baseline(&self) -> Option<u64> {
        Some(
            self.driver_peak_bytes?
                .saturating_sub(self.driver_baseline_bytes?),
        )
    }
}

#[cfg(test)]
impl DevicePoint {
    /// A device that completed one partition, with these busy shares and no memory figures
    /// (for tests).
    pub(crate) fn with_shares(device: usize, name: &str, busy: f64, trace: Option<f64>) -> Self {
        DevicePoint {
            engine: DeviceStats {
                device,
                name: name.into(),
                workers: 1,
                busy_fraction: busy,
                accelerator_seconds: 1.0,
                partitions: 1,
                failures: 0,
                rejected: 0,
                retried: 0,
                in_service: true,
            },
            allocated_peak_bytes: None,
            driver_baseline_bytes: None,
            driver_peak_bytes: None,
            trace_busy_fraction: trace,
            trace_kernel_busy_fraction: None,
        }
    }
}

/// Peak count and bytes by name.
pub(crate) fn peaks<'a>(
    usages: impl Iterator<Item = (&'a str, prover_core::accounting::ledger::Usage)>,
) -> BTreeMap<String, CountBytes> {
    usages
        .map(|(name, u)| {
            (
                name.to_string(),
                CountBytes {
                    count: u.count.peak,
                    bytes: u.bytes.peak,
                },
            )
        })
        .collect()
}
