//! Demo workloads: circuits for tests, benchmarks and the `prove` command.

use bellpepper_core::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use prover_core::groth16::public::random_scalar;

/// The `dense` workload: a chain of constraints where every constraint touches all three
/// linear combinations and the witness values are spread over the whole field (the worst case
/// for the MSMs: no 0/1 scalars to skip).
///
/// With aux values `z_0, z_1, ...`, public inputs `p_1..p_k` and per-constraint coefficients
/// `alpha_i, beta_i, gamma_i` drawn from the shape seed, constraint `i` is
/// `(z_{i+1} + alpha_i z_i + p_(i mod k)) * (z_i + beta_i) = z_{i+2} + gamma_i z_{i+1}`.
/// The shape seed fixes the circuit (and so its parameters); the witness seed fixes the
/// starting values and the public inputs (one per partition).
#[derive(Clone, Debug)]
pub struct DenseCircuit {
    constraints: usize,
    inputs: usize,
    shape_seed: u64,
    witness_seed: Option<u64>,
}

impl DenseCircuit {
    /// A circuit of `constraints` chain constraints and `inputs` public inputs, without witness
    /// (for parameter generation).
    pub fn new(constraints: usize, inputs: usize, shape_seed: u64) -> Self {
        DenseCircuit {
            constraints,
            inputs,
            shape_seed,
            witness_seed: None,
        }
    }

    /// The circuit whose total constraint count (input constraints included) is exactly `2^k`
    /// (for `k >= 4`), so that its domain is `2^k`.
    pub fn with_domain(log2: u32, inputs: usize, shape_seed: u64) -> Self {
        let total = 1usize << log2;
        Self::new(total.saturating_sub(inputs + 1).max(1), inputs, shape_seed)
    }

    /// The same circuit with the witness drawn from `seed`.
    pub fn with_witness(mut self, seed: u64) -> Self {
        self.witness_seed = Some(seed);
        self
    }

    /// Number of chain constraints (without input constraints).
    pub fn constraints(&self) -> usize {
        self.constraints
    }

    /// The public inputs of this witness (empty without a witness).
    pub fn public_inputs(&self) -> Vec<Scalar> {
        match self.witness_seed {
            Some(seed) => {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                (0..self.inputs).map(|_| random_scalar(&mut rng)).collect()
            }
            None => Vec::new(),
        }
    }
}

impl Circuit<Scalar> for DenseCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = ChaCha20Rng::seed_from_u64(self.shape_seed);
        let (inputs_v, start) = match self.witness_seed {
            Some(seed) => {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                let inputs: Vec<Scalar> =
                    (0..self.inputs).map(|_| random_scalar(&mut rng)).collect();
                let z0 = random_scalar(&mut rng);
                let z1 = random_scalar(&mut rng);
                (Some(inputs), Some((z0, z1)))
            }
            None => (None, None),
        };
        let mut inputs = Vec::with_capacity(self.inputs);
        for i in 0..self.inputs {
            let v = inputs_v.as_ref().map(|x| x[i]);
            inputs.push((
                cs.alloc_input(
                    || format!("p{i}"),
                    || v.ok_or(SynthesisError::AssignmentMissing),
                )?,
                v,
            ));
        }
        let alloc = |cs: &mut CS,
                     i: usize,
                     v: Option<Scalar>|
         -> Result<(Variable, Option<Scalar>), SynthesisError> {
            let var = cs.alloc(
                || format!("z{i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            Ok((var, v))
        };
        let mut y = alloc(cs, 0, start.map(|s| s.0))?;
        let mut x = alloc(cs, 1, start.map(|s| s.1))?;
        for i in 0..self.constraints {
            let alpha = random_scalar(&mut shape);
            let beta = random_scalar(&mut shape);
            let gamma = random_scalar(&mut shape);
            let p = if inputs.is_empty() {
                None
            } else {
                Some(inputs[i % inputs.len()])
            };
            let value = (|| {
                let a = x.1? + alpha * y.1? + p.map_or(Some(Scalar::ZERO), |p| p.1)?;
                let b = y.1? + beta;
                Some(a * b - gamma * x.1?)
            })();
            let z = alloc(cs, i + 2, value)?;
            cs.enforce(
                || format!("c{i}"),
                |lc: LinearCombination<Scalar>| {
                    let lc = lc + x.0 + (alpha, y.0);
                    match p {
                        Some(p) => lc + p.0,
                        None => lc,
                    }
                },
                |lc| lc + y.0 + (beta, CS::one()),
                |lc| lc + z.0 + (gamma, x.0),
            );
            y = x;
            x = z;
        }
        Ok(())
    }
}
