//! Helpers shared by proofline's integration tests: random satisfiable circuits and one-call
//! proving with the CPU backend.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use blstrs::Scalar;
use ff::Field;
use prover_core::bellpepper_core::{
    Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable,
};
use prover_core::{CpuSynthesizer, GpuBackend, Parameters, PreparedParameters, Proof, Stages};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// A random satisfiable circuit: its shape (which variables meet in which constraint, with
/// which coefficients) comes from `shape_seed`, its witness from `witness_seed`.
///
/// Every aux variable is constrained (each is the fresh C term of its own constraint), and
/// every coefficient is nonzero, so no query point is at infinity: bellperson rejects both.
#[derive(Clone, Debug)]
pub struct RandomCircuit {
    /// Public inputs (without ONE).
    pub inputs: usize,
    /// Constraints (without input constraints).
    pub constraints: usize,
    /// Fixes the circuit.
    pub shape_seed: u64,
    /// Fixes the witness; `None` for parameter generation.
    pub witness_seed: Option<u64>,
    /// Makes the last constraint unsatisfied (for negative tests).
    pub break_last: bool,
}

impl RandomCircuit {
    /// A circuit with a witness.
    pub fn new(inputs: usize, constraints: usize, shape_seed: u64, witness_seed: u64) -> Self {
        RandomCircuit {
            inputs,
            constraints,
            shape_seed,
            witness_seed: Some(witness_seed),
            break_last: false,
        }
    }

    /// The same circuit without witness.
    pub fn shape(&self) -> Self {
        RandomCircuit {
            witness_seed: None,
            ..self.clone()
        }
    }

    /// The public inputs of the witness.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.witness_seed.expect("a witness"));
        (0..self.inputs).map(|_| Scalar::random(&mut rng)).collect()
    }
}

fn nonzero(rng: &mut impl RngCore) -> Scalar {
    loop {
        let s = Scalar::random(&mut *rng);
        if !bool::from(s.is_zero()) {
            return s;
        }
    }
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = ChaCha20Rng::seed_from_u64(self.shape_seed);
        let mut wit = self.witness_seed.map(ChaCha20Rng::seed_from_u64);
        let mut vars: Vec<(Variable, Option<Scalar>)> = vec![(CS::one(), Some(Scalar::ONE))];
        for i in 0..self.inputs {
            let v = wit.as_mut().map(Scalar::random);
            let var = cs.alloc_input(
                || format!("input {i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            vars.push((var, v));
        }
        // Two starting aux variables, each pinned by its own constraint x * 1 = x.
        for i in 0..2 {
            let v = wit.as_mut().map(Scalar::random);
            let var = cs.alloc(
                || format!("start {i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("pin {i}"),
                |lc| lc + var,
                |lc| lc + CS::one(),
                |lc| lc + var,
            );
            vars.push((var, v));
        }
        for i in 0..self.constraints {
            let mut pick = |lc: &mut Vec<(usize, Scalar)>| {
                let terms = 1 + (shape.next_u32() % 3) as usize;
                for _ in 0..terms {
                    lc.push((
                        (shape.next_u32() as usize) % vars.len(),
                        nonzero(&mut shape),
                    ));
                }
            };
            let (mut la, mut lb) = (Vec::new(), Vec::new());
            pick(&mut la);
            pick(&mut lb);
            let eval = |lc: &[(usize, Scalar)]| -> Option<Scalar> {
                lc.iter()
                    .try_fold(Scalar::ZERO, |acc, (j, c)| Some(acc + vars[*j].1? * c))
            };
            let broken = self.break_last && i + 1 == self.constraints;
            let value = match (eval(&la), eval(&lb)) {
                (Some(a), Some(b)) => Some(a * b + if broken { Scalar::ONE } else { Scalar::ZERO }),
                _ => None,
            };
            let out = cs.alloc(
                || format!("out {i}"),
                || value.ok_or(SynthesisError::AssignmentMissing),
            )?;
            let to_lc = |lc: &[(usize, Scalar)], vars: &[(Variable, Option<Scalar>)]| {
                lc.iter().fold(LinearCombination::zero(), |acc, (j, c)| {
                    acc + (*c, vars[*j].0)
                })
            };
            let a = to_lc(&la, &vars);
            let b = to_lc(&lb, &vars);
            cs.enforce(|| format!("c{i}"), |_| a, |_| b, |lc| lc + out);
            vars.push((out, value));
        }
        Ok(())
    }
}

/// Prepared parameters for the CPU backend.
pub fn prepare_cpu(params: Parameters) -> PreparedParameters {
    CpuBackend
        .prepare(Arc::new(params))
        .expect("the CPU backend prepares any parameters")
}

/// The CPU stages.
pub fn cpu_stages() -> Stages<'static, CpuSynthesizer> {
    Stages {
        synthesizer: &CpuSynthesizer,
        backend: &CpuBackend,
        finalizer: &CpuBackend,
    }
}

/// Proves one circuit on the CPU with fresh randomness.
pub fn prove_one<C: Circuit<Scalar>>(
    prepared: &PreparedParameters,
    circuit: C,
) -> prover_core::Result<Proof> {
    let mut rng = rand::thread_rng();
    Ok(prover_core::prove(cpu_stages(), prepared, vec![circuit], &mut rng)?.remove(0))
}
