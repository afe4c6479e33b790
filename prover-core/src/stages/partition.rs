//! What synthesis produces and the accelerator consumes: a partition's A, B, C evaluations,
//! its witness in canonical form with the query densities, and the shape checks between a
//! partition and its parameters.

use blstrs::Scalar;

use crate::error::{Error, Result};
use crate::groth16::params::{KeyShape, Parameters};
use crate::stages::density::{Density, ScalarBytes};

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
