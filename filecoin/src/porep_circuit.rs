//! The circuit of one PoRep partition: filecoin-proofs' `StackedCircuit`, kept in its parts (the
//! commitments and one vanilla proof per challenge) so that a witness-only synthesizer can assign
//! the challenges on all cores. Every constraint system that builds constraints gets exactly
//! filecoin-proofs' `StackedCircuit::synthesize`; a witness generator (proofline's pre-compiled
//! synthesis) gets the same values, with each challenge assigned on its own thread.

use anyhow::{ensure, Result};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::DefaultPieceHasher;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCircuit};

use prover_core::synthesis::pce::{assign_parts, Assignment};

type G = DefaultPieceHasher;
type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type PieceDomain = <G as Hasher>::Domain;
type VanillaProof<Tree> = stacked::Proof<Tree, G>;

/// The circuit of one PoRep partition.
pub enum PorepCircuit<Tree: 'static + MerkleTreeTrait> {
    /// Without witness (parameter generation, recording the matrices): filecoin-proofs' blank
    /// circuit.
    Blank(StackedCircuit<Tree, G>),
    /// A partition with its witness, in parts.
    Partition(Box<Partition<Tree>>),
}

/// A partition's commitments and its challenges' vanilla proofs: what filecoin-proofs'
/// `StackedCompound::circuit` builds its `StackedCircuit` from.
pub struct Partition<Tree: 'static + MerkleTreeTrait> {
    replica_id: TreeDomain<Tree>,
    comm_d: Option<PieceDomain>,
    comm_r: Option<TreeDomain<Tree>>,
    comm_r_last: TreeDomain<Tree>,
    comm_c: TreeDomain<Tree>,
    proofs: Vec<VanillaProof<Tree>>,
}

impl<Tree: 'static + MerkleTreeTrait> Partition<Tree> {
    /// A partition of a sector: its public inputs and its challenges' vanilla proofs, with the
    /// checks of filecoin-proofs' `StackedCompound::circuit` (at least one proof, one `comm_r_last`
    /// and one `comm_c` for all).
    pub fn new(
        public_inputs: &stacked::PublicInputs<TreeDomain<Tree>, PieceDomain>,
        proofs: &[VanillaProof<Tree>],
    ) -> Result<Self> {
        ensure!(
            !proofs.is_empty(),
            "a PoRep partition needs at least one vanilla proof"
        );
        let comm_r_last = proofs[0].comm_r_last();
        let comm_c = proofs[0].comm_c();
        ensure!(
            proofs.iter().all(|p| p.comm_r_last() == comm_r_last),
            "the partition's vanilla proofs disagree on comm_r_last"
        );
        ensure!(
            proofs.iter().all(|p| p.comm_c() == comm_c),
            "the partition's vanilla proofs disagree on comm_c"
        );
        let tau = public_inputs.tau.as_ref();
        Ok(Partition {
            replica_id: public_inputs.replica_id,
            comm_d: tau.map(|t| t.comm_d),
            comm_r: tau.map(|t| t.comm_r),
            comm_r_last,
            comm_c,
            proofs: proofs.to_vec(),
        })
    }

    /// Challenges in the partition.
    pub fn challenges(&self) -> usize {
        self.proofs.len()
    }

    /// filecoin-proofs' circuit on `proofs` (none: the commitments' part alone).
    fn stacked<CS: ConstraintSystem<Scalar>>(
        &self,
        cs: CS,
        proofs: Vec<VanillaProof<Tree>>,
    ) -> Result<(), SynthesisError> {
        StackedCircuit::<Tree, G>::synthesize(
            cs,
            Some(self.replica_id),
            self.comm_d,
            self.comm_r,
            Some(self.comm_r_last),
            Some(self.comm_c),
            proofs.into_iter().map(Into::into).collect(),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for PorepCircuit<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            PorepCircuit::Blank(c) => c.synthesize(cs),
            PorepCircuit::Partition(mut p) if cs.is_witness_generator() && p.challenges() > 1 => {
                // The commitments' part once, then each challenge (after its own copy of that
                // part, whose values it uses) on its own thread, in order.
                let proofs = std::mem::take(&mut p.proofs);
                let p = &*p;
                assign_parts(cs, proofs, |a: &mut Assignment, proof| {
                    p.stacked(a, proof.into_iter().collect())
                })
            }
            PorepCircuit::Partition(mut p) => {
                let proofs = std::mem::take(&mut p.proofs);
                p.stacked(cs, proofs)
            }
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Clone for PorepCircuit<Tree> {
    fn clone(&self) -> Self {
        match self {
            PorepCircuit::Blank(c) => PorepCircuit::Blank(c.clone()),
            PorepCircuit::Partition(p) => PorepCircuit::Partition(Box::new(Partition {
                replica_id: p.replica_id,
                comm_d: p.comm_d,
                comm_r: p.comm_r,
                comm_r_last: p.comm_r_last,
                comm_c: p.comm_c,
                proofs: p.proofs.clone(),
            })),
        }
    }
}

crate::shape::any_shape_circuit!(
    /// A PoRep partition's circuit of any of the four tree shapes.
    AnyPorepCircuit,
    PorepCircuit,
    'static + MerkleTreeTrait
);
