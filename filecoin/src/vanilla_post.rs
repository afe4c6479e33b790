//! A PoSt from the vanilla proofs a client sends (Curio's WinningPoSt and WindowPoSt requests:
//! one bincode `FallbackPoStSectorProof` per sector): its partitions' circuits, and the
//! statement filecoin-proofs' verifier checks the proof against before it is returned.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use bincode::Options;
use filecoin_hashers::Domain;
use filecoin_proofs::{
    verify_window_post, verify_winning_post, ChallengeSeed, FallbackPoStSectorProof, PoStConfig,
    PoStType, ProverId, PublicReplicaInfo,
};
use prover_core::Parameters;
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

use crate::any_circuit::AnyPostCircuit;
use crate::shape::Shape;

/// A PoSt to prove from vanilla proofs.
#[derive(Debug, Clone)]
pub struct VanillaPost<'a> {
    /// The sectors' size.
    pub sector_size: u64,
    /// Winning or Window.
    pub typ: PoStType,
    /// The API version (`V1_0_0`, or `V1_2_0` for the `V1_2` WindowPoSt proofs).
    pub api_version: ApiVersion,
    /// The challenge randomness.
    pub randomness: ChallengeSeed,
    /// The prover id.
    pub prover_id: ProverId,
    /// One bincode `FallbackPoStSectorProof` per sector (WindowPoSt: in increasing sector-id
    /// order, the order the verifier takes them).
    pub sector_proofs: &'a [Vec<u8>],
}

/// What a PoSt proof is checked against: the sectors and commitments its vanilla proofs carry,
/// the randomness and the prover.
#[derive(Debug, Clone)]
pub struct PostStatement {
    config: PoStConfig,
    randomness: ChallengeSeed,
    prover_id: ProverId,
    replicas: Vec<(SectorId, PublicReplicaInfo)>,
}

impl PostStatement {
    /// filecoin-proofs' `verify_winning_post` or `verify_window_post` on `proof`.
    pub fn verify(&self, proof: &[u8]) -> Result<bool> {
        let shape = Shape::of(u64::from(self.config.sector_size))?;
        crate::with_tree!(shape, Tree => match self.config.typ {
            PoStType::Winning => verify_winning_post::<Tree>(
                &self.config,
                &self.randomness,
                &self.replicas,
                self.prover_id,
                proof,
            ),
            PoStType::Window => verify_window_post::<Tree>(
                &self.config,
                &self.randomness,
                &self.replicas.iter().cloned().collect::<BTreeMap<_, _>>(),
                self.prover_id,
                proof,
            ),
        })
    }

    /// [`PostStatement::verify`] as an error when the proof is rejected.
    pub fn check(&self, proof: &[u8]) -> Result<()> {
        if !self.verify(proof)? {
            bail!(
                "filecoin-proofs' {:?}PoSt verifier rejected the proof (the vanilla proofs do not \
                 prove this randomness for this miner); no proof is reported",
                self.config.typ
            );
        }
        Ok(())
    }
}

impl VanillaPost<'_> {
    /// filecoin-proofs' config of this PoSt.
    pub fn config(&self) -> Result<PoStConfig> {
        crate::post_config(self.sector_size, self.typ.clone(), self.api_version)
    }

    /// The parameter file's circuit id (filecoin-proofs' cache identifier).
    pub fn parameters_id(&self) -> Result<String> {
        let config = self.config()?;
        crate::with_tree!(Shape::of(self.sector_size)?, Tree =>
            Ok(crate::post_public_params::<Tree>(&config)?.0))
    }

    /// Loads (or generates) the parameters.
    pub fn parameters(&self) -> Result<Parameters> {
        let config = self.config()?;
        crate::with_tree!(Shape::of(self.sector_size)?, Tree =>
            Ok(crate::post_parameters::<Tree>(&config)?.0))
    }

    /// The vanilla proofs decoded: the partitions' circuits and the statement the proof is
    /// checked against.
    pub fn circuits(&self) -> Result<(Vec<AnyPostCircuit>, PostStatement)> {
        let config = self.config()?;
        crate::with_tree!(Shape::of(self.sector_size)?, Tree => self.circuits_as::<Tree>(config))
    }

    fn circuits_as<Tree: 'static + MerkleTreeTrait>(
        &self,
        config: PoStConfig,
    ) -> Result<(Vec<AnyPostCircuit>, PostStatement)> {
        let proofs: Vec<FallbackPoStSectorProof<Tree>> = self
            .sector_proofs
            .iter()
            .enumerate()
            .map(|(i, b)| decode(b).with_context(|| format!("vanilla_proofs[{i}]")))
            .collect::<Result<_>>()?;
        ensure!(
            !proofs.is_empty() && proofs.len() <= config.sector_count,
            "{} sector proofs; a {:?} PoSt partition of {}-byte sectors takes 1 to {}",
            proofs.len(),
            self.typ,
            self.sector_size,
            config.sector_count
        );
        let circuits =
            crate::post_circuits::<Tree>(&config, &self.randomness, self.prover_id, &proofs)?
                .into_iter()
                .map(|(c, _)| AnyPostCircuit::from(c))
                .collect();
        let replicas = proofs
            .iter()
            .map(|p| {
                let comm_r: [u8; 32] = p
                    .comm_r
                    .into_bytes()
                    .try_into()
                    .map_err(|_| anyhow::anyhow!("a comm_r of other than 32 bytes"))?;
                Ok((p.sector_id, PublicReplicaInfo::new(comm_r)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((
            circuits,
            PostStatement {
                config,
                randomness: self.randomness,
                prover_id: self.prover_id,
                replicas,
            },
        ))
    }
}

/// One sector's vanilla proof from the bincode filecoin-ffi writes (fixed-width integers),
/// bounded by its own length so that a forged length prefix cannot allocate more, and with no
/// bytes left over.
fn decode<Tree: 'static + MerkleTreeTrait>(bytes: &[u8]) -> Result<FallbackPoStSectorProof<Tree>> {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(bytes.len() as u64)
        .deserialize(bytes)
        .context("not a bincode FallbackPoStSectorProof of this sector size")
}
