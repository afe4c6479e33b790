//! `results.json` and `results.csv`: the sweep's figures, its recommendation, and the summary
//! table.

use std::fmt::Write as _;
use std::path::PathBuf;

use prover_core::units::human_bytes;
use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::report::model::{DevicePoint, PointResult, PointStatus};

/// The `schema` value of `results.json`.
pub const SCHEMA: &str = "proofline.sweep.v1";

/// The machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Host {
    /// Logical CPUs.
    pub cpus: usize,
    /// Total RAM, bytes.
    pub ram_bytes: u64,
    /// GPUs used or seen (empty on the CPU backend).
    pub gpus: Vec<String>,
}

impl Host {
    /// This machine.
    pub fn detect() -> Self {
        Host {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes: proofline_records::provenance::memory_bytes().unwrap_or(0),
            gpus: Vec::new(),
        }
    }
}

/// The resolved options of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepConfig {
    /// The run options.
    #[serde(flatten)]
    pub run: RunConfig,
    /// The worker counts, in order.
    pub pw: Vec<usize>,
    /// `--ram-limit`, bytes.
    pub ram_limit: Option<u64>,
    /// `--out`.
    pub out: PathBuf,
}

/// The recommended worker count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The worker count, if any point qualifies.
    pub pw: Option<usize>,
    /// Why.
    pub reason: String,
    /// What bounds the recommended point, with the setting to try next
    /// ([`super::bottleneck::bottleneck`]); absent without the figures to tell, and in files
    /// written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<String>,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResults {
    /// [`SCHEMA`].
    pub schema: String,
    /// The harness's git revision.
    pub git_rev: String,
    /// The machine.
    pub host: Host,
    /// UTC start time, RFC 3339.
    pub started_at: String,
    /// The options.
    pub config: SweepConfig,
    /// One per worker count.
    pub points: Vec<PointResult>,
    /// The recommendation.
    pub recommendation: Recommendation,
}

/// Throughputs within this fraction of the best count as equal: single runs on a shared machine
/// vary by about that much (docs/sweep.md).
pub const THROUGHPUT_TIE: f64 = 0.05;

/// The best throughput among the `ok` points whose peak RSS fits `ram_limit`; points within
/// [`THROUGHPUT_TIE`] of the best count as equal, and the one with the lowest peak RSS wins
/// among them (more workers that buy no throughput only cost memory).
pub fn recommend(points: &[PointResult], ram_limit: Option<u64>) -> Recommendation {
    let ok: Vec<&PointResult> = points
        .iter()
        .filter(|p| p.status == PointStatus::Ok)
        .collect();
    if ok.is_empty() {
        return Recommendation {
            pw: None,
            reason: "no point completed with every proof verified".into(),
            bottleneck: None,
        };
    }
    let fits: Vec<&PointResult> = ok
        .into_iter()
        .filter(|p| match (ram_limit, p.peak_rss_bytes) {
            (Some(limit), Some(rss)) => rss <= limit,
            (Some(_), None) => false,
            (None, _) => true,
        })
        .collect();
    let tp = |p: &PointResult| p.proofs_per_minute.unwrap_or(0.0);
    let Some(best_tp) = fits.iter().map(|p| tp(p)).max_by(f64::total_cmp) else {
        return Recommendation {
            pw: None,
            reason: format!(
                "no completed point fits --ram-limit {}",
                human_bytes(ram_limit.unwrap_or(0))
            ),
            bottleneck: None,
        };
    };
    let chosen = fits
        .iter()
        .filter(|p| tp(p) >= best_tp * (1.0 - THROUGHPUT_TIE))
        .min_by_key(|p| (p.peak_rss_bytes.unwrap_or(u64::MAX), p.pw))
        .expect("the best point is within the tie");
    let limit = match ram_limit {
        Some(l) => format!("peak RSS within --ram-limit {}", human_bytes(l)),
        None => "no --ram-limit given".into(),
    };
    Recommendation {
        pw: Some(chosen.pw),
        reason: format!(
            "{:.2} proofs/min, peak RSS {}: the lowest peak RSS among the points within {:.0}% of the best throughput ({:.2} proofs/min); {limit}",
            tp(chosen),
            chosen.peak_rss_bytes.map_or("-".into(), human_bytes),
            THROUGHPUT_TIE * 100.0,
            best_tp
        ),
        bottleneck: None,
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// `results.csv`: one row per point, units in the header names.
pub fn points_csv(points: &[PointResult]) -> String {
    let mut s = String::from(
        "pw,status,signal,seconds_per_proof (s),proofs_per_minute (1/min),seconds_per_partition (s),\
         wall_seconds (s),params_load_seconds (s),peak_rss_bytes (B),baseline_rss_bytes (B),\
         ledger_peak_bytes (B),proofs_verified (jobs),proofs_failed (jobs),partitions_verified,\
         accelerator_busy_fraction,device_busy_fractions,fallback_partitions,\
         device_peak_bytes (B),driver_device_bytes (B),device_trace_busy_fractions\n",
    );
    for p in points {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            p.pw,
            p.status.name(),
            opt(p.signal),
            opt(p.seconds_per_proof),
            opt(p.proofs_per_minute),
            opt(p.seconds_per_partition),
            opt(p.wall_seconds),
            opt(p.params_load_seconds),
            opt(p.peak_rss_bytes),
            opt(p.baseline_rss_bytes),
            opt(p.ledger_peak_bytes),
            p.proofs_verified,
            p.proofs_failed,
            p.partitions_verified,
            opt(p.accelerator_busy_fraction),
            per_device(p, ";", workers_busy),
            p.fallback_partitions,
            opt(p.device_peak_bytes),
            opt(driver_device_bytes(p)),
            per_device(p, ";", trace_busy),
        );
    }
    s
}

/// One figure per device, in device order, joined by `sep` (`-` when no device was reported).
fn per_device(p: &PointResult, sep: &str, figure: impl Fn(&DevicePoint) -> String) -> String {
    if p.devices.is_empty() {
        return "-".into();
    }
    p.devices.iter().map(figure).collect::<Vec<_>>().join(sep)
}

/// A device's workers' share of the wall time in the accelerator stage.
fn workers_busy(d: &DevicePoint) -> String {
    format!("{:.2}", d.engine.busy_fraction)
}

/// A device's busy share of its own timeline (`-` untraced).
fn trace_busy(d: &DevicePoint) -> String {
    d.trace_busy_fraction
        .map_or("-".into(), |t| format!("{t:.2}"))
}

/// A device's busy share as the table shows it: a traced device's own timeline; the CPU
/// backend's device, which has no queues, its workers' share; `-` for a device backend's device
/// run untraced (`--no-device-trace`). Its workers' share counts their host work too: it read
/// 0.97 while the device itself was 41% busy on the H200 (`docs/design-decisions.md#multiple-gpus`).
fn device_busy_shown(d: &DevicePoint) -> String {
    if d.trace_busy_fraction.is_none() && d.engine.name.starts_with("cpu") {
        workers_busy(d)
    } else {
        trace_busy(d)
    }
}

/// The driver's figure above its baseline, summed over devices (`None` unless every device
/// reported one).
fn driver_device_bytes(p: &PointResult) -> Option<u64> {
    if p.devices.is_empty() {
        return None;
    }
    p.devices
        .iter()
        .map(|d| d.driver_above_baseline())
        .sum::<Option<u64>>()
}

/// How much `measured` (the process's or the driver's figure) exceeds what the ledger counted,
/// as a signed percentage of the ledger's (`-` without both).
fn percent_over(measured: Option<u64>, ledger: Option<u64>) -> String {
    match (measured, ledger) {
        (Some(m), Some(l)) if l > 0 => format!("{:+.0}%", 100.0 * (m as f64 - l as f64) / l as f64),
        _ => "-".into(),
    }
}

/// The summary table printed at the end of a sweep.
pub fn table(points: &[PointResult]) -> String {
    let mut s = format!(
        "{:>4} {:>8} {:>9} {:>10} {:>8} {:>10} {:>11} {:>11} {:>7} {:>8} {:>5} {:>11} {:>10} {:>10} {:>8}\n",
        "pw",
        "status",
        "s/proof",
        "proofs/min",
        "s/part",
        "peak RSS",
        "RSS-base",
        "ledger pk",
        "diff",
        "verified",
        "busy",
        "device busy",
        "dev peak",
        "dev driver",
        "dev diff"
    );
    for p in points {
        let rss_delta = match (p.peak_rss_bytes, p.baseline_rss_bytes) {
            (Some(a), Some(b)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        let diff = percent_over(rss_delta, p.ledger_peak_bytes);
        let f = |v: Option<f64>, prec: usize| v.map_or("-".into(), |x| format!("{x:.prec$}"));
        let b = |v: Option<u64>| v.map_or("-".into(), human_bytes);
        let status = match p.signal {
            Some(sig) => format!("{}:{sig}", p.status.name()),
            None => p.status.name().to_string(),
        };
        let _ = writeln!(
            s,
            "{:>4} {:>8} {:>9} {:>10} {:>8} {:>10} {:>11} {:>11} {:>7} {:>8} {:>5} {:>11} {:>10} {:>10} {:>8}",
            p.pw,
            status,
            f(p.seconds_per_proof, 2),
            f(p.proofs_per_minute, 2),
            f(p.seconds_per_partition, 3),
            b(p.peak_rss_bytes),
            b(rss_delta),
            b(p.ledger_peak_bytes),
            diff,
            format!(
                "{}/{}",
                p.proofs_verified,
                p.proofs_verified + p.proofs_failed
            ),
            f(p.accelerator_busy_fraction, 2),
            per_device(p, "/", device_busy_shown),
            b(p.device_peak_bytes),
            b(driver_device_bytes(p)),
            percent_over(driver_device_bytes(p), p.device_peak_bytes),
        );
        // A point that did not succeed says why, under its row.
        if p.status != PointStatus::Ok {
            let _ = writeln!(
                s,
                "     pw {} {}: {}",
                p.pw,
                status,
                p.error.as_deref().unwrap_or("no reason was recorded")
            );
        }
    }
    s
}

/// The title of a sweep's report.
pub fn report_title(run: &RunConfig) -> String {
    format!(
        "{} 2^{} x {} partitions x {} jobs, {} backend, release {}{}{}",
        run.circuit.name(),
        run.log2_constraints,
        run.partitions,
        run.jobs,
        run.backend.name(),
        run.release.name(),
        if run.replay { REPLAY_NOTE } else { "" },
        synthesis_note(run)
    )
}

/// What a title says about the synthesis mode: nothing for the default, `, synthesis pce` for
/// pre-compiled synthesis (the replay workload synthesizes once, so it says nothing there).
pub fn synthesis_note(run: &RunConfig) -> &'static str {
    match run.synthesis {
        crate::config::SynthesisMode::Pce if !run.replay => ", synthesis pce",
        _ => "",
    }
}

/// What a replay run's title says (the figures are the accelerator's, not a prover's).
pub const REPLAY_NOTE: &str =
    ", replay (one partition synthesized once, copies proved: a timing workload)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::DevicePoint;

    fn point(pw: usize, ppm: f64, rss: u64, status: &str) -> PointResult {
        let status = match status {
            "ok" => PointStatus::Ok,
            "killed" => PointStatus::Killed,
            _ => PointStatus::Failed,
        };
        let mut p = PointResult::empty(pw, status);
        p.proofs_per_minute = Some(ppm);
        p.peak_rss_bytes = Some(rss);
        p
    }

    #[test]
    fn recommendation_respects_the_ram_limit() {
        let pts = vec![
            point(1, 1.0, 10, "ok"),
            point(2, 3.0, 30, "ok"),
            point(3, 9.0, 90, "killed"),
        ];
        assert_eq!(recommend(&pts, None).pw, Some(2));
        assert_eq!(recommend(&pts, Some(20)).pw, Some(1));
        assert_eq!(recommend(&pts, Some(5)).pw, None);
        assert_eq!(recommend(&[], None).pw, None);
        // Within the tie, less memory wins; outside it, throughput does.
        let flat = vec![
            point(4, 5.00, 40, "ok"),
            point(5, 5.05, 50, "ok"),
            point(6, 6.0, 60, "ok"),
        ];
        assert_eq!(recommend(&flat[..2], None).pw, Some(4));
        assert_eq!(recommend(&flat, None).pw, Some(6));
    }

    #[test]
    fn the_table_shows_device_memory_beside_the_driver_and_their_gap() {
        let mut p = point(2, 3.0, 30, "ok");
        p.device_peak_bytes = Some(1000 << 20);
        let device = |baseline, peak| DevicePoint {
            allocated_peak_bytes: Some(1000 << 20),
            driver_baseline_bytes: baseline,
            driver_peak_bytes: peak,
            ..DevicePoint::with_shares(0, "cuda:0", 0.5, None)
        };
        p.devices = vec![device(Some(500 << 20), Some(1530 << 20))];
        let t = table(&[p.clone()]);
        let row = t.lines().nth(1).unwrap();
        assert!(row.ends_with("1000.0 MiB    1.0 GiB      +3%"), "{row}");
        // A device whose driver cannot tell (OpenCL): no driver figure, no gap.
        p.devices = vec![device(None, None)];
        let t = table(&[p]);
        assert!(
            t.lines()
                .nth(1)
                .unwrap()
                .ends_with("1000.0 MiB          -        -"),
            "{t}"
        );
    }

    #[test]
    fn the_device_busy_cell_is_the_devices_own_share_never_its_workers_on_a_gpu() {
        let device = |name: &str, trace| DevicePoint::with_shares(0, name, 0.97, trace);
        assert_eq!(device_busy_shown(&device("cuda:0", Some(0.41))), "0.41");
        // Untimed, a GPU's workers' share is not shown as the device's.
        assert_eq!(device_busy_shown(&device("cuda:0", None)), "-");
        // The CPU backend's device is its workers.
        assert_eq!(device_busy_shown(&device("cpu:0", None)), "0.97");
        let mut p = point(2, 3.0, 30, "ok");
        p.devices = vec![device("cuda:0", Some(0.41)), device("cuda:1", None)];
        assert!(
            table(&[p.clone()]).contains(" 0.41/- "),
            "{}",
            table(&[p.clone()])
        );
        let csv = points_csv(&[p]);
        let row = csv.lines().nth(1).unwrap();
        assert!(
            row.contains(",0.97;0.97,") && row.ends_with(",0.41;-"),
            "{row}"
        );
    }
}
