//! The one kernel source both APIs compile, and everything that makes it:
//!
//! - the kernels themselves, OpenCL C that CUDA compiles too: `kernels.cl` (element-wise),
//!   `ntt.cl`, `msm.cl` (stock MSM), `pippenger.cl` (sorted MSM), `classify.cl` (the 0/1
//!   split), `fixed_base.cl` and `inverse.cl` (parameter generation), `synthetic.cl` (timing
//!   workloads' bases), `field.cl` (the fields' branch-free functions);
//! - [`fields`]: ec-gpu-gen's fields and curves, in a fixed order, with `field.cl`'s functions
//!   and [`mont`]'s product in place of its own;
//! - [`mont`]: the Montgomery product generated for a modulus, as PTX and as C;
//! - [`names`]: the names of the kernels the host launches;
//! - [`source`]: the whole program ([`KernelSource`]) and its per-kernel units ([`Unit`]).

pub mod fields;
pub mod mont;
pub mod names;
pub mod source;

pub use fields::Limbs;
pub use names::{KernelNames, NTT_MAX_G};
pub use source::{log_tail, KernelSource, Unit};
