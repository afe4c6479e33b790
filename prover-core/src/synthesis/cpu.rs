//! Synthesis on the CPU: bellpepper's constraint system, in bellperson's shape.

use bellpepper_core::{Circuit, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::error::{Error, Result};
use crate::groth16::assembly::{constraint_system, Assembly};
use crate::groth16::shape::synthesize_in_bellperson_shape;
use crate::stages::density::{into_canonical, Density};
use crate::stages::{Evaluations, SynthesizedPartition, Synthesizer, Witness};

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

    /// The host buffers of a partition of this circuit as [`CpuSynthesizer`] hands it on (every
    /// vector shrunk to its length), by the ledger's kinds: what the ledger counts for it.
    pub fn partition_bytes(&self) -> crate::runtime::engine::PartitionBytes {
        let scalar = std::mem::size_of::<Scalar>() as u64;
        let words = |bits: usize| bits.div_ceil(64) as u64 * 8;
        crate::runtime::engine::PartitionBytes {
            abc: 3 * self.constraints as u64 * scalar,
            aux: self.aux as u64 * scalar,
            input: self.inputs as u64 * scalar,
            density: 2 * words(self.aux) + words(self.inputs),
        }
    }
}

/// Counts a circuit's constraints and variables without evaluating a value or a linear
/// combination: seconds where synthesis or parameters take minutes, so that options that depend
/// on the size (a memory budget) can be checked first.
pub fn circuit_size<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitSize> {
    #[derive(Default)]
    struct Counter(CircuitSize);
    impl Assembly for Counter {
        const EXTENSIBLE: bool = true;

        fn alloc_aux<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
        {
            self.0.aux += 1;
            Ok(Variable::new_unchecked(Index::Aux(self.0.aux - 1)))
        }

        fn alloc_input<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
        {
            self.0.inputs += 1;
            Ok(Variable::new_unchecked(Index::Input(self.0.inputs - 1)))
        }

        fn enforce<N, LA, LB, LC>(&mut self, _: N, _: LA, _: LB, _: LC)
        where
            N: FnOnce() -> String,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            self.0.constraints += 1;
        }

        fn extend(&mut self, other: &Self) {
            // The other system's first input is its own temporary ONE.
            self.0.constraints += other.0.constraints;
            self.0.aux += other.0.aux;
            self.0.inputs += other.0.inputs.saturating_sub(1);
        }
    }

    constraint_system!(Counter {});
    let mut cs = Counter::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.0.inputs)?;
    Ok(cs.0)
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
            if crate::groth16::public::is_zero(coeff) {
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

impl Assembly for ProvingAssignment {
    const EXTENSIBLE: bool = true;

    fn alloc_aux<F>(&mut self, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push_unset();
        self.b_aux_density.push_unset();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F>(&mut self, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
    {
        self.input.push(f()?);
        self.b_input_density.push_unset();
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<N, LA, LB, LC>(&mut self, annotation: N, a: LA, b: LB, c: LC)
    where
        N: FnOnce() -> String,
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
            self.unsatisfied = Some((self.a.len(), annotation()));
        }
        self.a.push(va);
        self.b.push(vb);
        self.c.push(vc);
    }

    fn extend(&mut self, other: &Self) {
        let offset = self.a.len();
        extend_densities(
            [
                &mut self.a_aux_density,
                &mut self.b_input_density,
                &mut self.b_aux_density,
            ],
            [
                &other.a_aux_density,
                &other.b_input_density,
                &other.b_aux_density,
            ],
        );
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

constraint_system!(ProvingAssignment {});

/// Appends a child system's densities (A's aux, B's inputs, B's aux) to its parent's. The
/// child's first input is its own temporary ONE, which is the parent's ONE: its B use is carried
/// over and its bit skipped.
fn extend_densities(into: [&mut Density; 3], from: [&Density; 3]) {
    let [a_aux, b_input, b_aux] = into;
    a_aux.extend_from(from[0], 0);
    if from[1].get(0) {
        b_input.set(0);
    }
    b_input.extend_from(from[1], 1);
    b_aux.extend_from(from[2], 0);
}

/// A circuit's counts and how many of its variables its A and B polynomials use: what its
/// parameters' `a` and `b_g1` queries hold (their lengths are `inputs + a_aux` and
/// `b_inputs + b_aux`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CircuitDensity {
    /// Constraints, inputs and aux variables.
    pub size: CircuitSize,
    /// Aux variables with a nonzero coefficient in some A linear combination.
    pub a_aux: usize,
    /// Inputs (ONE included) with a nonzero coefficient in some B linear combination.
    pub b_inputs: usize,
    /// Aux variables with a nonzero coefficient in some B linear combination.
    pub b_aux: usize,
}

/// Counts a circuit's constraints, variables and densities: every linear combination is built
/// (as synthesis builds them) but no value is computed, so a blank circuit (no witness) can be
/// counted. Slower than [`circuit_size`] by the linear combinations.
pub fn circuit_density<C: Circuit<Scalar>>(circuit: C) -> Result<CircuitDensity> {
    #[derive(Default)]
    struct Counter {
        constraints: usize,
        a_aux: Density,
        b_input: Density,
        b_aux: Density,
    }
    fn mark<'a>(it: impl Iterator<Item = (&'a usize, &'a Scalar)>, density: &mut Density) {
        for (&index, coeff) in it {
            if !crate::groth16::public::is_zero(coeff) {
                density.set(index);
            }
        }
    }
    impl Assembly for Counter {
        const EXTENSIBLE: bool = true;

        fn alloc_aux<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
        {
            self.a_aux.push_unset();
            self.b_aux.push_unset();
            Ok(Variable::new_unchecked(Index::Aux(self.a_aux.len() - 1)))
        }

        fn alloc_input<F>(&mut self, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
        {
            self.b_input.push_unset();
            Ok(Variable::new_unchecked(Index::Input(
                self.b_input.len() - 1,
            )))
        }

        fn enforce<N, LA, LB, LC>(&mut self, _: N, a: LA, b: LB, _: LC)
        where
            N: FnOnce() -> String,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            self.constraints += 1;
            let a = a(LinearCombination::zero());
            let b = b(LinearCombination::zero());
            // Inputs are always dense in A, through the input constraints.
            mark(a.iter_aux(), &mut self.a_aux);
            mark(b.iter_inputs(), &mut self.b_input);
            mark(b.iter_aux(), &mut self.b_aux);
        }

        fn extend(&mut self, other: &Self) {
            self.constraints += other.constraints;
            extend_densities(
                [&mut self.a_aux, &mut self.b_input, &mut self.b_aux],
                [&other.a_aux, &other.b_input, &other.b_aux],
            );
        }
    }

    constraint_system!(Counter {});
    let mut cs = Counter::default();
    synthesize_in_bellperson_shape(&mut cs, circuit, |cs| cs.b_input.len())?;
    Ok(CircuitDensity {
        size: CircuitSize {
            constraints: cs.constraints,
            inputs: cs.b_input.len(),
            aux: cs.a_aux.len(),
        },
        a_aux: cs.a_aux.count_ones(),
        b_inputs: cs.b_input.count_ones(),
        b_aux: cs.b_aux.count_ones(),
    })
}

#[cfg(test)]
mod tests {
    use bellpepper_core::ConstraintSystem;

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
        let circuit =
            || crate::synthesis::test_circuit::ChainCircuit::new(1000, 3, 7).with_witness(11);
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
