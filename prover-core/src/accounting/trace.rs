//! The device's own timeline: one span per copy and kernel, timed by the device (CUDA events,
//! OpenCL profiling), so that busy and idle time are read from the device's clock rather than
//! from the host's view of a worker. Device backends record it when asked
//! ([`crate::Accelerator::device_trace`]); this module holds the span and the figures drawn
//! from a set of spans.

use std::collections::BTreeMap;
use std::fmt;

/// What a span was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// A copy from the host to the device.
    CopyIn,
    /// A copy from the device to the host.
    CopyOut,
    /// A kernel.
    Kernel,
    /// A copy from the host to the device beside the worker's kernels (CUDA: on the worker's
    /// second stream), which may overlap them.
    CopyBeside,
}

impl SpanKind {
    /// Every kind, in report order.
    pub const ALL: [SpanKind; 4] = [
        SpanKind::CopyIn,
        SpanKind::CopyOut,
        SpanKind::Kernel,
        SpanKind::CopyBeside,
    ];

    /// The name in reports (`copy_in`, `copy_out`, `kernel`, `copy_beside`).
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::CopyIn => "copy_in",
            SpanKind::CopyOut => "copy_out",
            SpanKind::Kernel => "kernel",
            SpanKind::CopyBeside => "copy_beside",
        }
    }
}

impl fmt::Display for SpanKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One copy or kernel on a device, in seconds of the device's clock since its backend opened it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpan {
    /// The device's ordinal.
    pub device: usize,
    /// The worker (queue, stream) of that device that ran it.
    pub worker: usize,
    /// The backend's count of accelerator calls, from 0, in the order they started.
    pub partition: u64,
    /// The accelerator step it belongs to (`h_ntt`, `msm_l`, ...; empty outside a step).
    pub step: String,
    /// Copy or kernel.
    pub kind: SpanKind,
    /// The kernel's name, or `copy`.
    pub name: String,
    /// Bytes copied (0 for a kernel).
    pub bytes: u64,
    /// Start, seconds.
    pub start: f64,
    /// End, seconds (at least `start`).
    pub end: f64,
}

impl DeviceSpan {
    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }
}

/// One device's figures over a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSummary {
    /// The device's ordinal.
    pub device: usize,
    /// Partitions (accelerator calls) with at least one span.
    pub partitions: usize,
    /// From the first span's start to the last one's end, seconds.
    pub window: f64,
    /// Seconds in which at least one span ran (overlapping spans of several workers counted
    /// once): copies and kernels.
    pub busy: f64,
    /// Seconds in which at least one kernel ran (overlaps counted once): the device's own
    /// computing, without the copies (a copy's span may include time the host spent filling
    /// its staging buffer, and a copy's DMA does not occupy the device's cores).
    pub kernel_busy: f64,
    /// Seconds summed per kind (overlaps counted as often as they overlap).
    pub by_kind: BTreeMap<SpanKind, f64>,
    /// Seconds summed per step.
    pub by_step: BTreeMap<String, f64>,
    /// The longest gap with nothing running, seconds.
    pub longest_gap: f64,
    /// Each partition's own window (its first span's start to its last span's end), seconds,
    /// in partition order: what the device took for it, without the time between partitions.
    pub partition_windows: Vec<f64>,
    /// Seconds in which the partitions' own spans ran, summed over partitions (so
    /// `partition_busy / sum(partition_windows)` is the share of a partition's window in which
    /// its work kept the device busy; the rest waited for the host).
    pub partition_busy: f64,
    /// `partition_busy` counting kernels only.
    pub partition_kernel_busy: f64,
}

/// `part / whole`, at most 1 (1 for an empty whole: nothing to be idle in).
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole).min(1.0)
    } else {
        1.0
    }
}

impl TraceSummary {
    /// `busy / window` (1 for an empty window; never above 1, whatever the rounding).
    pub fn busy_fraction(&self) -> f64 {
        share(self.busy, self.window)
    }

    /// `kernel_busy / window`: the kernels' own share of the window (1 for an empty window),
    /// at most [`TraceSummary::busy_fraction`].
    pub fn kernel_busy_fraction(&self) -> f64 {
        share(self.kernel_busy, self.window)
    }

    /// `window - busy`.
    pub fn idle(&self) -> f64 {
        (self.window - self.busy).max(0.0)
    }

    /// The median of the partitions' windows (0 without partitions).
    pub fn median_partition_window(&self) -> f64 {
        let mut w = self.partition_windows.clone();
        w.sort_by(f64::total_cmp);
        w.get(w.len() / 2).copied().unwrap_or(0.0)
    }

    /// `partition_busy` over the sum of the partitions' windows (1 without partitions).
    pub fn partition_busy_fraction(&self) -> f64 {
        share(self.partition_busy, self.partition_windows.iter().sum())
    }

    /// `partition_kernel_busy` over the sum of the partitions' windows (1 without partitions).
    pub fn partition_kernel_busy_fraction(&self) -> f64 {
        share(
            self.partition_kernel_busy,
            self.partition_windows.iter().sum(),
        )
    }
}

/// Seconds covered by the kernels among sorted spans (overlaps once).
fn kernel_union<'a>(sorted: impl Iterator<Item = &'a DeviceSpan>) -> f64 {
    union(sorted.filter(|s| s.kind == SpanKind::Kernel)).0
}

/// The union of sorted spans: (busy seconds, longest gap between them).
fn union<'a>(sorted: impl Iterator<Item = &'a DeviceSpan>) -> (f64, f64) {
    let (mut busy, mut longest_gap) = (0.0f64, 0.0f64);
    let mut covered_to: Option<f64> = None;
    for s in sorted {
        let to = covered_to.unwrap_or(s.start);
        if s.start > to {
            longest_gap = longest_gap.max(s.start - to);
        }
        let from = s.start.max(to);
        if s.end > from {
            busy += s.end - from;
        }
        covered_to = Some(to.max(s.end));
    }
    (busy, longest_gap)
}

/// The figures of each device that has spans in `spans`, by ordinal.
pub fn summarize(spans: &[DeviceSpan]) -> Vec<TraceSummary> {
    let mut devices: BTreeMap<usize, Vec<&DeviceSpan>> = BTreeMap::new();
    for s in spans {
        devices.entry(s.device).or_default().push(s);
    }
    devices
        .into_iter()
        .map(|(device, mut spans)| {
            spans.sort_by(|a, b| a.start.total_cmp(&b.start));
            let mut by_kind = BTreeMap::new();
            let mut by_step = BTreeMap::new();
            let mut partitions: BTreeMap<u64, Vec<&DeviceSpan>> = BTreeMap::new();
            let first = spans.first().map_or(0.0, |s| s.start);
            let mut last = first;
            for s in &spans {
                *by_kind.entry(s.kind).or_insert(0.0) += s.seconds();
                *by_step.entry(s.step.clone()).or_insert(0.0) += s.seconds();
                partitions.entry(s.partition).or_default().push(s);
                last = last.max(s.end);
            }
            let (busy, longest_gap) = union(spans.iter().copied());
            let kernel_busy = kernel_union(spans.iter().copied());
            let mut partition_windows = Vec::new();
            let (mut partition_busy, mut partition_kernel_busy) = (0.0, 0.0);
            for own in partitions.values() {
                let end = own.iter().map(|s| s.end).fold(f64::NEG_INFINITY, f64::max);
                partition_windows.push(end - own[0].start);
                partition_busy += union(own.iter().copied()).0;
                partition_kernel_busy += kernel_union(own.iter().copied());
            }
            TraceSummary {
                device,
                partitions: partitions.len(),
                window: last - first,
                busy,
                kernel_busy,
                by_kind,
                by_step,
                longest_gap,
                partition_windows,
                partition_busy,
                partition_kernel_busy,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(device: usize, partition: u64, kind: SpanKind, start: f64, end: f64) -> DeviceSpan {
        DeviceSpan {
            device,
            worker: 0,
            partition,
            step: if kind == SpanKind::Kernel {
                "msm".into()
            } else {
                "io".into()
            },
            kind,
            name: "k".into(),
            bytes: 0,
            start,
            end,
        }
    }

    #[test]
    fn busy_counts_overlaps_once_and_gaps_are_idle() {
        // Device 0: [0, 2] and [1, 3] overlap (busy 3), then a gap of 2, then [5, 6].
        let spans = vec![
            span(0, 1, SpanKind::Kernel, 1.0, 3.0),
            span(0, 0, SpanKind::CopyIn, 0.0, 2.0),
            span(0, 1, SpanKind::Kernel, 5.0, 6.0),
            span(1, 2, SpanKind::CopyOut, 10.0, 10.5),
        ];
        let s = summarize(&spans);
        assert_eq!(s.len(), 2);
        let d0 = &s[0];
        assert_eq!(d0.device, 0);
        assert_eq!(d0.partitions, 2);
        assert!((d0.window - 6.0).abs() < 1e-12);
        assert!((d0.busy - 4.0).abs() < 1e-12, "{d0:?}");
        assert!((d0.idle() - 2.0).abs() < 1e-12);
        assert!((d0.longest_gap - 2.0).abs() < 1e-12);
        assert!((d0.by_kind[&SpanKind::Kernel] - 3.0).abs() < 1e-12);
        assert!((d0.by_kind[&SpanKind::CopyIn] - 2.0).abs() < 1e-12);
        assert!((d0.by_step["msm"] - 3.0).abs() < 1e-12);
        assert!((d0.busy_fraction() - 4.0 / 6.0).abs() < 1e-12);
        // Partition 0: [0, 2]; partition 1: [1, 3] and [5, 6], a window of 5 with 3 busy.
        assert_eq!(d0.partition_windows, [2.0, 5.0]);
        assert!((d0.partition_busy - 5.0).abs() < 1e-12);
        assert!((d0.partition_busy_fraction() - 5.0 / 7.0).abs() < 1e-12);
        assert_eq!(d0.median_partition_window(), 5.0);
        // A span inside another adds nothing to busy.
        let nested = summarize(&[
            span(0, 0, SpanKind::Kernel, 0.0, 4.0),
            span(0, 0, SpanKind::Kernel, 1.0, 2.0),
        ]);
        assert!((nested[0].busy - 4.0).abs() < 1e-12);
        assert_eq!(nested[0].longest_gap, 0.0);
        assert_eq!(s[1].busy_fraction(), 1.0);
        assert!(summarize(&[]).is_empty());
    }

    #[test]
    fn the_kernels_own_busy_share_leaves_out_the_copies() {
        // A copy [0, 2] under a kernel [1, 3], a copy [3.5, 4] alone, a kernel [5, 6]: the union
        // covers 3 + 0.5 + 1 = 4.5 s of the 6 s window, the kernels 2 + 1 = 3 s.
        let spans = [
            span(0, 0, SpanKind::CopyIn, 0.0, 2.0),
            span(0, 0, SpanKind::Kernel, 1.0, 3.0),
            span(0, 1, SpanKind::CopyBeside, 3.5, 4.0),
            span(0, 1, SpanKind::Kernel, 5.0, 6.0),
        ];
        let d = &summarize(&spans)[0];
        assert!((d.busy - 4.5).abs() < 1e-12, "{d:?}");
        assert!((d.kernel_busy - 3.0).abs() < 1e-12, "{d:?}");
        assert!((d.busy_fraction() - 0.75).abs() < 1e-12);
        assert!((d.kernel_busy_fraction() - 0.5).abs() < 1e-12);
        // Partition 0: [0, 3], all busy, kernels 2 s; partition 1: [3.5, 6], 1.5 s busy, kernels
        // 1 s: of 5.5 s of partition windows, 4.5 busy and 3 computing.
        assert!((d.partition_busy_fraction() - 4.5 / 5.5).abs() < 1e-12);
        assert!((d.partition_kernel_busy - 3.0).abs() < 1e-12, "{d:?}");
        assert!((d.partition_kernel_busy_fraction() - 3.0 / 5.5).abs() < 1e-12);
        // Its twin: the same spans, all kernels, leave nothing to tell apart; all copies, no
        // kernel time at all in a busy window.
        let as_kind = |kind| {
            spans
                .iter()
                .map(|s| DeviceSpan { kind, ..s.clone() })
                .collect()
        };
        let kernels: Vec<DeviceSpan> = as_kind(SpanKind::Kernel);
        let k = &summarize(&kernels)[0];
        assert!((k.kernel_busy - 4.5).abs() < 1e-12, "{k:?}");
        assert_eq!(k.kernel_busy_fraction(), k.busy_fraction());
        let copies: Vec<DeviceSpan> = as_kind(SpanKind::CopyIn);
        let c = &summarize(&copies)[0];
        assert!((c.busy - 4.5).abs() < 1e-12, "{c:?}");
        assert_eq!((c.kernel_busy, c.kernel_busy_fraction()), (0.0, 0.0));
        assert_eq!(c.partition_kernel_busy_fraction(), 0.0);
    }
}
