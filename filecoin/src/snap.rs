//! SnapDeals (an empty sector update): a sealed sector's replica re-encoded with new data, its
//! vanilla partition proofs made by filecoin-proofs, and their SNARK (filecoin-proofs'
//! `EmptySectorUpdateCircuit`, one per partition) proven by proofline's engine and checked by
//! `verify_empty_sector_update_proof`.
//!
//! On disk (`proofline filecoin snap` writes it, `proofline snap-prove` reads it), what Curio
//! sends with a `SNAP_DEALS_UPDATE`: `snap.json` (sector size, registered update proof or PoRep
//! id, the three commitments in hex) and `vanilla-<k>.bin`, one bincode `PartitionProof` per
//! partition.

use std::path::Path;
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use filecoin_hashers::Domain;
use filecoin_proofs::{
    encode_into, generate_partition_proofs, verify_empty_sector_update_proof, DefaultPieceDomain,
    PoRepConfig, SectorUpdateConfig,
};
use filecoin_proofs_api::RegisteredUpdateProof;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_update::constants::{TreeRDomain, TreeRHasher, ALLOWED_SECTOR_SIZES};
use storage_proofs_update::{
    EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof, PublicInputs, PublicParams,
};

use crate::porep::{parse_hex32, to_hex};
use crate::seal::{stage_random_piece, SealedSector};
use crate::shape::{size_name, Shape};
use crate::{cached_parameters, with_tree, CachedParameters};
use prover_core::GenProgress;

/// An update's identity and commitments, as `snap.json` holds them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SnapInfo {
    /// The registered update proof (`StackedDrg32GiBV1`); none at a test size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_proof: Option<RegisteredUpdateProof>,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// The sector key's (the sealed replica's) comm_r, hex.
    pub comm_r_old: String,
    /// The updated replica's comm_r, hex.
    pub comm_r_new: String,
    /// The new data's comm_d, hex.
    pub comm_d_new: String,
}

/// The registered update proof of a sector size, when it has one.
pub fn registered_update_proof(sector_size: u64) -> Option<RegisteredUpdateProof> {
    use RegisteredUpdateProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ]
    .into_iter()
    .find(|p| u64::from(p.sector_size()) == sector_size)
}

/// The commitments of an update, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Commitments {
    /// comm_r of the sector key.
    pub comm_r_old: [u8; 32],
    /// comm_r of the updated replica.
    pub comm_r_new: [u8; 32],
    /// comm_d of the new data.
    pub comm_d_new: [u8; 32],
}

impl SnapInfo {
    /// Its commitments.
    pub fn commitments(&self) -> Result<Commitments> {
        Ok(Commitments {
            comm_r_old: parse_hex32(&self.comm_r_old).context("snap.json: comm_r_old")?,
            comm_r_new: parse_hex32(&self.comm_r_new).context("snap.json: comm_r_new")?,
            comm_d_new: parse_hex32(&self.comm_d_new).context("snap.json: comm_d_new")?,
        })
    }
}

/// The config filecoin-proofs' update functions take for a sector size (only its size is
/// read): the registered update proof's, or at a test size one built for it. Sizes that
/// SnapDeals does not have are an error.
pub fn update_config(sector_size: u64) -> Result<PoRepConfig> {
    Shape::of(sector_size)?;
    ensure!(
        ALLOWED_SECTOR_SIZES
            .iter()
            .any(|&nodes| (nodes as u64) << 5 == sector_size),
        "SnapDeals has no {} sectors (filecoin-proofs' update sizes: {})",
        size_name(sector_size),
        ALLOWED_SECTOR_SIZES
            .iter()
            .map(|&n| size_name((n as u64) << 5))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(match registered_update_proof(sector_size) {
        Some(proof) => proof.as_v1_config(),
        None => PoRepConfig::new_groth16(
            sector_size,
            [0; 32],
            storage_proofs_core::api_version::ApiVersion::V1_1_0,
        ),
    })
}

/// A sector updated with new data: its info and its vanilla partition proofs as bincode.
pub struct Updated {
    /// Commitments and size.
    pub info: SnapInfo,
    /// One bincode `PartitionProof` per partition, in order.
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// Encodes `sector` (sealed, its cache kept) with new random data into `dir` through
/// filecoin-proofs' `encode_into`, and makes the vanilla partition proofs.
pub fn update_sector(
    sector: &SealedSector,
    sector_size: u64,
    dir: &Path,
    rng: &mut impl RngCore,
) -> Result<Updated> {
    with_tree!(Shape::of(sector_size)?, Tree => update_sector_as::<Tree>(sector, sector_size, dir, rng))
}

fn update_sector_as<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector: &SealedSector,
    sector_size: u64,
    dir: &Path,
    rng: &mut impl RngCore,
) -> Result<Updated> {
    let config = update_config(sector_size)?;
    let new_cache = dir.join("update-cache");
    prover_core::files::create_dir_all(&new_cache)?;
    let staged = dir.join("update-staged");
    let piece_info = stage_random_piece(&dir.join("update-piece"), &staged, sector_size, rng)?;
    let new_replica = dir.join("update-replica");
    // encode_into writes into a file of the sector key's size.
    std::fs::File::create(&new_replica)
        .and_then(|f| f.set_len(sector_size))
        .with_context(|| format!("creating {}", new_replica.display()))?;
    let update_config = SectorUpdateConfig::from_porep_config(&config);
    let encoded = encode_into::<Tree>(
        &update_config,
        &new_replica,
        &new_cache,
        &sector.replica,
        &sector.cache,
        &staged,
        std::slice::from_ref(&piece_info),
    )?;
    let proofs = generate_partition_proofs::<Tree>(
        update_config,
        sector.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sector.replica,
        &sector.cache,
        &new_replica,
        &new_cache,
    )?;
    let vanilla_proofs = proofs
        .iter()
        .map(bincode::serialize)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Updated {
        info: SnapInfo {
            update_proof: registered_update_proof(sector_size),
            sector_size,
            comm_r_old: to_hex(&sector.comm_r),
            comm_r_new: to_hex(&encoded.comm_r_new),
            comm_d_new: to_hex(&encoded.comm_d_new),
        },
        vanilla_proofs,
    })
}

/// The circuit of one update partition: filecoin-proofs' `EmptySectorUpdateCircuit`, built
/// when it is synthesized (it is not `Clone`; its parts are shared).
pub struct UpdateCircuit<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub_params: PublicParams,
    pub_inputs: PublicInputs,
    /// The partition and its vanilla proof; none: the blank circuit.
    partition: Option<(usize, Arc<PartitionProof<Tree>>)>,
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Clone for UpdateCircuit<Tree> {
    fn clone(&self) -> Self {
        UpdateCircuit {
            pub_params: self.pub_params.clone(),
            pub_inputs: self.pub_inputs.clone(),
            partition: self.partition.clone(),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> UpdateCircuit<Tree> {
    fn build(&self) -> Result<EmptySectorUpdateCircuit<Tree>, SynthesisError> {
        match &self.partition {
            None => Ok(EmptySectorUpdateCircuit::blank(self.pub_params.clone())),
            Some((k, proof)) => EmptySectorUpdateCompound::<Tree>::circuit(
                &self.pub_inputs,
                (),
                proof,
                &self.pub_params,
                Some(*k),
            )
            .map_err(|e| SynthesisError::from(std::io::Error::other(e.to_string()))),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Scalar>
    for UpdateCircuit<Tree>
{
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.build()?.synthesize(cs)
    }
}

crate::shape::any_shape_circuit!(
    /// An update partition's circuit of any of the four tree shapes.
    AnyUpdateCircuit,
    UpdateCircuit,
    'static + MerkleTreeTrait<Hasher = TreeRHasher>
);

fn domains(c: &Commitments) -> Result<(TreeRDomain, DefaultPieceDomain, TreeRDomain)> {
    Ok((
        TreeRDomain::try_from_bytes(&c.comm_r_old).context("comm_r_old")?,
        DefaultPieceDomain::try_from_bytes(&c.comm_d_new).context("comm_d_new")?,
        TreeRDomain::try_from_bytes(&c.comm_r_new).context("comm_r_new")?,
    ))
}

/// The update's public params and partition count for a sector size.
fn public_params(sector_size: u64) -> Result<(PublicParams, SectorUpdateConfig)> {
    let config = SectorUpdateConfig::from_porep_config(&update_config(sector_size)?);
    Ok((PublicParams::from_sector_size(sector_size), config))
}

/// The circuits of an update's SNARK, one per partition, with their public inputs: what
/// filecoin-proofs' `generate_empty_sector_update_proof_with_vanilla` proves, from the vanilla
/// proofs as bincode.
pub fn update_circuits<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    sector_size: u64,
    commitments: &Commitments,
    vanilla_proofs: &[Vec<u8>],
) -> Result<Vec<(UpdateCircuit<Tree>, Vec<Scalar>)>> {
    let (pub_params, config) = public_params(sector_size)?;
    let partitions = usize::from(config.update_partitions);
    ensure!(
        vanilla_proofs.len() == partitions,
        "{} vanilla partition proofs; a {} update proves {partitions}",
        vanilla_proofs.len(),
        size_name(sector_size)
    );
    let (comm_r_old, comm_d_new, comm_r_new) = domains(commitments)?;
    let pub_inputs = PublicInputs {
        k: partitions,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        h: config.h,
    };
    vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, bytes)| {
            let proof: PartitionProof<Tree> = bincode::deserialize(bytes).with_context(|| {
                format!(
                    "vanilla proof {k} is not a {} PartitionProof",
                    size_name(sector_size)
                )
            })?;
            ensure!(
                proof.challenge_proofs.len() == pub_params.challenge_count
                    && proof.apex_leafs.len() == pub_params.apex_leaf_count,
                "vanilla proof {k} has {} challenges and {} apex leaves; a {} update's have {} \
                 and {}",
                proof.challenge_proofs.len(),
                proof.apex_leafs.len(),
                size_name(sector_size),
                pub_params.challenge_count,
                pub_params.apex_leaf_count
            );
            let inputs = prover_core::catch_panic("an update's public inputs", || {
                EmptySectorUpdateCompound::<Tree>::generate_public_inputs(
                    &pub_inputs,
                    &pub_params,
                    Some(k),
                )
            })??;
            let circuit = UpdateCircuit {
                pub_params: pub_params.clone(),
                pub_inputs: pub_inputs.clone(),
                partition: Some((k, Arc::new(proof))),
            };
            Ok((circuit, inputs))
        })
        .collect()
}

/// [`update_circuits`] of any shape.
pub fn circuits(
    sector_size: u64,
    commitments: &Commitments,
    vanilla_proofs: &[Vec<u8>],
) -> Result<Vec<(AnyUpdateCircuit, Vec<Scalar>)>> {
    with_tree!(Shape::of(sector_size)?, Tree => Ok(
        update_circuits::<Tree>(sector_size, commitments, vanilla_proofs)?
            .into_iter()
            .map(|(c, x)| (AnyUpdateCircuit::from(c), x))
            .collect()
    ))
}

/// Writes an update's files into `dir`: `snap.json` and `vanilla-<k>.bin`.
pub fn write_update(dir: &Path, updated: &Updated) -> Result<()> {
    prover_core::files::create_dir_all(dir)?;
    let write = |name: String, bytes: &[u8]| -> Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    for (k, proof) in updated.vanilla_proofs.iter().enumerate() {
        write(format!("vanilla-{k}.bin"), proof)?;
    }
    write(
        "snap.json".into(),
        &serde_json::to_vec_pretty(&updated.info)?,
    )
}

/// Reads an update's files from `dir` (see [`write_update`]): every partition's vanilla proof,
/// as many as the sector size has partitions.
pub fn read_update(dir: &Path) -> Result<Updated> {
    let info_path = dir.join("snap.json");
    let info: SnapInfo = serde_json::from_slice(&prover_core::files::read_input(
        &info_path,
        prover_core::files::InputKind::Document,
    )?)
    .with_context(|| format!("reading {}", info_path.display()))?;
    if let Some(proof) = info.update_proof {
        ensure!(
            u64::from(proof.sector_size()) == info.sector_size,
            "{}: {proof:?} is not of {} bytes",
            info_path.display(),
            info.sector_size
        );
    }
    let (_, config) = public_params(info.sector_size)?;
    let vanilla_proofs = (0..usize::from(config.update_partitions))
        .map(|k| {
            let path = dir.join(format!("vanilla-{k}.bin"));
            prover_core::files::read_input(&path, prover_core::files::InputKind::VanillaProof)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Updated {
        info,
        vanilla_proofs,
    })
}

/// The update circuit's parameters (see [`cached_parameters`]: the production file name under
/// `FIL_PROOFS_PARAMETER_CACHE`, generated there when missing at a size that allows it).
pub fn update_parameters(
    sector_size: u64,
    load: impl Into<crate::Load>,
    progress: &dyn GenProgress,
) -> Result<CachedParameters> {
    with_tree!(Shape::of(sector_size)?, Tree => {
        let (pub_params, _) = public_params(sector_size)?;
        let id = <EmptySectorUpdateCompound<Tree> as CacheableParameters<
            EmptySectorUpdateCircuit<Tree>,
            _,
        >>::cache_identifier(&pub_params);
        let blank = UpdateCircuit::<Tree> {
            pub_params: pub_params.clone(),
            pub_inputs: PublicInputs {
                k: 0,
                comm_r_old: TreeRDomain::default(),
                comm_d_new: DefaultPieceDomain::default(),
                comm_r_new: TreeRDomain::default(),
                h: 0,
            },
            partition: None,
        };
        cached_parameters(&id, || Ok(blank), load, progress)
    })
}

/// filecoin-proofs' `verify_empty_sector_update_proof` on the partitions' proofs, concatenated.
pub fn verify_update(sector_size: u64, commitments: &Commitments, proof: &[u8]) -> Result<bool> {
    let config = update_config(sector_size)?;
    with_tree!(Shape::of(sector_size)?, Tree => verify_empty_sector_update_proof::<Tree>(
        &config,
        proof,
        commitments.comm_r_old,
        commitments.comm_r_new,
        commitments.comm_d_new,
    ))
}
