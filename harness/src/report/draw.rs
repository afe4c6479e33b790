//! `report.svg`: throughput and peak RSS against pw, partitions per stage over time. Drawn
//! without fonts (plotters' SVG backend), so the binary needs none.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use prover_core::accounting::ledger::Stage;
use prover_core::files::InputKind;
use prover_core::runtime::sampler::Sample;

use super::{read_timelines, report_title, SweepResults, SCHEMA};
use crate::report::model::{PointResult, PointStatus};

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

/// Draws `report.svg` again from a sweep folder's `results.json` (read through its types) and
/// timelines.
pub fn redraw(out: &Path) -> Result<PathBuf, String> {
    let file = out.join("results.json");
    let text = prover_core::files::read_input_text(&file, InputKind::Document)
        .map_err(|e| e.to_string())?;
    let results: SweepResults =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if results.schema != SCHEMA {
        return Err(format!("{}: not a {SCHEMA} document", file.display()));
    }
    let timelines = read_timelines(out, &results.points);
    let path = out.join("report.svg");
    write_svg(
        &path,
        &results.points,
        &timelines,
        &report_title(&results.config.run),
    )?;
    Ok(path)
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
    // Drawn in memory, then written through a temporary file: never half a report.
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (w, top_h + row_h * rows as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(top_h);
        draw_throughput(&top, points, title).map_err(|e| e.to_string())?;
        if rows > 0 {
            let panels = bottom.split_evenly((rows, cols));
            for (panel, (pw, samples)) in panels.iter().zip(timelines) {
                draw_timeline(panel, *pw, samples).map_err(|e| e.to_string())?;
            }
        }
        root.present().map_err(|e| e.to_string())?;
    }
    crate::outputs::write_file(path, svg.as_bytes())
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
