//! The accelerator stage on any [`Device`]: a [`Accelerator`] whose workers run the H pipeline
//! and every MSM (b_g2 included, so the finalizer only assembles) on their device. The API
//! crates give it their devices; everything above the device trait is here, once.
//!
//! - [`GpuAccelerator`]: the backend over one API's devices (prepare, workers, figures);
//! - [`DeviceBackend`]: the same seen whole, whatever its API (what a binary opens once);
//! - `resident`: the bases `prepare` leaves on each device;
//! - `worker`: one worker's partition, from the witness to the sums.

mod resident;
mod worker;

use std::sync::Arc;

use prover_core::accounting::ledger::StageLedger;
use prover_core::{
    Accelerator, AcceleratorWorker, Error, Multiplier, Parameters, PreparedParameters, Result,
};

use crate::context::GpuDevice;
use crate::device::{Device, Queue};
use crate::fixed_base::GpuMultiplier;
use crate::kernels::KernelNames;
use crate::memory::{driver_in_use, MemoryGauge};
use crate::options::GpuOptions;
use crate::synthetic::SyntheticKey;

use resident::{prepare_device, synthetic_resident, working_bytes, PreparedState};
use worker::{GpuWorker, Shared};

/// A device backend over devices of one API.
pub struct GpuAccelerator<D: Device> {
    name: &'static str,
    devices: Vec<Arc<GpuDevice<D>>>,
    shared: Arc<Shared>,
}

impl<D: Device> GpuAccelerator<D> {
    /// A backend named `name` (`opencl`, `cuda`) over `devices`, whose programs define `names`,
    /// run as `options` say (their kernel cache folder served the API crate, which built the
    /// programs).
    pub fn new(
        name: &'static str,
        devices: Vec<D>,
        names: &KernelNames,
        options: GpuOptions,
    ) -> Self {
        let devices = devices
            .into_iter()
            .map(|device| {
                let own = device.info().memory_bytes / 10 * 9;
                let limit = options.mem_limit.map_or(own, |l| l.min(own));
                let gauge = MemoryGauge::new(limit);
                if let Some(in_use) = driver_in_use(&device) {
                    gauge.set_driver_baseline(in_use);
                }
                Arc::new(GpuDevice {
                    device,
                    gauge: Arc::new(gauge),
                    names: names.clone(),
                })
            })
            .collect();
        GpuAccelerator {
            name,
            devices,
            shared: Arc::new(Shared::new(options)),
        }
    }

    /// One line per device, for logs and tests: which device, on what, its memory limit, and
    /// whether its kernels came from the cache.
    pub fn describe(&self) -> Vec<String> {
        self.devices
            .iter()
            .enumerate()
            .map(|(d, gpu)| {
                let info = gpu.device.info();
                format!(
                    "{} device {d}: {} on {} ({} compute units, limit {}{})",
                    self.name,
                    info.name,
                    info.platform,
                    info.compute_units,
                    prover_core::units::human_bytes(gpu.gauge.limit()),
                    if info.program_from_cache {
                        ", kernels from the cache"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// Device `i` with its gauge.
    pub fn device(&self, i: usize) -> Option<&GpuDevice<D>> {
        self.devices.get(i).map(|d| &**d)
    }

    /// Prepares a synthetic key (a timing workload's: see [`crate::synthetic`]): every query's
    /// bases made on every device and counted in `ledger` as resident device bases. Refused,
    /// with what it needs, where the bases and a partition's working memory do not fit.
    pub fn prepare_synthetic(
        &self,
        key: &SyntheticKey,
        ledger: &StageLedger,
    ) -> Result<PreparedParameters> {
        let (t1, t2) = key.tables();
        let need = key.bases_bytes() + working_bytes(key.shape.domain);
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, gpu)| {
                if gpu.gauge.available() < need {
                    return Err(Error::Resource {
                        what: "device memory for a synthetic key",
                        detail: format!(
                            "{} needs {} for the bases and a partition, {} is left under its limit",
                            self.device_name(i),
                            prover_core::units::human_bytes(need),
                            prover_core::units::human_bytes(gpu.gauge.available())
                        ),
                    });
                }
                synthetic_resident(gpu, key, (&t1, &t2), ledger).map_err(|e| Error::Backend {
                    backend: self.device_name(i),
                    source: Box::new(e),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let state: Arc<PreparedState<D>> = Arc::new(PreparedState {
            devices,
            key: key.shape,
        });
        Ok(PreparedParameters::new(
            Arc::new(key.shape_only_parameters()),
            self.name,
            Some(state),
        ))
    }

    /// Parameter generation's products on device `i` (its memory counted by the same gauge).
    pub fn multiplier(&self, i: usize) -> Option<GpuMultiplier<D>> {
        self.devices
            .get(i)
            .map(|d| GpuMultiplier::new(Arc::clone(d), self.device_name(i)))
    }
}

impl<D: Device> Accelerator for GpuAccelerator<D> {
    fn name(&self) -> &str {
        self.name
    }

    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn device_name(&self, device: usize) -> String {
        match self.devices.get(device) {
            Some(d) => format!("{}:{device} ({})", self.name, d.device.info().name),
            None => format!("{}:{device}", self.name),
        }
    }

    fn prepare(&self, params: Arc<Parameters>, ledger: &StageLedger) -> Result<PreparedParameters> {
        let devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, gpu)| {
                prepare_device(gpu, &params, ledger).map_err(|e| Error::Backend {
                    backend: self.device_name(i),
                    source: Box::new(e),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let state: Arc<PreparedState<D>> = Arc::new(PreparedState {
            devices,
            key: params.shape(),
        });
        Ok(PreparedParameters::new(params, self.name, Some(state)))
    }

    fn partition_host_bytes(&self, params: &Parameters) -> u64 {
        // The split H pipeline's host vector, and the largest query's scan (index and exponent
        // per term).
        let largest = params.l.len().max(params.a.len()).max(params.b_g1.len());
        params.domain_size() as u64 * 32 + largest as u64 * 40
    }

    fn step_times(&self) -> Vec<prover_core::StepTime> {
        self.shared.profile.steps()
    }

    fn device_trace(&self) -> Vec<prover_core::DeviceSpan> {
        self.shared.trace.spans()
    }

    fn device_memory(&self) -> Vec<prover_core::DeviceMemory> {
        self.devices
            .iter()
            .enumerate()
            .map(|(device, gpu)| prover_core::DeviceMemory {
                device,
                allocated_peak: gpu.gauge.peak(),
                driver_baseline: gpu.gauge.driver_baseline(),
                driver_peak: gpu.gauge.driver_peak(),
            })
            .collect()
    }

    fn worker(&self, device: usize, slot: usize) -> Result<Box<dyn AcceleratorWorker>> {
        let gpu = self
            .devices
            .get(device)
            .ok_or_else(|| Error::InvalidConfig {
                what: "device",
                detail: format!(
                    "the {} backend has {} device(s), not {device}",
                    self.name,
                    self.devices.len()
                ),
            })?;
        let backend_err = |e| Error::Backend {
            backend: self.device_name(device),
            source: Box::new(e),
        };
        let mut queue = gpu.device.queue().map_err(backend_err)?;
        if self.shared.trace.enabled() && !queue.set_trace(true).map_err(backend_err)? {
            return Err(Error::InvalidConfig {
                what: "device tracing",
                detail: format!("{}'s queues cannot trace", self.device_name(device)),
            });
        }
        Ok(Box::new(GpuWorker {
            backend: self.name,
            label: self.device_name(device),
            ordinal: device,
            slot,
            gpu: gpu.clone(),
            queue,
            shared: self.shared.clone(),
        }))
    }
}

/// A device backend seen whole, whatever its API: what a binary opens once and uses to prove
/// (as an [`Accelerator`]), to generate parameters on a device and to run the synthetic
/// workload.
pub trait DeviceBackend: Accelerator {
    /// One line per device ([`GpuAccelerator::describe`]).
    fn describe(&self) -> Vec<String>;

    /// A synthetic key's bases made on every device ([`GpuAccelerator::prepare_synthetic`]).
    fn prepare_synthetic(
        &self,
        key: &SyntheticKey,
        ledger: &StageLedger,
    ) -> Result<PreparedParameters>;

    /// Parameter generation's products on device `device` ([`GpuAccelerator::multiplier`]).
    fn multiplier(&self, device: usize) -> Option<Box<dyn Multiplier>>;

    /// The backend as the engine takes it.
    fn into_accelerator(self: Arc<Self>) -> Arc<dyn Accelerator>;
}

impl<D: Device> DeviceBackend for GpuAccelerator<D> {
    fn describe(&self) -> Vec<String> {
        GpuAccelerator::describe(self)
    }

    fn prepare_synthetic(
        &self,
        key: &SyntheticKey,
        ledger: &StageLedger,
    ) -> Result<PreparedParameters> {
        GpuAccelerator::prepare_synthetic(self, key, ledger)
    }

    fn multiplier(&self, device: usize) -> Option<Box<dyn Multiplier>> {
        GpuAccelerator::multiplier(self, device).map(|m| Box::new(m) as Box<dyn Multiplier>)
    }

    fn into_accelerator(self: Arc<Self>) -> Arc<dyn Accelerator> {
        self
    }
}
