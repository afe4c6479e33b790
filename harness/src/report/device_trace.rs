//! `--device-trace`: the devices' own timeline (every copy and kernel, timed by the device) as a
//! CSV, a summary (busy and idle time from the device's clock, per kind and per step), and an
//! SVG of lanes (one per device worker): the whole run, and one partition drawn at full width
//! so that each kernel and each gap between kernels shows.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prover_core::accounting::trace::summarize;
use prover_core::{DeviceSpan, SpanKind};

/// The CSV: one row per span, times in seconds from the device's trace epoch.
pub fn trace_csv(spans: &[DeviceSpan]) -> String {
    let mut out = String::from("device,worker,partition,step,kind,name,bytes,start_s,end_s\n");
    for s in spans {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{:.9},{:.9}",
            s.device, s.worker, s.partition, s.step, s.kind, s.name, s.bytes, s.start, s.end
        );
    }
    out
}

/// The summary, one device per paragraph: the window from the first span to the last, busy
/// time (copies and kernels, overlaps once) and its fraction beside the kernels' own, idle time
/// and the longest gap, seconds per kind and per step.
pub fn trace_summary(spans: &[DeviceSpan]) -> Vec<String> {
    let mut lines = Vec::new();
    for d in summarize(spans) {
        lines.push(format!(
            "device {} trace: {} partitions in {:.3} s; busy {:.3} s ({:.1}%; kernels alone {:.3} s, {:.1}%), idle {:.3} s, longest gap {:.3} ms",
            d.device,
            d.partitions,
            d.window,
            d.busy,
            100.0 * d.busy_fraction(),
            d.kernel_busy,
            100.0 * d.kernel_busy_fraction(),
            d.idle(),
            1e3 * d.longest_gap
        ));
        lines.push(format!(
            "  per partition: median window {:.3} ms on the device, its own work busy {:.1}% of its window (kernels alone {:.1}%)",
            1e3 * d.median_partition_window(),
            100.0 * d.partition_busy_fraction(),
            100.0 * d.partition_kernel_busy_fraction()
        ));
        let kinds: Vec<String> = d
            .by_kind
            .iter()
            .map(|(k, s)| format!("{k} {s:.3} s"))
            .collect();
        lines.push(format!("  by kind: {}", kinds.join(", ")));
        let steps: Vec<String> = d
            .by_step
            .iter()
            .map(|(k, s)| {
                let name = if k.is_empty() { "(no step)" } else { k };
                format!("{name} {s:.3} s")
            })
            .collect();
        lines.push(format!("  by step: {}", steps.join(", ")));
    }
    lines
}

/// The partition drawn at full width: the second traced one when there are at least two (the
/// first pays one-time costs: kernel loads, allocator pools), else the first.
pub fn zoom_partition(spans: &[DeviceSpan]) -> Option<u64> {
    let mut numbers: Vec<u64> = spans.iter().map(|s| s.partition).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers.get(1).or(numbers.first()).copied()
}

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

fn color_of(steps: &BTreeMap<&str, usize>, s: &DeviceSpan) -> &'static str {
    PALETTE[steps.get(s.step.as_str()).copied().unwrap_or(0) % PALETTE.len()]
}

/// Draws one panel of lanes (`lanes`: (device, worker)) over `[t0, t1]` at `y`; returns the
/// panel's height.
#[allow(clippy::too_many_arguments)]
fn panel(
    svg: &mut String,
    spans: &[&DeviceSpan],
    lanes: &[(usize, usize)],
    steps: &BTreeMap<&str, usize>,
    (t0, t1): (f64, f64),
    y: f64,
    width: f64,
    title: &str,
) -> f64 {
    let (left, lane_h, gap) = (120.0, 26.0, 6.0);
    let plot_w = width - left - 20.0;
    let x = |t: f64| left + (t - t0) / (t1 - t0).max(1e-12) * plot_w;
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="{:.1}" font-size="14" font-family="sans-serif">{}</text>"#,
        y + 14.0,
        escape(title)
    );
    let top = y + 24.0;
    for (i, lane) in lanes.iter().enumerate() {
        let ly = top + i as f64 * (lane_h + gap);
        let _ = writeln!(
            svg,
            r##"<text x="4" y="{:.1}" font-size="12" font-family="sans-serif">device {} worker {}</text><rect x="{left}" y="{ly:.1}" width="{plot_w:.1}" height="{lane_h}" fill="#f4f4f4"/>"##,
            ly + lane_h * 0.65,
            lane.0,
            lane.1
        );
        for s in spans.iter().filter(|s| (s.device, s.worker) == *lane) {
            let (a, b) = (x(s.start.max(t0)), x(s.end.min(t1)));
            // Copies in the lane's upper half (those beside the kernels too, so an overlap
            // shows as a copy above a kernel), kernels in the lower; each span at least a
            // hairline wide so that short kernels show.
            let (sy, sh) = match s.kind {
                SpanKind::Kernel => (ly + lane_h * 0.35, lane_h * 0.65),
                _ => (ly, lane_h * 0.35),
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{a:.2}" y="{sy:.1}" width="{:.2}" height="{sh:.1}" fill="{}"><title>partition {} {} {} {} ({:.3} ms)</title></rect>"#,
                (b - a).max(0.3),
                color_of(steps, s),
                s.partition,
                escape(&s.step),
                s.kind,
                escape(&s.name),
                1e3 * s.seconds()
            );
        }
    }
    let axis_y = top + lanes.len() as f64 * (lane_h + gap) + 4.0;
    for k in 0..=4 {
        let t = t0 + (t1 - t0) * k as f64 / 4.0;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" font-family="sans-serif" text-anchor="middle">{}</text>"#,
            x(t),
            axis_y + 12.0,
            time_label(t - t0, t1 - t0)
        );
    }
    axis_y + 20.0 - y
}

fn time_label(t: f64, range: f64) -> String {
    if range < 1.0 {
        format!("{:.1} ms", 1e3 * t)
    } else {
        format!("{t:.2} s")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The SVG: the whole run's lanes, then the zoomed partition's, then the legend (colour per
/// step; copies in each lane's upper band, kernels in its lower band; blank is idle).
pub fn trace_svg(spans: &[DeviceSpan], title: &str) -> String {
    let width = 1400.0;
    let mut lanes: Vec<(usize, usize)> = spans.iter().map(|s| (s.device, s.worker)).collect();
    lanes.sort_unstable();
    lanes.dedup();
    let mut steps: BTreeMap<&str, usize> = BTreeMap::new();
    for s in spans {
        let n = steps.len();
        steps.entry(s.step.as_str()).or_insert(n);
    }
    let all: Vec<&DeviceSpan> = spans.iter().collect();
    let bounds = |v: &[&DeviceSpan]| {
        let t0 = v.iter().map(|s| s.start).fold(f64::INFINITY, f64::min);
        let t1 = v.iter().map(|s| s.end).fold(f64::NEG_INFINITY, f64::max);
        (t0, t1)
    };
    let mut body = String::new();
    let mut y = 10.0;
    if !all.is_empty() {
        let b = bounds(&all);
        y += panel(
            &mut body,
            &all,
            &lanes,
            &steps,
            b,
            y,
            width,
            &format!("{title}: the whole run"),
        );
    }
    if let Some(p) = zoom_partition(spans) {
        let one: Vec<&DeviceSpan> = spans.iter().filter(|s| s.partition == p).collect();
        let b = bounds(&one);
        // Every lane's spans inside the partition's window (another worker's overlap shows).
        let window: Vec<&DeviceSpan> = spans
            .iter()
            .filter(|s| s.end >= b.0 && s.start <= b.1)
            .collect();
        y += 10.0
            + panel(
                &mut body,
                &window,
                &lanes,
                &steps,
                b,
                y + 10.0,
                width,
                &format!("partition {p}, every kernel and copy"),
            );
    }
    let mut legend_x = 120.0;
    y += 10.0;
    for (step, i) in &steps {
        let name = if step.is_empty() { "(no step)" } else { step };
        let _ = writeln!(
            body,
            r#"<rect x="{legend_x:.1}" y="{y:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="12" font-family="sans-serif">{}</text>"#,
            PALETTE[i % PALETTE.len()],
            legend_x + 16.0,
            y + 10.5,
            escape(name)
        );
        legend_x += 30.0 + 7.5 * name.len() as f64;
    }
    let _ = writeln!(
        body,
        r#"<text x="120" y="{:.1}" font-size="11" font-family="sans-serif">upper band: copies, lower band: kernels, blank: the device idle; times from the device's clock</text>"#,
        y + 30.0
    );
    let height = y + 44.0;
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0}" viewBox="0 0 {width} {height:.0}"><rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#
    )
}

/// Prints the summary ([`trace_summary`]), writes the files ([`write_trace`]) and says where:
/// what `prove --device-trace` and `synthetic --device-trace` end with.
pub fn report_trace(path: &Path, spans: &[DeviceSpan], title: &str) -> Result<(), String> {
    trace_summary(spans).iter().for_each(|l| crate::say!("{l}"));
    let (csv, svg) = write_trace(path, spans, title)?;
    crate::say!(
        "device trace: {} spans in {} and {}",
        spans.len(),
        csv.display(),
        svg.display()
    );
    Ok(())
}

/// Writes `path` (the CSV) and the SVG beside it (`path` with `.svg`); returns both paths.
pub fn write_trace(
    path: &Path,
    spans: &[DeviceSpan],
    title: &str,
) -> Result<(PathBuf, PathBuf), String> {
    let svg = path.with_extension("svg");
    crate::outputs::write_file(path, trace_csv(spans).as_bytes())?;
    crate::outputs::write_file(&svg, trace_svg(spans, title).as_bytes())?;
    Ok((path.to_path_buf(), svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(
        partition: u64,
        worker: usize,
        step: &str,
        kind: SpanKind,
        t: (f64, f64),
    ) -> DeviceSpan {
        DeviceSpan {
            device: 0,
            worker,
            partition,
            step: step.into(),
            kind,
            name: if kind == SpanKind::Kernel {
                "pl_runs<1>".into()
            } else {
                "copy".into()
            },
            bytes: if kind == SpanKind::Kernel { 0 } else { 4096 },
            start: t.0,
            end: t.1,
        }
    }

    fn sample() -> Vec<DeviceSpan> {
        vec![
            span(0, 0, "h_ntt", SpanKind::CopyIn, (0.0, 0.001)),
            span(0, 0, "h_ntt", SpanKind::Kernel, (0.001, 0.003)),
            span(1, 1, "msm_l", SpanKind::Kernel, (0.002, 0.004)),
            span(1, 1, "msm_l", SpanKind::CopyOut, (0.005, 0.006)),
        ]
    }

    #[test]
    fn csv_has_a_row_per_span() {
        let csv = trace_csv(&sample());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("device,worker,partition,step,kind"));
        assert!(
            lines[2].contains(",h_ntt,kernel,pl_runs<1>,0,"),
            "{}",
            lines[2]
        );
        assert!(lines[4].contains(",copy_out,copy,4096,"), "{}", lines[4]);
    }

    #[test]
    fn summary_reads_busy_and_idle_from_the_spans() {
        let lines = trace_summary(&sample());
        // Busy: [0, 0.004] and [0.005, 0.006] = 5 ms of a 6 ms window; the gap is 1 ms.
        assert!(lines[0].contains("2 partitions in 0.006 s"), "{}", lines[0]);
        assert!(lines[0].contains("busy 0.005 s (83.3%;"), "{}", lines[0]);
        // Kernels alone: [0.001, 0.004], 3 ms (the copies' 2 ms left out).
        assert!(
            lines[0].contains("kernels alone 0.003 s, 50.0%)"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("longest gap 1.000 ms"), "{}", lines[0]);
        // Partition 0: [0, 3] all busy; partition 1: [0.002, 0.006], 3 of 4 ms busy.
        assert!(lines[1].contains("median window 4.000 ms"), "{}", lines[1]);
        assert!(lines[1].contains("busy 85.7%"), "{}", lines[1]);
        // Kernels alone: 2 ms of partition 0's 3, 2 of partition 1's 4.
        assert!(lines[1].contains("(kernels alone 57.1%)"), "{}", lines[1]);
        assert!(lines[2].contains("kernel 0.004 s"), "{}", lines[2]);
        assert!(lines[3].contains("msm_l 0.003 s"), "{}", lines[3]);
        assert!(trace_summary(&[]).is_empty());
    }

    #[test]
    fn svg_draws_every_span_of_the_run_and_of_the_zoomed_partition() {
        let spans = sample();
        assert_eq!(zoom_partition(&spans), Some(1));
        assert_eq!(zoom_partition(&spans[..2]), Some(0));
        assert_eq!(zoom_partition(&[]), None);
        let svg = trace_svg(&spans, "t<1>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // The whole run: 4 spans; partition 1's window [0.002, 0.006] holds spans 1, 2 and 3.
        assert_eq!(svg.matches("<title>").count(), 4 + 3);
        assert!(svg.contains("pl_runs&lt;1&gt;") && svg.contains("t&lt;1&gt;"));
        assert!(svg.contains(">h_ntt</text>") && svg.contains(">msm_l</text>"));
        assert!(svg.contains("device 0 worker 1"));
    }
}
