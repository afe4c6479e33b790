//! A PoSt from the vanilla proofs a client sends (Curio's WinningPoSt and WindowPoSt requests:
//! one bincode `FallbackPoStSectorProof` per sector), proven through the engine and checked with
//! filecoin-proofs' verifier before it is returned.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use bincode::Options;
use filecoin_hashers::Domain;
use filecoin_proofs::{
    verify_window_post, verify_winning_post, ChallengeSeed, FallbackPoStSectorProof, PoStConfig,
    PoStType, ProverId, PublicReplicaInfo,
};
use prover_core::{Parameters, Proof};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::merkle::MerkleTreeTrait;

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

    /// Proves the PoSt with `params` and checks it with filecoin-proofs' verifier: the proof
    /// bytes (192 a partition), or why there is none.
    pub fn prove(&self, params: Arc<Parameters>, synthesis_workers: usize) -> Result<Vec<u8>> {
        let config = self.config()?;
        crate::with_tree!(Shape::of(self.sector_size)?, Tree =>
            self.prove_as::<Tree>(&config, params, synthesis_workers))
    }

    fn prove_as<Tree: 'static + MerkleTreeTrait>(
        &self,
        config: &PoStConfig,
        params: Arc<Parameters>,
        synthesis_workers: usize,
    ) -> Result<Vec<u8>> {
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
            crate::post_circuits::<Tree>(config, &self.randomness, self.prover_id, &proofs)?;
        let circuits: Vec<_> = circuits.into_iter().map(|(c, _)| c).collect();
        let run = crate::prove_circuits(circuits, params, synthesis_workers)?;
        let proof = Proof::many_to_bytes(&run.proofs);
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
        let accepted = match self.typ {
            PoStType::Winning => verify_winning_post::<Tree>(
                config,
                &self.randomness,
                &replicas,
                self.prover_id,
                &proof,
            )?,
            PoStType::Window => verify_window_post::<Tree>(
                config,
                &self.randomness,
                &replicas.into_iter().collect::<BTreeMap<_, _>>(),
                self.prover_id,
                &proof,
            )?,
        };
        if !accepted {
            bail!(
                "filecoin-proofs' {:?}PoSt verifier rejected the proof (the vanilla proofs do not \
                 prove this randomness for this miner); no proof is reported",
                self.typ
            );
        }
        Ok(proof)
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
