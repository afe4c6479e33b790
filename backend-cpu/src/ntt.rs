//! Radix-2 NTT over Fr on the CPU (rayon), and the H polynomial of a partition.

use blstrs::Scalar;
use ff::Field;
pub use prover_core::Domain;
use rayon::prelude::*;

/// Blocks of this many scalars (512 KiB) run their first stages in cache, on one thread.
const BLOCK_LOG: u32 = 14;
/// Work items of the wide stages span at least this many butterflies.
const PAR_MIN: usize = 1 << 10;

/// In-place NTT: `values[i] <- sum_j values[j] * omega^(i j)`, in natural order.
///
/// Decimation in time after a (parallel) bit reversal. The first `BLOCK_LOG` stages run block
/// by block in cache, with a compact twiddle table per stage, so a 2^22 NTT makes 10 passes
/// over its data instead of 23 (about 12% faster in the PoRep quotient on two cores; grouping
/// the wide stages two by two was slower there, and was taken out).
pub fn ntt(values: &mut [Scalar], omega: Scalar) {
    ntt_blocked(values, omega, BLOCK_LOG, Wide::Own);
}

/// The twiddle factors of a domain's wide NTT stages, `omega^j` for `j < n / 2`: one table
/// serves the forward NTTs (`omega`) and the inverse ones (`omega^-j = -omega^(n/2 - j)`, since
/// `omega^(n/2) = -1`), so the H polynomial's seven NTTs share one table of `n / 2` scalars
/// instead of computing (and, three at a time, holding) one each.
pub struct Twiddles {
    omega: Scalar,
    table: Vec<Scalar>,
}

impl Twiddles {
    /// The table for the `n`-point domain with generator `omega`.
    pub fn new(omega: Scalar, n: usize) -> Self {
        Twiddles {
            omega,
            table: powers(omega, n / 2),
        }
    }

    /// Bytes of the table for an `n`-point domain.
    pub fn bytes(n: usize) -> u64 {
        (n / 2) as u64 * std::mem::size_of::<Scalar>() as u64
    }
}

/// The NTT of `values` over the domain of `twiddles` (of the same size), forward (`omega`) or
/// `inverse` (`omega^-1`).
pub fn ntt_with(values: &mut [Scalar], twiddles: &Twiddles, inverse: bool) {
    assert_eq!(
        twiddles.table.len(),
        values.len() / 2,
        "NTT of {} scalars with the twiddles of another domain",
        values.len()
    );
    let omega = if inverse {
        twiddles
            .omega
            .invert()
            .expect("a root of unity is not zero")
    } else {
        twiddles.omega
    };
    ntt_blocked(values, omega, BLOCK_LOG, Wide::Shared(twiddles, inverse));
}

/// Where the wide stages' twiddles come from.
enum Wide<'a> {
    /// Computed for this NTT.
    Own,
    /// A shared table, read forward or inverse.
    Shared(&'a Twiddles, bool),
}

fn ntt_blocked(values: &mut [Scalar], omega: Scalar, block_log: u32, wide: Wide<'_>) {
    let n = values.len();
    assert!(n.is_power_of_two(), "NTT size {n} is not a power of two");
    if n == 1 {
        return;
    }
    bit_reverse(values);
    let log_n = n.trailing_zeros();
    let block = 1usize << block_log.min(log_n);
    // Stage twiddles for the in-block stages: small[h + j] = omega_{2h}^j for h = 1, 2, 4, ...,
    // block / 2 (omega_{2h} = omega^(n / 2h)), so every block reads the same 512 KiB.
    let small = {
        let mut t = vec![Scalar::ZERO; block.max(2)];
        let mut h = 1;
        while h < block {
            let w = omega.pow_vartime([(n / (2 * h)) as u64]);
            scale_by_powers(&mut t[h..2 * h], w, Scalar::ONE, true);
            h *= 2;
        }
        t
    };
    values.par_chunks_mut(block).for_each(|blk| {
        let mut h = 1;
        while h < blk.len() {
            let tw = &small[h..2 * h];
            for pair in blk.chunks_mut(2 * h) {
                let (lo, hi) = pair.split_at_mut(h);
                for ((l, x), w) in lo.iter_mut().zip(hi.iter_mut()).zip(tw) {
                    bf(l, x, w);
                }
            }
            h *= 2;
        }
    });
    if block == n {
        return;
    }
    let own;
    let (table, inverse) = match wide {
        Wide::Shared(t, inverse) => (&t.table[..], inverse),
        Wide::Own => {
            own = powers(omega, n / 2);
            (&own[..], false)
        }
    };
    let mut h = block;
    while h < n {
        radix2_pass(values, table, inverse, h);
        h *= 2;
    }
}

/// One wide stage (`h >= block`), parallel over blocks and over chunks of butterflies; the
/// twiddle of butterfly `i` is `table[i]`, or for an `inverse` table `-table[n/2 - i]`.
fn radix2_pass(values: &mut [Scalar], table: &[Scalar], inverse: bool, h: usize) {
    let half = values.len() / 2;
    let stride = half / h;
    let chunk = PAR_MIN.min(h);
    values.par_chunks_mut(2 * h).for_each(|blk| {
        let (lo, hi) = blk.split_at_mut(h);
        lo.par_chunks_mut(chunk)
            .zip(hi.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(c, (l, x))| {
                for (k, (l, x)) in l.iter_mut().zip(x.iter_mut()).enumerate() {
                    let i = (c * chunk + k) * stride;
                    match (inverse, i) {
                        (false, _) => bf(l, x, &table[i]),
                        (true, 0) => bf(l, x, &Scalar::ONE),
                        (true, _) => bf_negated(l, x, &table[half - i]),
                    }
                }
            });
    });
}

#[inline(always)]
fn bf(lo: &mut Scalar, hi: &mut Scalar, w: &Scalar) {
    let t = *hi * w;
    *hi = *lo - t;
    *lo += t;
}

/// The butterfly with the twiddle `-w`.
#[inline(always)]
fn bf_negated(lo: &mut Scalar, hi: &mut Scalar, w: &Scalar) {
    let t = *hi * w;
    *hi = *lo + t;
    *lo -= t;
}

/// A raw pointer shared by the threads of the bit reversal.
#[derive(Clone, Copy)]
struct SharedPtr(*mut Scalar);
// SAFETY: see `bit_reverse`: every element is touched by exactly one task.
unsafe impl Send for SharedPtr {}
// SAFETY: as above.
unsafe impl Sync for SharedPtr {}

/// Permutes `values` into bit-reversed order, in parallel and in place.
fn bit_reverse(values: &mut [Scalar]) {
    let n = values.len();
    let shift = usize::BITS - n.trailing_zeros();
    let ptr = SharedPtr(values.as_mut_ptr());
    (0..n).into_par_iter().with_min_len(1 << 12).for_each(|i| {
        let j = i.reverse_bits() >> shift;
        if i < j {
            let p = ptr;
            // SAFETY: i < j < n, and the pair {i, j} is swapped only by the task of its smaller
            // index (reversal is an involution), so no two tasks touch the same element, and
            // `values` is borrowed mutably for the whole loop.
            unsafe { std::ptr::swap(p.0.add(i), p.0.add(j)) };
        }
    });
}

/// `[1, g, g^2, ..., g^(n-1)]`, computed in parallel chunks.
pub fn powers(g: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    scale_by_powers(&mut out, g, Scalar::ONE, true);
    out
}

/// `values[i] *= c * g^i` (or `values[i] = c * g^i` when `assign`), in parallel.
fn scale_by_powers(values: &mut [Scalar], g: Scalar, c: Scalar, assign: bool) {
    const CHUNK: usize = 1 << 12;
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut p = c * g.pow_vartime([(k * CHUNK) as u64]);
            for v in chunk {
                if assign {
                    *v = p;
                } else {
                    *v *= p;
                }
                p *= g;
            }
        });
}

/// Inverse NTT followed by the move to the coset `g * H`: from evaluations over the domain to
/// evaluations over the coset (`g` is Fr's multiplicative generator, as in bellperson).
pub fn evaluations_to_coset(values: &mut [Scalar], domain: &Domain) {
    evaluations_to_coset_with(values, domain, &Twiddles::new(domain.omega, domain.size()));
}

fn evaluations_to_coset_with(values: &mut [Scalar], domain: &Domain, twiddles: &Twiddles) {
    debug_assert_eq!(values.len(), domain.size());
    ntt_with(values, twiddles, true);
    scale_by_powers(values, Domain::coset_shift(), domain.size_inv(), false);
    ntt_with(values, twiddles, false);
}

/// The coefficients of `H = (A B - C) / Z` from the A, B, C evaluations of a partition
/// (bellperson's computation, with the scalings fused): iNTT, coset NTT, pointwise
/// `(a b - c) / Z(g)`, coset iNTT. Returns the `m - 1` coefficients that meet the H query; b and
/// c are freed as soon as they are used. The seven NTTs share one twiddle table
/// ([`Twiddles::bytes`] of the domain, besides a, b and c).
pub fn quotient(
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
    domain: &Domain,
) -> Vec<Scalar> {
    let m = domain.size();
    for v in [&mut a, &mut b, &mut c] {
        v.resize(m, Scalar::ZERO);
    }
    let tw = Twiddles::new(domain.omega, m);
    rayon::join(
        || evaluations_to_coset_with(&mut a, domain, &tw),
        || {
            rayon::join(
                || evaluations_to_coset_with(&mut b, domain, &tw),
                || evaluations_to_coset_with(&mut c, domain, &tw),
            )
        },
    );
    let zinv = domain.z_on_coset_inv();
    a.par_iter_mut()
        .zip(b.par_iter())
        .zip(c.par_iter())
        .with_min_len(PAR_MIN)
        .for_each(|((a, b), c)| *a = (*a * b - c) * zinv);
    drop(b);
    drop(c);
    ntt_with(&mut a, &tw, true);
    scale_by_powers(&mut a, Domain::coset_shift_inv(), domain.size_inv(), false);
    a.truncate(m - 1);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(values: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        let n = values.len();
        (0..n)
            .map(|i| {
                let wi = omega.pow_vartime([i as u64]);
                let mut acc = Scalar::ZERO;
                let mut p = Scalar::ONE;
                for v in values {
                    acc += *v * p;
                    p *= wi;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn ntt_matches_naive_dft() {
        let mut rng = rand::thread_rng();
        for log2 in [0, 1, 2, 3, 5, 11] {
            let d = Domain::new(log2).unwrap();
            let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
            let mut got = v.clone();
            ntt(&mut got, d.omega);
            assert_eq!(got, naive(&v, d.omega), "log2 {log2}");
            // Negative twin: the wrong root gives a different transform (for n = 2 the only
            // twiddle is 1, whatever the root).
            if log2 > 1 {
                let mut wrong = v.clone();
                ntt(&mut wrong, d.omega.square());
                assert_ne!(wrong, got);
            }
        }
    }

    #[test]
    fn wide_passes_match_naive_dft() {
        // Blocks of 2^b leave 7 - b wide stages.
        let mut rng = rand::thread_rng();
        let d = Domain::new(7).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let want = naive(&v, d.omega);
        for block_log in [1, 2, 3, 7] {
            let mut got = v.clone();
            ntt_blocked(&mut got, d.omega, block_log, Wide::Own);
            assert_eq!(got, want, "block 2^{block_log}");
        }
        // Negative twin: a wrong twiddle in a wide pass shows.
        let mut got = v.clone();
        ntt_blocked(&mut got, d.omega.square(), 2, Wide::Own);
        assert_ne!(got, want);
        // Large sizes: in-cache blocks agree with blocks of 2 (nearly every stage wide).
        let d = Domain::new(16).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let (mut x, mut y) = (v.clone(), v);
        ntt(&mut x, d.omega);
        ntt_blocked(&mut y, d.omega, 1, Wide::Own);
        assert_eq!(x, y);
    }

    #[test]
    fn a_shared_table_serves_forward_and_inverse_wide_passes() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(7).unwrap();
        let tw = Twiddles::new(d.omega, d.size());
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        for (omega, inverse) in [(d.omega, false), (d.omega_inv(), true)] {
            let want = naive(&v, omega);
            for block_log in [1, 3, 7] {
                let mut got = v.clone();
                ntt_blocked(&mut got, omega, block_log, Wide::Shared(&tw, inverse));
                assert_eq!(got, want, "block 2^{block_log}, inverse {inverse}");
                // Negative twin: the table read the other way round.
                if block_log < 7 {
                    let mut wrong = v.clone();
                    ntt_blocked(&mut wrong, omega, block_log, Wide::Shared(&tw, !inverse));
                    assert_ne!(wrong, want);
                }
            }
        }
        // The public entry at a size with wide stages, both ways.
        let d = Domain::new(16).unwrap();
        let tw = Twiddles::new(d.omega, d.size());
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let (mut x, mut y) = (v.clone(), v.clone());
        ntt(&mut x, d.omega_inv());
        ntt_with(&mut y, &tw, true);
        assert_eq!(x, y);
        ntt_with(&mut y, &tw, false);
        let n_inv = d.size_inv();
        assert_eq!(y.iter().map(|s| *s * n_inv).collect::<Vec<_>>(), v);
    }

    #[test]
    fn ntt_round_trips() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(17).unwrap();
        let v: Vec<Scalar> = (0..d.size()).map(|_| Scalar::random(&mut rng)).collect();
        let mut w = v.clone();
        ntt(&mut w, d.omega);
        ntt(&mut w, d.omega.invert().unwrap());
        let minv = Scalar::from(d.size() as u64).invert().unwrap();
        w.iter_mut().for_each(|x| *x *= minv);
        assert_eq!(v, w);
    }

    #[test]
    fn quotient_is_the_division_by_z() {
        // With A, B of degree < m and C the evaluations of A B on the domain, C's interpolant
        // is A B mod (x^m - 1), so H = (A B - C) / (x^m - 1) is the high half of A B:
        // h_i = (A B)_{i + m}.
        let mut rng = rand::thread_rng();
        let d = Domain::new(6).unwrap();
        let m = d.size();
        let pa: Vec<Scalar> = (0..m).map(|_| Scalar::random(&mut rng)).collect();
        let pb: Vec<Scalar> = (0..m).map(|_| Scalar::random(&mut rng)).collect();
        let mut ab = vec![Scalar::ZERO; 2 * m - 1];
        for (i, x) in pa.iter().enumerate() {
            for (j, y) in pb.iter().enumerate() {
                ab[i + j] += *x * y;
            }
        }
        let (mut a, mut b) = (pa.clone(), pb.clone());
        ntt(&mut a, d.omega);
        ntt(&mut b, d.omega);
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        let h = quotient(a.clone(), b.clone(), c.clone(), &d);
        assert_eq!(h, ab[m..].to_vec());
        // Negative twin: C off by one at one point no longer divides, and H changes.
        let mut c2 = c;
        c2[3] += Scalar::ONE;
        assert_ne!(quotient(a, b, c2, &d), ab[m..].to_vec());
    }
}
