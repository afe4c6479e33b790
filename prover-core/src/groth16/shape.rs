//! Bellperson's shape of a circuit: what the parameter generator and every synthesizer add
//! around the circuit's own constraints, in the same order, so that their variables and
//! constraints line up.

use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

/// The steps the parameter generator and the synthesizer must take alike, in bellperson's
/// order: the constant ONE as input 0, the circuit, then one `input * 0 = 0` constraint per
/// input (so that every input is in the A query). `inputs` reads the input count after the
/// circuit has run.
pub(crate) fn synthesize_in_bellperson_shape<CS, C>(
    cs: &mut CS,
    circuit: C,
    inputs: impl FnOnce(&CS) -> usize,
) -> std::result::Result<(), SynthesisError>
where
    CS: ConstraintSystem<Scalar>,
    C: Circuit<Scalar>,
{
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(cs)?;
    for i in 0..inputs(cs) {
        cs.enforce(
            || "input constraint",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    Ok(())
}
