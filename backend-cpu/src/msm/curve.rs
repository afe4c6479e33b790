//! The two groups an MSM runs over, G1 and G2: their affine coordinates for the batch-affine
//! Pippenger, and blst's Pippenger for comparison.

use std::ops::AddAssign;

use blst::{blst_fp, blst_fp2, blst_p1_affine, blst_p2_affine};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::prime::PrimeCurveAffine;
use group::Group;

use super::field::Coord;

/// A group whose MSM runs on the CPU, by either engine.
pub trait MsmGroup: Copy + Send + Sync + 'static {
    /// The projective point type.
    type Projective: Group + Send + Sync + for<'a> AddAssign<&'a Self>;
    /// The coordinate field (Fp for G1, Fp2 for G2).
    type Base: Coord;
    /// One bucket's share of a window's reduction (two projective additions), in batch-affine
    /// bucket additions; measured (see `docs/performance.md`), it steers the window width.
    const REDUCE_COST: f64;
    /// Affine coordinates `(x, y)`; the identity is `(0, 0)`.
    fn coords(&self) -> (Self::Base, Self::Base);
    /// Whether this is the identity (it adds nothing, and the batch-affine additions take none).
    fn is_infinity(&self) -> bool;
    /// The affine form of a projective point.
    fn from_projective(p: &Self::Projective) -> Self;
    /// The point with coordinates `(x, y)`, which must be on the curve (or `(0, 0)`).
    fn from_coords(x: Self::Base, y: Self::Base) -> Self;
    /// blst's Pippenger over `points.len()` (point, scalar) pairs given by pointers.
    fn blst_pippenger(points: &[*const Self], scalars: &[*const u8]) -> Self::Projective;
}

macro_rules! impl_msm_group {
    ($affine:ty, $proj:ty, $base:ty, $raw:ident, $reduce:expr, $scratch:path, $mult:path) => {
        impl MsmGroup for $affine {
            type Projective = $proj;
            type Base = $base;
            const REDUCE_COST: f64 = $reduce;

            #[inline]
            fn coords(&self) -> ($base, $base) {
                let raw: &$raw = self.as_ref();
                (raw.x, raw.y)
            }

            #[inline]
            fn is_infinity(&self) -> bool {
                self.is_identity().into()
            }

            fn from_projective(p: &$proj) -> Self {
                <$affine>::from(p)
            }

            #[inline]
            fn from_coords(x: $base, y: $base) -> Self {
                let mut p = <$affine>::identity();
                *p.as_mut() = $raw { x, y };
                p
            }

            fn blst_pippenger(points: &[*const Self], scalars: &[*const u8]) -> $proj {
                debug_assert_eq!(points.len(), scalars.len());
                let n = points.len();
                let mut out = <$proj>::identity();
                if n == 0 {
                    return out;
                }
                // SAFETY: blst reads `n` pointers from each array (see multi_scalar.c: a null
                // entry would switch to flat mode, and none is null), each point is a valid
                // affine point of the parameters (`repr(transparent)` over blst's type), each
                // scalar pointer has 32 readable bytes, and the scratch has the size blst asks.
                unsafe {
                    let bytes = $scratch(n);
                    let mut scratch = vec![0u64; bytes.div_ceil(8)];
                    $mult(
                        out.as_mut(),
                        points.as_ptr().cast::<*const $raw>(),
                        n,
                        scalars.as_ptr(),
                        255,
                        scratch.as_mut_ptr().cast(),
                    );
                }
                out
            }
        }
    };
}

impl_msm_group!(
    G1Affine,
    G1Projective,
    blst_fp,
    blst_p1_affine,
    2.2,
    blst::blst_p1s_mult_pippenger_scratch_sizeof,
    blst::blst_p1s_mult_pippenger
);
impl_msm_group!(
    G2Affine,
    G2Projective,
    blst_fp2,
    blst_p2_affine,
    2.2,
    blst::blst_p2s_mult_pippenger_scratch_sizeof,
    blst::blst_p2s_mult_pippenger
);
