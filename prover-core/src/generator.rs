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
use group::{Curve, Group};
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use crate::encoding::{write_len, write_point_run};
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
    let mut sink = MemorySink::default();
    generate_into(circuit, trapdoor, progress, &mut sink)?;
    let vk = sink
        .vk
        .expect("the generator always emits the verifying key");
    let mut sections = sink.g1.into_iter();
    let mut next = || sections.next().unwrap_or_default();
    Ok(Parameters {
        vk,
        h: next(),
        l: next(),
        a: next(),
        b_g1: next(),
        b_g2: sink.g2,
    })
}

/// Generates the parameters for `circuit` straight into the file `path`, in bellperson's layout,
/// without holding them in memory: the points are computed in chunks and written in file order
/// (through a temporary file renamed into place). Returns the verifying key.
///
/// Peak memory is the circuit's QAP at tau (three scalars per variable), the recorded
/// constraints, the fixed-base tables (tens of MiB) and a few chunks of points, instead of the
/// whole parameter set.
pub fn write_parameters_with_progress<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    path: &std::path::Path,
    progress: &dyn GenProgress,
) -> Result<VerifyingKey> {
    crate::params::write_atomically(path, |w| {
        let mut sink = FileSink { w, vk: None };
        generate_into(circuit, trapdoor, progress, &mut sink)?;
        Ok(sink
            .vk
            .expect("the generator always emits the verifying key"))
    })
}

/// Receives the parameters in file order: the verifying key, then the sections h, l, a, b_g1
/// (G1) and b_g2 (G2), each announced with its length and then filled in chunks.
trait Sink {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()>;
    fn section(&mut self, what: &'static str, len: usize) -> Result<()>;
    fn g1(&mut self, what: &'static str, points: &[G1Affine]) -> Result<()>;
    fn g2(&mut self, what: &'static str, points: &[G2Affine]) -> Result<()>;
}

#[derive(Default)]
struct MemorySink {
    vk: Option<VerifyingKey>,
    g1: Vec<Vec<G1Affine>>,
    g2: Vec<G2Affine>,
}

impl Sink for MemorySink {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()> {
        self.vk = Some(vk);
        Ok(())
    }
    fn section(&mut self, what: &'static str, len: usize) -> Result<()> {
        if what == "params.b_g2" {
            self.g2.reserve_exact(len);
        } else {
            self.g1.push(Vec::with_capacity(len));
        }
        Ok(())
    }
    fn g1(&mut self, _: &'static str, points: &[G1Affine]) -> Result<()> {
        self.g1
            .last_mut()
            .expect("a section is open")
            .extend_from_slice(points);
        Ok(())
    }
    fn g2(&mut self, _: &'static str, points: &[G2Affine]) -> Result<()> {
        self.g2.extend_from_slice(points);
        Ok(())
    }
}

struct FileSink<'a, W: std::io::Write> {
    w: &'a mut W,
    vk: Option<VerifyingKey>,
}

impl<W: std::io::Write> Sink for FileSink<'_, W> {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()> {
        vk.write(&mut *self.w)?;
        self.vk = Some(vk);
        Ok(())
    }
    fn section(&mut self, what: &'static str, len: usize) -> Result<()> {
        write_len(self.w, what, len)
    }
    fn g1(&mut self, what: &'static str, points: &[G1Affine]) -> Result<()> {
        write_point_run(self.w, what, points)
    }
    fn g2(&mut self, what: &'static str, points: &[G2Affine]) -> Result<()> {
        write_point_run(self.w, what, points)
    }
}

/// Points per chunk of work (one batch normalization each).
const CHUNK: usize = 1 << 13;

/// The generator proper: synthesizes, evaluates the QAP at tau, and emits every section.
fn generate_into<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    progress: &dyn GenProgress,
    sink: &mut dyn Sink,
) -> Result<()> {
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
    let n_in = cs.num_inputs;
    drop(cs);
    let [u, v, w] = qap;

    // The IC and L scalars; bellperson refuses unconstrained variables, whose entry is zero
    // (the identity point): refuse them before any point is computed.
    let ext = |j: usize| {
        let inv = if j < n_in { gamma_inv } else { delta_inv };
        (beta * u[j] + alpha * v[j] + w[j]) * inv
    };
    if (0..num_vars)
        .into_par_iter()
        .any(|j| bool::from(ext(j).is_zero()))
    {
        return Err(SynthesisError::UnconstrainedVariable.into());
    }
    let a_vars: Vec<u32> = nonzero_indices(&u);
    let b_vars: Vec<u32> = nonzero_indices(&v);

    let g1_points = (m - 1) + num_vars + a_vars.len() + b_vars.len();
    progress.start((g1_points + b_vars.len()) as u64);
    let g1_base = FixedBase::new(g1, g1_points);
    let g2_base = FixedBase::new(g2, b_vars.len());

    let g1a = g1.to_affine();
    let g2a = g2.to_affine();
    let ic = normalize(
        &(0..n_in)
            .into_par_iter()
            .map(|j| g1_base.mul(&ext(j)))
            .collect::<Vec<_>>(),
    );
    progress.advance(n_in as u64);
    sink.vk(VerifyingKey {
        alpha_g1: (g1a * alpha).to_affine(),
        beta_g1: (g1a * beta).to_affine(),
        beta_g2: (g2a * beta).to_affine(),
        gamma_g2: (g2a * gamma).to_affine(),
        delta_g1: (g1a * delta).to_affine(),
        delta_g2: (g2a * delta).to_affine(),
        ic,
    })?;

    // H query: tau^i * t(tau) / delta for i in 0..m-1.
    let coeff = t_tau * delta_inv;
    sink.section("params.h", m - 1)?;
    emit(
        m - 1,
        &g1_base,
        progress,
        |range| {
            let mut p = tau.pow_vartime([range.start as u64]) * coeff;
            range
                .map(|_| {
                    let q = p;
                    p *= tau;
                    q
                })
                .collect()
        },
        &mut |c| sink.g1("params.h", c),
    )?;
    // L query: every aux variable.
    sink.section("params.l", num_vars - n_in)?;
    emit(
        num_vars - n_in,
        &g1_base,
        progress,
        |range| range.map(|j| ext(n_in + j)).collect(),
        &mut |c| sink.g1("params.l", c),
    )?;
    // A and B queries: the variables with nonzero polynomials, inputs first.
    sink.section("params.a", a_vars.len())?;
    emit(
        a_vars.len(),
        &g1_base,
        progress,
        |range| a_vars[range].iter().map(|&j| u[j as usize]).collect(),
        &mut |c| sink.g1("params.a", c),
    )?;
    let b_scalars = |range: std::ops::Range<usize>| -> Vec<Scalar> {
        b_vars[range].iter().map(|&j| v[j as usize]).collect()
    };
    sink.section("params.b_g1", b_vars.len())?;
    emit(b_vars.len(), &g1_base, progress, b_scalars, &mut |c| {
        sink.g1("params.b_g1", c)
    })?;
    drop(g1_base);
    sink.section("params.b_g2", b_vars.len())?;
    emit(b_vars.len(), &g2_base, progress, b_scalars, &mut |c| {
        sink.g2("params.b_g2", c)
    })
}

/// Indices of the nonzero entries.
fn nonzero_indices(s: &[Scalar]) -> Vec<u32> {
    s.par_iter()
        .enumerate()
        .filter(|(_, x)| !bool::from(x.is_zero()))
        .map(|(j, _)| j as u32)
        .collect()
}

/// Computes `base * scalars(range)` for `0..n` in chunks, several chunks in parallel, and
/// hands the affine points to `put` in order.
fn emit<G>(
    n: usize,
    base: &FixedBase<G>,
    progress: &dyn GenProgress,
    scalars: impl Fn(std::ops::Range<usize>) -> Vec<Scalar> + Sync,
    put: &mut dyn FnMut(&[G::AffineRepr]) -> Result<()>,
) -> Result<()>
where
    G: Curve + Send + Sync,
    G::AffineRepr: Send + Sync + Default + Copy,
{
    let starts: Vec<usize> = (0..n).step_by(CHUNK).collect();
    let batch = rayon::current_num_threads() * 4;
    for starts in starts.chunks(batch) {
        let done: Vec<Vec<G::AffineRepr>> = starts
            .par_iter()
            .map(|&s| {
                let range = s..(s + CHUNK).min(n);
                let proj: Vec<G> = scalars(range).iter().map(|x| base.mul(x)).collect();
                progress.advance(proj.len() as u64);
                normalize(&proj)
            })
            .collect();
        for chunk in &done {
            put(chunk)?;
        }
    }
    Ok(())
}

/// Fixed-base scalar multiplication by a precomputed table of signed window digits: for window
/// `i` and digit `d` in `1..=2^(w-1)` the table holds `d * 2^(w*i) * base` in affine form, so a
/// product costs one mixed addition per window and no doublings (bellperson's wNAF costs 255
/// doublings a product). Not constant time: for test and benchmark setups, whose toxic waste
/// is generated and thrown away in the same process.
struct FixedBase<G: Curve> {
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
    fn new(base: G, n: usize) -> Self {
        let cost = |w: usize| ((1usize << (w - 1)) + n) * (Scalar::NUM_BITS as usize / w + 2);
        Self::with_window(base, (2..=16).min_by_key(|&w| cost(w)).expect("a window"))
    }

    fn with_window(base: G, window: usize) -> Self {
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
            window,
            windows,
            table: rows.concat(),
        }
    }

    fn mul(&self, s: &Scalar) -> G {
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

fn normalize<G: Curve>(p: &[G]) -> Vec<G::AffineRepr>
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

    #[derive(Clone)]
    struct Cube {
        x: u64,
        dangling: bool,
    }

    impl Circuit<Scalar> for Cube {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            let x = Scalar::from(self.x);
            let xv = cs.alloc(|| "x", || Ok(x))?;
            let x2 = cs.alloc(|| "x2", || Ok(x * x))?;
            let out = cs.alloc_input(|| "x3", || Ok(x * x * x))?;
            cs.enforce(|| "x2", |lc| lc + xv, |lc| lc + xv, |lc| lc + x2);
            cs.enforce(|| "x3", |lc| lc + x2, |lc| lc + xv, |lc| lc + out);
            if self.dangling {
                cs.alloc(|| "unused", || Ok(Scalar::ONE))?;
            }
            Ok(())
        }
    }

    #[derive(Default)]
    struct Count {
        total: std::sync::atomic::AtomicU64,
        done: std::sync::atomic::AtomicU64,
    }

    impl GenProgress for Count {
        fn start(&self, total: u64) {
            self.total
                .store(total, std::sync::atomic::Ordering::Relaxed);
        }
        fn advance(&self, points: u64) {
            self.done
                .fetch_add(points, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn progress_reaches_its_total() {
        let count = Count::default();
        let trapdoor = Trapdoor::random(&mut rand::thread_rng());
        let params = generate_parameters_with_progress(
            Cube {
                x: 2,
                dangling: false,
            },
            &trapdoor,
            &count,
        )
        .unwrap();
        let total = count.total.load(std::sync::atomic::Ordering::Relaxed);
        // Every point of the parameters but the verifying key's fixed six.
        let points = params.vk.ic.len()
            + params.h.len()
            + params.l.len()
            + params.a.len()
            + params.b_g1.len()
            + params.b_g2.len();
        assert_eq!(total, points as u64);
        assert_eq!(count.done.load(std::sync::atomic::Ordering::Relaxed), total);
    }

    #[test]
    fn streamed_file_equals_the_parameters_in_memory() {
        let dir = std::env::temp_dir().join(format!("proofline-gen-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cube.params");
        let trapdoor = Trapdoor::random(&mut rand::thread_rng());
        let c = Cube {
            x: 3,
            dangling: false,
        };
        let vk = write_parameters_with_progress(c.clone(), &trapdoor, &path, &()).unwrap();
        let params = generate_parameters(c.clone(), &trapdoor).unwrap();
        assert_eq!(vk, params.vk);
        let mut bytes = Vec::new();
        params.write(&mut bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        // Negative twin: another trapdoor writes another file.
        let other = Trapdoor::random(&mut rand::thread_rng());
        write_parameters_with_progress(c, &other, &path, &()).unwrap();
        assert_ne!(std::fs::read(&path).unwrap(), bytes);
        // An unconstrained variable is refused and leaves no file behind.
        let bad = dir.join("bad.params");
        let err = write_parameters_with_progress(
            Cube {
                x: 3,
                dangling: true,
            },
            &trapdoor,
            &bad,
            &(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("unconstrained"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("cube.params")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
