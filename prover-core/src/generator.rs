//! Random Groth16 parameters for a circuit, with bellperson's domain size, query layout, point
//! filtering and randomness draws: the same circuit and the same RNG give the same parameters as
//! bellperson's `generate_random_parameters`, byte for byte.
//!
//! Unlike bellperson, the QAP polynomials are not kept as one list per variable: the
//! constraints are recorded as flat term lists, and the Lagrange basis at tau is evaluated in
//! closed form (`L_i(tau) = (tau^m - 1) / m * w^i / (tau - w^i)`), with no NTT.

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{BatchInvert, Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group, Wnaf};
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::params::{Parameters, VerifyingKey};

/// The toxic waste of a setup.
#[derive(Debug, Clone, Copy)]
pub struct Trapdoor {
    /// G1 generator used.
    pub g1: G1Projective,
    /// G2 generator used.
    pub g2: G2Projective,
    /// alpha.
    pub alpha: Scalar,
    /// beta.
    pub beta: Scalar,
    /// gamma.
    pub gamma: Scalar,
    /// delta.
    pub delta: Scalar,
    /// tau.
    pub tau: Scalar,
}

impl Trapdoor {
    /// Draws a trapdoor in bellperson's order (g1, g2, alpha, beta, gamma, delta, tau).
    pub fn random(rng: &mut impl RngCore) -> Self {
        Trapdoor {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }
}

/// Parameters from a trapdoor drawn from `rng` (same draws as bellperson).
pub fn generate_random_parameters<C: Circuit<Scalar>>(
    circuit: C,
    rng: &mut impl RngCore,
) -> Result<Parameters> {
    generate_parameters(circuit, &Trapdoor::random(rng))
}

/// Seeded parameters for tests and benchmarks (ChaCha20 seeded with `seed`).
pub fn generate_seeded_parameters<C: Circuit<Scalar>>(circuit: C, seed: u64) -> Result<Parameters> {
    generate_random_parameters(circuit, &mut rand_chacha::ChaCha20Rng::seed_from_u64(seed))
}

/// One term of a linear combination: `coeff * var` in constraint `constraint`.
struct Term {
    coeff: Scalar,
    constraint: u32,
    /// Variable index; inputs first, then aux at `num_inputs + j` (resolved after synthesis,
    /// so aux are tagged with the top bit meanwhile).
    var: u32,
}

const AUX_TAG: u32 = 1 << 31;

#[derive(Default)]
struct KeypairAssembly {
    num_inputs: usize,
    num_aux: usize,
    num_constraints: usize,
    /// Terms of the A, B and C linear combinations.
    terms: [Vec<Term>; 3],
    overflow: bool,
}

impl ConstraintSystem<Scalar> for KeypairAssembly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.num_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.num_inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.num_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let constraint = self.num_constraints;
        self.num_constraints += 1;
        if constraint >= u32::MAX as usize {
            self.overflow = true;
            return;
        }
        let lcs = [
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        ];
        for (lc, terms) in lcs.iter().zip(self.terms.iter_mut()) {
            for (var, coeff) in lc.iter() {
                if bool::from(coeff.is_zero()) {
                    continue;
                }
                let var = match var.get_unchecked() {
                    Index::Input(i) => i,
                    Index::Aux(i) => i | AUX_TAG as usize,
                };
                terms.push(Term {
                    coeff: *coeff,
                    constraint: constraint as u32,
                    var: var as u32,
                });
            }
        }
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Progress of a parameter generation, in points computed.
pub trait GenProgress: Sync {
    /// Called once the circuit is synthesized, with the number of points to compute.
    fn start(&self, _total: u64) {}
    /// Called as points are computed.
    fn advance(&self, _points: u64) {}
}

/// No progress reporting.
impl GenProgress for () {}

/// Parameters for `circuit` from a given trapdoor.
pub fn generate_parameters<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
) -> Result<Parameters> {
    generate_parameters_with_progress(circuit, trapdoor, &())
}

/// [`generate_parameters`], reporting progress.
pub fn generate_parameters_with_progress<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    progress: &dyn GenProgress,
) -> Result<Parameters> {
    let Trapdoor {
        g1,
        g2,
        alpha,
        beta,
        gamma,
        delta,
        tau,
    } = *trapdoor;

    let mut cs = KeypairAssembly::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.num_inputs {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    if cs.overflow || cs.num_aux >= AUX_TAG as usize || cs.num_inputs >= AUX_TAG as usize {
        return Err(Error::Malformed {
            what: "circuit",
            detail: "more than 2^31 variables or 2^32 constraints".into(),
        });
    }

    // The evaluation domain, as bellperson's EvaluationDomain::from_coeffs sizes it.
    let m = cs.num_constraints.max(1).next_power_of_two();
    let exp = m.trailing_zeros();
    if exp >= Scalar::S {
        return Err(Error::DomainTooLarge { log2: exp });
    }
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in exp..Scalar::S {
        omega = omega.square();
    }
    let t_tau = tau.pow_vartime([m as u64]) - Scalar::ONE;
    if bool::from(t_tau.is_zero()) {
        return Err(Error::Malformed {
            what: "trapdoor",
            detail: "tau lies in the evaluation domain".into(),
        });
    }
    let gamma_inv =
        Option::<Scalar>::from(gamma.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;
    let delta_inv =
        Option::<Scalar>::from(delta.invert()).ok_or(SynthesisError::UnexpectedIdentity)?;

    let lagrange = lagrange_at(tau, omega, m, cs.num_constraints, t_tau);

    // u, v, w of every variable (inputs first) at tau.
    let num_vars = cs.num_inputs + cs.num_aux;
    let mut qap = [
        vec![Scalar::ZERO; num_vars],
        vec![Scalar::ZERO; num_vars],
        vec![Scalar::ZERO; num_vars],
    ];
    let resolve = |var: u32| {
        if var & AUX_TAG != 0 {
            cs.num_inputs + (var & !AUX_TAG) as usize
        } else {
            var as usize
        }
    };
    for (terms, acc) in cs.terms.iter().zip(qap.iter_mut()) {
        for t in terms {
            acc[resolve(t.var)] += lagrange[t.constraint as usize] * t.coeff;
        }
    }
    drop(lagrange);
    cs.terms = Default::default();
    let [u, v, w] = qap;

    progress.start((m - 1 + num_vars) as u64);
    let g1_table_size = (m - 1) + 3 * num_vars;
    let mut g1_wnaf = Wnaf::new();
    let g1_wnaf = g1_wnaf.base(g1, g1_table_size);
    let mut g2_wnaf = Wnaf::new();
    let g2_wnaf = g2_wnaf.base(g2, num_vars);

    // H query: tau^i * t(tau) / delta for i in 0..m-1.
    let coeff = t_tau * delta_inv;
    let h = par_chunked(m - 1, |range| {
        let mut wnaf = g1_wnaf.shared();
        let mut p = tau.pow_vartime([range.start as u64]) * coeff;
        let len = range.len() as u64;
        let proj: Vec<G1Projective> = range
            .map(|_| {
                let q = wnaf.scalar(&p);
                p *= tau;
                q
            })
            .collect();
        progress.advance(len);
        normalize_g1(&proj)
    });

    // Per variable: A, B (G1, G2) filtered where zero, and the IC / L entry.
    let n_in = cs.num_inputs;
    let per_var = par_chunked(num_vars, |range| {
        let mut w1 = g1_wnaf.shared();
        let mut w2 = g2_wnaf.shared();
        let mut a = Vec::new();
        let mut b1 = Vec::new();
        let mut b2 = Vec::new();
        let mut ext = Vec::with_capacity(range.len());
        let len = range.len() as u64;
        for j in range {
            let (uj, vj, wj) = (u[j], v[j], w[j]);
            if !bool::from(uj.is_zero()) {
                a.push(w1.scalar(&uj));
            }
            if !bool::from(vj.is_zero()) {
                b1.push(w1.scalar(&vj));
                b2.push(w2.scalar(&vj));
            }
            let inv = if j < n_in { gamma_inv } else { delta_inv };
            ext.push(w1.scalar(&((beta * uj + alpha * vj + wj) * inv)));
        }
        progress.advance(len);
        vec![(
            normalize_g1(&a),
            normalize_g1(&b1),
            normalize_g2(&b2),
            normalize_g1(&ext),
        )]
    });
    let mut a = Vec::new();
    let mut b_g1 = Vec::new();
    let mut b_g2 = Vec::new();
    let mut ext = Vec::with_capacity(num_vars);
    for (pa, pb1, pb2, pe) in per_var {
        a.extend(pa);
        b_g1.extend(pb1);
        b_g2.extend(pb2);
        ext.extend(pe);
    }
    let l = ext.split_off(n_in);
    let mut ic = ext;
    // The query vectors grew by doubling: give the slack back (parameters live for the whole
    // process, and a prover holds them next to every partition).
    for v in [&mut a, &mut b_g1, &mut ic] {
        v.shrink_to_fit();
    }
    b_g2.shrink_to_fit();
    // bellperson refuses unconstrained variables, whose L entry is the identity.
    if l.iter().chain(&ic).any(|p| bool::from(p.is_identity())) {
        return Err(SynthesisError::UnconstrainedVariable.into());
    }
    // Points at infinity are filtered from the A and B queries (zero polynomials were skipped
    // above; a nonzero polynomial never maps to the identity).

    let g1a = g1.to_affine();
    let g2a = g2.to_affine();
    let vk = VerifyingKey {
        alpha_g1: (g1a * alpha).to_affine(),
        beta_g1: (g1a * beta).to_affine(),
        beta_g2: (g2a * beta).to_affine(),
        gamma_g2: (g2a * gamma).to_affine(),
        delta_g1: (g1a * delta).to_affine(),
        delta_g2: (g2a * delta).to_affine(),
        ic,
    };
    Ok(Parameters {
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
}

/// `L_i(tau)` for `i < count` over the domain of size `m` generated by `omega`.
fn lagrange_at(tau: Scalar, omega: Scalar, m: usize, count: usize, t_tau: Scalar) -> Vec<Scalar> {
    let scale = t_tau * Scalar::from(m as u64).invert().unwrap();
    par_chunked(count, |range| {
        let mut wi = omega.pow_vartime([range.start as u64]);
        let mut num = Vec::with_capacity(range.len());
        let mut den = Vec::with_capacity(range.len());
        for _ in range {
            num.push(wi * scale);
            den.push(tau - wi);
            wi *= omega;
        }
        // tau is not in the domain (checked by the caller), so no denominator is zero.
        den.iter_mut().batch_invert();
        num.iter().zip(&den).map(|(n, d)| *n * d).collect()
    })
}

/// Runs `f` over chunks of `0..n` in parallel and concatenates the results in order.
fn par_chunked<T: Send>(n: usize, f: impl Fn(std::ops::Range<usize>) -> Vec<T> + Sync) -> Vec<T> {
    let chunk = (n / (rayon::current_num_threads() * 8)).clamp(256, 1 << 16);
    let starts: Vec<usize> = (0..n).step_by(chunk).collect();
    starts
        .into_par_iter()
        .map(|s| f(s..(s + chunk).min(n)))
        .collect::<Vec<Vec<T>>>()
        .into_iter()
        .flatten()
        .collect()
}

fn normalize_g1(p: &[G1Projective]) -> Vec<G1Affine> {
    let mut out = vec![G1Affine::identity(); p.len()];
    G1Projective::batch_normalize(p, &mut out);
    out
}

fn normalize_g2(p: &[G2Projective]) -> Vec<G2Affine> {
    let mut out = vec![G2Affine::identity(); p.len()];
    G2Projective::batch_normalize(p, &mut out);
    out
}
