//! The backend a run asks for (`--backend`), opened once per process, with the CPU as the
//! fallback of the device backends (a partition a device hands back is proved there), and
//! checked before anything slow runs ([`preflight`]: the libraries, the devices named).

use std::sync::Arc;

use backend_cpu::CpuBackend;
use prover_core::{Accelerator, CpuMultiplier, Multiplier};

use crate::config::{BackendKind, RunConfig};

/// The accelerator and its fallback.
pub struct Backends {
    /// The accelerator backend.
    pub backend: Arc<dyn Accelerator>,
    /// Where handed-back partitions go (`None` for the CPU backend, its own fallback).
    pub fallback: Option<Arc<dyn Accelerator>>,
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

/// Checks in milliseconds, before any parameters are loaded or generated, what a run of `cfg`
/// needs from its backend: `PROOFLINE_PARAMS_ON` is `cpu` or `device`, and for a device backend
/// its libraries load (every function there, for CUDA), `--opencl-device` matches, and every
/// ordinal of `--gpus` (the first one by default: the device that generates missing parameters
/// unless `PROOFLINE_PARAMS_ON=cpu`) is one of its devices, listed once. No kernel is compiled.
/// The CPU backend has nothing to check.
pub fn preflight(cfg: &RunConfig) -> anyhow::Result<()> {
    if cfg.backend == BackendKind::Cpu {
        return Ok(());
    }
    params_on_device_from_env()?;
    // The device layer's settings (PROOFLINE_GPU_* and the like), before any parameter.
    gpu_core::GpuOptions::from_env(cfg.gpu_mem_limit, None)?;
    let ordinals: &[usize] = if cfg.gpus.is_empty() { &[0] } else { &cfg.gpus };
    check_devices(cfg.backend, cfg.opencl_device.as_deref(), ordinals)
}

/// Checks, without compiling a kernel, that `backend` opens and has every device in
/// `ordinals` (ordinals of its device list, which `opencl_device` selects for OpenCL), each
/// listed once. The CPU backend has nothing to check.
pub fn check_devices(
    backend: BackendKind,
    opencl_device: Option<&str>,
    ordinals: &[usize],
) -> anyhow::Result<()> {
    let count = match backend {
        BackendKind::Cpu => return Ok(()),
        BackendKind::Opencl => opencl_device_count(opencl_device)?,
        BackendKind::Cuda => cuda_device_count()?,
    };
    check_ordinals(ordinals, count, backend.name()).map_err(anyhow::Error::msg)
}

/// Refuses an ordinal past `count` devices, or one listed twice.
fn check_ordinals(ordinals: &[usize], count: usize, backend: &str) -> Result<(), String> {
    for (i, &d) in ordinals.iter().enumerate() {
        if d >= count {
            return Err(format!(
                "device {d} does not exist: the {backend} backend has {count} device{} \
                 (ordinals 0..{count})",
                if count == 1 { "" } else { "s" }
            ));
        }
        if ordinals[..i].contains(&d) {
            return Err(format!("device {d} is listed twice"));
        }
    }
    Ok(())
}

/// How many devices `--opencl-device` selects (the platforms listed, nothing built).
#[cfg(feature = "opencl")]
fn opencl_device_count(opencl_device: Option<&str>) -> anyhow::Result<usize> {
    let selector =
        backend_opencl::Selector::parse(opencl_device.unwrap_or("")).map_err(anyhow::Error::msg)?;
    let found = backend_opencl::select::select(&selector).map_err(|detail| {
        prover_core::Error::Resource {
            what: "an OpenCL device",
            detail,
        }
    })?;
    Ok(found.len())
}

#[cfg(not(feature = "opencl"))]
fn opencl_device_count(_: Option<&str>) -> anyhow::Result<usize> {
    anyhow::bail!("this proofline was built without the `opencl` feature")
}

/// How many CUDA devices the driver lists (both libraries checked, nothing compiled).
#[cfg(feature = "cuda")]
fn cuda_device_count() -> anyhow::Result<usize> {
    Ok(backend_cuda::preflight()?)
}

#[cfg(not(feature = "cuda"))]
fn cuda_device_count() -> anyhow::Result<usize> {
    anyhow::bail!("this proofline was built without the `cuda` feature")
}

/// The environment variable that keeps parameter generation on the CPU (`cpu`) when a device
/// backend is chosen; by default a device backend generates missing parameters on its first
/// device.
pub const PARAMS_ON_VAR: &str = "PROOFLINE_PARAMS_ON";

/// Who computes missing parameters' points for `cfg`: the first selected device of a device
/// backend (unless `PROOFLINE_PARAMS_ON=cpu`), else the CPU. Same bytes either way.
pub fn multiplier(cfg: &RunConfig) -> anyhow::Result<Box<dyn Multiplier>> {
    if !params_on_device_from_env()? {
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

/// Whether missing parameters are generated on a device, from `PROOFLINE_PARAMS_ON` (read here
/// only, for [`multiplier`] and [`preflight`] alike).
fn params_on_device_from_env() -> anyhow::Result<bool> {
    params_on_device(&std::env::var(PARAMS_ON_VAR).unwrap_or_default()).map_err(anyhow::Error::msg)
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
    let modules = backend_cuda::nvrtc::modules(&source, arch, &|line| crate::tell!("{line}"))
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
    use super::{check_ordinals, params_on_device, parse_cuda_arch};

    #[test]
    fn every_ordinal_is_checked_and_a_repeat_refused() {
        assert_eq!(check_ordinals(&[0], 1, "opencl"), Ok(()));
        assert_eq!(check_ordinals(&[1, 0], 2, "cuda"), Ok(()));
        // Negative twins: the second ordinal past the end, a repeat, and no device at all.
        let e = check_ordinals(&[0, 7], 2, "cuda").unwrap_err();
        assert!(
            e.contains("device 7 does not exist") && e.contains("cuda backend has 2 devices"),
            "{e}"
        );
        let e = check_ordinals(&[0, 0], 2, "cuda").unwrap_err();
        assert!(e.contains("device 0 is listed twice"), "{e}");
        assert!(check_ordinals(&[0], 0, "opencl").is_err());
    }

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
