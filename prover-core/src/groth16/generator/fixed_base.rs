//! Fixed-base multiplication of a generator by many scalars, through precomputed tables.

use std::sync::atomic::{AtomicU64, Ordering};

use blstrs::Scalar;
use ff::PrimeField;
use group::Curve;
use rayon::prelude::*;

/// Tells tables apart (a device keeps the last one it was sent).
static NEXT_TABLE: AtomicU64 = AtomicU64::new(0);

/// Fixed-base scalar multiplication by a precomputed table of signed window digits: for window
/// `i` and digit `d` in `1..=2^(w-1)` the table holds `d * 2^(w*i) * base` in affine form, so a
/// product costs one mixed addition per window and no doublings (bellperson's wNAF costs 255
/// doublings a product). Not constant time: for test and benchmark setups, whose toxic waste
/// is generated and thrown away in the same process.
///
/// The digits are any signed digits in `-2^(w-1)..=2^(w-1)` whose weighted sum is the scalar:
/// the CPU's [`FixedBase::mul`] carries out of each window, a device may use Booth digits
/// (`gpu-core`'s `fixed_base.cl`); `windows` covers both for scalars below 2^255.
pub struct FixedBase<G: Curve> {
    id: u64,
    window: usize,
    windows: usize,
    table: Vec<G::AffineRepr>,
}

impl<G> FixedBase<G>
where
    G: Curve + Send + Sync,
    G::AffineRepr: Send + Sync + Default + Copy,
{
    /// A table sized for `n` products: the window minimizes table building plus products.
    pub fn new(base: G, n: usize) -> Self {
        let cost = |w: usize| ((1usize << (w - 1)) + n) * (Scalar::NUM_BITS as usize / w + 2);
        Self::with_window(base, (2..=16).min_by_key(|&w| cost(w)).expect("a window"))
    }

    /// A table of `window`-bit windows.
    ///
    /// # Panics
    /// Unless `2 <= window <= 16` (a programming error: [`FixedBase::new`] picks it).
    pub fn with_window(base: G, window: usize) -> Self {
        assert!((2..=16).contains(&window), "window {window} outside 2..=16");
        // One extra window takes the carry out of the top signed digit.
        let windows = (Scalar::NUM_BITS as usize).div_ceil(window) + 1;
        let half = 1usize << (window - 1);
        let mut bases = Vec::with_capacity(windows);
        let mut b = base;
        for _ in 0..windows {
            bases.push(b);
            for _ in 0..window {
                b = b.double();
            }
        }
        let rows: Vec<Vec<G::AffineRepr>> = bases
            .into_par_iter()
            .map(|b| {
                let mut row = Vec::with_capacity(half);
                let mut acc = b;
                for _ in 0..half {
                    row.push(acc);
                    acc += b;
                }
                normalize(&row)
            })
            .collect();
        FixedBase {
            id: NEXT_TABLE.fetch_add(1, Ordering::Relaxed),
            window,
            windows,
            table: rows.concat(),
        }
    }

    /// This table's identity in the process (tables are never equal by id).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bits per window, `w`.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Windows: `ceil(255 / w) + 1`, at least `ceil(256 / w)`.
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// `table[i * 2^(w-1) + d - 1] = d * 2^(w*i) * base` in affine form, for window `i` and
    /// digit `d` in `1..=2^(w-1)`.
    pub fn table(&self) -> &[G::AffineRepr] {
        &self.table
    }

    /// `s * base`.
    pub fn mul(&self, s: &Scalar) -> G {
        // Room for the 8-byte read of the top window (bit offsets up to 16 * 17 = 272).
        let mut bytes = [0u8; 48];
        bytes[..32].copy_from_slice(&s.to_bytes_le());
        let half = 1u64 << (self.window - 1);
        let mask = (1u64 << self.window) - 1;
        let mut acc = G::identity();
        let mut carry = 0u64;
        for i in 0..self.windows {
            let bit = i * self.window;
            let word = u64::from_le_bytes(bytes[bit / 8..bit / 8 + 8].try_into().expect("8 bytes"));
            let mut digit = ((word >> (bit % 8)) & mask) + carry;
            // Signed digits in -2^(w-1)..=2^(w-1): a larger one is taken as digit - 2^w, with
            // one carried into the next window.
            let negative = digit > half;
            if negative {
                digit = mask + 1 - digit;
            }
            carry = u64::from(negative);
            if digit > 0 {
                let p = self.table[i * half as usize + (digit - 1) as usize];
                if negative {
                    acc -= p;
                } else {
                    acc += p;
                }
            }
        }
        debug_assert_eq!(carry, 0);
        acc
    }
}

/// Affine forms of `p`, in one batch inversion.
pub fn normalize<G: Curve>(p: &[G]) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Default + Copy,
{
    let mut out = vec![G::AffineRepr::default(); p.len()];
    G::batch_normalize(p, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective};
    use ff::Field;
    use group::Group;

    #[test]
    fn fixed_base_products_match_plain_multiplication() {
        let mut rng = rand::thread_rng();
        let g1 = G1Projective::random(&mut rng);
        let g2 = G2Projective::random(&mut rng);
        // Edge scalars: zero, one, -1 (all windows full), 2^k - 1 and 2^k patterns.
        let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
        for k in [1u64, 15, 16, 17, 31, 32, 63, 64] {
            scalars.push(Scalar::from(1u64 << (k % 64)));
            scalars.push(Scalar::from(u64::MAX >> (64 - k)));
        }
        scalars.extend((0..16).map(|_| Scalar::random(&mut rng)));
        for window in 2..=16 {
            let t1 = FixedBase::with_window(g1, window);
            // (G2 tables of 15- and 16-bit windows take seconds to build: G1 covers those widths.)
            let t2 = FixedBase::with_window(g2, window.min(14));
            for s in &scalars {
                assert_eq!(t1.mul(s), g1 * s, "G1, window {window}, scalar {s:?}");
                assert_eq!(t2.mul(s), g2 * s, "G2, window {window}, scalar {s:?}");
            }
            // Negative twin: the table of another base gives another product.
            let other = FixedBase::with_window(g1.double(), window);
            assert_ne!(other.mul(&scalars[5]), g1 * scalars[5]);
        }
    }
}
