//! Device memory accounting: every buffer the layer allocates is counted against the device's
//! limit (its memory, or `--gpu-mem-limit`), so that planning sees what is left and a limit
//! below the device's memory is obeyed exactly (the path that streams bases and splits the NTT
//! work is then taken on any device, POCL in CI included).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};

use crate::device::{Device, DeviceError, DeviceResult};

/// The bytes the layer may use on one device, and how many it uses now; beside them, what the
/// driver reports in use (where the API can tell), to check the accounting against.
#[derive(Debug)]
pub struct MemoryGauge {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
    /// The driver's figure when the device was opened (`UNKNOWN` where it cannot tell).
    driver_baseline: AtomicU64,
    /// The driver's largest figure read after an allocation (`UNKNOWN` before the first).
    driver_peak: AtomicU64,
}

const UNKNOWN: u64 = u64::MAX;

/// Bytes in use on `device` as its driver reports them (memory less free), where it can tell.
pub fn driver_in_use<D: Device>(device: &D) -> Option<u64> {
    let free = device.free_memory()?;
    Some(device.info().memory_bytes.saturating_sub(free))
}

impl MemoryGauge {
    /// A gauge with `limit` bytes.
    pub fn new(limit: u64) -> Self {
        MemoryGauge {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            driver_baseline: AtomicU64::new(UNKNOWN),
            driver_peak: AtomicU64::new(UNKNOWN),
        }
    }

    /// Records the driver's figure before the layer allocates anything.
    pub fn set_driver_baseline(&self, in_use: u64) {
        self.driver_baseline.store(in_use, Ordering::Release);
    }

    /// Records a driver figure read after an allocation (its peak is kept).
    pub fn observe_driver(&self, in_use: u64) {
        let _ = self
            .driver_peak
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                (p == UNKNOWN || in_use > p).then_some(in_use)
            });
    }

    /// The driver's figure when the device was opened.
    pub fn driver_baseline(&self) -> Option<u64> {
        Some(self.driver_baseline.load(Ordering::Acquire)).filter(|&b| b != UNKNOWN)
    }

    /// The driver's largest figure after an allocation.
    pub fn driver_peak(&self) -> Option<u64> {
        Some(self.driver_peak.load(Ordering::Acquire)).filter(|&b| b != UNKNOWN)
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
        Self::new_with(device, gauge, bytes, what, |size| device.alloc(size))
    }

    /// As [`DeviceBuffer::new`], the allocation made by `alloc` (given the size in bytes).
    pub fn new_with(
        device: &D,
        gauge: &Arc<MemoryGauge>,
        bytes: u64,
        what: &str,
        alloc: impl FnOnce(usize) -> DeviceResult<D::Buffer>,
    ) -> DeviceResult<Self> {
        let during = || {
            format!(
                "allocating {what} ({})",
                prover_core::units::human_bytes(bytes)
            )
        };
        let size = usize::try_from(bytes.max(1))
            .map_err(|_| DeviceError::new(during(), "larger than the address space"))?;
        if bytes > device.info().max_alloc_bytes {
            return Err(DeviceError::new(
                during(),
                format!(
                    "larger than the device's largest allocation ({})",
                    prover_core::units::human_bytes(device.info().max_alloc_bytes)
                ),
            ));
        }
        if !gauge.reserve(bytes) {
            return Err(DeviceError::new(
                during(),
                format!(
                    "over the device memory limit ({} of {} in use)",
                    prover_core::units::human_bytes(gauge.used()),
                    prover_core::units::human_bytes(gauge.limit())
                ),
            ));
        }
        match alloc(size) {
            Ok(buffer) => {
                // The driver's figure peaks right after an allocation: read it there.
                if let Some(in_use) = driver_in_use(device) {
                    gauge.observe_driver(in_use);
                }
                Ok(DeviceBuffer {
                    buffer,
                    bytes,
                    gauge: gauge.clone(),
                })
            }
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

/// Frees `buffers`, registered in `ledger` as one entry of `kind` of their summed bytes, then
/// releases that entry: freed first, so the ledger never counts fewer bytes than are allocated
/// (another worker may allocate in between).
pub fn free_counted<D: Device, const N: usize>(
    ledger: &mut BackendBuffers<'_>,
    kind: BackendBuffer,
    buffers: [DeviceBuffer<D>; N],
) {
    let bytes = buffers.iter().map(DeviceBuffer::bytes).sum();
    drop(buffers);
    ledger.release_one(kind, bytes);
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

    #[test]
    fn driver_figures_keep_the_baseline_and_the_peak() {
        let g = MemoryGauge::new(100);
        assert_eq!((g.driver_baseline(), g.driver_peak()), (None, None));
        g.set_driver_baseline(500);
        g.observe_driver(700);
        g.observe_driver(650);
        assert_eq!(
            (g.driver_baseline(), g.driver_peak()),
            (Some(500), Some(700))
        );
        g.observe_driver(900);
        assert_eq!(g.driver_peak(), Some(900));
    }
}
