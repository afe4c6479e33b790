//! proofline's CUDA backend: the shared GPU layer (`gpu-core`) on CUDA through cudarc's driver
//! API, loaded at run time (nothing CUDA is needed to build). The kernels are gpu-core's one
//! source, compiled by NVRTC for each device's architecture, one CUBIN per kernel built on all
//! cores at once, and cached on disk ([`nvrtc`], `gpu_core::cache`). Both libraries are checked
//! for every function proofline calls before cudarc calls into them ([`library`]): a missing,
//! old or broken one is an error naming it, not a panic.
#![warn(missing_docs)]

pub mod device;
mod event;
pub mod library;
pub mod nvrtc;
mod staging;

use gpu_core::skip::{or_skip, Missing};
use gpu_core::{GpuAccelerator, GpuOptions, KernelSource, Limbs};

pub use device::CudaDevice;

/// The CUDA backend.
pub type CudaBackend = GpuAccelerator<CudaDevice>;

/// How to open the backend.
#[derive(Debug, Default)]
pub struct CudaOptions {
    /// The device layer's settings: the memory cap per device (`--gpu-mem-limit`), injected
    /// faults, the kernels' choices, tracing (`--device-trace`) and profiling, and the kernel
    /// cache's folder.
    pub gpu: GpuOptions,
}

fn fail(detail: String) -> prover_core::Error {
    prover_core::Error::Resource {
        what: "a CUDA device",
        detail,
    }
}

/// What opening needs, checked in milliseconds (no kernel is compiled or loaded): the driver and
/// NVRTC load with every function proofline calls, the driver initialises and lists at least
/// one device. Returns how many devices it lists (ordinals `0..n`).
pub fn preflight() -> prover_core::Result<usize> {
    library::driver().map_err(|e| fail(e.to_string()))?;
    cudarc::driver::result::init().map_err(|e| fail(format!("cuInit: {e:?}")))?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| fail(format!("counting devices: {e:?}")))?;
    if count <= 0 {
        return Err(fail("the driver lists no CUDA device".into()));
    }
    library::nvrtc().map_err(|e| fail(e.to_string()))?;
    Ok(count as usize)
}

/// Opens every CUDA device (the engine's `--gpus` picks among them) with its kernels. Errors
/// say what is missing: the driver or NVRTC (or a function in either), a device, or the
/// compile with its log.
pub fn open(options: CudaOptions) -> prover_core::Result<CudaBackend> {
    let gpu = options.gpu;
    let count = preflight()?;
    let nvrtc = nvrtc::version().map_err(fail)?;
    let source = KernelSource::new(Limbs::L32);
    // The units and their texts once, for every device (and a rebuild).
    let units = source.units();
    let cache = gpu.kernel_cache();
    let progress = |line: &str| eprintln!("{line}");
    let mut devices = Vec::new();
    for ordinal in 0..count {
        let arch = CudaDevice::arch(ordinal).map_err(|e| fail(e.to_string()))?;
        let modules =
            nvrtc::modules_of(&units, arch, cache.as_ref(), nvrtc::Cached::Use, &progress)
                .map_err(fail)?;
        let from_cache = modules.iter().any(|m| m.cached);
        let device = match CudaDevice::open(ordinal, modules, nvrtc) {
            Ok(device) => device,
            // A cached CUBIN the driver refuses (damaged, or from another toolkit) is compiled
            // again and stored over; a fresh one that fails is the error.
            Err(e) if from_cache => {
                eprintln!("warning: cached CUDA kernels did not load ({e}); compiling them again");
                let fresh = nvrtc::modules_of(
                    &units,
                    arch,
                    cache.as_ref(),
                    nvrtc::Cached::Replace,
                    &progress,
                )
                .map_err(fail)?;
                CudaDevice::open(ordinal, fresh, nvrtc).map_err(|e| fail(e.to_string()))?
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        devices.push(device);
    }
    Ok(GpuAccelerator::new("cuda", devices, &source.names, gpu))
}

/// For tests: the backend, or `None` with the reason printed when there is no CUDA device here
/// (CI has none: device tests skip there, always). Prints the devices it runs on.
pub fn open_or_skip(options: CudaOptions) -> Option<CudaBackend> {
    or_skip("CUDA", open(options), Missing::Skip)
}
