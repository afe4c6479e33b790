//! A synthetic partition shaped like a 32 GiB PoRep's (domain 2^27, about 130M aux variables):
//! a timing workload, not a proof. Its a, b and c are random (so `a b - c` is not divisible by
//! the vanishing polynomial: the H pipeline runs the same transforms on them), its aux
//! assignment has the mix `porep_profile` measured on a real PoRep witness, and its densities
//! have a real PoRep's proportions. Its proving key exists only as a shape
//! ([`KeyShape`]): a device backend makes random bases for it on the device, since a 32 GiB
//! sector's key cannot be generated here.

use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use prover_core::stages::density::{Density, ScalarBytes};
use prover_core::stages::{Evaluations, SynthesizedPartition, Witness};
use prover_core::{CircuitDensity, CircuitSize, KeyShape};

/// The scalar mix `porep_profile` measured on a 2 KiB PoRep's aux assignment, as percentages:
/// zeros, ones (the rest are dense).
pub const POREP_MIX: (u32, u32) = (51, 47);

/// A 2 KiB PoRep's proportions (its parameters' query lengths), in parts per million: aux
/// variables in A, 2,674,908 of 2,685,673; in B, 685,521. [`SyntheticSpec::like`] takes a real
/// circuit's instead.
const A_AUX_PPM: u32 = 995_992;
const B_AUX_PPM: u32 = 255_251;

/// Public inputs of a PoRep partition, ONE included (its `vk.ic` has 40 points).
const POREP_INPUTS: usize = 40;

/// Scalars generated per random stream (each chunk seeded from the seed and its index, so a
/// partition is the same for a seed whatever the thread count).
const CHUNK: usize = 1 << 16;

/// The shape of a synthetic partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticSpec {
    /// Constraints (the length of a, b and c).
    pub constraints: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Aux variables used by A, in parts per million of `aux`.
    pub a_aux_ppm: u32,
    /// Aux variables used by B, in parts per million of `aux`.
    pub b_aux_ppm: u32,
}

impl SyntheticSpec {
    /// A 32 GiB PoRep partition: 130M constraints and aux variables (domain 2^27).
    pub fn porep_32g() -> Self {
        Self::scaled(27)
    }

    /// The same proportions in a domain of `2^log2_domain`: constraints and aux variables 97%
    /// of the domain (130M of 2^27).
    pub fn scaled(log2_domain: u32) -> Self {
        let domain = 1usize << log2_domain;
        let n = (domain as u64 * 97 / 100).max(2) as usize;
        SyntheticSpec {
            constraints: n.max(domain / 2 + 1),
            inputs: POREP_INPUTS.min(n / 2),
            aux: n,
            a_aux_ppm: A_AUX_PPM,
            b_aux_ppm: B_AUX_PPM,
        }
    }

    /// A real partition's counts (constraints, inputs with ONE, aux variables, and the share of
    /// aux variables its A and B use: [`prover_core::circuit_density`] of its blank circuit)
    /// carried into a domain of `2^log2_domain`: constraints and aux variables scaled by the
    /// ratio of the domains, the inputs kept (at most half the constraints), the shares kept.
    pub fn like(real: &CircuitDensity, log2_domain: u32) -> Self {
        let CircuitSize {
            constraints,
            inputs,
            aux,
        } = real.size;
        let real_domain = constraints.max(1).next_power_of_two() as u128;
        let domain = 1usize << log2_domain;
        let scale = |n: usize| (n as u128 * domain as u128 / real_domain) as usize;
        let ppm = |used: usize| (used as u128 * 1_000_000 / aux.max(1) as u128) as u32;
        let constraints = scale(constraints).clamp(domain / 2 + 1, domain);
        SyntheticSpec {
            constraints,
            inputs: inputs.clamp(1, constraints / 2),
            aux: scale(aux).max(2),
            a_aux_ppm: ppm(real.a_aux),
            b_aux_ppm: ppm(real.b_aux),
        }
    }

    /// The evaluation domain.
    pub fn domain(&self) -> usize {
        self.constraints.next_power_of_two()
    }

    /// Host bytes of one partition (a, b, c, the aux assignment and the densities).
    pub fn partition_bytes(&self) -> u64 {
        let scalars = 3 * self.constraints + self.aux + self.inputs;
        scalars as u64 * 32 + 2 * (self.aux as u64).div_ceil(8)
    }

    /// The partition for `seed`, generated on every core.
    pub fn partition(&self, seed: u64) -> SynthesizedPartition {
        let field = |stream: u64| random_scalars(self.constraints, seed ^ stream);
        let (a, (b, c)) = rayon::join(
            || field(1 << 60),
            || rayon::join(|| field(2 << 60), || field(3 << 60)),
        );
        let aux = porep_like_aux(self.aux, seed ^ (4 << 60));
        let mut input = vec![ScalarBytes::from_scalar(&Scalar::ONE)];
        input.extend(porep_like_aux(self.inputs - 1, seed ^ (5 << 60)));
        let mut b_input_density = Density::default();
        for _ in 0..self.inputs {
            b_input_density.push_unset();
        }
        b_input_density.set(0);
        SynthesizedPartition {
            evaluations: Evaluations { a, b, c },
            witness: Witness {
                input,
                aux,
                a_aux_density: random_density(self.aux, self.a_aux_ppm, seed ^ (6 << 60)),
                b_input_density,
                b_aux_density: random_density(self.aux, self.b_aux_ppm, seed ^ (7 << 60)),
            },
        }
    }
}

/// The key shape `partition` needs.
pub fn key_shape(partition: &SynthesizedPartition) -> KeyShape {
    let s = partition.shape();
    KeyShape {
        domain: s.domain_size(),
        inputs: s.inputs,
        l: s.aux,
        a: s.inputs + s.a_aux,
        b_g1: s.b_inputs + s.b_aux,
        b_g2: s.b_inputs + s.b_aux,
    }
}

fn chunk_rng(seed: u64, chunk: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_add((chunk as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
}

fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, piece)| {
            let mut rng = chunk_rng(seed, k);
            piece.iter_mut().for_each(|x| *x = Scalar::random(&mut rng));
        });
    out
}

/// `n` aux scalars with [`POREP_MIX`] (canonical form), from `seed`.
pub fn porep_like_aux(n: usize, seed: u64) -> Vec<ScalarBytes> {
    let (zeros, ones) = POREP_MIX;
    let mut out = vec![ScalarBytes::default(); n];
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, piece)| {
            let mut rng = chunk_rng(seed, k);
            for x in piece {
                let roll = rng.next_u32() % 100;
                let s = if roll < zeros {
                    Scalar::ZERO
                } else if roll < zeros + ones {
                    Scalar::ONE
                } else {
                    Scalar::random(&mut rng)
                };
                *x = ScalarBytes::from_scalar(&s);
            }
        });
    out
}

/// A density of `n` bits, each set with probability `ppm / 1_000_000`.
fn random_density(n: usize, ppm: u32, seed: u64) -> Density {
    let words: Vec<u64> = (0..n.div_ceil(64))
        .into_par_iter()
        .chunks(CHUNK / 64)
        .enumerate()
        .flat_map_iter(|(k, ws)| {
            let mut rng = chunk_rng(seed, k);
            ws.into_iter()
                .map(|_| {
                    (0..64).fold(0u64, |w, b| {
                        w | (u64::from(rng.next_u32() % 1_000_000 < ppm) << b)
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Density::from_words(words, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_has_the_spec_shape_and_the_porep_proportions() {
        let spec = SyntheticSpec::scaled(14);
        assert_eq!(spec.domain(), 1 << 14);
        let p = spec.partition(7);
        let s = p.shape();
        assert_eq!(
            (s.constraints, s.inputs, s.aux),
            (spec.constraints, 40, spec.aux)
        );
        let key = key_shape(&p);
        p.check_key_shape(&key)
            .expect("the key shape fits its partition");
        assert_eq!(key.domain, 1 << 14);
        let frac = |k: usize| k as f64 / s.aux as f64;
        assert!((frac(s.a_aux) - 0.996).abs() < 0.01, "{s:?}");
        assert!((frac(s.b_aux) - 0.255).abs() < 0.02, "{s:?}");
        let zero = ScalarBytes::from_scalar(&Scalar::ZERO);
        let one = ScalarBytes::from_scalar(&Scalar::ONE);
        let zeros = p.witness.aux.iter().filter(|x| **x == zero).count();
        let ones = p.witness.aux.iter().filter(|x| **x == one).count();
        assert!((frac(zeros) - 0.51).abs() < 0.02 && (frac(ones) - 0.47).abs() < 0.02);
        // The same seed gives the same partition; another seed another one.
        assert_eq!(spec.partition(7).witness.aux, p.witness.aux);
        assert_ne!(spec.partition(8).evaluations.a, p.evaluations.a);
        // A key of another shape is refused.
        let wrong = KeyShape {
            l: key.l + 1,
            ..key
        };
        assert!(p.check_key_shape(&wrong).is_err());
        let b = spec.partition_bytes() as usize;
        assert!(
            b >= p.heap_bytes() - 1024 && b <= p.heap_bytes() + 1024,
            "{b} {}",
            p.heap_bytes()
        );
    }

    #[test]
    fn real_counts_carry_into_smaller_domains() {
        // A 32 GiB PoRep partition's counts (filecoin-proofs 19.1's circuit); the densities are
        // made up for the test (a third of the aux variables in A, a quarter in B).
        let counts = CircuitDensity {
            size: CircuitSize {
                constraints: 130_278_869,
                inputs: 328,
                aux: 130_169_893,
            },
            a_aux: 130_169_893 / 3,
            b_inputs: 1,
            b_aux: 130_169_893 / 4,
        };
        let real = SyntheticSpec::like(&counts, 27);
        assert_eq!(
            (real.constraints, real.inputs, real.aux),
            (130_278_869, 328, 130_169_893)
        );
        assert_eq!((real.a_aux_ppm, real.b_aux_ppm), (333_333, 249_999));
        let small = SyntheticSpec::like(&counts, 14);
        assert_eq!(small.domain(), 1 << 14);
        assert_eq!(small.constraints, 130_278_869 * (1 << 14) / (1 << 27));
        assert_eq!(small.inputs, 328);
        // The partition has the shares it was given, not the 2 KiB PoRep's.
        let s = small.partition(3).shape();
        let frac = |k: usize| k as f64 / s.aux as f64;
        assert!((frac(s.a_aux) - 1.0 / 3.0).abs() < 0.02, "{s:?}");
        assert!((frac(s.b_aux) - 0.25).abs() < 0.02, "{s:?}");
        // A domain too small for the inputs keeps half the constraints for them at most.
        assert_eq!(SyntheticSpec::like(&counts, 9).inputs, 248);
    }

    #[test]
    fn the_32g_shape_is_130m_in_a_2_27_domain() {
        let s = SyntheticSpec::porep_32g();
        assert_eq!(s.domain(), 1 << 27);
        assert!((129_000_000..=131_000_000).contains(&s.aux), "{s:?}");
    }
}
