//! Many independent affine additions with one field inversion (Montgomery's trick): the core
//! that bucket accumulation and the sum of the ones share.
//!
//! For `n` additions `Q_i + P_i`: the products of the denominators are built forward (one
//! multiplication each), the last one is inverted once, and unwinding it backward gives each
//! inverse (two multiplications each); the slope, `x3` and `y3` then take one multiplication,
//! one square and one multiplication: `5M + 1S` per addition and one inversion per batch.

use super::field::Coord;

/// How an addition is computed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Distinct x: the chord, denominator `x_P - x_Q`.
    Add,
    /// The same point: the tangent, denominator `2 y`.
    Double,
    /// Opposite points (or a 2-torsion point doubled): the sum is the identity.
    Cancel,
}

/// The case of `q + p` and its denominator (one for `Cancel`, so the product stays nonzero).
#[inline]
fn case<F: Coord>(q: &(F, F), p: &(F, F), one: &F) -> (Case, F) {
    if p.0 != q.0 {
        (Case::Add, p.0.sub(&q.0))
    } else if p.1 == q.1 && !q.1.is_zero() {
        (Case::Double, q.1.add(&q.1))
    } else {
        (Case::Cancel, *one)
    }
}

/// A batch of additions: the `i`-th adds two affine points (neither the identity) and stores
/// the sum (`None` for the identity).
pub trait Additions<F: Coord> {
    /// The number of additions.
    fn count(&self) -> usize;
    /// The two points of addition `i`.
    fn pair(&self, i: usize) -> ((F, F), (F, F));
    /// Stores the sum of addition `i`; called once per `i`, in decreasing `i`, after every
    /// `pair` call of the forward pass and only `pair(i)` of the same `i` before it.
    fn store(&mut self, i: usize, sum: Option<(F, F)>);
}

/// Computes every addition of `pairs`; `prefix` is scratch, grown as needed.
pub fn add_pairs<F: Coord>(pairs: &mut impl Additions<F>, prefix: &mut Vec<F>) {
    let n = pairs.count();
    if n == 0 {
        return;
    }
    let one = F::one();
    if prefix.len() < n {
        prefix.resize(n, F::ZERO);
    }
    let mut acc = one;
    for (i, slot) in prefix[..n].iter_mut().enumerate() {
        let (q, p) = pairs.pair(i);
        *slot = acc;
        acc = acc.mul(&case(&q, &p, &one).1);
    }
    // Every denominator is nonzero, so is their product.
    let mut inv = acc.inverse();
    for i in (0..n).rev() {
        let (q, p) = pairs.pair(i);
        let (kind, den) = case(&q, &p, &one);
        let num = match kind {
            Case::Add => p.1.sub(&q.1),
            Case::Double => q.0.sqr().triple(),
            Case::Cancel => {
                pairs.store(i, None);
                continue;
            }
        };
        let lambda = num.mul(&inv.mul(&prefix[i]));
        inv = inv.mul(&den);
        let x3 = lambda.sqr().sub(&q.0).sub(&p.0);
        let y3 = lambda.mul(&q.0.sub(&x3)).sub(&q.1);
        pairs.store(i, Some((x3, y3)));
    }
}
