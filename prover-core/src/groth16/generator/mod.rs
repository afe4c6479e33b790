//! Random Groth16 parameters for a circuit, with bellperson's domain size, query layout, point
//! filtering and randomness draws: the same circuit and the same RNG give the same parameters as
//! bellperson's `generate_random_parameters`, byte for byte.
//!
//! Unlike bellperson, the QAP polynomials are not kept as one list per variable: the
//! constraints are recorded as flat term lists, and the Lagrange basis at tau is evaluated in
//! closed form (`L_i(tau) = (tau^m - 1) / m * w^i / (tau - w^i)`), with no NTT.
//!
//! Split by concern: [`qap`] records the constraints and evaluates the QAP at tau,
//! [`fixed_base`] holds the tables of the generators' multiples, [`multiplier`] computes the
//! products from them (on the CPU, or on a device through the [`Multiplier`] trait), `sink`
//! writes the points in file order (into memory or straight into a parameter file).

pub mod fixed_base;
pub mod multiplier;
mod progress;
mod qap;
mod sink;

pub(crate) use qap::AUX_TAG;

use bellpepper_core::{Circuit, SynthesisError};
use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

use crate::error::{catch_panic, Error, Result};
use crate::groth16::domain::Domain;
use crate::groth16::params::{Parameters, VerifyingKey};
use fixed_base::{normalize, FixedBase};
pub use multiplier::{CpuMultiplier, Multiplier};
use multiplier::{GenCurve, CPU_PIECE};
use progress::timed;
pub use progress::{GenPhase, GenProgress};
use qap::KeypairAssembly;
use sink::{FileSink, MemorySink, Sink};

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
    generate_parameters_on(circuit, trapdoor, progress, &CpuMultiplier)
}

/// [`generate_parameters_with_progress`], the products computed by `multiplier` (a device):
/// the same parameters, byte for byte.
pub fn generate_parameters_on<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    progress: &dyn GenProgress,
    multiplier: &dyn Multiplier,
) -> Result<Parameters> {
    let mut sink = MemorySink::default();
    generate_into(circuit, trapdoor, progress, multiplier, &mut sink)?;
    let vk = sink
        .vk
        .expect("the generator always emits the verifying key");
    let mut sections = sink.g1.into_iter();
    let mut next = || sections.next().unwrap_or_default();
    Ok(Parameters {
        vk,
        h: next().into(),
        l: next().into(),
        a: next().into(),
        b_g1: next().into(),
        b_g2: sink.g2.into(),
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
    write_parameters_on(circuit, trapdoor, path, progress, &CpuMultiplier)
}

/// [`write_parameters_with_progress`], the products computed by `multiplier` (a device): the
/// same file, byte for byte.
pub fn write_parameters_on<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    path: &std::path::Path,
    progress: &dyn GenProgress,
    multiplier: &dyn Multiplier,
) -> Result<VerifyingKey> {
    let generated = std::cell::Cell::new(None);
    let vk = crate::groth16::params::write_atomically(path, |w| {
        let mut sink = FileSink { w, vk: None };
        generate_into(circuit, trapdoor, progress, multiplier, &mut sink)?;
        generated.set(Some(std::time::Instant::now()));
        Ok(sink
            .vk
            .expect("the generator always emits the verifying key"))
    })?;
    if let Some(t) = generated.get() {
        progress.phase(GenPhase::Sync, t.elapsed());
    }
    Ok(vk)
}

/// The generator proper: synthesizes, evaluates the QAP at tau, and emits every section.
fn generate_into<C: Circuit<Scalar>>(
    circuit: C,
    trapdoor: &Trapdoor,
    progress: &dyn GenProgress,
    multiplier: &dyn Multiplier,
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
    timed(progress, GenPhase::Shape, || {
        crate::groth16::shape::synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.num_inputs)
    })?;
    let qap_started = std::time::Instant::now();
    if cs.overflow || cs.num_aux >= qap::AUX_TAG as usize || cs.num_inputs >= qap::AUX_TAG as usize
    {
        return Err(Error::Malformed {
            what: "circuit",
            detail: "more than 2^31 variables or 2^32 constraints".into(),
        });
    }

    // The evaluation domain, as bellperson's EvaluationDomain::from_coeffs sizes it.
    let domain = Domain::for_size(cs.num_constraints)?;
    let (m, omega) = (domain.size(), domain.omega);
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

    let lagrange = qap::lagrange_at(tau, omega, m, cs.num_constraints, t_tau);

    // u, v, w of every variable (inputs first) at tau.
    let num_vars = cs.num_inputs + cs.num_aux;
    let mut qap = [
        vec![Scalar::ZERO; num_vars],
        vec![Scalar::ZERO; num_vars],
        vec![Scalar::ZERO; num_vars],
    ];
    let resolve = |var: u32| {
        if var & qap::AUX_TAG != 0 {
            cs.num_inputs + (var & !qap::AUX_TAG) as usize
        } else {
            var as usize
        }
    };
    // The three matrices on three threads.
    cs.terms
        .par_iter()
        .zip(qap.par_iter_mut())
        .for_each(|(terms, acc)| {
            for t in terms {
                acc[resolve(t.var)] += lagrange[t.constraint as usize] * t.coeff;
            }
        });
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
    let g1_base = FixedBase::new(g1, g1_points);
    let g2_base = FixedBase::new(g2, b_vars.len());
    progress.phase(GenPhase::Qap, qap_started.elapsed());
    progress.start((g1_points + b_vars.len()) as u64);

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
        multiplier,
        progress,
        |start, out| {
            let mut p = tau.pow_vartime([start as u64]) * coeff;
            for o in out {
                *o = p;
                p *= tau;
            }
        },
        &mut |c| sink.g1("params.h", c),
    )?;
    // L query: every aux variable.
    sink.section("params.l", num_vars - n_in)?;
    emit(
        num_vars - n_in,
        &g1_base,
        multiplier,
        progress,
        |start, out| {
            for (j, o) in (n_in + start..).zip(out) {
                *o = ext(j);
            }
        },
        &mut |c| sink.g1("params.l", c),
    )?;
    // A and B queries: the variables with nonzero polynomials, inputs first.
    sink.section("params.a", a_vars.len())?;
    emit(
        a_vars.len(),
        &g1_base,
        multiplier,
        progress,
        |start, out| gather(&u, &a_vars[start..start + out.len()], out),
        &mut |c| sink.g1("params.a", c),
    )?;
    let b_scalars =
        |start: usize, out: &mut [Scalar]| gather(&v, &b_vars[start..start + out.len()], out);
    sink.section("params.b_g1", b_vars.len())?;
    emit(
        b_vars.len(),
        &g1_base,
        multiplier,
        progress,
        b_scalars,
        &mut |c| sink.g1("params.b_g1", c),
    )?;
    drop(g1_base);
    sink.section("params.b_g2", b_vars.len())?;
    emit(
        b_vars.len(),
        &g2_base,
        multiplier,
        progress,
        b_scalars,
        &mut |c| sink.g2("params.b_g2", c),
    )
}

/// `out[k] = values[at[k]]`.
fn gather(values: &[Scalar], at: &[u32], out: &mut [Scalar]) {
    for (o, &j) in out.iter_mut().zip(at) {
        *o = values[j as usize];
    }
}

/// Indices of the nonzero entries.
fn nonzero_indices(s: &[Scalar]) -> Vec<u32> {
    s.par_iter()
        .enumerate()
        .filter(|(_, x)| !bool::from(x.is_zero()))
        .map(|(j, _)| j as u32)
        .collect()
}

/// Computes `base * s_i` for `i` in `0..n`, where `scalars(start, out)` writes `s_start..` into
/// `out`, in the multiplier's chunks (each chunk's scalars made on every thread) and hands the affine points to `put` in order. The next chunk
/// is computed (on the device, for a device multiplier) while this thread encodes and writes
/// the current one: at most three chunks are held, one computed, one waiting, one written.
fn emit<G>(
    n: usize,
    base: &FixedBase<G>,
    multiplier: &dyn Multiplier,
    progress: &dyn GenProgress,
    scalars: impl Fn(usize, &mut [Scalar]) + Sync,
    put: &mut dyn FnMut(&[G::AffineRepr]) -> Result<()>,
) -> Result<()>
where
    G: GenCurve,
    G::AffineRepr: Send + Sync + Default + Copy,
{
    let chunk = multiplier.chunk_len().max(1);
    let make = |start: usize| -> Result<Vec<G::AffineRepr>> {
        let end = (start + chunk).min(n);
        let s: Vec<Scalar> = timed(progress, GenPhase::Scalars, || {
            let mut s = vec![Scalar::ZERO; end - start];
            s.par_chunks_mut(CPU_PIECE)
                .enumerate()
                .for_each(|(k, out)| scalars(start + k * CPU_PIECE, out));
            s
        });
        let points = timed(progress, GenPhase::Products, || {
            G::products(multiplier, base, &s)
        })?;
        if points.len() != s.len() {
            return Err(Error::Backend {
                backend: multiplier.name(),
                source: format!(
                    "{} fixed-base products returned for {} scalars",
                    points.len(),
                    s.len()
                )
                .into(),
            });
        }
        Ok(points)
    };
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        scope.spawn(move || {
            for start in (0..n).step_by(chunk) {
                let chunk = catch_panic("parameter generation", || make(start)).and_then(|r| r);
                let failed = chunk.is_err();
                // A closed channel: the writer failed and returned its error.
                if tx.send(chunk).is_err() || failed {
                    break;
                }
            }
        });
        for points in rx {
            let points = points?;
            progress.advance(points.len() as u64);
            timed(progress, GenPhase::Write, || put(&points))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::ConstraintSystem;

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

    /// A fresh folder under the system's temporary one.
    fn scratch_dir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("proofline-{tag}-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[derive(Default)]
    struct Count {
        total: std::sync::atomic::AtomicU64,
        done: std::sync::atomic::AtomicU64,
        phases: std::sync::Mutex<Vec<GenPhase>>,
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
        fn phase(&self, phase: GenPhase, _took: std::time::Duration) {
            let mut seen = self.phases.lock().unwrap();
            if !seen.contains(&phase) {
                seen.push(phase);
            }
        }
    }

    /// The CPU's products for `good` calls, then an error (or a panic).
    struct Failing {
        good: usize,
        calls: std::sync::atomic::AtomicUsize,
        panics: bool,
    }

    impl Failing {
        fn check(&self) -> Result<()> {
            let call = self
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if call < self.good {
                return Ok(());
            }
            if self.panics {
                panic!("device lost");
            }
            Err(Error::Backend {
                backend: "failing".into(),
                source: "device lost".into(),
            })
        }
    }

    impl Multiplier for Failing {
        fn name(&self) -> String {
            "failing".into()
        }
        fn chunk_len(&self) -> usize {
            1
        }
        fn g1(
            &self,
            base: &FixedBase<G1Projective>,
            s: &[Scalar],
        ) -> Result<Vec<blstrs::G1Affine>> {
            self.check()?;
            CpuMultiplier.g1(base, s)
        }
        fn g2(
            &self,
            base: &FixedBase<G2Projective>,
            s: &[Scalar],
        ) -> Result<Vec<blstrs::G2Affine>> {
            self.check()?;
            CpuMultiplier.g2(base, s)
        }
    }

    #[test]
    fn a_failing_chunk_stops_the_file_and_says_why() {
        let dir = scratch_dir("fail");
        let path = dir.join("cube.params");
        let trapdoor = Trapdoor::random(&mut rand::thread_rng());
        let c = Cube {
            x: 3,
            dangling: false,
        };
        // One point per chunk: the third chunk fails while the first ones are written.
        for panics in [false, true] {
            let m = Failing {
                good: 2,
                calls: Default::default(),
                panics,
            };
            let err = write_parameters_on(c.clone(), &trapdoor, &path, &(), &m).unwrap_err();
            let want = if panics { "panicked" } else { "device lost" };
            assert!(err.to_string().contains(want), "{err}");
            assert!(err.to_string().contains("device lost"), "{err}");
            // Nothing is computed past the failure (the producer stops at it).
            assert_eq!(m.calls.load(std::sync::atomic::Ordering::Relaxed), 3);
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no file left");
        }
        // Twin: a multiplier that never fails writes the CPU's file.
        let m = Failing {
            good: usize::MAX,
            calls: Default::default(),
            panics: false,
        };
        write_parameters_on(c.clone(), &trapdoor, &path, &(), &m).unwrap();
        let mut want = Vec::new();
        generate_parameters(c, &trapdoor)
            .unwrap()
            .write(&mut want)
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_phase_is_reported_in_order() {
        let trapdoor = Trapdoor::random(&mut rand::thread_rng());
        let c = Cube {
            x: 5,
            dangling: false,
        };
        let dir = scratch_dir("phases");
        let to_file = Count::default();
        write_parameters_with_progress(c.clone(), &trapdoor, &dir.join("cube.params"), &to_file)
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(*to_file.phases.lock().unwrap(), GenPhase::ALL.to_vec());
        // Twin: parameters made in memory have no file to sync.
        let in_memory = Count::default();
        generate_parameters_with_progress(c, &trapdoor, &in_memory).unwrap();
        let seen = in_memory.phases.lock().unwrap().clone();
        assert_eq!(seen, GenPhase::ALL[..GenPhase::ALL.len() - 1].to_vec());
        assert!(!seen.contains(&GenPhase::Sync));
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
        let dir = scratch_dir("gen");
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
