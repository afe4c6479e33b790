//! Where a device backend's accelerator time goes, step by step (uploads, NTTs, each MSM):
//! with profiling on (`PROOFLINE_GPU_PROFILE=1`, [`crate::options::GpuOptions::profile`]) each
//! step waits for the device before it is timed, so the figures are the steps' own (at the cost
//! of the overlap two workers on one device would otherwise get). Off, nothing waits and nothing
//! is recorded.

use std::sync::Mutex;
use std::time::Instant;

use prover_core::StepTime;

use crate::device::{DeviceResult, Queue};

/// Step times of one backend.
#[derive(Debug, Default)]
pub struct Profile {
    enabled: bool,
    steps: Mutex<Vec<StepTime>>,
}

impl Profile {
    /// Step times recorded when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Profile {
            enabled,
            steps: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` as the step `name` on `q`; when profiling, waits for the device and records;
    /// labels the spans `f` queues with `name` (a queue that is not tracing ignores it).
    pub fn step<Q: Queue, T>(
        &self,
        name: &str,
        q: &mut Q,
        f: impl FnOnce(&mut Q) -> DeviceResult<T>,
    ) -> DeviceResult<T> {
        q.trace_label(name);
        let out = self.timed(name, q, f);
        q.trace_label("");
        out
    }

    fn timed<Q: Queue, T>(
        &self,
        name: &str,
        q: &mut Q,
        f: impl FnOnce(&mut Q) -> DeviceResult<T>,
    ) -> DeviceResult<T> {
        if !self.enabled {
            return f(q);
        }
        let t = Instant::now();
        let out = f(q)?;
        q.synchronize()?;
        self.record(name, t.elapsed().as_secs_f64());
        Ok(out)
    }

    /// Adds `secs` to the step `name` (host steps timed by the caller), when profiling.
    pub fn record(&self, name: &str, secs: f64) {
        if !self.enabled {
            return;
        }
        let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        match steps.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.count += 1;
                s.seconds += secs;
            }
            None => steps.push(StepTime {
                name: name.to_string(),
                count: 1,
                seconds: secs,
            }),
        }
    }

    /// The steps so far, in first-run order.
    pub fn steps(&self) -> Vec<StepTime> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
