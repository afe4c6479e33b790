//! The suite's circuits: small, satisfiable, with the witness patterns that break backends
//! (all zeros, all ones, random), sizes that are not powers of two, and shapes whose aux
//! variables are in no A or B query (empty densities).

use blstrs::Scalar;
use ff::Field;
use prover_core::bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// The values the witness takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Fresh random field elements.
    Random,
    /// Every input and aux value zero.
    Zeros,
    /// Every input and aux value one.
    Ones,
}

/// `inputs` public inputs; `squares` constraints `x * x = y` (x in A and B, y in C only);
/// `copies` constraints `ONE * input_k = c` (c in C only, so with no squares the aux A and B
/// densities are empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteCircuit {
    /// Public inputs (without ONE), at least 1.
    pub inputs: usize,
    /// Square constraints.
    pub squares: usize,
    /// Copy constraints.
    pub copies: usize,
    /// The witness pattern.
    pub values: Values,
    /// Seeds the random values.
    pub seed: u64,
}

impl SuiteCircuit {
    fn value(&self, rng: &mut ChaCha20Rng) -> Scalar {
        match self.values {
            Values::Random => Scalar::random(rng),
            Values::Zeros => Scalar::ZERO,
            Values::Ones => Scalar::ONE,
        }
    }

    /// The public inputs of the witness.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        (0..self.inputs).map(|_| self.value(&mut rng)).collect()
    }

    /// The same shape with another witness seed.
    pub fn reseeded(&self, seed: u64) -> Self {
        SuiteCircuit {
            seed,
            ..self.clone()
        }
    }

    /// A short description for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "{} inputs, {} squares, {} copies, {:?} values, seed {}",
            self.inputs, self.squares, self.copies, self.values, self.seed
        )
    }
}

impl Circuit<Scalar> for SuiteCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        let mut inputs = Vec::with_capacity(self.inputs);
        for i in 0..self.inputs {
            let v = self.value(&mut rng);
            inputs.push((cs.alloc_input(|| format!("in {i}"), || Ok(v))?, v));
        }
        for j in 0..self.squares {
            let v = self.value(&mut rng);
            let x = cs.alloc(|| format!("x {j}"), || Ok(v))?;
            let y = cs.alloc(|| format!("y {j}"), || Ok(v.square()))?;
            cs.enforce(
                || format!("square {j}"),
                |lc| lc + x,
                |lc| lc + x,
                |lc| lc + y,
            );
        }
        for j in 0..self.copies {
            let (input, v) = inputs[j % inputs.len()];
            let c = cs.alloc(|| format!("c {j}"), || Ok(v))?;
            cs.enforce(
                || format!("copy {j}"),
                |lc| lc + CS::one(),
                |lc| lc + input,
                |lc| lc + c,
            );
        }
        Ok(())
    }
}

/// The suite's cases, each with fresh random witness seeds: sizes that are not powers of two,
/// the three witness patterns, and empty aux densities.
pub fn cases(rng: &mut impl rand_core::RngCore) -> Vec<SuiteCircuit> {
    let mut case = |inputs, squares, copies, values| SuiteCircuit {
        inputs,
        squares,
        copies,
        values,
        seed: rng.next_u64(),
    };
    vec![
        case(2, 37, 5, Values::Random),
        case(1, 100, 0, Values::Random),
        case(3, 13, 4, Values::Zeros),
        case(3, 13, 4, Values::Ones),
        // No squares: no aux variable is in A or B.
        case(4, 0, 9, Values::Random),
    ]
}
