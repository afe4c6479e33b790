//! One circuit type for every Filecoin proof the engine proves (PoRep, PoSt and SnapDeals
//! partitions of every tree shape), so that one engine, with one ledger and one budget, can
//! take the partitions of jobs of every kind.

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::porep::AnyPorepCircuit;
use crate::snap::AnyUpdateCircuit;
use crate::PostCircuit;

crate::shape::any_shape_circuit!(
    /// A PoSt partition's circuit of any of the four tree shapes.
    AnyPostCircuit,
    PostCircuit,
    'static + MerkleTreeTrait
);

/// A partition of any Filecoin proof.
#[derive(Clone)]
pub enum FilecoinCircuit {
    /// A PoRep partition.
    Porep(AnyPorepCircuit),
    /// A WinningPoSt or WindowPoSt partition.
    Post(AnyPostCircuit),
    /// A SnapDeals update partition.
    Update(AnyUpdateCircuit),
}

impl From<AnyPorepCircuit> for FilecoinCircuit {
    fn from(c: AnyPorepCircuit) -> Self {
        FilecoinCircuit::Porep(c)
    }
}

impl From<AnyPostCircuit> for FilecoinCircuit {
    fn from(c: AnyPostCircuit) -> Self {
        FilecoinCircuit::Post(c)
    }
}

impl From<AnyUpdateCircuit> for FilecoinCircuit {
    fn from(c: AnyUpdateCircuit) -> Self {
        FilecoinCircuit::Update(c)
    }
}

impl Circuit<blstrs::Scalar> for FilecoinCircuit {
    fn synthesize<CS: ConstraintSystem<blstrs::Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), SynthesisError> {
        match self {
            FilecoinCircuit::Porep(c) => c.synthesize(cs),
            FilecoinCircuit::Post(c) => c.synthesize(cs),
            FilecoinCircuit::Update(c) => c.synthesize(cs),
        }
    }
}
