//! The backend a run asks for (`--backend`), opened once per process, with the CPU as the
//! fallback of the device backends (a partition a device hands back is proved there).

use std::sync::Arc;

use backend_cpu::CpuBackend;
use prover_core::{CpuMultiplier, GpuBackend, Multiplier};

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

/// The environment variable that keeps parameter generation on the CPU (`cpu`) when a device
/// backend is chosen; by default a device backend generates missing parameters on its first
/// device.
pub const PARAMS_ON_VAR: &str = "PROOFLINE_PARAMS_ON";

/// Who computes missing parameters' points for `cfg`: the first selected device of a device
/// backend (unless `PROOFLINE_PARAMS_ON=cpu`), else the CPU. Same bytes either way.
pub fn multiplier(cfg: &RunConfig) -> anyhow::Result<Box<dyn Multiplier>> {
    let on_device = params_on_device(&std::env::var(PARAMS_ON_VAR).unwrap_or_default())
        .map_err(anyhow::Error::msg)?;
    if !on_device {
        return Ok(Box::new(CpuMultiplier));
    }
    let device = cfg.gpus.first().copied().unwrap_or(0);
    let missing = |n: usize| anyhow::anyhow!("--gpus names device {device}; there are {n}");
    match cfg.backend {
        BackendKind::Cpu => Ok(Box::new(CpuMultiplier)),
        #[cfg(feature = "opencl")]
        BackendKind::Opencl => {
            let b = open_opencl_backend(cfg)?;
            let n = b.describe().len();
            Ok(Box::new(b.multiplier(device).ok_or_else(|| missing(n))?))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let b = open_cuda_backend(cfg)?;
            let n = b.describe().len();
            Ok(Box::new(b.multiplier(device).ok_or_else(|| missing(n))?))
        }
        #[allow(unreachable_patterns)]
        _ => open(cfg).map(|_| Box::new(CpuMultiplier) as Box<dyn Multiplier>),
    }
}

/// `PROOFLINE_PARAMS_ON`'s value: `device` or unset (true), `cpu` (false).
fn params_on_device(value: &str) -> Result<bool, String> {
    match value.trim() {
        "" | "device" => Ok(true),
        "cpu" => Ok(false),
        other => Err(format!(
            "{PARAMS_ON_VAR}={other}: expected `cpu` or `device`"
        )),
    }
}

#[cfg(feature = "opencl")]
fn open_opencl_backend(cfg: &RunConfig) -> anyhow::Result<backend_opencl::OpenClBackend> {
    let selector = backend_opencl::Selector::parse(cfg.opencl_device.as_deref().unwrap_or(""))
        .map_err(anyhow::Error::msg)?;
    Ok(backend_opencl::open(backend_opencl::OpenClOptions {
        selector,
        mem_limit: cfg.gpu_mem_limit,
        faults: None,
        trace: cfg.trace,
    })?)
}

#[cfg(feature = "opencl")]
fn open_opencl(cfg: &RunConfig) -> anyhow::Result<Backends> {
    Ok(Backends {
        backend: Arc::new(open_opencl_backend(cfg)?),
        fallback: Some(Arc::new(CpuBackend)),
    })
}

#[cfg(not(feature = "opencl"))]
fn open_opencl(_: &RunConfig) -> anyhow::Result<Backends> {
    anyhow::bail!("this proofline was built without the `opencl` feature")
}

#[cfg(feature = "cuda")]
fn open_cuda_backend(cfg: &RunConfig) -> anyhow::Result<backend_cuda::CudaBackend> {
    Ok(backend_cuda::open(backend_cuda::CudaOptions {
        mem_limit: cfg.gpu_mem_limit,
        faults: None,
        trace: cfg.trace,
    })?)
}

#[cfg(feature = "cuda")]
fn open_cuda(cfg: &RunConfig) -> anyhow::Result<Backends> {
    Ok(Backends {
        backend: Arc::new(open_cuda_backend(cfg)?),
        fallback: Some(Arc::new(CpuBackend)),
    })
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &RunConfig) -> anyhow::Result<Backends> {
    anyhow::bail!("this proofline was built without the `cuda` feature")
}

/// What `proofline kernels` did: the cache folder, and how many kernels it compiled and found
/// already cached.
#[derive(Debug)]
pub struct CachedKernels {
    /// The cache folder.
    pub folder: std::path::PathBuf,
    /// Kernels compiled now.
    pub compiled: usize,
    /// Kernels that were already in the cache.
    pub cached: usize,
}

/// Compiles the CUDA kernels for `sm_{arch}` into the kernel cache without a GPU (NVRTC only,
/// on every core, progress on stderr), so that a fleet's provers start without the compile:
/// run it on a build host, copy the cache folder.
#[cfg(feature = "cuda")]
pub fn cache_cuda_kernels(arch: (i32, i32)) -> anyhow::Result<CachedKernels> {
    let folder = gpu_core::cache::folder().ok_or_else(|| {
        anyhow::anyhow!(
            "no kernel cache folder: set {} (or HOME)",
            gpu_core::cache::CACHE_VAR
        )
    })?;
    let source = gpu_core::KernelSource::new(gpu_core::Limbs::L32);
    let modules = backend_cuda::nvrtc::modules(&source, arch, &|line| eprintln!("{line}"))
        .map_err(|e| {
            anyhow::anyhow!(
                "compiling the CUDA kernels for sm_{}{}: {e}",
                arch.0,
                arch.1
            )
        })?;
    let cached = modules.iter().filter(|m| m.cached).count();
    Ok(CachedKernels {
        folder,
        compiled: modules.len() - cached,
        cached,
    })
}

#[cfg(not(feature = "cuda"))]
pub fn cache_cuda_kernels(_: (i32, i32)) -> anyhow::Result<CachedKernels> {
    anyhow::bail!("this proofline was built without the `cuda` feature")
}

/// `sm_90`, `90` or `9.0` as a compute capability.
pub fn parse_cuda_arch(s: &str) -> Result<(i32, i32), String> {
    let t = s.trim().trim_start_matches("sm_");
    let (major, minor) = match t.split_once('.') {
        Some((a, b)) => (a, b),
        None if t.len() >= 2 => t.split_at(t.len() - 1),
        None => ("", ""),
    };
    match (major.parse::<i32>(), minor.parse::<i32>()) {
        (Ok(a), Ok(b)) if (3..=20).contains(&a) && (0..=9).contains(&b) => Ok((a, b)),
        _ => Err(format!(
            "`{s}` is not a CUDA architecture (write sm_90, 90 or 9.0)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{params_on_device, parse_cuda_arch};

    #[test]
    fn params_on_parses_and_nonsense_is_refused() {
        assert_eq!(params_on_device(""), Ok(true));
        assert_eq!(params_on_device(" device "), Ok(true));
        assert_eq!(params_on_device("cpu"), Ok(false));
        for bad in ["gpu", "CPU", "0"] {
            let e = params_on_device(bad).unwrap_err();
            assert!(e.contains("PROOFLINE_PARAMS_ON") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn cuda_architectures_parse_and_nonsense_is_refused() {
        assert_eq!(parse_cuda_arch("sm_90"), Ok((9, 0)));
        assert_eq!(parse_cuda_arch("90"), Ok((9, 0)));
        assert_eq!(parse_cuda_arch("8.6"), Ok((8, 6)));
        assert_eq!(parse_cuda_arch("sm_100"), Ok((10, 0)));
        for bad in ["", "sm_", "9", "x0", "sm_9x", "99.99", "-1.0"] {
            assert!(parse_cuda_arch(bad).is_err(), "{bad}");
        }
    }
}
