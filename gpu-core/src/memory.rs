//! Device memory accounting: every buffer the layer allocates is counted against the device's
//! limit (its memory, or `--gpu-mem-limit`), so that planning sees what is left and a limit
//! below the device's memory is obeyed exactly (the path that streams bases and splits the NTT
//! work is then taken on any device, POCL in CI included).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::device::{Device, DeviceError, DeviceResult};

/// The bytes the layer may use on one device, and how many it uses now.
#[derive(Debug)]
pub struct MemoryGauge {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

impl MemoryGauge {
    /// A gauge with `limit` bytes.
    pub fn new(limit: u64) -> Self {
        MemoryGauge {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The most bytes in use at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Acquire)
    }

    /// Bytes still available under the limit.
    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.used())
    }

    fn reserve(&self, bytes: u64) -> bool {
        let mut cur = self.used.load(Ordering::Acquire);
        loop {
            let Some(next) = cur.checked_add(bytes).filter(|&n| n <= self.limit) else {
                return false;
            };
            match self
                .used
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::AcqRel);
                    return true;
                }
                Err(now) => cur = now,
            }
        }
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// A counted device buffer: its bytes return to the gauge when it is dropped.
pub struct DeviceBuffer<D: Device> {
    buffer: D::Buffer,
    bytes: u64,
    gauge: Arc<MemoryGauge>,
}

impl<D: Device> DeviceBuffer<D> {
    /// Allocates `bytes` on `device`, counted against `gauge`; over the limit is an error
    /// naming `what`, before the device is asked.
    pub fn new(device: &D, gauge: &Arc<MemoryGauge>, bytes: u64, what: &str) -> DeviceResult<Self> {
        let during = || {
            format!(
                "allocating {what} ({})",
                prover_core::ledger::human_bytes(bytes)
            )
        };
        let size = usize::try_from(bytes.max(1))
            .map_err(|_| DeviceError::new(during(), "larger than the address space"))?;
        if bytes > device.info().max_alloc_bytes {
            return Err(DeviceError::new(
                during(),
                format!(
                    "larger than the device's largest allocation ({})",
                    prover_core::ledger::human_bytes(device.info().max_alloc_bytes)
                ),
            ));
        }
        if !gauge.reserve(bytes) {
            return Err(DeviceError::new(
                during(),
                format!(
                    "over the device memory limit ({} of {} in use)",
                    prover_core::ledger::human_bytes(gauge.used()),
                    prover_core::ledger::human_bytes(gauge.limit())
                ),
            ));
        }
        match device.alloc(size) {
            Ok(buffer) => Ok(DeviceBuffer {
                buffer,
                bytes,
                gauge: gauge.clone(),
            }),
            Err(e) => {
                gauge.give_back(bytes);
                Err(e)
            }
        }
    }

    /// The API's buffer.
    pub fn raw(&self) -> &D::Buffer {
        &self.buffer
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl<D: Device> Drop for DeviceBuffer<D> {
    fn drop(&mut self) {
        self.gauge.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_refuses_past_its_limit_and_gives_back() {
        let g = MemoryGauge::new(100);
        assert!(g.reserve(60));
        assert!(!g.reserve(41), "60 + 41 > 100");
        assert!(g.reserve(40));
        assert_eq!((g.used(), g.available(), g.peak()), (100, 0, 100));
        g.give_back(60);
        assert_eq!((g.used(), g.available(), g.peak()), (40, 60, 100));
        assert!(!g.reserve(u64::MAX), "overflow is refused, not wrapped");
    }
}
