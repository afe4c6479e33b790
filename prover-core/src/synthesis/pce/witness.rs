//! Witness-only synthesis: a constraint system that runs a circuit for its assignments and
//! counts its constraints, without building a linear combination (`enforce` calls none of its
//! closures). It is a bellpepper witness generator: gadgets that compute their values directly
//! (neptune's `circuit2` Poseidon) take that path, and a circuit made of independent parts can
//! assign them on all cores ([`assign_parts`]).

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use crate::error::Result;
use crate::groth16::assembly::{constraint_system, Assembly};
use crate::groth16::shape::synthesize_in_bellperson_shape;
use crate::parallel;

use super::stream::Writer;

/// A circuit's assignments in bellperson's shape (ONE first), and its constraint count.
#[derive(Default)]
pub struct Assignment {
    /// The stream to the helper evaluating beside the witness (`stream.rs`), while open. First,
    /// so that it closes (drops) before `aux` is freed when the assignment is dropped.
    gate: Option<Writer>,
    /// Inputs, ONE first.
    pub input: Vec<Scalar>,
    /// Aux variables.
    pub aux: Vec<Scalar>,
    /// Constraints, input constraints included.
    pub constraints: usize,
    /// Whether a gadget filled values in bulk (`allocate_empty`), which enforces nothing: the
    /// constraint count is then not the circuit's.
    bulk: bool,
}

impl Assignment {
    /// Whether `constraints` counts every constraint of the circuit (false once a gadget has
    /// filled values in bulk without enforcing its constraints).
    pub fn counts_constraints(&self) -> bool {
        !self.bulk
    }
}

/// Runs `circuit` for its assignments only.
pub fn assign<C: Circuit<Scalar>>(circuit: C) -> Result<Assignment> {
    let mut cs = Assignment::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.input.len())?;
    Ok(cs)
}

/// [`assign`] with its aux values shared, as they are assigned, with the helper behind `writer`
/// (`stream.rs`): the aux vector is reserved at `aux` values (the recorded count), and the
/// stream is closed when the assignment ends, fails, or would outgrow that.
pub(crate) fn assign_beside<C: Circuit<Scalar>>(
    circuit: C,
    writer: Writer,
    aux: usize,
) -> Result<Assignment> {
    let mut cs = Assignment {
        gate: Some(writer),
        aux: Vec::with_capacity(aux),
        ..Assignment::default()
    };
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.input.len())?;
    cs.gate = None;
    Ok(cs)
}

impl Assignment {
    /// Before values come in bulk (appended systems, a gadget's bulk values): the helper
    /// follows values assigned one by one, so it stops here, and the constraints it has not
    /// evaluated are evaluated over every core after the witness. (A 2 KiB PoRep partition,
    /// whose challenges are assigned in parallel and appended, was 1.2x slower with the stream
    /// left open, by criterion here.)
    fn close_stream(&mut self) {
        self.gate = None;
    }

    /// After aux values are appended (all final): the helper may read them.
    fn publish(&mut self) {
        if let Some(g) = &mut self.gate {
            g.publish(&self.input, &self.aux);
        }
    }
}

impl Assembly for Assignment {
    const EXTENSIBLE: bool = true;

    fn alloc_aux<F>(&mut self, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        let v = f()?;
        if self.aux.len() == self.aux.capacity() {
            // The push would move the vector the helper reads.
            self.close_stream();
        }
        self.aux.push(v);
        self.publish();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F>(&mut self, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        self.input.push(f()?);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<N, LA, LB, LC>(&mut self, _: N, _: LA, _: LB, _: LC)
    where
        N: FnOnce() -> String,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
    }

    fn extend(&mut self, other: &Self) {
        // The other system's first input is its own temporary ONE.
        self.input
            .extend_from_slice(other.input.get(1..).unwrap_or(&[]));
        self.close_stream();
        self.aux.extend_from_slice(&other.aux);
        self.constraints += other.constraints;
        self.bulk |= other.bulk;
    }
}

constraint_system!(Assignment {
    fn is_witness_generator(&self) -> bool {
        true
    }
    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        self.input.extend_from_slice(new_inputs);
    }
    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        self.close_stream();
        self.aux.extend_from_slice(new_aux);
    }
    fn allocate_empty(&mut self, aux_n: usize, inputs_n: usize) -> (&mut [Scalar], &mut [Scalar]) {
        self.bulk = true;
        let (a, i) = (self.aux.len(), self.input.len());
        self.close_stream();
        self.aux.resize(a + aux_n, Scalar::ZERO);
        self.input.resize(i + inputs_n, Scalar::ZERO);
        (&mut self.aux[a..], &mut self.input[i..])
    }
    fn allocate_empty_inputs(&mut self, n: usize) -> &mut [Scalar] {
        self.allocate_empty(0, n).1
    }
    fn allocate_empty_aux(&mut self, n: usize) -> &mut [Scalar] {
        self.allocate_empty(n, 0).0
    }
    fn inputs_slice(&self) -> &[Scalar] {
        &self.input
    }
    fn aux_slice(&self) -> &[Scalar] {
        &self.aux
    }
});

/// Assigns a circuit made of a common beginning and independent `parts` on all cores, appending
/// to the witness generator `cs` the same inputs, aux values and constraint count as running the
/// beginning and then each part in turn on `cs`.
///
/// `run(a, None)` assigns the beginning alone into `a`; `run(a, Some(p))` assigns the beginning
/// and then part `p`, in a fresh [`Assignment`] on its own thread (a part may use what the
/// beginning allocated, which in a witness generator is only values). The beginning goes into `cs`
/// once; of each part's assignment, what follows the beginning.
///
/// Only for witness generators (`cs.is_witness_generator()`): a constraint system that builds
/// constraints needs the variables the parts share, so such a circuit runs its parts in turn.
pub fn assign_parts<CS, P, F>(cs: &mut CS, parts: Vec<P>, run: F) -> Result<(), SynthesisError>
where
    CS: ConstraintSystem<Scalar>,
    P: Send,
    F: Fn(&mut Assignment, Option<P>) -> Result<(), SynthesisError> + Sync,
{
    assert!(
        cs.is_witness_generator(),
        "assign_parts needs a witness generator"
    );
    let mut beginning = Assignment::default();
    run(&mut beginning, None)?;
    let assigned: Vec<Assignment> = parallel::install(|| {
        parts
            .into_par_iter()
            .map(|p| {
                let mut a = Assignment::default();
                run(&mut a, Some(p))?;
                Ok(a)
            })
            .collect::<Result<_, SynthesisError>>()
    })?;
    append(cs, &beginning, &Assignment::default());
    for a in &assigned {
        append(cs, a, &beginning);
    }
    Ok(())
}

/// Appends to `cs` what `a` assigned after its first `skip.input.len()` inputs, `skip.aux.len()`
/// aux values and `skip.constraints` constraints.
fn append<CS: ConstraintSystem<Scalar>>(cs: &mut CS, a: &Assignment, skip: &Assignment) {
    cs.extend_inputs(a.input.get(skip.input.len()..).unwrap_or(&[]));
    cs.extend_aux(a.aux.get(skip.aux.len()..).unwrap_or(&[]));
    for _ in skip.constraints..a.constraints {
        cs.enforce(|| "part", |lc| lc, |lc| lc, |lc| lc);
    }
    if a.bulk {
        // "The count is not the circuit's" carries over to `cs`.
        cs.allocate_empty(0, 0);
    }
}
