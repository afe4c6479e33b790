//! Host checks of the device's transforms and quotients, at sizes where a CPU transform would
//! take too long: evaluation of a polynomial at a point, interpolation at a point off the
//! domain, a transform's values at chosen points and its round trip.

use blstrs::Scalar;
use ff::Field;
use prover_core::Domain;

use crate::context::GpuDevice;
use crate::device::{bytes_of_mut, Device, DeviceError, Queue};
use crate::ntt::shape::FR;
use crate::ntt::tables::{powers, NttTables};
use crate::ntt::transform::ntt_with;

/// Elements of a chunk of the host checks' loops on every core.
const CHECK_CHUNK: usize = 1 << 14;

/// The value at `x` of the polynomial whose coefficients are `coeffs` (lowest first):
/// `sum_j coeffs_j x^j`, on the host (Horner's rule in chunks, on every core).
pub fn evaluate(coeffs: &[Scalar], x: Scalar) -> Scalar {
    use rayon::prelude::*;
    let step = x.pow_vartime([CHECK_CHUNK as u64]);
    coeffs
        .par_chunks(CHECK_CHUNK)
        .enumerate()
        .map(|(k, chunk)| {
            let horner = chunk.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
            horner * step.pow_vartime([k as u64])
        })
        .reduce(|| Scalar::ZERO, |a, b| a + b)
}

/// The values at `r` of the polynomials of degree below the domain's size whose evaluations
/// over `domain` (at `omega^i`, `i` in order; missing ones zero) are each of `evals`, on the
/// host, by the barycentric formula `f(r) = (r^n - 1) / n sum_i f(omega^i) omega^i /
/// (r - omega^i)`; `None` where `r` is a point of the domain.
pub fn interpolate_at<const K: usize>(
    evals: [&[Scalar]; K],
    domain: &Domain,
    r: Scalar,
) -> Option<[Scalar; K]> {
    use ff::BatchInvert;
    use rayon::prelude::*;
    let n = domain.size();
    let z = r.pow_vartime([n as u64]) - Scalar::ONE;
    if bool::from(z.is_zero()) || evals.iter().any(|e| e.len() > n) {
        return None;
    }
    let sums = (0..n.div_ceil(CHECK_CHUNK))
        .into_par_iter()
        .map(|k| {
            let start = k * CHECK_CHUNK;
            let len = CHECK_CHUNK.min(n - start);
            // omega^i and 1 / (r - omega^i) for the chunk's points.
            let w = powers(domain.omega.pow_vartime([start as u64]), domain.omega, len);
            let mut inv: Vec<Scalar> = w.iter().map(|w| r - w).collect();
            inv.iter_mut().batch_invert();
            evals.map(|e| {
                let e = e.get(start..).unwrap_or(&[]);
                e.iter()
                    .zip(w.iter().zip(&inv))
                    .map(|(f, (w, inv))| *f * w * inv)
                    .sum::<Scalar>()
            })
        })
        .reduce(
            || [Scalar::ZERO; K],
            |a, b| std::array::from_fn(|j| a[j] + b[j]),
        );
    let scale = z * domain.size_inv();
    Some(sums.map(|s| s * scale))
}

/// Checks the quotient's coefficients `h` (the H pipeline's output, `n - 1` of them or `n`, the
/// last zero) for evaluations `a`, `b`, `c` with `a b = c` at every point of `domain` (a
/// satisfied system): then `A B - C` vanishes on the domain and `H = (A B - C) / Z` exactly, so
/// that `H(r) Z(r) = A(r) B(r) - C(r)` at the point `r` off the domain. On the host; a random
/// `r` catches a wrong coefficient but with probability about `n / |Fr|`.
pub fn check_quotient_at(
    h: &[Scalar],
    [a, b, c]: [&[Scalar]; 3],
    domain: &Domain,
    r: Scalar,
) -> Result<(), String> {
    let [ar, br, cr] = interpolate_at([a, b, c], domain, r)
        .ok_or_else(|| "the check's point is on the domain, or an input is too long".to_string())?;
    let z = r.pow_vartime([domain.size() as u64]) - Scalar::ONE;
    let got = evaluate(h, r) * z;
    if got == ar * br - cr {
        Ok(())
    } else {
        Err(format!(
            "the quotient of 2^{} is wrong: H(r) Z(r) != A(r) B(r) - C(r) at r = {r:?}",
            domain.log2
        ))
    }
}

/// Checks `output`, a transform of `input` with root `omega`, at the indices `spots` against
/// direct evaluation of `input` as a polynomial on the host: the value at `omega^i` is
/// `sum_j input_j omega^(i j)`. The first difference, as text.
pub fn check_values(
    input: &[Scalar],
    output: &[Scalar],
    omega: Scalar,
    spots: &[usize],
) -> Result<(), String> {
    let n = input.len();
    if output.len() != n {
        return Err(format!("{} values for {n} inputs", output.len()));
    }
    for &i in spots {
        if i >= n {
            return Err(format!("no point {i} in a domain of {n}"));
        }
        let want = evaluate(input, omega.pow_vartime([i as u64]));
        if output[i] != want {
            return Err(format!(
                "the value at omega^{i} is {:?}, the polynomial's {want:?}",
                output[i]
            ));
        }
    }
    Ok(())
}

/// Checks that `back`, the inverse transform (unscaled) of `input`'s transform, is `input`
/// times its size, at every point, on the host (on every core). The first difference, as text.
pub fn check_round_trip(input: &[Scalar], back: &[Scalar]) -> Result<(), String> {
    use rayon::prelude::*;
    let n = input.len();
    if back.len() != n {
        return Err(format!("{} values back for {n} inputs", back.len()));
    }
    let size = Scalar::from(n as u64);
    match (0..n)
        .into_par_iter()
        .find_first(|&j| back[j] != input[j] * size)
    {
        None => Ok(()),
        Some(j) => Err(format!(
            "the inverse transform does not give the input back (element {j} of {n})"
        )),
    }
}

/// Checks the device's transform by `forward` of `input` (its domain's size) against the host:
/// its values at the indices `spots` ([`check_values`]), then its transform by `inverse` (the
/// inverse root's) back to the input ([`check_round_trip`]). The first difference, or the
/// device's error, as text.
pub fn check_ntt<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    input: &[Scalar],
    forward: &NttTables<D>,
    inverse: &NttTables<D>,
    spots: &[usize],
) -> Result<(), String> {
    let (log_n, omega) = (forward.log_n, forward.omega);
    let n = 1usize << log_n;
    let what = format!("NTT 2^{log_n} ({})", forward.shape.name());
    if inverse.log_n != log_n || omega * inverse.omega != Scalar::ONE {
        return Err(format!(
            "{what}: the inverse tables are not the inverse root's"
        ));
    }
    if input.len() != n {
        return Err(format!("{what}: {} inputs", input.len()));
    }
    let device = |e: DeviceError| format!("{what}: {e}");
    let mut x = gpu.upload(q, input, "NTT check").map_err(device)?;
    let mut tmp = gpu
        .alloc(n as u64 * FR, "NTT check scratch")
        .map_err(device)?;
    let mut out = vec![Scalar::ZERO; n];
    ntt_with(gpu, q, &mut x, &mut tmp, forward).map_err(device)?;
    q.read(x.raw(), 0, bytes_of_mut(&mut out)).map_err(device)?;
    check_values(input, &out, omega, spots).map_err(|e| format!("{what}: {e}"))?;
    ntt_with(gpu, q, &mut x, &mut tmp, inverse).map_err(device)?;
    q.read(x.raw(), 0, bytes_of_mut(&mut out)).map_err(device)?;
    check_round_trip(input, &out).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
        (0..n).map(|_| Scalar::random(&mut *rng)).collect()
    }

    #[test]
    fn evaluation_is_the_polynomials_sum_in_and_across_chunks() {
        let mut rng = rand::thread_rng();
        // Across chunks: CHECK_CHUNK + 3 coefficients.
        for n in [0, 1, 5, CHECK_CHUNK + 3] {
            let c = random(n, &mut rng);
            let x = Scalar::random(&mut rng);
            let mut want = Scalar::ZERO;
            let mut p = Scalar::ONE;
            for v in &c {
                want += *v * p;
                p *= x;
            }
            assert_eq!(evaluate(&c, x), want, "{n} coefficients");
            // Negative twin: one coefficient changed changes the value.
            if n > 0 {
                let mut bad = c.clone();
                bad[n - 1] += Scalar::ONE;
                assert_ne!(evaluate(&bad, x), want, "{n} coefficients, twin");
            }
        }
    }

    /// The evaluations of `coeffs` over `domain` (at `omega^i`), directly.
    fn evaluations(coeffs: &[Scalar], domain: &Domain) -> Vec<Scalar> {
        (0..domain.size())
            .map(|i| evaluate(coeffs, domain.omega.pow_vartime([i as u64])))
            .collect()
    }

    #[test]
    fn interpolation_at_a_point_is_the_polynomials_value_there() {
        let mut rng = rand::thread_rng();
        for log in [0, 3, 15] {
            let d = Domain::new(log).unwrap();
            let n = d.size();
            // Cheap evaluations at 2^15: those of x^3 + 7 (short inputs: the rest are zero).
            let (f, g) = if log < 15 {
                (random(n, &mut rng), random(n, &mut rng))
            } else {
                let mut f = vec![Scalar::ZERO; 4];
                f[0] = Scalar::from(7u64);
                f[3] = Scalar::ONE;
                (f, Vec::new())
            };
            let (fe, ge) = if log < 15 {
                (evaluations(&f, &d), evaluations(&g, &d))
            } else {
                let fe = (0..n)
                    .map(|i| d.omega.pow_vartime([3 * i as u64]) + Scalar::from(7u64))
                    .collect();
                (fe, Vec::new())
            };
            let r = Scalar::random(&mut rng);
            let [fr, gr] = interpolate_at([&fe, &ge], &d, r).expect("r off the domain");
            assert_eq!(fr, evaluate(&f, r), "2^{log}");
            assert_eq!(gr, evaluate(&g, r), "2^{log}");
            // Negative twins: a point of the domain has no barycentric value; another
            // evaluation gives another polynomial.
            assert!(interpolate_at([&fe], &d, d.omega.pow_vartime([n as u64 - 1])).is_none());
            let mut bad = fe.clone();
            bad[n / 2] += Scalar::ONE;
            assert_ne!(interpolate_at([&bad], &d, r).unwrap()[0], fr, "2^{log}");
        }
    }

    #[test]
    fn the_quotient_of_a_satisfied_system_checks_at_a_point() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(4).unwrap();
        let n = d.size();
        let (a, b) = (random(n, &mut rng), random(n, &mut rng));
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        // A and B's coefficients (the inverse transform, directly), their product, less C's:
        // (A B - C) = H (x^n - 1), so H's coefficients are its upper half.
        let inv = d.omega_inv();
        let coeffs = |e: &[Scalar]| -> Vec<Scalar> {
            (0..n)
                .map(|j| evaluate(e, inv.pow_vartime([j as u64])) * d.size_inv())
                .collect()
        };
        let (ca, cb, cc) = (coeffs(&a), coeffs(&b), coeffs(&c));
        let mut p = vec![Scalar::ZERO; 2 * n];
        for i in 0..n {
            for j in 0..n {
                p[i + j] += ca[i] * cb[j];
            }
            p[i] -= cc[i];
        }
        let h: Vec<Scalar> = p[n..2 * n - 1].to_vec();
        assert!(
            (0..n - 1).all(|j| p[j] == -h[j]),
            "A B - C divisible by x^n - 1"
        );
        let r = Scalar::random(&mut rng);
        assert_eq!(check_quotient_at(&h, [&a, &b, &c], &d, r), Ok(()));
        // Negative twins: a changed coefficient; an unsatisfied system (c changed at one point);
        // a point of the domain.
        let mut bad = h.clone();
        bad[3] += Scalar::ONE;
        let err = check_quotient_at(&bad, [&a, &b, &c], &d, r).unwrap_err();
        assert!(err.contains("quotient of 2^4 is wrong"), "{err}");
        let mut c2 = c.clone();
        c2[5] += Scalar::ONE;
        assert!(check_quotient_at(&h, [&a, &b, &c2], &d, r).is_err());
        assert!(check_quotient_at(&h, [&a, &b, &c], &d, d.omega).is_err());
    }

    #[test]
    fn a_transforms_spot_values_and_round_trip_check_on_the_host() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(5).unwrap();
        let input = random(d.size(), &mut rng);
        let out = evaluations(&input, &d);
        let spots = [0, 1, 17, 31];
        assert_eq!(check_values(&input, &out, d.omega, &spots), Ok(()));
        let back: Vec<Scalar> = evaluations(
            &out,
            &Domain {
                omega: d.omega_inv(),
                ..d
            },
        );
        assert_eq!(check_round_trip(&input, &back), Ok(()));
        // Negative twins: a wrong value at a spot, the transform of another root, a point past
        // the domain; a round trip off at one element, or scaled to the input (not times n).
        let mut bad = out.clone();
        bad[17] += Scalar::ONE;
        let err = check_values(&input, &bad, d.omega, &spots).unwrap_err();
        assert!(err.contains("omega^17"), "{err}");
        let other = evaluations(
            &input,
            &Domain {
                omega: d.omega.square(),
                ..d
            },
        );
        assert!(check_values(&input, &other, d.omega, &spots).is_err());
        assert!(check_values(&input, &out, d.omega, &[32]).is_err());
        let mut off = back.clone();
        off[9] += Scalar::ONE;
        let err = check_round_trip(&input, &off).unwrap_err();
        assert!(err.contains("element 9 of 32"), "{err}");
        assert!(check_round_trip(&input, &input).is_err());
    }
}
