//! Stage 1, synthesis: a bellpepper-core circuit with its witness becomes a synthesized
//! partition (the A, B, C evaluations per constraint, the assignments and the densities).

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable,
};
use blstrs::Scalar;
use ff::Field;

use crate::density::{into_canonical, Density, ScalarBytes};
use crate::error::{Error, Result};
use crate::params::{KeyShape, Parameters};

/// The A, B, C evaluations of every constraint (input constraints included): the inputs of the
/// H computation. Released when the accelerator stage ends.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Evaluations {
    /// `<A_i, z>` for every constraint `i`.
    pub a: Vec<Scalar>,
    /// `<B_i, z>`.
    pub b: Vec<Scalar>,
    /// `<C_i, z>`.
    pub c: Vec<Scalar>,
}

impl Evaluations {
    /// Number of constraints.
    pub fn len(&self) -> usize {
        self.a.len()
    }

    /// Whether there are no constraints.
    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    /// Real heap bytes of a, b and c.
    pub fn heap_bytes(&self) -> usize {
        (self.a.capacity() + self.b.capacity() + self.c.capacity()) * std::mem::size_of::<Scalar>()
    }
}

/// The witness of a partition in canonical form, with the densities of the A and B queries. It
/// stays with the partition from synthesis through finalization.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Witness {
    /// Public input assignment, the constant ONE first.
    pub input: Vec<ScalarBytes>,
    /// Auxiliary (private) assignment.
    pub aux: Vec<ScalarBytes>,
    /// Aux variables used in some A (inputs are all used, through the input constraints).
    pub a_aux_density: Density,
    /// Inputs used in some B.
    pub b_input_density: Density,
    /// Aux variables used in some B.
    pub b_aux_density: Density,
}

impl Witness {
    /// Real heap bytes of the input assignment.
    pub fn input_bytes(&self) -> usize {
        self.input.capacity() * std::mem::size_of::<ScalarBytes>()
    }

    /// Real heap bytes of the aux assignment.
    pub fn aux_bytes(&self) -> usize {
        self.aux.capacity() * std::mem::size_of::<ScalarBytes>()
    }

    /// Real heap bytes of the three density bitmaps.
    pub fn density_bytes(&self) -> usize {
        self.a_aux_density.heap_bytes()
            + self.b_input_density.heap_bytes()
            + self.b_aux_density.heap_bytes()
    }

    /// The public inputs as field elements (without the constant ONE).
    pub fn public_inputs(&self) -> Vec<Scalar> {
        self.input[1..]
            .iter()
            .map(|b| b.to_scalar().expect("inputs are canonical"))
            .collect()
    }
}

/// The output of synthesis: what the accelerator stage consumes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SynthesizedPartition {
    /// The A, B, C evaluations (freed by the accelerator stage).
    pub evaluations: Evaluations,
    /// Assignments and densities (kept until the partition is deallocated).
    pub witness: Witness,
}

impl SynthesizedPartition {
    /// Real heap bytes: the evaluations, the assignments and the densities.
    pub fn heap_bytes(&self) -> usize {
        let w = &self.witness;
        self.evaluations.heap_bytes() + w.input_bytes() + w.aux_bytes() + w.density_bytes()
    }
}

/// The sizes that must agree between a synthesized partition and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionShape {
    /// Constraints, input constraints included.
    pub constraints: usize,
    /// Inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Aux variables in the A query.
    pub a_aux: usize,
    /// Inputs in the B query.
    pub b_inputs: usize,
    /// Aux variables in the B query.
    pub b_aux: usize,
}

impl PartitionShape {
    /// Size of the evaluation domain (next power of two of the constraint count).
    pub fn domain_size(&self) -> usize {
        self.constraints.next_power_of_two()
    }
}

impl SynthesizedPartition {
    /// The partition's shape.
    pub fn shape(&self) -> PartitionShape {
        let w = &self.witness;
        PartitionShape {
            constraints: self.evaluations.len(),
            inputs: w.input.len(),
            aux: w.aux.len(),
            a_aux: w.a_aux_density.count_ones(),
            b_inputs: w.b_input_density.count_ones(),
            b_aux: w.b_aux_density.count_ones(),
        }
    }

    /// Checks that this partition can be proven with `params`: every size that the MSMs and the
    /// NTT rely on must agree, so that a wrong circuit is an error and never a wrong proof.
    pub fn check_shape(&self, params: &Parameters) -> Result<()> {
        self.check_key_shape(&params.shape())
    }

    /// Checks that this partition fits a key of shape `key` (see [`Self::check_shape`]).
    pub fn check_key_shape(&self, key: &KeyShape) -> Result<()> {
        let s = self.shape();
        let check = |what, circuit: usize, params: usize| {
            if circuit == params {
                Ok(())
            } else {
                Err(Error::ShapeMismatch {
                    what,
                    circuit,
                    params,
                })
            }
        };
        check("evaluation domain size", s.domain_size(), key.domain)?;
        check("public inputs (vk.ic)", s.inputs, key.inputs)?;
        check("aux variables (l query)", s.aux, key.l)?;
        check("A query points", s.inputs + s.a_aux, key.a)?;
        check("B query points in G1", s.b_inputs + s.b_aux, key.b_g1)?;
        check("B query points in G2", s.b_inputs + s.b_aux, key.b_g2)?;
        let w = &self.witness;
        check("aux density length", w.a_aux_density.len(), s.aux)?;
        check("B aux density length", w.b_aux_density.len(), s.aux)?;
        check("B input density length", w.b_input_density.len(), s.inputs)?;
        Ok(())
    }
}

/// Stage 1: turns circuits into synthesized partitions.
pub trait Synthesizer: Send + Sync {
    /// Synthesizes one circuit with its witness.
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition>;
}

/// A shared synthesizer (the caller keeps a handle, as to a [`crate::replay::Replay`]).
impl<S: Synthesizer> Synthesizer for std::sync::Arc<S> {
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        (**self).synthesize(circuit)
    }
}

/// The sizes of a circuit as the prover sees them (bellperson's shape: ONE and the input
/// constraints included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CircuitSize {
    /// Constraints, input constraints included.
    pub constraints: usize,
    /// Inputs, ONE included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
}

impl CircuitSize {
    /// The evaluation domain (next power of two of the constraints).
    pub fn domain_size(&self) -> usize {
        self.constraints.max(1).next_power_of_two()
    }
}

/// Counts a circuit's constraints and variables without evaluating a value or a linear
/// combination: seconds where synthesis or parameters take minutes, so that options that depend
/// on the size (a memory budget) can be checked first.
pub fn circuit_size<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitSize> {
    #[derive(Default)]
    struct Counter(CircuitSize);
    impl ConstraintSystem<Scalar> for Counter {
        type Root = Self;
        fn new() -> Self {
            Self::default()
        }
        fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.0.aux += 1;
            Ok(Variable::new_unchecked(Index::Aux(self.0.aux - 1)))
        }
        fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.0.inputs += 1;
            Ok(Variable::new_unchecked(Index::Input(self.0.inputs - 1)))
        }
        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            self.0.constraints += 1;
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
            self.0.constraints += other.0.constraints;
            self.0.aux += other.0.aux;
            self.0.inputs += other.0.inputs.saturating_sub(1);
        }
    }
    let mut cs = Counter::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.0.inputs)?;
    Ok(cs.0)
}

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

/// Synthesis on the calling thread, exactly as bellperson's prover does it (the constant ONE
/// input, the circuit, then one `input * 0 = 0` constraint per input), with a satisfiability
/// check: an unsatisfied constraint is an error that names it, never a proof that fails later.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSynthesizer;

impl Synthesizer for CpuSynthesizer {
    fn synthesize<C: Circuit<Scalar>>(&self, circuit: C) -> Result<SynthesizedPartition> {
        let mut cs = ProvingAssignment::default();
        synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.input.len())?;
        if let Some((index, annotation)) = cs.unsatisfied.take() {
            return Err(Error::Unsatisfied { index, annotation });
        }
        cs.shrink_to_fit();
        Ok(SynthesizedPartition {
            evaluations: Evaluations {
                a: cs.a,
                b: cs.b,
                c: cs.c,
            },
            witness: Witness {
                input: into_canonical(cs.input),
                aux: into_canonical(cs.aux),
                a_aux_density: cs.a_aux_density,
                b_input_density: cs.b_input_density,
                b_aux_density: cs.b_aux_density,
            },
        })
    }
}

/// The proving constraint system.
#[derive(Default)]
struct ProvingAssignment {
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
    input: Vec<Scalar>,
    aux: Vec<Scalar>,
    unsatisfied: Option<(usize, String)>,
}

impl ProvingAssignment {
    /// Gives back the spare capacity of every vector. They grow by doubling as the circuit
    /// runs, so up to half of each is unused at the end (a 2 KiB PoRep partition: 2^22 slots
    /// for 2.69M constraints, 36% of its bytes); the partition then waits with them for the
    /// accelerator and the finalizer, counted in the ledger by their capacity.
    fn shrink_to_fit(&mut self) {
        for v in [
            &mut self.a,
            &mut self.b,
            &mut self.c,
            &mut self.input,
            &mut self.aux,
        ] {
            v.shrink_to_fit();
        }
        for d in [
            &mut self.a_aux_density,
            &mut self.b_input_density,
            &mut self.b_aux_density,
        ] {
            d.shrink_to_fit();
        }
    }
}

fn eval(
    lc: &LinearCombination<Scalar>,
    input_density: Option<&mut Density>,
    aux_density: Option<&mut Density>,
    input: &[Scalar],
    aux: &[Scalar],
) -> Scalar {
    fn terms<'a>(
        acc: &mut Scalar,
        it: impl Iterator<Item = (&'a usize, &'a Scalar)>,
        mut density: Option<&mut Density>,
        values: &[Scalar],
    ) {
        for (&index, coeff) in it {
            if crate::public::is_zero(coeff) {
                continue;
            }
            let v = values[index];
            *acc += if *coeff == Scalar::ONE { v } else { v * coeff };
            if let Some(d) = density.as_deref_mut() {
                d.set(index);
            }
        }
    }
    let mut acc = Scalar::ZERO;
    terms(&mut acc, lc.iter_inputs(), input_density, input);
    terms(&mut acc, lc.iter_aux(), aux_density, aux);
    acc
}

impl ConstraintSystem<Scalar> for ProvingAssignment {
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
        self.a_aux_density.push_unset();
        self.b_aux_density.push_unset();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push_unset();
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        // Inputs are always dense in A, through the input constraints.
        let va = eval(
            &a,
            None,
            Some(&mut self.a_aux_density),
            &self.input,
            &self.aux,
        );
        let vb = eval(
            &b,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
            &self.input,
            &self.aux,
        );
        let vc = eval(&c, None, None, &self.input, &self.aux);
        if self.unsatisfied.is_none() && va * vb != vc {
            self.unsatisfied = Some((self.a.len(), annotation().into()));
        }
        self.a.push(va);
        self.b.push(vb);
        self.c.push(vc);
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
        let offset = self.a.len();
        self.a_aux_density.extend_from(&other.a_aux_density, 0);
        // The other system's ONE is this one's ONE: carry its B use over, skip its bit.
        if other.b_input_density.get(0) {
            self.b_input_density.set(0);
        }
        self.b_input_density.extend_from(&other.b_input_density, 1);
        self.b_aux_density.extend_from(&other.b_aux_density, 0);
        self.a.extend_from_slice(&other.a);
        self.b.extend_from_slice(&other.b);
        self.c.extend_from_slice(&other.c);
        // The other system's first input is its own temporary ONE.
        self.input.extend_from_slice(&other.input[1..]);
        self.aux.extend_from_slice(&other.aux);
        if self.unsatisfied.is_none() {
            if let Some((i, ann)) = &other.unsatisfied {
                self.unsatisfied = Some((offset + i, ann.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthesizes one constraint `x * (ONE or x) = y` in a child system merged with `extend`,
    /// as circuits that synthesize in parallel do.
    struct Extended {
        one_in_b: bool,
    }

    impl Circuit<Scalar> for Extended {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            assert!(CS::is_extensible());
            let mut child = CS::new();
            child.alloc_input(|| "child ONE", || Ok(Scalar::ONE))?;
            let x = child.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let y = child.alloc(
                || "y",
                || Ok(Scalar::from(if self.one_in_b { 3u64 } else { 9 })),
            )?;
            let one_in_b = self.one_in_b;
            child.enforce(
                || "x * b = y",
                |lc| lc + x,
                |lc| if one_in_b { lc + CS::one() } else { lc + x },
                |lc| lc + y,
            );
            cs.extend(&child);
            Ok(())
        }
    }

    #[test]
    fn circuit_size_counts_what_synthesis_makes() {
        for one_in_b in [true, false] {
            let p = CpuSynthesizer.synthesize(Extended { one_in_b }).unwrap();
            let size = circuit_size(Extended { one_in_b }).unwrap();
            assert_eq!(
                (size.constraints, size.inputs, size.aux),
                (
                    p.evaluations.len(),
                    p.witness.input.len(),
                    p.witness.aux.len()
                )
            );
            assert_eq!(size.domain_size(), p.shape().domain_size());
        }
    }

    #[test]
    fn extend_carries_the_one_inputs_b_use() {
        let p = CpuSynthesizer
            .synthesize(Extended { one_in_b: true })
            .unwrap();
        assert!(p.witness.b_input_density.get(0));
        assert_eq!(p.witness.b_input_density.len(), 1);
        assert_eq!(p.witness.aux.len(), 2);
        // Twin: without ONE in B, its bit stays clear.
        let q = CpuSynthesizer
            .synthesize(Extended { one_in_b: false })
            .unwrap();
        assert!(!q.witness.b_input_density.get(0));
        assert!(q.witness.b_aux_density.get(0));
    }

    #[test]
    fn a_partition_keeps_no_spare_capacity() {
        // 1000 constraints and 3 inputs: 1004 evaluations, 1000+ aux, none a power of two.
        let circuit = || crate::circuits::DenseCircuit::new(1000, 3, 7).with_witness(11);
        // Twin: grown by pushing, the system's vectors hold spare capacity before the shrink.
        let mut cs = ProvingAssignment::default();
        synthesize_in_bellperson_shape(&mut cs, circuit(), |cs| cs.input.len()).unwrap();
        assert!(cs.a.capacity() > cs.a.len() && cs.aux.capacity() > cs.aux.len());
        cs.shrink_to_fit();
        assert_eq!(cs.a.capacity(), cs.a.len());
        // What the synthesizer returns: real bytes equal to the lengths' bytes.
        let p = CpuSynthesizer.synthesize(circuit()).unwrap();
        let e = &p.evaluations;
        assert_eq!(e.len(), 1004);
        for v in [&e.a, &e.b, &e.c] {
            assert_eq!(v.capacity(), v.len());
        }
        let w = &p.witness;
        assert_eq!(w.aux.capacity(), w.aux.len());
        assert_eq!(w.input.capacity(), w.input.len());
        assert_eq!(e.heap_bytes(), 3 * 1004 * 32);
        assert_eq!(w.a_aux_density.heap_bytes(), w.aux.len().div_ceil(64) * 8);
    }
}
