//! Who computes the generator's fixed-base products: the CPU (here), or a device (`gpu-core`
//! implements [`Multiplier`] for its devices). Every multiplier returns the same affine points
//! for the same table and scalars, so the parameter bytes do not depend on where they were
//! made.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Curve;
use rayon::prelude::*;

use super::fixed_base::{normalize, FixedBase};
use crate::error::Result;

/// Computes `scalars[i] * base` for a table of the base's multiples.
pub trait Multiplier: Sync {
    /// The name in messages and progress lines (`cpu`, `cuda device 0`).
    fn name(&self) -> String;
    /// Scalars per call that keep it busy (the generator's chunk).
    fn chunk_len(&self) -> usize;
    /// The G1 products, affine, in order.
    fn g1(&self, base: &FixedBase<G1Projective>, scalars: &[Scalar]) -> Result<Vec<G1Affine>>;
    /// The G2 products, affine, in order.
    fn g2(&self, base: &FixedBase<G2Projective>, scalars: &[Scalar]) -> Result<Vec<G2Affine>>;
}

/// The CPU's products: every thread takes pieces of [`CPU_PIECE`] scalars, one batch
/// normalization each.
#[derive(Debug, Default, Clone, Copy)]
pub struct CpuMultiplier;

/// Scalars per piece of CPU work (one batch inversion).
pub const CPU_PIECE: usize = 1 << 13;

impl CpuMultiplier {
    fn products<G>(base: &FixedBase<G>, scalars: &[Scalar]) -> Vec<G::AffineRepr>
    where
        G: Curve + Send + Sync,
        G::AffineRepr: Send + Sync + Default + Copy,
    {
        scalars
            .par_chunks(CPU_PIECE)
            .flat_map_iter(|piece| {
                let proj: Vec<G> = piece.iter().map(|x| base.mul(x)).collect();
                normalize(&proj)
            })
            .collect()
    }
}

impl Multiplier for CpuMultiplier {
    fn name(&self) -> String {
        "cpu".into()
    }
    fn chunk_len(&self) -> usize {
        CPU_PIECE * rayon::current_num_threads() * 4
    }
    fn g1(&self, base: &FixedBase<G1Projective>, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        Ok(Self::products(base, scalars))
    }
    fn g2(&self, base: &FixedBase<G2Projective>, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        Ok(Self::products(base, scalars))
    }
}

/// The two groups the generator multiplies in, dispatched to a [`Multiplier`].
pub(super) trait GenCurve: Curve + Send + Sync
where
    Self::AffineRepr: Send + Sync + Default + Copy,
{
    fn products(
        m: &dyn Multiplier,
        base: &FixedBase<Self>,
        scalars: &[Scalar],
    ) -> Result<Vec<Self::AffineRepr>>;
}

impl GenCurve for G1Projective {
    fn products(
        m: &dyn Multiplier,
        base: &FixedBase<Self>,
        scalars: &[Scalar],
    ) -> Result<Vec<G1Affine>> {
        m.g1(base, scalars)
    }
}

impl GenCurve for G2Projective {
    fn products(
        m: &dyn Multiplier,
        base: &FixedBase<Self>,
        scalars: &[Scalar],
    ) -> Result<Vec<G2Affine>> {
        m.g2(base, scalars)
    }
}
