//! PoRep: a sector sealed through C1 by filecoin-proofs, and its C2 (the Groth16 proof of every
//! partition) proven by proofline's engine and checked by `verify_seal`, at every sector shape
//! and for every seal proof variant whose proof is the partitions' proofs.
//!
//! A C1 output carries neither the prover id and sector number that `verify_seal` needs nor,
//! at a test size, the PoRep id: `seal` writes them to `sector.json` next to the outputs, and a
//! caller may give them instead.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use filecoin_hashers::Domain;
use filecoin_proofs::{
    as_safe_commitment, clear_synthetic_proofs, generate_synth_proofs, parameters::setup_params,
    seal_commit_phase1, DefaultPieceDomain, DefaultPieceHasher, PoRepConfig, ProverId,
    SealCommitPhase1Output, SealPreCommitOutput,
};
use filecoin_proofs_api::RegisteredSealProof;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

use crate::c1::AnyC1;
use crate::seal::seal_sector;
use crate::shape::Shape;
use crate::variant::{SealSpec, SealVariant};
use crate::{cached_parameters, on_c1, with_tree, CachedParameters};
use prover_core::GenProgress;

pub use crate::porep_circuit::{AnyPorepCircuit, Partition, PorepCircuit};

/// What `verify_seal` needs besides the C1 output, as `seal` writes it to `sector.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SectorInfo {
    /// The registered proof, as filecoin-proofs-api names it (`StackedDrg2KiBV1_1`); none at a
    /// test size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_proof: Option<RegisteredSealProof>,
    /// The proof variant (`v1`, `v1_1`, `synthetic`, `ni`).
    #[serde(default = "default_variant")]
    pub variant: SealVariant,
    /// The PoRep id in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub porep_id: Option<String>,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// The sector number.
    pub sector_id: u64,
    /// The prover (miner) id, 32 bytes in hex.
    pub prover_id: String,
    /// The miner actor the prover id was made from, when it was sealed for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miner_id: Option<u64>,
    /// comm_r in hex.
    pub comm_r: String,
    /// comm_d in hex.
    pub comm_d: String,
}

fn default_variant() -> SealVariant {
    SealVariant::V1_1
}

/// Bytes as lowercase hex.
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses 32 bytes of hex (an optional `0x` prefix is allowed).
pub fn parse_hex32(s: &str) -> Result<[u8; 32]> {
    let s = s.trim().trim_start_matches("0x");
    ensure!(
        s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "expected 32 bytes as 64 hex digits, got `{s}`"
    );
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("checked hex");
    }
    Ok(out)
}

impl SectorInfo {
    /// The prover id as bytes.
    pub fn prover_id(&self) -> Result<ProverId> {
        parse_hex32(&self.prover_id).context("sector.json: prover_id")
    }

    /// The `sector.json` that `seal` wrote beside a C1 output file, when there is one.
    pub fn beside(c1: &Path) -> Result<Option<SectorInfo>> {
        let path = c1.with_file_name("sector.json");
        if !path.exists() {
            return Ok(None);
        }
        let bytes = prover_core::files::read_input(&path, prover_core::files::InputKind::Document)?;
        Ok(Some(
            serde_json::from_slice(&bytes)
                .with_context(|| format!("reading {}", path.display()))?,
        ))
    }

    /// The sector's seal proof.
    pub fn spec(&self) -> Result<SealSpec> {
        if let Some(proof) = self.registered_proof {
            let spec = SealSpec::registered(proof);
            ensure!(
                spec.sector_size == self.sector_size,
                "sector.json: {proof:?} is not of {} bytes",
                self.sector_size
            );
            return Ok(spec);
        }
        let porep_id = match &self.porep_id {
            Some(hex) => Some(parse_hex32(hex).context("sector.json: porep_id")?),
            None => None,
        };
        SealSpec::new(self.sector_size, self.variant, porep_id).context("sector.json")
    }
}

/// A sector sealed through C1: its seal proof, C1 output and identity.
pub struct SealedC1 {
    /// The seal proof.
    pub spec: SealSpec,
    /// The C1 output (the raw form).
    pub c1: AnyC1,
    /// Sector number, prover id and commitments.
    pub info: SectorInfo,
    /// The sealed sector on disk (its replica and cache stay for PoSt and SnapDeals).
    pub sector: crate::seal::SealedSector,
}

impl SealedC1 {
    /// filecoin-proofs' config of the seal proof.
    pub fn config(&self) -> Result<PoRepConfig> {
        self.spec.config()
    }

    /// The C1 output in filecoin-proofs-api's wrapper, as Lotus and Curio hand it around (the
    /// registered proofs only; a test size has none).
    pub fn wrapped(&self) -> Option<Result<filecoin_proofs_api::seal::SealCommitPhase1Output>> {
        self.spec
            .registered_proof()
            .map(|proof| self.c1.to_wrapped(proof))
    }

    /// The statement `verify_seal` checks a proof of this sector against.
    pub fn statement(&self) -> Result<SealStatement> {
        Ok(SealStatement::of(
            &self.config()?,
            &self.c1,
            self.info.prover_id()?,
            self.info.sector_id,
        ))
    }
}

/// Random 32 bytes that are a valid field element (the top two bits clear).
pub fn field_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b: [u8; 32] = rng.gen();
    b[31] &= 0x3f;
    b
}

/// The prover id of the miner actor `miner_id`, as Lotus and Curio make it: the actor id as an
/// unsigned LEB128 varint, left-aligned in 32 zeroed bytes.
pub fn actor_prover_id(miner_id: u64) -> ProverId {
    let mut out = [0u8; 32];
    let mut v = miner_id;
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            return out;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
}

/// Seals a sector of random data through pre-commit 1 and 2 (and, for Synthetic PoRep, the
/// synthetic proofs) and commit 1 in `dir`, with a random prover id, ticket and seed.
pub fn seal_c1(spec: &SealSpec, dir: &Path, rng: &mut impl RngCore) -> Result<SealedC1> {
    seal_c1_for(spec, dir, None, rng)
}

/// [`seal_c1`] for the miner actor `miner_id` (its prover id, [`actor_prover_id`]), or a random
/// prover id without one.
pub fn seal_c1_for(
    spec: &SealSpec,
    dir: &Path,
    miner_id: Option<u64>,
    rng: &mut impl RngCore,
) -> Result<SealedC1> {
    with_tree!(spec.shape(), Tree => seal_c1_as::<Tree>(spec, dir, miner_id, rng))
}

fn seal_c1_as<Tree: 'static + MerkleTreeTrait>(
    spec: &SealSpec,
    dir: &Path,
    miner_id: Option<u64>,
    rng: &mut impl RngCore,
) -> Result<SealedC1> {
    let config = spec.config()?;
    let prover_id = match miner_id {
        Some(id) => actor_prover_id(id),
        None => field_bytes(rng),
    };
    let sealed = seal_sector::<Tree>(&config, dir, prover_id, rng)?;
    let pre_commit = SealPreCommitOutput {
        comm_r: sealed.comm_r,
        comm_d: sealed.comm_d,
    };
    let synthetic = config.feature_enabled(ApiFeature::SyntheticPoRep);
    if synthetic {
        generate_synth_proofs::<_, Tree>(
            &config,
            &sealed.cache,
            &sealed.replica,
            prover_id,
            sealed.sector_id,
            sealed.ticket,
            pre_commit.clone(),
            &sealed.pieces,
        )?;
    }
    let seed = field_bytes(rng);
    let c1 = seal_commit_phase1::<_, Tree>(
        &config,
        &sealed.cache,
        &sealed.replica,
        prover_id,
        sealed.sector_id,
        sealed.ticket,
        seed,
        pre_commit,
        &sealed.pieces,
    )?;
    if synthetic {
        clear_synthetic_proofs(&sealed.cache)?;
    }
    let info = SectorInfo {
        registered_proof: spec.registered_proof(),
        variant: spec.variant,
        porep_id: Some(to_hex(&spec.porep_id)),
        sector_size: spec.sector_size,
        sector_id: u64::from(sealed.sector_id),
        prover_id: to_hex(&prover_id),
        miner_id,
        comm_r: to_hex(&c1.comm_r),
        comm_d: to_hex(&c1.comm_d),
    };
    Ok(SealedC1 {
        spec: spec.clone(),
        c1: AnyC1::new(c1)?,
        info,
        sector: sealed,
    })
}

/// The public parameters of a PoRep (as filecoin-proofs' `seal_commit_phase2` sets them up).
pub fn public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
) -> Result<compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>> {
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(config)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    StackedCompound::<Tree, DefaultPieceHasher>::setup(&setup)
}

/// The parameter cache id of a PoRep (the production file name without version and extension).
pub fn cache_id<Tree: 'static + MerkleTreeTrait>(config: &PoRepConfig) -> Result<String> {
    let pp = public_params::<Tree>(config)?;
    Ok(<StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        PorepCircuit<Tree>,
        _,
    >>::cache_identifier(&pp.vanilla_params))
}

/// The PoRep circuit without witness (for parameter generation).
pub fn blank_circuit<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
) -> Result<PorepCircuit<Tree>> {
    Ok(blank(&public_params::<Tree>(config)?))
}

/// filecoin-proofs' blank circuit for `pp`.
fn blank<Tree: 'static + MerkleTreeTrait>(
    pp: &compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>,
) -> PorepCircuit<Tree> {
    PorepCircuit::Blank(
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::blank_circuit(
            &pp.vanilla_params,
        ),
    )
}

/// The PoRep parameters for `config` (see [`crate::cached_parameters`]: the production file
/// under `FIL_PROOFS_PARAMETER_CACHE`, read as `load` says when found, generated there when not).
pub fn parameters<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    load: impl Into<crate::Load>,
    progress: &dyn GenProgress,
) -> Result<CachedParameters> {
    let pp = public_params::<Tree>(config)?;
    let id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        PorepCircuit<Tree>,
        _,
    >>::cache_identifier(&pp.vanilla_params);
    cached_parameters(&id, || Ok(blank(&pp)), load, progress)
}

/// The circuits of a C2, one per partition, with their public inputs: what filecoin-proofs'
/// `seal_commit_phase2` proves, with the same checks on the C1 output.
pub fn porep_circuits<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: &SealCommitPhase1Output<Tree>,
) -> Result<Vec<(PorepCircuit<Tree>, Vec<blstrs::Scalar>)>> {
    ensure!(c1.comm_d != [0; 32], "invalid all-zero commitment (comm_d)");
    ensure!(c1.comm_r != [0; 32], "invalid all-zero commitment (comm_r)");
    ensure!(
        c1.seed != [0; 32],
        "invalid PoRep challenge seed (all zero)"
    );
    ensure!(
        !c1.vanilla_proofs.is_empty() && c1.vanilla_proofs.iter().all(|p| !p.is_empty()),
        "the C1 output contains no vanilla proofs"
    );
    let partitions = usize::from(config.partitions);
    ensure!(
        c1.vanilla_proofs.len() == partitions,
        "the C1 output has {} partitions; this sector size proves {partitions}: is the sector \
         size right?",
        c1.vanilla_proofs.len()
    );
    let pp = public_params::<Tree>(config)?;
    let public_inputs = stacked::PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(stacked::Tau {
            comm_d: DefaultPieceDomain::try_from_bytes(&c1.comm_d)?,
            comm_r: as_safe_commitment(&c1.comm_r, "comm_r")?,
        }),
        k: None,
        seed: Some(c1.seed),
    };
    c1.vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, proof)| {
            // What slips through the checks of the C1 output must not take the process down.
            prover_core::catch_panic("building a PoRep circuit", || -> Result<_> {
                let circuit = PorepCircuit::Partition(Box::new(Partition::new(
                    &public_inputs,
                    proof,
                )?));
                let inputs = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::generate_public_inputs(
                    &public_inputs,
                    &pp.vanilla_params,
                    Some(k),
                )?;
                Ok((circuit, inputs))
            })
            .with_context(|| {
                format!("partition {k}: the C1 output holds a value filecoin-proofs cannot use")
            })?
        })
        .collect()
}

/// The PoRep parameters of any shape (see [`parameters`]).
pub fn parameters_for(
    config: &PoRepConfig,
    load: impl Into<crate::Load>,
    progress: &dyn GenProgress,
) -> Result<CachedParameters> {
    let shape = Shape::of(u64::from(config.sector_size))?;
    let load = load.into();
    with_tree!(shape, Tree => parameters::<Tree>(config, load, progress))
}

/// [`porep_circuits`] for a C1 output of any shape, whose shape must be the config's.
pub fn circuits(
    config: &PoRepConfig,
    c1: &AnyC1,
) -> Result<Vec<(AnyPorepCircuit, Vec<blstrs::Scalar>)>> {
    let size = u64::from(config.sector_size);
    ensure!(
        Shape::of(size)? == c1.shape(),
        "the C1 output is of a {} sector's tree shape; a {}-byte sector's is {}: is the sector \
         size right?",
        c1.shape().name(),
        size,
        Shape::of(size)?.name()
    );
    on_c1!(c1, c, Tree => Ok(porep_circuits::<Tree>(config, c)?
        .into_iter()
        .map(|(circuit, inputs)| (AnyPorepCircuit::from(circuit), inputs))
        .collect()))
}

/// What `verify_seal` checks a C2 proof against: the sector's config and commitments, its
/// ticket and seed, the prover and the sector number (the part of a C1 output and its
/// `sector.json` a verifier needs, without the vanilla proofs).
#[derive(Debug, Clone)]
pub struct SealStatement {
    /// The sector's PoRep config.
    pub config: PoRepConfig,
    /// comm_r.
    pub comm_r: [u8; 32],
    /// comm_d.
    pub comm_d: [u8; 32],
    /// The ticket.
    pub ticket: [u8; 32],
    /// The seed.
    pub seed: [u8; 32],
    /// The prover (miner) id.
    pub prover_id: ProverId,
    /// The sector number.
    pub sector_id: u64,
}

impl SealStatement {
    /// The statement of a C1 output, its prover and its sector number.
    pub fn of(config: &PoRepConfig, c1: &AnyC1, prover_id: ProverId, sector_id: u64) -> Self {
        let (ticket, seed) = on_c1!(c1, c, _T => (c.ticket, c.seed));
        SealStatement {
            config: config.clone(),
            comm_r: c1.comm_r(),
            comm_d: c1.comm_d(),
            ticket,
            seed,
            prover_id,
            sector_id,
        }
    }

    /// filecoin-proofs' `verify_seal` on proof bytes in the MultiProof layout (the
    /// partitions' 192-byte proofs, concatenated).
    pub fn verify(&self, proof: &[u8]) -> Result<bool> {
        let shape = Shape::of(u64::from(self.config.sector_size))?;
        with_tree!(shape, Tree => filecoin_proofs::verify_seal::<Tree>(
            &self.config,
            self.comm_r,
            self.comm_d,
            self.prover_id,
            SectorId::from(self.sector_id),
            self.ticket,
            self.seed,
            proof,
        ))
    }
}
