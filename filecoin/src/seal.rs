//! Sealing a random sector through filecoin-proofs (pre-commit phases 1 and 2), for PoSt tests
//! and demos.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use filecoin_proofs::{
    add_piece, generate_piece_commitment, seal_pre_commit_phase1, seal_pre_commit_phase2,
    Commitment, PaddedBytesAmount, PieceInfo, PoRepConfig, PrivateReplicaInfo, ProverId,
    PublicReplicaInfo, UnpaddedBytesAmount,
};
use rand::{Rng, RngCore};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

/// The PoRep id proofline uses for its test sectors (registered proof 2 KiB V1_1, as Filecoin's
/// own tests do: a little-endian 5 in the first byte).
pub const POREP_ID: [u8; 32] = {
    let mut id = [0u8; 32];
    id[0] = 5;
    id
};

/// A sealed sector on disk.
#[derive(Debug, Clone)]
pub struct SealedSector {
    /// Its id.
    pub sector_id: SectorId,
    /// comm_r.
    pub comm_r: Commitment,
    /// The replica file.
    pub replica: PathBuf,
    /// The cache folder (tree_r_last and the rest).
    pub cache: PathBuf,
    /// comm_d.
    pub comm_d: Commitment,
    /// The ticket it was sealed with.
    pub ticket: [u8; 32],
    /// Its one piece.
    pub pieces: Vec<PieceInfo>,
}

impl SealedSector {
    /// What a prover holds.
    pub fn private_info<Tree: 'static + MerkleTreeTrait>(
        &self,
    ) -> Result<PrivateReplicaInfo<Tree>> {
        PrivateReplicaInfo::new(self.replica.clone(), self.comm_r, self.cache.clone())
    }

    /// What a verifier holds.
    pub fn public_info(&self) -> Result<PublicReplicaInfo> {
        PublicReplicaInfo::new(self.comm_r)
    }
}

/// Seals a sector of random data of `sector_size` bytes into `dir` (pre-commit phases 1 and 2),
/// with [`POREP_ID`].
pub fn seal_random_sector<Tree: 'static + MerkleTreeTrait>(
    dir: &Path,
    sector_size: u64,
    prover_id: ProverId,
    rng: &mut impl RngCore,
) -> Result<SealedSector> {
    let config = PoRepConfig::new_groth16(sector_size, POREP_ID, ApiVersion::V1_1_0);
    seal_sector::<Tree>(&config, dir, prover_id, rng)
}

/// Writes a sector's worth of random data to `piece`, and its padded form, as one piece filling
/// the sector, to `staged` (filecoin-proofs' `add_piece`); returns the piece's commitment.
pub(crate) fn stage_random_piece(
    piece: &Path,
    staged: &Path,
    sector_size: u64,
    rng: &mut impl RngCore,
) -> Result<PieceInfo> {
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let mut data = vec![0u8; u64::from(unpadded) as usize];
    rng.fill_bytes(&mut data);
    std::fs::write(piece, &data).with_context(|| format!("writing {}", piece.display()))?;
    let mut piece_file = prover_core::files::open_regular_file(piece)?;
    let piece_info = generate_piece_commitment(&mut piece_file, unpadded)?;
    piece_file.rewind()?;
    let mut staged_file =
        std::fs::File::create(staged).with_context(|| format!("creating {}", staged.display()))?;
    add_piece(&mut piece_file, &mut staged_file, unpadded, &[])?;
    staged_file.flush()?;
    Ok(piece_info)
}

/// Seals a sector of random data into `dir` under `config` (pre-commit phases 1 and 2).
pub fn seal_sector<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    dir: &Path,
    prover_id: ProverId,
    rng: &mut impl RngCore,
) -> Result<SealedSector> {
    let sector_size = u64::from(config.sector_size);
    let sector_id = SectorId::from(rng.gen::<u64>());
    let sector_dir = dir.join(format!("sector-{}", u64::from(sector_id)));
    let cache = sector_dir.join("cache");
    prover_core::files::create_dir_all(&cache)?;
    let staged = sector_dir.join("staged");
    let piece_info = stage_random_piece(&sector_dir.join("piece"), &staged, sector_size, rng)?;
    let replica = sector_dir.join("sealed");
    std::fs::File::create(&replica).with_context(|| format!("creating {}", replica.display()))?;
    let ticket: [u8; 32] = rng.gen();
    let phase1 = seal_pre_commit_phase1::<_, _, _, Tree>(
        config,
        &cache,
        &staged,
        &replica,
        prover_id,
        sector_id,
        ticket,
        std::slice::from_ref(&piece_info),
    )?;
    let pre_commit = seal_pre_commit_phase2(config, phase1, &cache, &replica)?;
    Ok(SealedSector {
        sector_id,
        comm_r: pre_commit.comm_r,
        replica,
        cache,
        comm_d: pre_commit.comm_d,
        ticket,
        pieces: vec![piece_info],
    })
}
