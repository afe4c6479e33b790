//! The sweep's outputs: `results.json`, `results.csv`, `timeline-pw<N>.csv`, `report.svg`, and
//! the summary table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use prover_core::ledger::{human_bytes, Stage};
use prover_core::sampler::Sample;
use serde::Serialize;

use crate::config::RunConfig;
use crate::point::{PointResult, PointStatus};

/// The `schema` value of `results.json`.
pub const SCHEMA: &str = "proofline.sweep.v1";

/// The machine.
#[derive(Debug, Clone, Serialize)]
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
        let ram_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|k| k.parse::<u64>().ok())
            })
            .map_or(0, |k| k * 1024);
        Host {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes,
            gpus: Vec::new(),
        }
    }
}

/// The resolved options of a sweep.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// The worker count, if any point qualifies.
    pub pw: Option<usize>,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SweepResults {
    /// [`SCHEMA`].
    pub schema: &'static str,
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
         accelerator_busy_fraction,device_busy_fractions,fallback_partitions\n",
    );
    for p in points {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
            device_busy(p, ";"),
            p.fallback_partitions,
        );
    }
    s
}

/// Per-device busy fractions, in device order, joined by `sep` (`-` when none was reported).
fn device_busy(p: &PointResult, sep: &str) -> String {
    if p.devices.is_empty() {
        return "-".into();
    }
    p.devices
        .iter()
        .map(|d| format!("{:.2}", d.busy_fraction))
        .collect::<Vec<_>>()
        .join(sep)
}

/// `timeline-pw<N>.csv`.
pub fn timeline_csv(samples: &[Sample]) -> String {
    let mut s = String::from("t_seconds,rss_bytes");
    for st in Stage::ALL {
        let _ = write!(s, ",{0}_count,{0}_bytes", st.name());
    }
    s.push('\n');
    for x in samples {
        let _ = write!(s, "{:.4},{}", x.t_seconds, x.rss_bytes);
        for (c, b) in x.stages {
            let _ = write!(s, ",{c},{b}");
        }
        s.push('\n');
    }
    s
}

/// Reads a timeline written by [`timeline_csv`], by header name: a stage whose columns are
/// missing (a timeline written before that stage existed) reads as zero.
pub fn parse_timeline_csv(text: &str) -> Result<Vec<Sample>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or("timeline is empty")?
        .split(',')
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let need = |name: &str| col(name).ok_or(format!("timeline has no column {name}"));
    let (t, rss) = (need("t_seconds")?, need("rss_bytes")?);
    let stage_cols: Vec<(Option<usize>, Option<usize>)> = Stage::ALL
        .iter()
        .map(|s| {
            (
                col(&format!("{}_count", s.name())),
                col(&format!("{}_bytes", s.name())),
            )
        })
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != header.len() {
                return Err(format!(
                    "timeline row has {} fields, the header {}: {l}",
                    f.len(),
                    header.len()
                ));
            }
            let n = |i: Option<usize>| {
                i.map_or(Ok(0), |i| {
                    f[i].parse::<u64>().map_err(|e| format!("{l}: {e}"))
                })
            };
            let mut stages = [(0, 0); 6];
            for (slot, (c, b)) in stages.iter_mut().zip(&stage_cols) {
                *slot = (n(*c)?, n(*b)?);
            }
            Ok(Sample {
                t_seconds: f[t].parse().map_err(|e| format!("{l}: {e}"))?,
                rss_bytes: n(Some(rss))?,
                stages,
            })
        })
        .collect()
}

/// The summary table printed at the end of a sweep.
pub fn table(points: &[PointResult]) -> String {
    let mut s = format!(
        "{:>4} {:>8} {:>9} {:>10} {:>8} {:>10} {:>11} {:>11} {:>7} {:>8} {:>5} {:>11}\n",
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
        "device busy"
    );
    for p in points {
        let rss_delta = match (p.peak_rss_bytes, p.baseline_rss_bytes) {
            (Some(a), Some(b)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        let diff = match (rss_delta, p.ledger_peak_bytes) {
            (Some(d), Some(l)) if l > 0 => {
                format!("{:+.0}%", 100.0 * (d as f64 - l as f64) / l as f64)
            }
            _ => "-".into(),
        };
        let f = |v: Option<f64>, prec: usize| v.map_or("-".into(), |x| format!("{x:.prec$}"));
        let b = |v: Option<u64>| v.map_or("-".into(), human_bytes);
        let status = match p.signal {
            Some(sig) => format!("{}:{sig}", p.status.name()),
            None => p.status.name().to_string(),
        };
        let _ = writeln!(
            s,
            "{:>4} {:>8} {:>9} {:>10} {:>8} {:>10} {:>11} {:>11} {:>7} {:>8} {:>5} {:>11}",
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
            device_busy(p, "/"),
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

/// The unit that keeps the largest value readable: (divisor, name).
fn byte_unit(max_bytes: u64) -> (f64, &'static str) {
    if max_bytes >= 1 << 30 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    }
}

/// A series drawn as steps: each value holds until the next change. Samples that repeat the
/// previous value add nothing and are left out (a timeline has thousands of them).
fn steps(points: impl Iterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut last_x = None;
    for (x, y) in points {
        last_x = Some(x);
        match out.last() {
            Some(&(_, prev)) if prev == y => {}
            Some(&(_, prev)) => {
                out.push((x, prev));
                out.push((x, y));
            }
            None => out.push((x, y)),
        }
    }
    // Hold the last value to the end of the run.
    if let (Some(x), Some(&(px, y))) = (last_x, out.last()) {
        if x > px {
            out.push((x, y));
        }
    }
    out
}

/// The title of a sweep's report.
pub fn report_title(run: &RunConfig) -> String {
    title(
        run.circuit.name(),
        &run.log2_constraints.to_string(),
        run.partitions,
        run.jobs,
        run.backend.name(),
        run.release.name(),
    )
}

fn title(
    circuit: &str,
    log2: &str,
    partitions: impl std::fmt::Display,
    jobs: impl std::fmt::Display,
    backend: &str,
    release: &str,
) -> String {
    format!("{circuit} 2^{log2} x {partitions} partitions x {jobs} jobs, {backend} backend, release {release}")
}

/// Draws `report.svg` again from a sweep folder's `results.json` and timelines.
pub fn redraw(out: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(out.join("results.json"))
        .map_err(|e| format!("reading {}: {e}", out.join("results.json").display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if v["schema"] != SCHEMA {
        return Err(format!("{}: not a {SCHEMA} document", out.display()));
    }
    let points: Vec<PointResult> =
        serde_json::from_value(v["points"].clone()).map_err(|e| e.to_string())?;
    let c = &v["config"];
    let title = title(
        c["circuit"].as_str().unwrap_or("?"),
        &c["log2_constraints"].to_string(),
        &c["partitions"],
        &c["jobs"],
        c["backend"].as_str().unwrap_or("?"),
        c["release"].as_str().unwrap_or("?"),
    );
    let timelines = read_timelines(out, &points);
    let path = out.join("report.svg");
    write_svg(&path, &points, &timelines, &title)?;
    Ok(path)
}

/// The timelines of the points that have one.
pub fn read_timelines(out: &Path, points: &[PointResult]) -> Vec<(usize, Vec<Sample>)> {
    points
        .iter()
        .filter_map(|p| {
            let text =
                std::fs::read_to_string(out.join(format!("timeline-pw{}.csv", p.pw))).ok()?;
            parse_timeline_csv(&text).ok().map(|t| (p.pw, t))
        })
        .collect()
}

/// `report.svg`: throughput and peak RSS against pw; buffers in flight per stage over time, one
/// panel per point. Text is laid out without fonts, so the binary needs none.
pub fn write_svg(
    path: &Path,
    points: &[PointResult],
    timelines: &[(usize, Vec<Sample>)],
    title: &str,
) -> Result<(), String> {
    let cols = 2usize;
    let rows = timelines.len().div_ceil(cols);
    let (w, top_h, row_h) = (1200u32, 420u32, 300u32);
    let root = SVGBackend::new(path, (w, top_h + row_h * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (top, bottom) = root.split_vertically(top_h);
    draw_throughput(&top, points, title).map_err(|e| e.to_string())?;
    if rows > 0 {
        let panels = bottom.split_evenly((rows, cols));
        for (panel, (pw, samples)) in panels.iter().zip(timelines) {
            draw_timeline(panel, *pw, samples).map_err(|e| e.to_string())?;
        }
    }
    root.present().map_err(|e| e.to_string())
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

fn draw_throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    points: &[PointResult],
    title: &str,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let ok: Vec<&PointResult> = points
        .iter()
        .filter(|p| p.proofs_per_minute.is_some())
        .collect();
    let pw_min = points.iter().map(|p| p.pw).min().unwrap_or(1) as f64;
    let pw_max = points.iter().map(|p| p.pw).max().unwrap_or(1) as f64;
    let (x0, x1) = if pw_min == pw_max {
        (pw_min - 1.0, pw_max + 1.0)
    } else {
        (pw_min - 0.5, pw_max + 0.5)
    };
    let tp_max = ok
        .iter()
        .filter_map(|p| p.proofs_per_minute)
        .fold(0.0, f64::max)
        * 1.15
        + 1e-9;
    let (unit, unit_name) = byte_unit(
        points
            .iter()
            .filter_map(|p| p.peak_rss_bytes)
            .max()
            .unwrap_or(0),
    );
    let rss_max = points
        .iter()
        .filter_map(|p| p.peak_rss_bytes)
        .map(|b| b as f64 / unit)
        .fold(0.0, f64::max)
        * 1.15
        + 1e-9;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..tp_max)?
        .set_secondary_coord(x0..x1, 0.0..rss_max);
    chart
        .configure_mesh()
        .x_desc("pw (synthesis workers)")
        .y_desc("proofs per minute")
        .x_labels(points.len().clamp(2, 20))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc(format!("peak RSS ({unit_name})"))
        .draw()?;
    let tp: Vec<(f64, f64)> = ok
        .iter()
        .map(|p| (p.pw as f64, p.proofs_per_minute.unwrap_or(0.0)))
        .collect();
    chart
        .draw_series(LineSeries::new(tp.clone(), BLUE.stroke_width(2)))?
        .label("proofs per minute")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
    chart.draw_series(
        tp.iter()
            .map(|&(x, y)| Circle::new((x, y), 4, BLUE.filled())),
    )?;
    let rss: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.peak_rss_bytes.map(|b| (p.pw as f64, b as f64 / unit)))
        .collect();
    chart
        .draw_secondary_series(LineSeries::new(rss.clone(), RED.stroke_width(2)))?
        .label(format!("peak RSS ({unit_name})"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));
    chart.draw_secondary_series(
        rss.iter()
            .map(|&(x, y)| TriangleMarker::new((x, y), 5, RED.filled())),
    )?;
    // Points that did not complete are marked on the axis.
    let failed: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.status != PointStatus::Ok)
        .map(|p| (p.pw as f64, 0.0))
        .collect();
    chart.draw_series(
        failed
            .iter()
            .map(|&(x, y)| Cross::new((x, y), 6, BLACK.stroke_width(2))),
    )?;
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

const STAGE_COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(140, 86, 75),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
];

fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    pw: usize,
    samples: &[Sample],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let t_max = samples.last().map_or(1.0, |s| s.t_seconds).max(1e-3);
    let c_max = samples
        .iter()
        .flat_map(|s| s.stages.iter().map(|x| x.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("pw = {pw}: partitions per stage"),
            ("sans-serif", 16),
        )
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(40)
        .build_cartesian_2d(0.0..t_max, 0.0..c_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("partitions")
        .draw()?;
    for (i, st) in Stage::ALL.iter().enumerate() {
        let color = STAGE_COLORS[i];
        chart
            .draw_series(LineSeries::new(
                steps(samples.iter().map(|s| (s.t_seconds, s.stages[i].0 as f64))),
                color.stroke_width(2),
            ))?
            .label(st.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 11))
        .draw()?;
    Ok(())
}

/// UTC time as RFC 3339 (`2026-11-30T06:12:59Z`), and a folder-friendly stamp
/// (`20261130-061259`).
pub fn utc_now() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z"),
        format!("{y:04}{mo:02}{d:02}-{h:02}{m:02}{s:02}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn timeline_csv_round_trips() {
        let s = vec![Sample {
            t_seconds: 0.5,
            rss_bytes: 1 << 20,
            stages: [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)],
        }];
        let text = timeline_csv(&s);
        assert!(text.starts_with("t_seconds,rss_bytes,synthesizing_count,synthesizing_bytes,"));
        assert_eq!(parse_timeline_csv(&text).unwrap(), s);
        assert!(parse_timeline_csv("h\n1,2,3\n").is_err());
        // Read by header: columns in another order, and a timeline from before the fallback
        // stage existed (its columns read as zero).
        let old = "rss_bytes,t_seconds,synthesizing_count,synthesizing_bytes\n7,0.25,1,2\n";
        let got = parse_timeline_csv(old).unwrap();
        assert_eq!(got[0].rss_bytes, 7);
        assert_eq!(got[0].t_seconds, 0.25);
        assert_eq!(got[0].stages[0], (1, 2));
        assert_eq!(got[0].stages[3], (0, 0));
        // Twin: a row shorter than its header is an error.
        assert!(parse_timeline_csv("t_seconds,rss_bytes\n0.1\n").is_err());
    }

    #[test]
    fn utc_stamp_has_the_right_shape() {
        let (rfc, stamp) = utc_now();
        assert_eq!(rfc.len(), 20);
        assert!(rfc.ends_with('Z') && rfc.as_bytes()[10] == b'T');
        assert_eq!(stamp.len(), 15);
        assert!(rfc.starts_with("20"));
    }
}
