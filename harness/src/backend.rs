//! The backend a run asks for (`--backend`), opened in one place ([`open_backend`]) from typed
//! options ([`BackendOptions`]), with the CPU as the fallback of the device backends (a
//! partition a device hands back is proved there): what proving, parameter generation
//! ([`multiplier`]) and the synthetic workload use. Checked before anything slow runs
//! ([`preflight`]: the settings, the libraries, the devices named). A device backend this build
//! leaves out (`--no-default-features`) is an error saying so ([`not_compiled`]).
//!
//! The device layer reads no environment variable: its settings (`PROOFLINE_GPU_*`, the kernel
//! cache's folder) are read here, at the binary's edge, and handed to it typed.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use gpu_core::{DeviceBackend, GpuOptions};
use prover_core::{Accelerator, CpuMultiplier, Multiplier};

use crate::config::{BackendKind, RunConfig};

/// A variable of this process's environment, by name (`None`: unset or not Unicode).
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// What opening a backend takes.
#[derive(Debug)]
pub struct BackendOptions {
    /// Which backend (`--backend`).
    pub kind: BackendKind,
    /// Which OpenCL devices (`--opencl-device`; the OpenCL backend's alone).
    pub opencl_device: Option<String>,
    /// The device layer's settings (a device backend's alone).
    pub gpu: GpuOptions,
}

impl BackendOptions {
    /// The options of `kind` on `opencl_device`, its devices capped at `mem_limit`
    /// (`--gpu-mem-limit`), traced when `trace` (`--device-trace`) or `PROOFLINE_GPU_TRACE`
    /// asks, and the rest of the device layer's settings from the environment
    /// ([`GpuOptions::from_lookup`]); a malformed one is an error.
    pub fn new(
        kind: BackendKind,
        opencl_device: Option<&str>,
        mem_limit: Option<u64>,
        trace: bool,
    ) -> anyhow::Result<Self> {
        let mut gpu = GpuOptions::from_lookup(mem_limit, env)?;
        gpu.trace |= trace;
        Ok(BackendOptions {
            kind,
            opencl_device: opencl_device.map(str::to_string),
            gpu,
        })
    }

    /// The options a run of `cfg` opens its backend with.
    pub fn for_run(cfg: &RunConfig) -> anyhow::Result<Self> {
        Self::new(
            cfg.backend,
            cfg.opencl_device.as_deref(),
            cfg.gpu_mem_limit,
            cfg.trace,
        )
    }
}

/// The accelerator and its fallback.
pub struct Backends {
    /// The accelerator backend.
    pub backend: Arc<dyn Accelerator>,
    /// Where handed-back partitions go (`None` for the CPU backend, its own fallback).
    pub fallback: Option<Arc<dyn Accelerator>>,
    /// The same backend seen as a device backend, where it is one (parameter generation on a
    /// device, the synthetic workload); `None` for the CPU backend.
    pub device: Option<Arc<dyn DeviceBackend>>,
}

/// Opens the backend `options` name; errors say what is missing (no OpenCL platform, no
/// device, a backend not compiled into this build).
pub fn open_backend(options: BackendOptions) -> anyhow::Result<Backends> {
    let device = match options.kind {
        BackendKind::Cpu => {
            return Ok(Backends {
                backend: Arc::new(CpuBackend),
                fallback: None,
                device: None,
            })
        }
        BackendKind::Opencl => open_opencl(options)?,
        BackendKind::Cuda => open_cuda(options)?,
    };
    Ok(Backends {
        backend: device.clone().into_accelerator(),
        fallback: Some(Arc::new(CpuBackend)),
        device: Some(device),
    })
}

/// Opens the backend `cfg` names ([`open_backend`]).
pub fn open(cfg: &RunConfig) -> anyhow::Result<Backends> {
    open_backend(BackendOptions::for_run(cfg)?)
}

#[cfg(feature = "opencl")]
fn open_opencl(options: BackendOptions) -> anyhow::Result<Arc<dyn DeviceBackend>> {
    let selector = backend_opencl::Selector::parse(options.opencl_device.as_deref().unwrap_or(""))
        .map_err(anyhow::Error::msg)?;
    let opened = backend_opencl::open(backend_opencl::OpenClOptions {
        selector,
        gpu: options.gpu,
    })?;
    Ok(Arc::new(opened))
}

#[cfg(not(feature = "opencl"))]
fn open_opencl(_: BackendOptions) -> anyhow::Result<Arc<dyn DeviceBackend>> {
    Err(not_compiled(BackendKind::Opencl))
}

#[cfg(feature = "cuda")]
fn open_cuda(options: BackendOptions) -> anyhow::Result<Arc<dyn DeviceBackend>> {
    let opened = backend_cuda::open(backend_cuda::CudaOptions { gpu: options.gpu })?;
    Ok(Arc::new(opened))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: BackendOptions) -> anyhow::Result<Arc<dyn DeviceBackend>> {
    Err(not_compiled(BackendKind::Cuda))
}

/// The error of a backend this build leaves out (built without its cargo feature).
pub fn not_compiled(kind: BackendKind) -> anyhow::Error {
    anyhow::Error::msg(kind.not_compiled())
}

/// Checks in milliseconds, before any parameters are loaded or generated, what a run of `cfg`
/// needs from its backend: `PROOFLINE_PARAMS_ON` is `cpu` or `device`, the device layer's
/// settings parse, and for a device backend its libraries load (every function there, for
/// CUDA), `--opencl-device` matches, and every ordinal of `--gpus` (the first one by default:
/// the device that generates missing parameters unless `PROOFLINE_PARAMS_ON=cpu`) is one of
/// its devices, listed once. No kernel is compiled. The CPU backend has nothing to check.
pub fn preflight(cfg: &RunConfig) -> anyhow::Result<()> {
    if cfg.backend == BackendKind::Cpu {
        return Ok(());
    }
    params_on_device_from_env()?;
    // The device layer's settings (PROOFLINE_GPU_* and the like), before any parameter.
    BackendOptions::for_run(cfg)?;
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
    Err(not_compiled(BackendKind::Opencl))
}

/// How many CUDA devices the driver lists (both libraries checked, nothing compiled).
#[cfg(feature = "cuda")]
fn cuda_device_count() -> anyhow::Result<usize> {
    Ok(backend_cuda::preflight()?)
}

#[cfg(not(feature = "cuda"))]
fn cuda_device_count() -> anyhow::Result<usize> {
    Err(not_compiled(BackendKind::Cuda))
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
    let Some(gpu) = open(cfg)?.device else {
        return Ok(Box::new(CpuMultiplier));
    };
    let device = cfg.gpus.first().copied().unwrap_or(0);
    let count = gpu.device_count();
    gpu.multiplier(device)
        .ok_or_else(|| anyhow::anyhow!("--gpus names device {device}; there are {count}"))
}

/// Whether missing parameters are generated on a device, from `PROOFLINE_PARAMS_ON` (read here
/// only, for [`multiplier`] and [`preflight`] alike).
fn params_on_device_from_env() -> anyhow::Result<bool> {
    params_on_device(&env(PARAMS_ON_VAR).unwrap_or_default()).map_err(anyhow::Error::msg)
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
    let folder = gpu_core::cache::folder(env).ok_or_else(|| {
        anyhow::anyhow!(
            "no kernel cache folder: set {} (or HOME)",
            gpu_core::cache::CACHE_VAR
        )
    })?;
    let cache = gpu_core::cache::KernelCache::new(&folder);
    let source = gpu_core::KernelSource::new(gpu_core::Limbs::L32);
    let modules =
        backend_cuda::nvrtc::modules(&source, arch, Some(&cache), &|line| crate::tell!("{line}"))
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

/// Without the CUDA backend in this build: the error saying so ([`not_compiled`]).
#[cfg(not(feature = "cuda"))]
pub fn cache_cuda_kernels(_: (i32, i32)) -> anyhow::Result<CachedKernels> {
    Err(not_compiled(BackendKind::Cuda))
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
    use super::*;

    #[test]
    fn a_backend_left_out_of_the_build_says_how_to_build_it() {
        for (kind, name) in [(BackendKind::Cuda, "cuda"), (BackendKind::Opencl, "opencl")] {
            let e = not_compiled(kind).to_string();
            assert!(
                e.contains(&format!(
                    "the {name} backend is not compiled into this build"
                )) && e.contains(&format!("--features {name}")),
                "{e}"
            );
        }
    }

    /// Without the `cuda` feature, `--backend cuda` is that error, from the check before the
    /// run and from opening alike (its twin, the CPU backend, opens).
    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_is_refused_where_it_is_not_compiled() {
        let e = check_devices(BackendKind::Cuda, None, &[0]).unwrap_err();
        assert!(e.to_string().contains("not compiled"), "{e}");
        let options = |kind| BackendOptions {
            kind,
            opencl_device: None,
            gpu: GpuOptions::default(),
        };
        let e = open_backend(options(BackendKind::Cuda))
            .err()
            .expect("an error");
        assert!(e.to_string().contains("not compiled"), "{e}");
        assert!(open_backend(options(BackendKind::Cpu)).is_ok());
    }

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
