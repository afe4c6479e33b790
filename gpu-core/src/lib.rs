//! proofline's shared GPU layer: what the CUDA and OpenCL backends have in common, written
//! once so that POCL (a CPU OpenCL, in CI) checks the code both run.
//!
//! From the device up:
//! - [`device`]: the small trait an API crate implements (buffers, copies, launches,
//!   synchronisation, memory facts); [`trace`]: what its queues record while tracing;
//! - [`kernels`]: one kernel source for both APIs (ec-gpu-gen's fields and curves, proofline's
//!   own kernels, the generated Montgomery product), and the names of its kernels;
//! - [`memory`]: every device buffer counted against the device's limit (`--gpu-mem-limit`);
//!   [`context`]: one device with its gauge and kernel names, as the stages use it;
//! - [`ntt`]: the H pipeline on a device, with the CPU backend's semantics;
//! - [`msm`]: query-plan MSMs (the 0/1 split on the host or the device, the sorted and stock
//!   bucket MSMs; bases resident or streamed in chunks);
//! - [`fixed_base`]: parameter generation's fixed-base products on a device (prover-core's
//!   `Multiplier`); [`synthetic`]: a timing workload's bases made on the device;
//! - [`accelerator`]: an `Accelerator` over any device: prepare (resident bases), workers, b_g2
//!   on the device, hand-back on any device error;
//! - [`options`]: the backend's settings, typed, parsed from a lookup the binary gives;
//!   [`fault`]: the fault-injection test hook; [`profile`]: step times;
//!   [`cache`]: the program binary cache on disk; [`skip`]: a backend opened or skipped, for
//!   tests.
#![warn(missing_docs)]

pub mod accelerator;
pub mod cache;
pub mod context;
pub mod device;
pub mod fault;
pub mod fixed_base;
pub mod kernels;
pub mod memory;
pub mod msm;
pub mod ntt;
pub mod options;
pub mod profile;
pub mod skip;
pub mod synthetic;
pub mod trace;

pub use accelerator::{DeviceBackend, GpuAccelerator};
pub use context::GpuDevice;
pub use device::{Arg, Device, DeviceError, DeviceInfo, DeviceResult, Queue};
pub use fault::Faults;
pub use fixed_base::GpuMultiplier;
pub use kernels::{KernelSource, Limbs, Unit};
pub use options::GpuOptions;
