//! Witness-only synthesis: a constraint system that runs a circuit for its assignments and
//! counts its constraints, without building a linear combination (`enforce` calls none of its
//! closures).

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;

use crate::error::Result;
use crate::synthesize::synthesize_in_bellperson_shape;

/// A circuit's assignments in bellperson's shape (ONE first), and its constraint count.
#[derive(Default)]
pub struct Assignment {
    /// Inputs, ONE first.
    pub input: Vec<Scalar>,
    /// Aux variables.
    pub aux: Vec<Scalar>,
    /// Constraints, input constraints included.
    pub constraints: usize,
}

/// Runs `circuit` for its assignments only.
pub fn assign<C: Circuit<Scalar>>(circuit: C) -> Result<Assignment> {
    let mut cs = Assignment::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.input.len())?;
    Ok(cs)
}

impl ConstraintSystem<Scalar> for Assignment {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
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

    fn is_extensible() -> bool {
        true
    }

    fn extend(&mut self, other: &Self) {
        // The other system's first input is its own temporary ONE.
        self.input
            .extend_from_slice(other.input.get(1..).unwrap_or(&[]));
        self.aux.extend_from_slice(&other.aux);
        self.constraints += other.constraints;
    }
}
