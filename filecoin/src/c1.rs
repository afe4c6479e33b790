//! A C1 output of any tree shape, in its two file forms: filecoin-proofs-api's wrapper (what
//! Lotus and Curio hand around, through filecoin-ffi, as JSON; it names the registered proof,
//! and exists for the registered sizes only) and filecoin-proofs' raw `SealCommitPhase1Output`
//! (JSON too; it does not say its sector size, so the caller names the shape).

use std::any::Any;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use filecoin_proofs::{
    SealCommitPhase1Output, SectorShapeBase, SectorShapeSub2, SectorShapeSub8, SectorShapeTop2,
};
use filecoin_proofs_api::seal::{
    SealCommitPhase1Output as ApiC1Output, VanillaSealProof as ApiVanillaProofs,
};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};

pub use crate::field_elements::check_field_elements;
use crate::shape::{size_name, Shape};

/// A C1 output of one of the four tree shapes.
pub enum AnyC1 {
    /// 2 KiB, 8 MiB, 512 MiB.
    Base(Box<SealCommitPhase1Output<SectorShapeBase>>),
    /// 4 KiB, 16 MiB, 1 GiB.
    Sub2(Box<SealCommitPhase1Output<SectorShapeSub2>>),
    /// 16 KiB, 32 GiB.
    Sub8(Box<SealCommitPhase1Output<SectorShapeSub8>>),
    /// 32 KiB, 64 GiB.
    Top2(Box<SealCommitPhase1Output<SectorShapeTop2>>),
}

/// Runs `$body` on the C1 output inside `$value` (an [`AnyC1`], or a reference to one) as `$x`,
/// with `$Tree` its tree type.
#[macro_export]
macro_rules! on_c1 {
    ($value:expr, $x:ident, $Tree:ident => $body:expr) => {
        match $value {
            $crate::c1::AnyC1::Base($x) => {
                #[allow(dead_code)]
                type $Tree = $crate::filecoin_proofs::SectorShapeBase;
                $body
            }
            $crate::c1::AnyC1::Sub2($x) => {
                #[allow(dead_code)]
                type $Tree = $crate::filecoin_proofs::SectorShapeSub2;
                $body
            }
            $crate::c1::AnyC1::Sub8($x) => {
                #[allow(dead_code)]
                type $Tree = $crate::filecoin_proofs::SectorShapeSub8;
                $body
            }
            $crate::c1::AnyC1::Top2($x) => {
                #[allow(dead_code)]
                type $Tree = $crate::filecoin_proofs::SectorShapeTop2;
                $body
            }
        }
    };
}

impl Clone for AnyC1 {
    fn clone(&self) -> Self {
        // filecoin-proofs derives `Clone` only for trees that are `Clone`, which these are not;
        // every field is.
        fn copy<Tree: MerkleTreeTrait>(
            c: &SealCommitPhase1Output<Tree>,
        ) -> Box<SealCommitPhase1Output<Tree>> {
            Box::new(SealCommitPhase1Output {
                vanilla_proofs: c.vanilla_proofs.clone(),
                comm_r: c.comm_r,
                comm_d: c.comm_d,
                replica_id: c.replica_id,
                seed: c.seed,
                ticket: c.ticket,
            })
        }
        match self {
            AnyC1::Base(c) => AnyC1::Base(copy(c)),
            AnyC1::Sub2(c) => AnyC1::Sub2(copy(c)),
            AnyC1::Sub8(c) => AnyC1::Sub8(copy(c)),
            AnyC1::Top2(c) => AnyC1::Top2(copy(c)),
        }
    }
}

impl AnyC1 {
    /// The bytes its parsed form holds, counted as its bincode encoding: every hash, label and
    /// index at its in-memory size (32-byte hashes, 8-byte indices), without the vectors' own
    /// headers. What the ledger counts for a C2's input.
    pub fn parsed_bytes(&self) -> u64 {
        on_c1!(self, c, _Tree => bincode::serialized_size(c.as_ref()).unwrap_or(0))
    }

    /// A C1 output of tree type `Tree` (one of filecoin-proofs' four sector shapes).
    pub fn new<Tree: 'static + MerkleTreeTrait>(c1: SealCommitPhase1Output<Tree>) -> Result<AnyC1> {
        let any: Box<dyn Any> = Box::new(c1);
        let any = match any.downcast() {
            Ok(c) => return Ok(AnyC1::Base(c)),
            Err(a) => a,
        };
        let any = match any.downcast() {
            Ok(c) => return Ok(AnyC1::Sub2(c)),
            Err(a) => a,
        };
        let any = match any.downcast() {
            Ok(c) => return Ok(AnyC1::Sub8(c)),
            Err(a) => a,
        };
        match any.downcast() {
            Ok(c) => Ok(AnyC1::Top2(c)),
            Err(_) => bail!(
                "{} is not one of filecoin-proofs' sector shapes",
                std::any::type_name::<Tree>()
            ),
        }
    }

    /// The C1 output as tree type `Tree`, when it is of that shape.
    pub fn as_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
    ) -> Option<&SealCommitPhase1Output<Tree>> {
        on_c1!(self, c, _T => (&**c as &dyn Any).downcast_ref())
    }

    /// The C1 output as tree type `Tree`, or an error naming both shapes.
    pub fn into_tree<Tree: 'static + MerkleTreeTrait>(
        self,
    ) -> Result<SealCommitPhase1Output<Tree>> {
        let shape = self.shape();
        let any: Box<dyn Any> = on_c1!(self, c, _T => c);
        match any.downcast() {
            Ok(c) => Ok(*c),
            Err(_) => bail!(
                "the C1 output is of the {} shape, not {}",
                shape.name(),
                std::any::type_name::<Tree>()
            ),
        }
    }

    /// [`AnyC1::as_tree`], mutable.
    pub fn as_tree_mut<Tree: 'static + MerkleTreeTrait>(
        &mut self,
    ) -> Option<&mut SealCommitPhase1Output<Tree>> {
        on_c1!(self, c, _T => (&mut **c as &mut dyn Any).downcast_mut())
    }

    /// Its tree shape.
    pub fn shape(&self) -> Shape {
        match self {
            AnyC1::Base(_) => Shape::Base,
            AnyC1::Sub2(_) => Shape::Sub2,
            AnyC1::Sub8(_) => Shape::Sub8,
            AnyC1::Top2(_) => Shape::Top2,
        }
    }

    /// comm_r.
    pub fn comm_r(&self) -> [u8; 32] {
        on_c1!(self, c, _T => c.comm_r)
    }

    /// comm_d.
    pub fn comm_d(&self) -> [u8; 32] {
        on_c1!(self, c, _T => c.comm_d)
    }

    /// The interactive seed.
    pub fn seed(&self) -> [u8; 32] {
        on_c1!(self, c, _T => c.seed)
    }

    /// The partitions' vanilla proofs: how many partitions, and challenges in each.
    pub fn partition_challenges(&self) -> Vec<usize> {
        on_c1!(self, c, _T => c.vanilla_proofs.iter().map(Vec::len).collect())
    }

    /// The raw form, as JSON.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        Ok(on_c1!(self, c, _T => serde_json::to_vec(&**c))?)
    }

    /// Parses the raw form of a sector of `sector_size` bytes. The JSON does not name its shape,
    /// and one shape's Merkle paths parse as another's: every challenge's `tree_r_last`
    /// inclusion path must have this size's levels and arities, or the file is refused as
    /// another size's (or damaged).
    pub fn from_json(bytes: &[u8], sector_size: u64) -> Result<AnyC1> {
        let shape = Shape::of(sector_size)?;
        let c1 = Self::parse(bytes, shape)?;
        let expected = shape.level_arities(sector_size);
        let of_size = on_c1!(&c1, c, _T => c.vanilla_proofs.iter().flatten().all(|p| {
            let arities: Vec<usize> = p
                .comm_r_last_proof
                .path()
                .iter()
                .map(|(siblings, _)| siblings.len() + 1)
                .collect();
            arities == expected
        }));
        ensure!(
            of_size,
            "its tree_r_last inclusion paths are not a {} sector's ({} levels of arity {:?}): the \
             C1 output is of another sector size, or damaged",
            size_name(sector_size),
            expected.len(),
            expected
        );
        Ok(c1)
    }

    fn parse(bytes: &[u8], shape: Shape) -> Result<AnyC1> {
        Ok(match shape {
            Shape::Base => AnyC1::Base(serde_json::from_slice(bytes)?),
            Shape::Sub2 => AnyC1::Sub2(serde_json::from_slice(bytes)?),
            Shape::Sub8 => AnyC1::Sub8(serde_json::from_slice(bytes)?),
            Shape::Top2 => AnyC1::Top2(serde_json::from_slice(bytes)?),
        })
    }

    /// The raw form of a wrapped C1 output; its registered proof must name the size its proofs
    /// are of.
    pub fn from_wrapped(output: ApiC1Output) -> Result<AnyC1> {
        let size = u64::from(output.registered_proof.sector_size());
        let shape_size = wrapped_proofs_size(&output.vanilla_proofs);
        ensure!(
            size == shape_size,
            "the C1 output names {:?} ({size} bytes) but holds proofs of {shape_size}-byte sectors",
            output.registered_proof
        );
        macro_rules! raw {
            ($variant:ident, $proofs:expr) => {
                AnyC1::$variant(Box::new(SealCommitPhase1Output {
                    vanilla_proofs: $proofs,
                    comm_r: output.comm_r,
                    comm_d: output.comm_d,
                    replica_id: output.replica_id,
                    seed: output.seed,
                    ticket: output.ticket,
                }))
            };
        }
        Ok(match output.vanilla_proofs {
            ApiVanillaProofs::StackedDrg2KiBV1(p)
            | ApiVanillaProofs::StackedDrg8MiBV1(p)
            | ApiVanillaProofs::StackedDrg512MiBV1(p) => raw!(Base, p),
            ApiVanillaProofs::StackedDrg32GiBV1(p) => raw!(Sub8, p),
            ApiVanillaProofs::StackedDrg64GiBV1(p) => raw!(Top2, p),
        })
    }

    /// The wrapper for `proof` (a registered proof of this shape's size); the test sizes have
    /// none.
    pub fn to_wrapped(&self, proof: RegisteredSealProof) -> Result<ApiC1Output> {
        let size = u64::from(proof.sector_size());
        ensure!(
            Shape::of(size)? == self.shape(),
            "{proof:?} is of the {} shape, the C1 output of the {} shape",
            Shape::of(size)?.name(),
            self.shape().name()
        );
        let vanilla_proofs = match (self, size) {
            (AnyC1::Base(c), 2_048) => ApiVanillaProofs::StackedDrg2KiBV1(c.vanilla_proofs.clone()),
            (AnyC1::Base(c), 8_388_608) => {
                ApiVanillaProofs::StackedDrg8MiBV1(c.vanilla_proofs.clone())
            }
            (AnyC1::Base(c), 536_870_912) => {
                ApiVanillaProofs::StackedDrg512MiBV1(c.vanilla_proofs.clone())
            }
            (AnyC1::Sub8(c), 34_359_738_368) => {
                ApiVanillaProofs::StackedDrg32GiBV1(c.vanilla_proofs.clone())
            }
            (AnyC1::Top2(c), 68_719_476_736) => {
                ApiVanillaProofs::StackedDrg64GiBV1(c.vanilla_proofs.clone())
            }
            _ => bail!(
                "filecoin-proofs-api has no C1 wrapper for {} sectors (a test size): use the raw form",
                size_name(size)
            ),
        };
        Ok(on_c1!(self, c, _T => ApiC1Output {
            registered_proof: proof,
            vanilla_proofs,
            comm_r: c.comm_r,
            comm_d: c.comm_d,
            replica_id: c.replica_id,
            seed: c.seed,
            ticket: c.ticket,
        }))
    }
}

/// The sector size whose tree shape a wrapped C1 output's vanilla proofs have.
fn wrapped_proofs_size(proofs: &ApiVanillaProofs) -> u64 {
    match proofs {
        ApiVanillaProofs::StackedDrg2KiBV1(_) => 2_048,
        ApiVanillaProofs::StackedDrg8MiBV1(_) => 8_388_608,
        ApiVanillaProofs::StackedDrg512MiBV1(_) => 536_870_912,
        ApiVanillaProofs::StackedDrg32GiBV1(_) => 34_359_738_368,
        ApiVanillaProofs::StackedDrg64GiBV1(_) => 68_719_476_736,
    }
}

/// A C1 output read from a file.
pub enum C1File {
    /// filecoin-proofs-api's wrapper (Lotus, Curio, `seal`'s `c1.json`).
    Wrapped(Box<ApiC1Output>),
    /// filecoin-proofs' raw struct (`seal`'s `c1-raw.json`), read as the shape the caller named.
    Raw(AnyC1),
}

/// Reads a C1 output in either form; every field element in it is checked (see
/// [`check_field_elements`]). The raw form is read as a sector of `sector_size` bytes, which it
/// does not name itself; without a size, only the wrapper is read.
pub fn read_c1(path: &Path, sector_size: Option<u64>) -> Result<C1File> {
    let bytes = prover_core::files::read_input(path, prover_core::files::InputKind::C1Output)?;
    if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok() {
        check_field_elements(&bytes).with_context(|| format!("reading {}", path.display()))?;
    }
    let wrapped = match serde_json::from_slice::<ApiC1Output>(&bytes) {
        Ok(w) => return Ok(C1File::Wrapped(Box::new(w))),
        Err(e) => e,
    };
    let Some(size) = sector_size else {
        // Whether it is a raw C1 output at all, so that the error says the right thing.
        let raw_shape = [Shape::Base, Shape::Sub2, Shape::Sub8, Shape::Top2]
            .into_iter()
            .any(|s| AnyC1::parse(&bytes, s).is_ok());
        if raw_shape {
            bail!(
                "{} is filecoin-proofs' raw C1 output, which does not say its sector size: pass \
                 --sector-size (or keep the sector.json that `proofline filecoin seal` wrote \
                 next to it)",
                path.display()
            );
        }
        bail!(
            "{} is not a C1 output: as filecoin-proofs-api's SealCommitPhase1Output: {wrapped}",
            path.display()
        );
    };
    match AnyC1::from_json(&bytes, size) {
        Ok(raw) => Ok(C1File::Raw(raw)),
        Err(raw) => bail!(
            "{} is not a C1 output: as filecoin-proofs-api's SealCommitPhase1Output: {wrapped}; \
             as filecoin-proofs' raw SealCommitPhase1Output of a {} sector: {raw}",
            path.display(),
            size_name(size)
        ),
    }
}
