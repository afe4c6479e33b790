//! Many independent affine additions with one field inversion (Montgomery's trick): the core
//! that bucket accumulation and the sum of the ones share.
//!
//! For `n` additions `Q_i + P_i`: the products of the denominators are built forward (one
//! multiplication each), the last one is inverted once, and unwinding it backward gives each
//! inverse (two multiplications each); the slope, `x3` and `y3` then take one multiplication,
//! one square and one multiplication: `5M + 1S` per addition and one inversion per batch.

use super::field::Coord;

/// How many additions ahead the operands are prefetched (bucket arrays outgrow the caches).
const PREFETCH_AHEAD: usize = 8;

/// Prefetches every cache line of `r` (a no-op off x86-64).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (r as *const T).cast::<i8>();
        let size = std::mem::size_of::<T>();
        let mut at = 0;
        while at < size {
            // SAFETY: a prefetch never faults, and the address is inside `r`.
            unsafe { _mm_prefetch(p.add(at), _MM_HINT_T0) };
            at += 64;
        }
        // SAFETY: as above (the last byte, whose line the stride may have missed).
        unsafe { _mm_prefetch(p.add(size - 1), _MM_HINT_T0) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

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

/// The case of `q + p`, its denominator written to `den` (one for `Cancel`, so the product
/// stays nonzero).
#[inline]
fn case<F: Coord>(q: &(F, F), p: &(F, F), one: &F, den: &mut F) -> Case {
    if !p.0.same(&q.0) {
        F::sub_to(den, &p.0, &q.0);
        Case::Add
    } else if p.1.same(&q.1) && !q.1.is_zero() {
        F::add_to(den, &q.1, &q.1);
        Case::Double
    } else {
        *den = *one;
        Case::Cancel
    }
}

/// A batch of additions: the `i`-th adds two affine points (neither the identity) and stores
/// the sum (`None` for the identity).
pub trait Additions<F: Coord> {
    /// The number of additions.
    fn count(&self) -> usize;
    /// The two points of addition `i`.
    fn pair(&self, i: usize) -> (&(F, F), &(F, F));
    /// Asks the memory system for the operands of addition `i` (if there is one), ahead of use.
    fn prefetch(&self, _i: usize) {}
    /// Stores the sum of addition `i`; called once per `i`, in decreasing `i`, after every
    /// invocation of `pair` in the forward pass and only `pair(i)` of the same `i` before it.
    fn store(&mut self, i: usize, sum: Option<&(F, F)>);
}

/// Computes every addition of `pairs`; `prefix` is scratch, grown as needed. Every field
/// operation writes its result where it is used next (see [`Coord`]).
pub fn add_pairs<F: Coord>(pairs: &mut impl Additions<F>, prefix: &mut Vec<F>) {
    let n = pairs.count();
    if n == 0 {
        return;
    }
    let one = F::one();
    if prefix.len() < n {
        prefix.resize(n, F::ZERO);
    }
    // prefix[i] = den_0 ... den_i
    let mut den = F::ZERO;
    for i in 0..PREFETCH_AHEAD {
        pairs.prefetch(i);
    }
    for i in 0..n {
        pairs.prefetch(i + PREFETCH_AHEAD);
        let (q, p) = pairs.pair(i);
        case(q, p, &one, &mut den);
        if i == 0 {
            prefix[0] = den;
        } else {
            let (done, rest) = prefix.split_at_mut(i);
            F::mul_to(&mut rest[0], &done[i - 1], &den);
        }
    }
    // Every denominator is nonzero, so is their product.
    let mut inv = F::ZERO;
    F::inverse_to(&mut inv, &prefix[n - 1]);
    let (mut inv_i, mut lambda, mut t) = (F::ZERO, F::ZERO, F::ZERO);
    let mut sum = (F::ZERO, F::ZERO);
    for i in (0..n).rev() {
        if let Some(j) = i.checked_sub(PREFETCH_AHEAD) {
            pairs.prefetch(j);
        }
        let (q, p) = pairs.pair(i);
        let kind = case(q, p, &one, &mut den);
        if kind == Case::Cancel {
            pairs.store(i, None);
            continue;
        }
        // inv = 1 / (den_0 ... den_i); inv_i = 1 / den_i.
        let inv_i = if i == 0 {
            &inv
        } else {
            F::mul_to(&mut inv_i, &inv, &prefix[i - 1]);
            inv.mul_assign(&den);
            &inv_i
        };
        match kind {
            Case::Add => F::sub_to(&mut t, &p.1, &q.1),
            _ => {
                F::sqr_to(&mut t, &q.0);
                t.triple_assign();
            }
        }
        F::mul_to(&mut lambda, &t, inv_i);
        F::sqr_to(&mut sum.0, &lambda);
        sum.0.sub_assign(&q.0);
        sum.0.sub_assign(&p.0);
        F::sub_to(&mut t, &q.0, &sum.0);
        F::mul_to(&mut sum.1, &lambda, &t);
        sum.1.sub_assign(&q.1);
        pairs.store(i, Some(&sum));
    }
}
