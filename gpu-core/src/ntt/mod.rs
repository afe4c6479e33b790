//! The H pipeline on a device, with the CPU backend's semantics: iNTT of a, b and c, coset
//! NTT, `(a b - c) / Z(g)`, coset iNTT; the result stays on the device as canonical MSM
//! exponents. The transforms are proofline's Stockham passes (`ntt.cl`: up to 2^10 points a
//! pass, twiddles from tables, natural order in and out, out of place). The element-wise steps
//! ride on the last pass of a transform as it stores: the move to the coset (`g^i / n`) on each
//! inverse transform, `A B` and `(A B - C) / Z` on the forward transforms of b and c, the move
//! back and the canonical form on the last. Resident at 2^27: 21 passes over memory, against 28
//! for seven separate transforms and their element-wise kernels.
//!
//! Memory: three vectors of the domain's size when they fit (a's transform stays on the device
//! while b and c are transformed); otherwise two, with the product kept on the host between
//! steps (one host vector more, more copies, separate element-wise kernels). Below two vectors
//! the device cannot hold the work, and the partition is handed back for the fallback.
//!
//! - [`shape`]: how a transform's passes are cut ([`NttShape`]);
//! - [`tables`]: the twiddles on the device ([`NttTables`]);
//! - [`transform`]: one transform's passes ([`ntt`], [`ntt_with`]);
//! - [`h`]: the H pipeline ([`quotient`], [`HPipeline`], [`NttMode`]);
//! - [`check`]: host checks of transforms and quotients.

pub mod check;
pub mod h;
pub mod shape;
pub mod tables;
pub mod transform;

pub use check::{
    check_ntt, check_quotient_at, check_round_trip, check_values, evaluate, interpolate_at,
};
pub use h::{quotient, HPipeline, NttMode};
pub use shape::NttShape;
pub use tables::{table_bytes_bound, NttTables, MAX_LOG_SINGLE};
pub use transform::{ntt, ntt_with};
