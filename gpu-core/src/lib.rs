//! proofline's shared GPU layer: what the CUDA and OpenCL backends have in common, written
//! once so that POCL (a CPU OpenCL, in CI) checks the code both run.
//!
//! - [`source`]: one kernel source for both APIs: ec-gpu-gen's field, curve, FFT and multiexp
//!   code for Fr, Fp, Fp2, G1 and G2, and proofline's own kernels (`kernels.cl`, `msm.cl`).
//! - [`device`]: the small trait an API crate implements (buffers, copies, launches,
//!   synchronisation, memory facts).
//! - [`memory`]: every device buffer counted against the device's limit (`--gpu-mem-limit`).
//! - [`ntt`]: the H pipeline on a device, with the CPU backend's semantics.
//! - [`msm`]: query-plan MSMs (density, zeros dropped, ones batch-added, bucket MSM; bases
//!   resident or streamed in chunks).
//! - [`classify`]: the 0/1 split on the device (a partition's witness uploaded once, each
//!   query's scalars classified into the lists the host scan makes).
//! - [`accelerator`]: a `Accelerator` over any device: prepare (resident bases), workers, b_g2
//!   on the device, hand-back on any device error.
//! - [`fixed_base`]: parameter generation's fixed-base products on a device (prover-core's
//!   `Multiplier`).
//! - [`cache`]: the program binary cache on disk.
//! - [`fault`]: the fault-injection test hook.
//! - [`profile`]: step times under `PROOFLINE_GPU_PROFILE=1`.
#![warn(missing_docs)]

pub mod accelerator;
pub mod cache;
pub mod classify;
pub mod context;
pub mod device;
pub mod fault;
pub mod fixed_base;
pub mod memory;
pub mod mont;
pub mod msm;
pub mod ntt;
pub mod pippenger;
pub mod profile;
pub mod source;
pub mod synthetic;
pub mod trace;

pub use accelerator::{GpuAccelerator, GpuOptions};
pub use context::GpuDevice;
pub use device::{Arg, Device, DeviceError, DeviceInfo, DeviceResult, Queue};
pub use fault::Faults;
pub use fixed_base::GpuMultiplier;
pub use source::{KernelSource, Limbs, Unit};
