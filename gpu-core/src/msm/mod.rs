//! MSMs on a device, executing prover-core's query plan: each query's scalars are split into
//! zeros (dropped), ones (listed for a batch addition) and the rest (listed with their
//! exponents), on the host or on the device; the device sums the listed bases of ones and runs
//! a bucket MSM over the rest, gathering bases by index from the query's bases: resident when
//! they fit, streamed in chunks when they do not. Window and chunk sizes come from the device's
//! compute units and the memory left under its limit.
//!
//! - [`curve`]: the curves ([`DeviceCurve`]: G1, G2 and their kernels) and the operands' check;
//! - [`scan`]: the host scan of a query's scalars ([`Scan`]);
//! - [`classify`]: the same split on the device ([`DeviceScan`], from a [`DeviceWitness`]);
//! - [`prefix`]: prefix sums on the device (bucket and list offsets);
//! - [`pippenger`]: the sorted-bucket MSM, the default kernel;
//! - [`stock`]: the stock bucket MSM;
//! - [`query`]: a query's MSM from its lists and bases, by either kernel ([`MsmKernel`]).

pub mod classify;
pub mod curve;
pub mod pippenger;
pub mod prefix;
pub mod query;
pub mod scan;
pub mod stock;

pub use classify::{DeviceScan, DeviceWitness, ScanMode};
pub use curve::{check_terms, DeviceCurve};
pub use query::{dense_msm, query_msm, scanned_msm, Bases, MsmKernel};
pub use scan::Scan;
pub use stock::MsmPlan;
