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

use gpu_core::skip::or_skip;
use gpu_core::{GpuAccelerator, GpuOptions, KernelSource, Limbs};

pub use device::OpenClDevice;
pub use gpu_core::skip::Missing;
pub use select::Selector;

/// The OpenCL backend.
pub type OpenClBackend = GpuAccelerator<OpenClDevice>;

/// The environment variable the tests and benchmarks pick their OpenCL devices by
/// (`--opencl-device`'s syntax; the command line has `--opencl-device` itself).
pub const DEVICE_VAR: &str = "PROOFLINE_OPENCL_DEVICE";

/// How to open the backend.
#[derive(Debug, Default)]
pub struct OpenClOptions {
    /// Which devices (`--opencl-device`).
    pub selector: Selector,
    /// The device layer's settings: the memory cap per device (`--gpu-mem-limit`), injected
    /// faults, the kernels' choices, tracing (`--device-trace`) and profiling, and the kernel
    /// cache's folder.
    pub gpu: GpuOptions,
}

impl OpenClOptions {
    /// The options a test or benchmark runs with: `mem_limit`, the devices
    /// `PROOFLINE_OPENCL_DEVICE` picks ([`DEVICE_VAR`]), and the `PROOFLINE_GPU_*` and kernel
    /// cache variables ([`GpuOptions::from_lookup`]), as `lookup` gives them.
    pub fn from_lookup(
        mem_limit: Option<u64>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> prover_core::Result<Self> {
        let selector = match lookup(DEVICE_VAR) {
            None => Selector::default(),
            Some(s) => Selector::parse(&s).map_err(|detail| prover_core::Error::InvalidConfig {
                what: "OpenCL devices",
                detail: format!("{DEVICE_VAR}: {detail}"),
            })?,
        };
        Ok(OpenClOptions {
            selector,
            gpu: GpuOptions::from_lookup(mem_limit, lookup)?,
        })
    }
}

/// Opens the selected devices and builds (or loads) their programs. Errors say what was
/// missing: no OpenCL loader, no platform, no matching device, a build failure with its log.
pub fn open(options: OpenClOptions) -> prover_core::Result<OpenClBackend> {
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
    let cache = options.gpu.kernel_cache();
    let devices = found
        .iter()
        .map(|f| {
            OpenClDevice::open(f, &source, cache.as_ref()).map_err(|e| backend_err(e.to_string()))
        })
        .collect::<prover_core::Result<Vec<_>>>()?;
    Ok(GpuAccelerator::new(
        "opencl",
        devices,
        &source.names,
        options.gpu,
    ))
}

/// For tests: the backend, or, where there is no OpenCL here, `None` with the reason printed
/// (`Missing::Skip`) or a panic (`Missing::Fail`: CI installs POCL). Prints the devices it runs
/// on.
pub fn open_or_skip(options: OpenClOptions, missing: Missing) -> Option<OpenClBackend> {
    or_skip("OpenCL", open(options), missing)
}
