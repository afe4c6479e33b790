//! The coordinate fields of G1 and G2 (blst's Fp and Fp2, in Montgomery form) with the few
//! operations the batch-affine additions use, on blst's assembly.

use blst::{blst_fp, blst_fp2};

/// A coordinate field element. Values are kept fully reduced by blst, so equality of the
/// representations is equality of the elements.
pub trait Coord: Copy + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// One (in Montgomery form).
    fn one() -> Self;
    /// `r = a + b`.
    fn add_to(r: &mut Self, a: &Self, b: &Self);
    /// `r = a - b`.
    fn sub_to(r: &mut Self, a: &Self, b: &Self);
    /// `r = a * b`.
    fn mul_to(r: &mut Self, a: &Self, b: &Self);
    /// `r = a^2`.
    fn sqr_to(r: &mut Self, a: &Self);
    /// `a *= b`.
    fn mul_assign(&mut self, b: &Self);
    /// `a -= b`.
    fn sub_assign(&mut self, b: &Self);
    /// `a *= 3`.
    fn triple_assign(&mut self);
    /// `a = -a`.
    fn neg_assign(&mut self);
    /// `r = 1 / a` (variable time); `a` must not be zero.
    fn inverse_to(r: &mut Self, a: &Self);
    /// The 64-bit limbs of the representation.
    fn limbs(&self) -> &[u64];
    /// Whether `a == b` (limb by limb, without branches or invoking `memcmp`).
    #[inline]
    fn same(&self, b: &Self) -> bool {
        self.limbs()
            .iter()
            .zip(b.limbs())
            .fold(0, |acc, (x, y)| acc | (x ^ y))
            == 0
    }
    /// Whether `a == 0`.
    #[inline]
    fn is_zero(&self) -> bool {
        self.limbs().iter().fold(0, |acc, x| acc | x) == 0
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
            fn limbs(&self) -> &[u64] {
                const WORDS: usize = std::mem::size_of::<$t>() / 8;
                // SAFETY: the type is `repr(C)` over `u64` arrays only (blst's bindings), so
                // its bytes are `WORDS` initialized, aligned `u64`s.
                unsafe { std::slice::from_raw_parts((self as *const $t).cast::<u64>(), WORDS) }
            }

            // Results are written in place by blst (an output may be the first input): a
            // value returned and then copied would be read back right after blst's stores.
            #[inline]
            fn add_to(r: &mut Self, a: &Self, b: &Self) {
                // SAFETY: blst reads two elements and writes one, all of this type.
                unsafe { $add(r, a, b) }
            }

            #[inline]
            fn sub_to(r: &mut Self, a: &Self, b: &Self) {
                // SAFETY: as above.
                unsafe { $sub(r, a, b) }
            }

            #[inline]
            fn mul_to(r: &mut Self, a: &Self, b: &Self) {
                // SAFETY: as above.
                unsafe { $mul(r, a, b) }
            }

            #[inline]
            fn sqr_to(r: &mut Self, a: &Self) {
                // SAFETY: blst reads one element and writes one.
                unsafe { $sqr(r, a) }
            }

            #[inline]
            fn mul_assign(&mut self, b: &Self) {
                let a: *mut Self = self;
                // SAFETY: as above; blst allows the output to be the first input.
                unsafe { $mul(a, a, b) }
            }

            #[inline]
            fn sub_assign(&mut self, b: &Self) {
                let a: *mut Self = self;
                // SAFETY: as above.
                unsafe { $sub(a, a, b) }
            }

            #[inline]
            fn triple_assign(&mut self) {
                let a: *mut Self = self;
                // SAFETY: as above.
                unsafe { $three(a, a) }
            }

            #[inline]
            fn neg_assign(&mut self) {
                let a: *mut Self = self;
                // SAFETY: as above.
                unsafe { $cneg(a, a, true) }
            }

            #[inline]
            fn inverse_to(r: &mut Self, a: &Self) {
                debug_assert!(!a.is_zero(), "inverse of zero");
                // SAFETY: as above.
                unsafe { $inv(r, a) }
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

    fn op(f: impl Fn(&mut blst_fp)) -> blst_fp {
        let mut r = FP_ZERO;
        f(&mut r);
        r
    }

    #[test]
    fn fp_arithmetic_agrees_with_small_integers() {
        assert_eq!(blst_fp::one(), from_u64(1));
        assert!(from_u64(7).same(&from_u64(7)) && !from_u64(7).same(&from_u64(8)));
        assert!(FP_ZERO.is_zero() && !blst_fp::one().is_zero());
        assert_eq!(blst_fp2::one().limbs().len(), 12);
        let (a, b) = (from_u64(1234), from_u64(5678));
        assert_eq!(op(|r| Coord::mul_to(r, &a, &b)), from_u64(1234 * 5678));
        assert_eq!(op(|r| Coord::add_to(r, &a, &b)), from_u64(1234 + 5678));
        assert_eq!(op(|r| Coord::sub_to(r, &b, &a)), from_u64(5678 - 1234));
        assert_eq!(op(|r| Coord::sqr_to(r, &a)), from_u64(1234 * 1234));
        let mut x = a;
        x.triple_assign();
        assert_eq!(x, from_u64(3 * 1234));
        x.mul_assign(&b);
        assert_eq!(x, from_u64(3 * 1234 * 5678));
        x.sub_assign(&a);
        assert_eq!(x, from_u64(3 * 1234 * 5678 - 1234));
        x.neg_assign();
        assert_eq!(
            op(|r| Coord::add_to(r, &x, &from_u64(3 * 1234 * 5678 - 1234))),
            FP_ZERO
        );
        let inv = op(|r| Coord::inverse_to(r, &a));
        assert_eq!(op(|r| Coord::mul_to(r, &a, &inv)), blst_fp::one());
        // Negative twins.
        assert_ne!(op(|r| Coord::mul_to(r, &a, &b)), from_u64(1234 * 5678 + 1));
        assert_ne!(op(|r| Coord::mul_to(r, &a, &inv)), from_u64(2));
        let y = blst_fp2 { fp: [a, b] };
        let mut yi = blst_fp2::ZERO;
        Coord::inverse_to(&mut yi, &y);
        yi.mul_assign(&y);
        assert_eq!(yi, blst_fp2::one());
        assert_ne!(yi, blst_fp2 { fp: [a, FP_ZERO] });
    }
}
