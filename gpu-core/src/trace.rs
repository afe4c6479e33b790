//! Tracing a device's queues: what each queue records while tracing is on (a span per copy and
//! kernel, labelled with the accelerator step that issued it, its times resolved later from
//! the device's clock), and the backend's store of every worker's spans with the partition
//! and worker they belong to. Tracing never waits for the device until a partition's spans are
//! taken, after its last step has been waited for anyway.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use prover_core::{DeviceSpan, SpanKind};

/// A copy or kernel as its queue timed it: seconds on the device's clock since the device was
/// opened.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSpan {
    /// Copy or kernel.
    pub kind: SpanKind,
    /// The kernel's name, or `copy`.
    pub name: String,
    /// The step label current when it was queued.
    pub label: String,
    /// Bytes copied (0 for kernels).
    pub bytes: u64,
    /// Start, seconds.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
}

/// A span queued but not yet timed: what it was, and the API's handle(s) `E` to time it by.
pub struct Pending<E> {
    /// Copy or kernel.
    pub kind: SpanKind,
    /// The kernel's name, or `copy`.
    pub name: String,
    /// The step label.
    pub label: String,
    /// Bytes copied.
    pub bytes: u64,
    /// The API's timing handle(s).
    pub handle: E,
}

impl<E> Pending<E> {
    /// The span, once its times are known.
    pub fn timed(self, start: f64, end: f64) -> (QueueSpan, E) {
        (
            QueueSpan {
                kind: self.kind,
                name: self.name,
                label: self.label,
                bytes: self.bytes,
                start,
                end: end.max(start),
            },
            self.handle,
        )
    }
}

/// What a queue keeps while tracing: on or off, the current label, and the spans queued since
/// they were last taken.
pub struct Recorder<E> {
    on: bool,
    label: String,
    pending: Vec<Pending<E>>,
}

impl<E> Default for Recorder<E> {
    fn default() -> Self {
        Recorder {
            on: false,
            label: String::new(),
            pending: Vec::new(),
        }
    }
}

impl<E> Recorder<E> {
    /// Whether tracing is on.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Turns tracing on or off (what is pending stays until taken).
    pub fn set(&mut self, on: bool) {
        self.on = on;
    }

    /// Sets the label of the spans recorded next.
    pub fn label(&mut self, label: &str) {
        label.clone_into(&mut self.label);
    }

    /// Records a queued copy or kernel timed by `handle`.
    pub fn push(&mut self, kind: SpanKind, name: &str, bytes: u64, handle: E) {
        self.pending.push(Pending {
            kind,
            name: name.to_string(),
            label: self.label.clone(),
            bytes,
            handle,
        });
    }

    /// Everything pending, in queue order, to be timed by the caller.
    pub fn drain(&mut self) -> Vec<Pending<E>> {
        std::mem::take(&mut self.pending)
    }
}

/// A backend's trace: every worker's spans, and the count of accelerator calls that numbers
/// partitions.
#[derive(Debug, Default)]
pub struct Trace {
    enabled: bool,
    calls: AtomicU64,
    spans: Mutex<Vec<DeviceSpan>>,
}

impl Trace {
    /// A trace that records when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Trace {
            enabled,
            ..Trace::default()
        }
    }

    /// Whether workers trace their queues.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The number of the next accelerator call.
    pub fn next_partition(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds a queue's spans for `partition`, run by `worker` on `device`.
    pub fn add(&self, device: usize, worker: usize, partition: u64, spans: Vec<QueueSpan>) {
        let mut all = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        all.extend(spans.into_iter().map(|s| DeviceSpan {
            device,
            worker,
            partition,
            step: s.label,
            kind: s.kind,
            name: s.name,
            bytes: s.bytes,
            start: s.start,
            end: s.end,
        }));
    }

    /// Every span so far, ordered by device and start.
    pub fn spans(&self) -> Vec<DeviceSpan> {
        let mut all = self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone();
        all.sort_by(|a, b| a.device.cmp(&b.device).then(a.start.total_cmp(&b.start)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_labels_what_it_records_and_drains_in_order() {
        let mut r: Recorder<u32> = Recorder::default();
        assert!(!r.on());
        r.set(true);
        r.label("h_ntt");
        r.push(SpanKind::CopyIn, "copy", 64, 1);
        r.push(SpanKind::Kernel, "ntt_pass", 0, 2);
        r.label("msm_l");
        r.push(SpanKind::Kernel, "runs", 0, 3);
        let pending = r.drain();
        assert!(r.drain().is_empty());
        let labels: Vec<_> = pending.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["h_ntt", "h_ntt", "msm_l"]);
        let (span, handle) = pending.into_iter().nth(1).unwrap().timed(2.0, 1.0);
        assert_eq!(handle, 2);
        assert_eq!(
            (span.start, span.end),
            (2.0, 2.0),
            "an end before the start is clamped"
        );
        assert_eq!(span.name, "ntt_pass");
    }

    #[test]
    fn the_store_numbers_partitions_and_sorts_by_device_and_start() {
        let t = Trace::new(true);
        assert_eq!(t.next_partition(), 0);
        assert_eq!(t.next_partition(), 1);
        let span = |start: f64| QueueSpan {
            kind: SpanKind::Kernel,
            name: "k".into(),
            label: "s".into(),
            bytes: 0,
            start,
            end: start + 1.0,
        };
        t.add(1, 0, 0, vec![span(0.5)]);
        t.add(0, 1, 1, vec![span(3.0), span(2.0)]);
        let got: Vec<_> = t.spans().iter().map(|s| (s.device, s.start)).collect();
        assert_eq!(got, [(0, 2.0), (0, 3.0), (1, 0.5)]);
        assert!(!Trace::new(false).enabled());
    }
}
