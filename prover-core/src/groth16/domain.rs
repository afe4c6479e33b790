//! The evaluation domain of a partition: the roots of unity and the coset that the H
//! computation uses, as bellperson picks them. One definition for the generator, the CPU
//! backend and every device backend.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::error::{Error, Result};

/// An evaluation domain of size `2^log2` over Fr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    /// log2 of the size.
    pub log2: u32,
    /// The generator of the size-`2^log2` subgroup, as bellperson picks it (Fr's 2^32-th root
    /// of unity squared down).
    pub omega: Scalar,
}

impl Domain {
    /// The domain of size `2^log2`; `log2` of Fr's two-adicity (32) or more is an error, as in
    /// bellperson's `EvaluationDomain`.
    pub fn new(log2: u32) -> Result<Self> {
        if log2 >= Scalar::S {
            return Err(Error::DomainTooLarge { log2 });
        }
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log2..Scalar::S {
            omega = omega.square();
        }
        Ok(Domain { log2, omega })
    }

    /// The smallest domain holding `n` evaluations (bellperson's `EvaluationDomain` sizing:
    /// at least one).
    pub fn for_size(n: usize) -> Result<Self> {
        let size = n
            .max(1)
            .checked_next_power_of_two()
            .ok_or(Error::DomainTooLarge { log2: usize::BITS })?;
        Self::new(size.trailing_zeros())
    }

    /// The size.
    pub fn size(&self) -> usize {
        1 << self.log2
    }

    /// `omega^-1`.
    pub fn omega_inv(&self) -> Scalar {
        self.omega.invert().expect("a root of unity is nonzero")
    }

    /// `1 / size`.
    pub fn size_inv(&self) -> Scalar {
        Scalar::from(self.size() as u64)
            .invert()
            .expect("the domain size is below the field characteristic")
    }

    /// The coset shift `g` (Fr's multiplicative generator, as in bellperson).
    pub fn coset_shift() -> Scalar {
        Scalar::MULTIPLICATIVE_GENERATOR
    }

    /// `g^-1`.
    pub fn coset_shift_inv() -> Scalar {
        Self::coset_shift()
            .invert()
            .expect("the generator is nonzero")
    }

    /// `1 / Z(g x)` on the coset, where `Z(x) = x^size - 1` is the vanishing polynomial: it is
    /// the same constant `1 / (g^size - 1)` at every point of the coset.
    pub fn z_on_coset_inv(&self) -> Scalar {
        (Self::coset_shift().pow_vartime([self.size() as u64]) - Scalar::ONE)
            .invert()
            .expect("g is not in the subgroup, so g^size != 1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omega_has_the_domain_order() {
        for log2 in [0, 1, 5, 20] {
            let d = Domain::new(log2).unwrap();
            assert_eq!(d.omega.pow_vartime([d.size() as u64]), Scalar::ONE);
            // Twin: half the order is not one (for log2 >= 1, omega is primitive).
            if log2 > 0 {
                assert_ne!(d.omega.pow_vartime([(d.size() / 2) as u64]), Scalar::ONE);
            }
            assert_eq!(d.omega * d.omega_inv(), Scalar::ONE);
            assert_eq!(d.size_inv() * Scalar::from(d.size() as u64), Scalar::ONE);
        }
    }

    #[test]
    fn sizes_round_up_and_too_large_is_an_error() {
        assert_eq!(Domain::for_size(0).unwrap().size(), 1);
        assert_eq!(Domain::for_size(5).unwrap().size(), 8);
        assert_eq!(Domain::for_size(8).unwrap().size(), 8);
        assert!(matches!(
            Domain::new(32),
            Err(Error::DomainTooLarge { log2: 32 })
        ));
        assert!(Domain::new(31).is_ok());
    }

    #[test]
    fn z_on_coset_is_the_vanishing_polynomial_at_g() {
        let d = Domain::new(4).unwrap();
        let g = Domain::coset_shift();
        let z = g.pow_vartime([16]) - Scalar::ONE;
        assert_eq!(d.z_on_coset_inv() * z, Scalar::ONE);
        // Twin: at a point of the domain itself Z vanishes.
        assert_eq!(d.omega.pow_vartime([16]) - Scalar::ONE, Scalar::ZERO);
    }
}
