//! The backend a run asks for (`--backend`), opened once per process, with the CPU as the
//! fallback of the device backends (a partition a device hands back is proved there).

use std::sync::Arc;

use backend_cpu::CpuBackend;
use prover_core::GpuBackend;

use crate::config::{BackendKind, RunConfig};

/// The accelerator and its fallback.
pub struct Backends {
    /// The accelerator backend.
    pub backend: Arc<dyn GpuBackend>,
    /// Where handed-back partitions go (`None` for the CPU backend, its own fallback).
    pub fallback: Option<Arc<dyn GpuBackend>>,
}

/// Opens the backend `cfg` names; errors say what is missing (no OpenCL platform, no device).
pub fn open(cfg: &RunConfig) -> anyhow::Result<Backends> {
    match cfg.backend {
        BackendKind::Cpu => Ok(Backends {
            backend: Arc::new(CpuBackend),
            fallback: None,
        }),
        BackendKind::Opencl => open_opencl(cfg),
        BackendKind::Cuda => open_cuda(cfg),
    }
}

#[cfg(feature = "opencl")]
fn open_opencl(cfg: &RunConfig) -> anyhow::Result<Backends> {
    let selector = backend_opencl::Selector::parse(cfg.opencl_device.as_deref().unwrap_or(""))
        .map_err(anyhow::Error::msg)?;
    let backend = backend_opencl::open(backend_opencl::OpenClOptions {
        selector,
        mem_limit: cfg.gpu_mem_limit,
        faults: None,
    })?;
    Ok(Backends {
        backend: Arc::new(backend),
        fallback: Some(Arc::new(CpuBackend)),
    })
}

#[cfg(not(feature = "opencl"))]
fn open_opencl(_: &RunConfig) -> anyhow::Result<Backends> {
    anyhow::bail!("this proofline was built without the `opencl` feature")
}

#[cfg(feature = "cuda")]
fn open_cuda(cfg: &RunConfig) -> anyhow::Result<Backends> {
    let backend = backend_cuda::open(backend_cuda::CudaOptions {
        mem_limit: cfg.gpu_mem_limit,
        faults: None,
    })?;
    Ok(Backends {
        backend: Arc::new(backend),
        fallback: Some(Arc::new(CpuBackend)),
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &RunConfig) -> anyhow::Result<Backends> {
    anyhow::bail!("this proofline was built without the `cuda` feature")
}
