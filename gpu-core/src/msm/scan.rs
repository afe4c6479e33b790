//! The host scan of a query's scalars ([`Scan`]): density filtering, zeros dropped, ones
//! listed for a batch addition, the rest listed with their exponents, on every core.

use prover_core::stages::density::ScalarBytes;
use prover_core::stages::plan::MsmTerm;
use prover_core::stages::Witness;
use rayon::prelude::*;

use crate::device::{DeviceError, DeviceResult};

/// A query's scalars as the device takes them: base indices of the ones, and base indices and
/// exponents of the rest (zeros and unused variables dropped). Indices are into the query's
/// bases, ascending.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Bases whose scalar is one.
    pub ones: Vec<u32>,
    /// Bases of the other nonzero scalars.
    pub idx: Vec<u32>,
    /// Their exponents.
    pub exps: Vec<ScalarBytes>,
}

impl Scan {
    /// Scans the terms of one query (their bases ranges are disjoint and ascending).
    pub fn new<'a>(
        terms: impl IntoIterator<Item = &'a MsmTerm>,
        witness: &Witness,
    ) -> DeviceResult<Self> {
        const CHUNK: usize = 1 << 14;
        let mut out = Scan::default();
        for t in terms {
            if t.bases.end > u32::MAX as usize {
                return Err(DeviceError::new("scanning scalars", "more than 2^32 bases"));
            }
            let scalars = t.scalars(witness);
            let density = t.density(witness);
            // The base index of each chunk's first used variable.
            let mut starts = Vec::with_capacity(scalars.len().div_ceil(CHUNK));
            let mut k = t.bases.start;
            for s in (0..scalars.len()).step_by(CHUNK) {
                starts.push((s, k));
                let e = (s + CHUNK).min(scalars.len());
                k += density.map_or(e - s, |d| (s..e).filter(|&j| d.get(j)).count());
            }
            if k != t.bases.end {
                return Err(DeviceError::new(
                    "scanning scalars",
                    format!(
                        "{} used scalars for {} bases",
                        k - t.bases.start,
                        t.bases.len()
                    ),
                ));
            }
            let parts: Vec<Scan> = starts
                .into_par_iter()
                .map(|(s, mut k)| {
                    let mut part = Scan::default();
                    let e = (s + CHUNK).min(scalars.len());
                    for (j, sc) in scalars[s..e].iter().enumerate() {
                        if density.is_some_and(|d| !d.get(s + j)) {
                            continue;
                        }
                        if sc.is_one() {
                            part.ones.push(k as u32);
                        } else if !sc.is_zero() {
                            part.idx.push(k as u32);
                            part.exps.push(*sc);
                        }
                        k += 1;
                    }
                    part
                })
                .collect();
            for p in parts {
                out.ones.extend_from_slice(&p.ones);
                out.idx.extend_from_slice(&p.idx);
                out.exps.extend_from_slice(&p.exps);
            }
        }
        Ok(out)
    }

    /// Host bytes it holds.
    pub fn heap_bytes(&self) -> u64 {
        (self.ones.capacity() * 4 + self.idx.capacity() * 4 + self.exps.capacity() * 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan's lists, one variable at a time.
    fn naive_scan(terms: &[&MsmTerm], w: &Witness) -> Scan {
        let mut out = Scan::default();
        for t in terms {
            let d = t.density(w);
            let mut k = t.bases.start as u32;
            for (j, sc) in t.scalars(w).iter().enumerate() {
                if d.is_some_and(|d| !d.get(j)) {
                    continue;
                }
                if sc.is_one() {
                    out.ones.push(k);
                } else if !sc.is_zero() {
                    out.idx.push(k);
                    out.exps.push(*sc);
                }
                k += 1;
            }
        }
        out
    }

    #[test]
    fn scan_lists_what_a_one_by_one_scan_lists() {
        use ff::Field;
        use prover_core::stages::density::Density;
        use prover_core::stages::plan::{Filter, ScalarSource};
        use rand::Rng;
        let mut rng = rand::thread_rng();
        // Sizes around the chunk (2^14), the A query's density on the aux (one in three unused).
        for n in [
            0usize,
            1,
            5,
            (1 << 14) - 1,
            1 << 14,
            (1 << 14) + 7,
            3 * (1 << 14) + 11,
        ] {
            let aux: Vec<ScalarBytes> = (0..n)
                .map(|_| {
                    let s = match rng.gen_range(0..4) {
                        0 => blstrs::Scalar::ZERO,
                        1 => blstrs::Scalar::ONE,
                        _ => blstrs::Scalar::random(&mut rng),
                    };
                    ScalarBytes::from_scalar(&s)
                })
                .collect();
            let input = vec![ScalarBytes::from_scalar(&blstrs::Scalar::ONE); 3];
            let mut density = Density::default();
            for j in 0..n {
                density.push_unset();
                if j % 3 != 2 {
                    density.set(j);
                }
            }
            let used = density.count_ones();
            let w = Witness {
                input,
                aux,
                a_aux_density: density,
                b_input_density: Density::default(),
                b_aux_density: Density::default(),
            };
            let inputs = MsmTerm {
                bases: 0..3,
                source: ScalarSource::Input,
                filter: Filter::All,
            };
            let aux_term = MsmTerm {
                bases: 3..3 + used,
                source: ScalarSource::Aux,
                filter: Filter::AAux,
            };
            let got = Scan::new([&inputs, &aux_term], &w).unwrap();
            assert_eq!(got, naive_scan(&[&inputs, &aux_term], &w), "n {n}");
            // Negative twin: a term whose bases do not match its used scalars is refused.
            let wrong = MsmTerm {
                bases: 3..4 + used,
                ..aux_term.clone()
            };
            let err = Scan::new([&wrong], &w).unwrap_err().to_string();
            assert!(err.contains("used scalars for"), "{err}");
        }
    }
}
