//! proofline's OpenCL backend: the shared GPU layer (`gpu-core`) on OpenCL through opencl3,
//! which opens `libOpenCL` at run time (nothing OpenCL is needed to build).
//!
//! - devices: [`select`] (`--opencl-device PLATFORM[:N]`; by default every GPU, else every
//!   device), each with its program built once and cached on disk (`gpu_core::cache`);
//! - [`OpenClBackend`]: gpu-core's accelerator over those devices (bases resident when they
//!   fit, streamed when not; the whole accelerator stage and b_g2 on the device; any device
//!   error hands the partition back for the engine's fallback).
#![warn(missing_docs)]

pub mod device;
pub mod select;

use gpu_core::{Faults, GpuAccelerator, GpuOptions, KernelSource, Limbs};

pub use device::OpenClDevice;
pub use select::Selector;

/// The OpenCL backend.
pub type OpenClBackend = GpuAccelerator<OpenClDevice>;

/// How to open the backend.
#[derive(Debug, Default)]
pub struct OpenClOptions {
    /// Which devices (`--opencl-device`).
    pub selector: Selector,
    /// Device memory cap per device (`--gpu-mem-limit`).
    pub mem_limit: Option<u64>,
    /// Injected faults (test hook; also read from `PROOFLINE_GPU_FAIL_CALLS`).
    pub faults: Option<Faults>,
    /// Trace every copy and kernel on the device's clock (`--device-trace`; also turned on by
    /// `PROOFLINE_GPU_TRACE=1`).
    pub trace: bool,
}

/// Opens the selected devices and builds (or loads) their programs. Errors say what was
/// missing: no OpenCL loader, no platform, no matching device, a build failure with its log.
pub fn open(options: OpenClOptions) -> prover_core::Result<OpenClBackend> {
    // The environment's options first: a malformed one is refused before any device opens.
    let mut gpu = GpuOptions::from_env(options.mem_limit, options.faults)?;
    gpu.trace |= options.trace;
    let backend_err = |detail: String| prover_core::Error::Resource {
        what: "an OpenCL device",
        detail,
    };
    // Some drivers (POCL among them) do not survive being initialised or building programs
    // from several threads at once: opening is serialised per process.
    static OPENING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = OPENING.lock().unwrap_or_else(|p| p.into_inner());
    let found = select::select(&options.selector).map_err(backend_err)?;
    let source = KernelSource::new(Limbs::L32);
    let cache = gpu_core::cache::KernelCache::from_env();
    let devices = found
        .iter()
        .map(|f| {
            OpenClDevice::open(f, &source, cache.as_ref()).map_err(|e| backend_err(e.to_string()))
        })
        .collect::<prover_core::Result<Vec<_>>>()?;
    Ok(GpuAccelerator::new("opencl", devices, &source.names, gpu))
}

/// Whether this run is CI's (`CI=true` or `CI=1`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// For tests: the backend, or `None` with the reason printed when there is no OpenCL here.
/// Under `CI=true` (CI installs POCL) a backend that does not open is a panic, not a skip.
/// `PROOFLINE_OPENCL_DEVICE` picks the devices (`--opencl-device`'s syntax). Prints the
/// devices it runs on.
pub fn open_or_skip(mut options: OpenClOptions) -> Option<OpenClBackend> {
    if let Ok(s) = std::env::var("PROOFLINE_OPENCL_DEVICE") {
        options.selector = Selector::parse(&s).expect("PROOFLINE_OPENCL_DEVICE");
    }
    match open(options) {
        Ok(b) => {
            b.describe().iter().for_each(|line| eprintln!("{line}"));
            Some(b)
        }
        Err(e) if !in_ci() => {
            eprintln!("skipped: no OpenCL device here ({e}); CI installs POCL and fails instead");
            None
        }
        Err(e) => panic!("CI=true but the OpenCL backend did not open: {e}"),
    }
}
