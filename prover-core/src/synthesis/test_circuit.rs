//! A small circuit for the core's own tests (the workloads crate has the benchmark circuits):
//! a chain `z_{i+1} = (z_i + c_i + p_(i mod k)) * z_i`, its coefficients `c_i` fixed by the
//! shape seed, its start `z_0` and public inputs `p` by the witness seed.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

use crate::groth16::public::random_scalar;

/// The chain circuit (see the module's text).
#[derive(Clone, Debug)]
pub(crate) struct ChainCircuit {
    constraints: usize,
    inputs: usize,
    shape_seed: u64,
    witness_seed: Option<u64>,
}

impl ChainCircuit {
    /// `constraints` chain constraints over `inputs` public inputs, without witness.
    pub(crate) fn new(constraints: usize, inputs: usize, shape_seed: u64) -> Self {
        ChainCircuit {
            constraints,
            inputs,
            shape_seed,
            witness_seed: None,
        }
    }

    /// The same circuit with its witness drawn from `seed`.
    pub(crate) fn with_witness(mut self, seed: u64) -> Self {
        self.witness_seed = Some(seed);
        self
    }
}

impl Circuit<Scalar> for ChainCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut shape = ChaCha20Rng::seed_from_u64(self.shape_seed);
        let mut witness = self.witness_seed.map(ChaCha20Rng::seed_from_u64);
        let value = |cs_rng: &mut Option<ChaCha20Rng>| cs_rng.as_mut().map(random_scalar);
        let mut publics = Vec::with_capacity(self.inputs);
        for i in 0..self.inputs {
            let v = value(&mut witness);
            let var = cs.alloc_input(
                || format!("p{i}"),
                || v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            publics.push((var, v));
        }
        let mut z_v = value(&mut witness);
        let mut z = cs.alloc(|| "z0", || z_v.ok_or(SynthesisError::AssignmentMissing))?;
        for i in 0..self.constraints {
            let c = random_scalar(&mut shape);
            let (p, p_v) = match publics.get(i % self.inputs.max(1)) {
                Some(&(p, v)) => (Some(p), v),
                None => (None, Some(Scalar::from(0u64))),
            };
            let next_v = match (z_v, p_v) {
                (Some(z), Some(p)) => Some((z + c + p) * z),
                _ => None,
            };
            let next = cs.alloc(
                || format!("z{}", i + 1),
                || next_v.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || format!("step {i}"),
                |lc| {
                    let lc = lc + z + (c, CS::one());
                    match p {
                        Some(p) => lc + p,
                        None => lc,
                    }
                },
                |lc| lc + z,
                |lc| lc + next,
            );
            (z, z_v) = (next, next_v);
        }
        Ok(())
    }
}
