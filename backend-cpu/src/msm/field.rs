//! The coordinate fields of G1 and G2 (blst's Fp and Fp2, in Montgomery form) with the few
//! operations the batch-affine additions use, on blst's assembly.

use blst::{blst_fp, blst_fp2};

/// A coordinate field element. Values are kept fully reduced by blst, so equality of the
/// representations is equality of the elements.
pub trait Coord: Copy + PartialEq + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// One (in Montgomery form).
    fn one() -> Self;
    /// `a + b`.
    fn add(&self, b: &Self) -> Self;
    /// `a - b`.
    fn sub(&self, b: &Self) -> Self;
    /// `a * b`.
    fn mul(&self, b: &Self) -> Self;
    /// `a^2`.
    fn sqr(&self) -> Self;
    /// `3 a`.
    fn triple(&self) -> Self;
    /// `-a`.
    fn neg(&self) -> Self;
    /// `1 / a` (variable time); `a` must not be zero.
    fn inverse(&self) -> Self;
    /// Whether `a == 0`.
    fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }
}

macro_rules! impl_coord {
    ($t:ty, $zero:expr, $one:expr, $add:path, $sub:path, $mul:path, $sqr:path, $three:path,
     $cneg:path, $inv:path) => {
        impl Coord for $t {
            const ZERO: Self = $zero;

            #[inline]
            fn one() -> Self {
                $one
            }

            #[inline]
            fn add(&self, b: &Self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: blst reads two and writes one element of this type.
                unsafe { $add(&mut r, self, b) };
                r
            }

            #[inline]
            fn sub(&self, b: &Self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: as above.
                unsafe { $sub(&mut r, self, b) };
                r
            }

            #[inline]
            fn mul(&self, b: &Self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: as above.
                unsafe { $mul(&mut r, self, b) };
                r
            }

            #[inline]
            fn sqr(&self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: blst reads one and writes one element of this type.
                unsafe { $sqr(&mut r, self) };
                r
            }

            #[inline]
            fn triple(&self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: as above.
                unsafe { $three(&mut r, self) };
                r
            }

            #[inline]
            fn neg(&self) -> Self {
                let mut r = Self::ZERO;
                // SAFETY: as above.
                unsafe { $cneg(&mut r, self, true) };
                r
            }

            #[inline]
            fn inverse(&self) -> Self {
                debug_assert!(!self.is_zero(), "inverse of zero");
                let mut r = Self::ZERO;
                // SAFETY: as above.
                unsafe { $inv(&mut r, self) };
                r
            }
        }
    };
}

/// One in Montgomery form, `2^384 mod p`.
const FP_ONE: blst_fp = blst_fp {
    l: [
        0x7609_0000_0002_fffd,
        0xebf4_000b_c40c_0002,
        0x5f48_9857_53c7_58ba,
        0x77ce_5853_7052_5745,
        0x5c07_1a97_a256_ec6d,
        0x15f6_5ec3_fa80_e493,
    ],
};
const FP_ZERO: blst_fp = blst_fp { l: [0; 6] };

impl_coord!(
    blst_fp,
    FP_ZERO,
    FP_ONE,
    blst::blst_fp_add,
    blst::blst_fp_sub,
    blst::blst_fp_mul,
    blst::blst_fp_sqr,
    blst::blst_fp_mul_by_3,
    blst::blst_fp_cneg,
    blst::blst_fp_eucl_inverse
);
impl_coord!(
    blst_fp2,
    blst_fp2 {
        fp: [FP_ZERO, FP_ZERO]
    },
    blst_fp2 {
        fp: [FP_ONE, FP_ZERO]
    },
    blst::blst_fp2_add,
    blst::blst_fp2_sub,
    blst::blst_fp2_mul,
    blst::blst_fp2_sqr,
    blst::blst_fp2_mul_by_3,
    blst::blst_fp2_cneg,
    blst::blst_fp2_eucl_inverse
);

#[cfg(test)]
mod tests {
    use super::*;

    fn from_u64(v: u64) -> blst_fp {
        let mut r = FP_ZERO;
        let limbs = [v, 0, 0, 0, 0, 0];
        // SAFETY: blst reads six limbs and writes one element.
        unsafe { blst::blst_fp_from_uint64(&mut r, limbs.as_ptr()) };
        r
    }

    #[test]
    fn fp_arithmetic_agrees_with_small_integers() {
        assert_eq!(blst_fp::one(), from_u64(1));
        let (a, b) = (from_u64(1234), from_u64(5678));
        assert_eq!(a.mul(&b), from_u64(1234 * 5678));
        assert_eq!(a.add(&b), from_u64(1234 + 5678));
        assert_eq!(b.sub(&a), from_u64(5678 - 1234));
        assert_eq!(a.sqr(), from_u64(1234 * 1234));
        assert_eq!(a.triple(), from_u64(3 * 1234));
        assert_eq!(a.add(&a.neg()), blst_fp::ZERO);
        assert_eq!(a.mul(&a.inverse()), blst_fp::one());
        // Negative twins.
        assert_ne!(a.mul(&b), from_u64(1234 * 5678 + 1));
        assert_ne!(a.mul(&a.inverse()), from_u64(2));
        let x = blst_fp2 { fp: [a, b] };
        assert_eq!(x.mul(&x.inverse()), blst_fp2::one());
        assert_ne!(x.mul(&x.inverse()), blst_fp2 { fp: [a, FP_ZERO] });
    }
}
