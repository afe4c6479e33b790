//! PoRep: a sector sealed through C1 by filecoin-proofs, and its C2 (the Groth16 proof of every
//! partition) proven by proofline's engine and checked by `verify_seal`.
//!
//! A C1 output arrives in one of two forms: filecoin-proofs-api's wrapper (what Lotus and Curio
//! hand around, through filecoin-ffi, as JSON; it names the registered proof) or filecoin-proofs'
//! raw `SealCommitPhase1Output` (JSON too; it does not say its sector size). Neither carries the
//! prover id and sector number that `verify_seal` needs: `seal` writes them to `sector.json` next
//! to the outputs, and a caller may give them instead.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use filecoin_hashers::Domain;
use filecoin_proofs::{
    as_safe_commitment, parameters::setup_params, seal_commit_phase1, DefaultPieceDomain,
    DefaultPieceHasher, PoRepConfig, ProverId, SealCommitPhase1Output, SealPreCommitOutput,
    SectorShape2KiB,
};
use filecoin_proofs_api::seal::{
    SealCommitPhase1Output as ApiC1Output, VanillaSealProof as ApiVanillaProofs,
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

use crate::seal::seal_sector;
use crate::{cached_parameters, CachedParameters};
use prover_core::{GenProgress, PointCheck};

pub use crate::porep_circuit::{Partition, PorepCircuit};

/// The registered proof (API version 1.1, interactive PoRep) of a sector size.
pub fn registered_proof(sector_size: u64) -> Result<RegisteredSealProof> {
    use RegisteredSealProof::*;
    Ok(match sector_size {
        2_048 => StackedDrg2KiBV1_1,
        8_388_608 => StackedDrg8MiBV1_1,
        536_870_912 => StackedDrg512MiBV1_1,
        34_359_738_368 => StackedDrg32GiBV1_1,
        68_719_476_736 => StackedDrg64GiBV1_1,
        other => bail!(
            "no Filecoin PoRep for sectors of {other} bytes (2KiB, 8MiB, 512MiB, 32GiB or 64GiB)"
        ),
    })
}

/// What `verify_seal` needs besides the C1 output, as `seal` writes it to `sector.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SectorInfo {
    /// The registered proof, as filecoin-proofs-api names it (`StackedDrg2KiBV1_1`).
    pub registered_proof: RegisteredSealProof,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// The sector number.
    pub sector_id: u64,
    /// The prover (miner) id, 32 bytes in hex.
    pub prover_id: String,
    /// comm_r in hex.
    pub comm_r: String,
    /// comm_d in hex.
    pub comm_d: String,
}

fn to_hex(b: &[u8]) -> String {
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
}

/// A sector sealed through C1: the C1 output in filecoin-proofs-api's wrapper and the sector's
/// identity.
pub struct SealedC1 {
    /// The C1 output as Lotus and Curio hand it around.
    pub output: ApiC1Output,
    /// Sector number, prover id and commitments.
    pub info: SectorInfo,
}

/// Random 32 bytes that are a valid field element (the top two bits clear).
pub fn field_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b: [u8; 32] = rng.gen();
    b[31] &= 0x3f;
    b
}

/// Seals a sector of random data through pre-commit 1 and 2 and commit 1 in `dir`, with a
/// random prover id, ticket and seed. 2KiB, 8MiB and 512MiB sectors.
pub fn seal_c1(sector_size: u64, dir: &Path, rng: &mut impl RngCore) -> Result<SealedC1> {
    let registered = registered_proof(sector_size)?;
    let config = registered.as_v1_config();
    let prover_id = field_bytes(rng);
    // 2KiB, 8MiB and 512MiB sectors share one tree shape.
    ensure!(
        sector_size <= 536_870_912,
        "sealing {sector_size}-byte sectors here is out of scope (2KiB, 8MiB or 512MiB); C2 \
         takes any size's C1 output"
    );
    let sealed = seal_sector::<SectorShape2KiB>(&config, dir, prover_id, rng)?;
    let seed = field_bytes(rng);
    let c1 = seal_commit_phase1::<_, SectorShape2KiB>(
        &config,
        &sealed.cache,
        &sealed.replica,
        prover_id,
        sealed.sector_id,
        sealed.ticket,
        seed,
        SealPreCommitOutput {
            comm_r: sealed.comm_r,
            comm_d: sealed.comm_d,
        },
        &sealed.pieces,
    )?;
    let vanilla_proofs = match sector_size {
        2_048 => ApiVanillaProofs::StackedDrg2KiBV1(c1.vanilla_proofs),
        8_388_608 => ApiVanillaProofs::StackedDrg8MiBV1(c1.vanilla_proofs),
        _ => ApiVanillaProofs::StackedDrg512MiBV1(c1.vanilla_proofs),
    };
    let info = SectorInfo {
        registered_proof: registered,
        sector_size,
        sector_id: u64::from(sealed.sector_id),
        prover_id: to_hex(&prover_id),
        comm_r: to_hex(&c1.comm_r),
        comm_d: to_hex(&c1.comm_d),
    };
    Ok(SealedC1 {
        output: ApiC1Output {
            registered_proof: registered,
            vanilla_proofs,
            comm_r: c1.comm_r,
            comm_d: c1.comm_d,
            replica_id: c1.replica_id,
            seed: c1.seed,
            ticket: c1.ticket,
        },
        info,
    })
}

/// The sector size whose tree shape a wrapped C1 output's vanilla proofs have.
fn proofs_sector_size(proofs: &ApiVanillaProofs) -> u64 {
    match proofs {
        ApiVanillaProofs::StackedDrg2KiBV1(_) => 2_048,
        ApiVanillaProofs::StackedDrg8MiBV1(_) => 8_388_608,
        ApiVanillaProofs::StackedDrg512MiBV1(_) => 536_870_912,
        ApiVanillaProofs::StackedDrg32GiBV1(_) => 34_359_738_368,
        ApiVanillaProofs::StackedDrg64GiBV1(_) => 68_719_476_736,
    }
}

/// The raw filecoin-proofs form of a wrapped C1 output of a 2KiB, 8MiB or 512MiB sector (the
/// three share one tree shape); its registered proof must name the size its proofs are of.
pub fn raw_c1(output: &ApiC1Output) -> Result<SealCommitPhase1Output<SectorShape2KiB>> {
    let size = u64::from(output.registered_proof.sector_size());
    let shape_size = proofs_sector_size(&output.vanilla_proofs);
    ensure!(
        size == shape_size,
        "the C1 output names {:?} ({size} bytes) but holds proofs of {shape_size}-byte sectors",
        output.registered_proof
    );
    let proofs = match &output.vanilla_proofs {
        ApiVanillaProofs::StackedDrg2KiBV1(p)
        | ApiVanillaProofs::StackedDrg8MiBV1(p)
        | ApiVanillaProofs::StackedDrg512MiBV1(p) => p.clone(),
        _ => bail!(
            "C2 of {shape_size}-byte sectors is not supported yet (2KiB, 8MiB and 512MiB are)"
        ),
    };
    Ok(SealCommitPhase1Output {
        vanilla_proofs: proofs,
        comm_r: output.comm_r,
        comm_d: output.comm_d,
        replica_id: output.replica_id,
        seed: output.seed,
        ticket: output.ticket,
    })
}

/// A C1 output read from a file.
pub enum C1File {
    /// filecoin-proofs-api's wrapper (Lotus, Curio, `seal`'s `c1.json`).
    Wrapped(Box<ApiC1Output>),
    /// filecoin-proofs' raw struct (`seal`'s `c1-raw.json`); its sector size is not in it.
    Raw(Box<SealCommitPhase1Output<SectorShape2KiB>>),
}

/// Keys whose 32 bytes are not field elements (the interactive randomness).
const NOT_FIELD_ELEMENTS: [&str; 2] = ["seed", "ticket"];

/// Checks every field element of a C1 output in its JSON form: every array of 32 byte values
/// (a commitment, the replica id, a tree node or path hash in a vanilla proof) must be a
/// canonical BLS12-381 scalar (little endian, below the modulus), or filecoin-proofs panics on
/// it. The error names the first bad one by its path in the file (`vanilla_proofs[0][3]...`).
pub fn check_field_elements(json: &serde_json::Value) -> Result<()> {
    fn walk(v: &serde_json::Value, path: &mut String) -> Result<()> {
        match v {
            serde_json::Value::Array(items) => {
                let bytes: Option<Vec<u8>> = (items.len() == 32)
                    .then(|| {
                        items
                            .iter()
                            .map(|x| x.as_u64().and_then(|b| u8::try_from(b).ok()))
                            .collect()
                    })
                    .flatten();
                if let Some(bytes) = bytes {
                    let repr: [u8; 32] = bytes.try_into().expect("32 bytes");
                    ensure!(
                        bool::from(blstrs::Scalar::from_bytes_le(&repr).is_some()),
                        "the C1 output's {path} is not a canonical field element (32 \
                         little-endian bytes below the BLS12-381 scalar modulus): the file is \
                         damaged or not from a C1 of this proof"
                    );
                    return Ok(());
                }
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path)?;
                    path.truncate(len);
                }
            }
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    if NOT_FIELD_ELEMENTS.contains(&key.as_str()) {
                        continue;
                    }
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    walk(item, path)?;
                    path.truncate(len);
                }
            }
            _ => {}
        }
        Ok(())
    }
    walk(json, &mut String::new())
}

/// Reads a C1 output in either form; every field element in it is checked (see
/// [`check_field_elements`]).
pub fn read_c1(path: &Path) -> Result<C1File> {
    let bytes = prover_core::files::read_input(path, prover_core::files::InputKind::C1Output)?;
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        check_field_elements(&json).with_context(|| format!("reading {}", path.display()))?;
    }
    let wrapped = match serde_json::from_slice::<ApiC1Output>(&bytes) {
        Ok(w) => return Ok(C1File::Wrapped(Box::new(w))),
        Err(e) => e,
    };
    match serde_json::from_slice::<SealCommitPhase1Output<SectorShape2KiB>>(&bytes) {
        Ok(raw) => Ok(C1File::Raw(Box::new(raw))),
        Err(raw) => bail!(
            "{} is not a C1 output: as filecoin-proofs-api's SealCommitPhase1Output: {wrapped}; \
             as filecoin-proofs' raw SealCommitPhase1Output: {raw}",
            path.display()
        ),
    }
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
/// under `FIL_PROOFS_PARAMETER_CACHE`, read with `check` when found, generated there when not).
pub fn parameters<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    check: PointCheck,
    progress: &dyn GenProgress,
) -> Result<CachedParameters> {
    let pp = public_params::<Tree>(config)?;
    let id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        PorepCircuit<Tree>,
        _,
    >>::cache_identifier(&pp.vanilla_params);
    cached_parameters(&id, || Ok(blank(&pp)), check, progress)
}

/// The circuits of a C2, one per partition, with their public inputs: what filecoin-proofs'
/// `seal_commit_phase2` proves, with the same checks on the C1 output.
pub fn porep_circuits<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: &SealCommitPhase1Output<Tree>,
) -> Result<Vec<(PorepCircuit<Tree>, Vec<blstrs::Scalar>)>> {
    ensure!(
        !config.feature_enabled(ApiFeature::NonInteractivePoRep),
        "non-interactive PoRep aggregates its partition proofs (SnarkPack), which proofline does \
         not do"
    );
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
    pub fn of<Tree: 'static + MerkleTreeTrait>(
        config: &PoRepConfig,
        c1: &SealCommitPhase1Output<Tree>,
        prover_id: ProverId,
        sector_id: u64,
    ) -> Self {
        SealStatement {
            config: config.clone(),
            comm_r: c1.comm_r,
            comm_d: c1.comm_d,
            ticket: c1.ticket,
            seed: c1.seed,
            prover_id,
            sector_id,
        }
    }

    /// filecoin-proofs' `verify_seal` on proof bytes in the MultiProof layout (the
    /// partitions' 192-byte proofs, concatenated).
    pub fn verify<Tree: 'static + MerkleTreeTrait>(&self, proof: &[u8]) -> Result<bool> {
        filecoin_proofs::verify_seal::<Tree>(
            &self.config,
            self.comm_r,
            self.comm_d,
            self.prover_id,
            SectorId::from(self.sector_id),
            self.ticket,
            self.seed,
            proof,
        )
    }
}

/// `verify_seal` on proof bytes in the MultiProof layout.
pub fn verify_c2<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    c1: &SealCommitPhase1Output<Tree>,
    prover_id: ProverId,
    sector_id: u64,
    proof: &[u8],
) -> Result<bool> {
    SealStatement::of(config, c1, prover_id, sector_id).verify::<Tree>(proof)
}
