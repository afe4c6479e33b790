//! The checks a `SubmitProofRequest` passes before a job is accepted: its kind and registered
//! proof agree, its sector size is the proof's, the fields its kind needs are there with their
//! lengths, every 32-byte field value is a canonical BLS12-381 scalar, and its payload has the
//! form its kind sends (the PoRep envelope's JSON and base64; one vanilla proof per entry). A
//! request that fails gets [`Invalid`], which names the field (`INVALID_ARGUMENT` on the wire);
//! nothing here panics on any input. The payload's own contents (the C1 output's JSON, the
//! bincode vanilla proofs) are parsed when the job is admitted to the engine, not here.

use base64::Engine as _;
use ff::PrimeField;
use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::variant::SealVariant;

use crate::proto::{Priority, ProofKind, SubmitProofRequest};

use crate::registered::{self, PostKind};

/// A request that cannot be accepted, and the field that says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    /// The request's field (its name in the `.proto`).
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl From<Invalid> for tonic::Status {
    fn from(e: Invalid) -> Self {
        tonic::Status::invalid_argument(e.to_string())
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid {
        field,
        reason: reason.into(),
    }
}

/// Limits on what a request may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of `request_id`.
    pub request_id_bytes: usize,
    /// Entries of `vanilla_proofs`.
    pub vanilla_proofs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_id_bytes: 256,
            // A WindowPoSt partition holds at most 2349 sectors (32 GiB).
            vanilla_proofs: 4096,
        }
    }
}

/// What a job proves, as its request said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// PoRep C2 from the envelope's C1 output.
    Porep {
        /// The seal proof variant.
        variant: SealVariant,
        /// The C1 output's JSON (the envelope's `Phase1Out`, base64-decoded).
        c1_json: Vec<u8>,
    },
    /// A SnapDeals update from one bincode `PartitionProof` per partition.
    SnapDeals {
        /// `comm_r_old`, `comm_r_new`, `comm_d_new`.
        commitments: [[u8; 32]; 3],
        /// The partitions' vanilla proofs.
        partition_proofs: Vec<Vec<u8>>,
    },
    /// One WindowPoSt partition, or a WinningPoSt, from one bincode `FallbackPoStSectorProof`
    /// per sector.
    Post {
        /// Winning, or Window at an API version.
        kind: PostKind,
        /// The challenge randomness (masked, canonical).
        randomness: [u8; 32],
        /// The partition index (WindowPoSt).
        partition: u32,
        /// The sectors' vanilla proofs.
        sector_proofs: Vec<Vec<u8>>,
    },
}

/// Bytes of a list of vanilla proofs.
pub fn vanilla_bytes(proofs: &[Vec<u8>]) -> u64 {
    proofs.iter().map(|p| p.len() as u64).sum()
}

impl Work {
    /// Bytes of the payload it carries (the C1 output's JSON, the vanilla proofs).
    pub fn payload_bytes(&self) -> u64 {
        match self {
            Work::Porep { c1_json, .. } => c1_json.len() as u64,
            Work::SnapDeals {
                partition_proofs, ..
            } => vanilla_bytes(partition_proofs),
            Work::Post { sector_proofs, .. } => vanilla_bytes(sector_proofs),
        }
    }
}

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The client's idempotency key.
    pub request_id: String,
    /// The priority, the kind's default resolved (1 low to 4 critical).
    pub priority: Priority,
    /// The registered proof's sector size.
    pub sector_size: u64,
    /// The sector (PoRep and SnapDeals; 0 for PoSt).
    pub sector_number: u64,
    /// The miner's actor id.
    pub miner_id: u64,
    /// What to prove.
    pub work: Work,
    /// BLAKE2b-256 of the request's proof-relevant fields, so that the same `request_id` with
    /// another payload can be told apart from a resent one.
    pub digest: [u8; 32],
}

impl Accepted {
    /// The prover id of the miner: its actor id as an unsigned LEB128 varint, left-aligned in
    /// 32 bytes.
    pub fn prover_id(&self) -> [u8; 32] {
        prover_id(self.miner_id)
    }
}

/// The prover id of actor `miner_id` (unsigned LEB128, left-aligned, zero-padded).
pub fn prover_id(miner_id: u64) -> [u8; 32] {
    proofline_filecoin::porep::actor_prover_id(miner_id)
}

/// The default priority of a kind: WinningPoSt critical, WindowPoSt high, the others normal.
pub fn default_priority(kind: ProofKind) -> Priority {
    match kind {
        ProofKind::WinningPost => Priority::Critical,
        ProofKind::WindowPostPartition => Priority::High,
        _ => Priority::Normal,
    }
}

/// A 32-byte field that must hold a canonical BLS12-381 scalar (little-endian).
fn scalar_field(field: &'static str, bytes: &[u8]) -> Result<[u8; 32], Invalid> {
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| invalid(field, format!("{} bytes; 32 expected", bytes.len())))?;
    if Option::<blstrs::Scalar>::from(blstrs::Scalar::from_repr(arr)).is_none() {
        return Err(invalid(
            field,
            "not a canonical BLS12-381 scalar (at or above the field's modulus)",
        ));
    }
    Ok(arr)
}

/// The PoRep envelope: `{"SectorNum": <int>, "Phase1Out": "<base64>", "SectorSize": <int>}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    #[serde(rename = "SectorNum")]
    _sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

fn entries(
    field: &'static str,
    list: &[Vec<u8>],
    limits: &Limits,
    what: &str,
) -> Result<Vec<Vec<u8>>, Invalid> {
    if list.is_empty() {
        return Err(invalid(
            field,
            format!("empty: one {what} per entry expected"),
        ));
    }
    if list.len() > limits.vanilla_proofs {
        return Err(invalid(
            field,
            format!("{} entries; at most {}", list.len(), limits.vanilla_proofs),
        ));
    }
    if let Some(i) = list.iter().position(Vec::is_empty) {
        return Err(invalid(field, format!("entry {i} is empty")));
    }
    Ok(list.to_vec())
}

/// Checks `req` and returns what it asks to prove, or the first field that is wrong.
pub fn check(req: &SubmitProofRequest, limits: &Limits) -> Result<Accepted, Invalid> {
    if req.request_id.is_empty() {
        return Err(invalid("request_id", "empty"));
    }
    if req.request_id.len() > limits.request_id_bytes {
        return Err(invalid(
            "request_id",
            format!(
                "{} bytes; at most {}",
                req.request_id.len(),
                limits.request_id_bytes
            ),
        ));
    }
    if req.request_id.contains('\0') {
        // No job store's text holds one (PostgreSQL refuses it).
        return Err(invalid("request_id", "holds a NUL character"));
    }
    let kind = ProofKind::try_from(req.proof_kind)
        .map_err(|_| invalid("proof_kind", format!("unknown value {}", req.proof_kind)))?;
    let priority = match Priority::try_from(req.priority) {
        Ok(Priority::Unspecified) => default_priority(kind),
        Ok(p) => p,
        Err(_) => {
            return Err(invalid(
                "priority",
                format!("unknown value {}", req.priority),
            ))
        }
    };
    let unknown = |family: &str| {
        invalid(
            "registered_proof",
            format!(
                "{} is not a registered {family} proof",
                req.registered_proof
            ),
        )
    };
    let (sector_size, work) = match kind {
        ProofKind::Unspecified => return Err(invalid("proof_kind", "unspecified")),
        ProofKind::PorepSealCommit => {
            let (variant, size) =
                registered::seal(req.registered_proof).ok_or_else(|| unknown("seal"))?;
            if req.vanilla_proof.is_empty() {
                return Err(invalid(
                    "vanilla_proof",
                    "empty: the PoRep envelope expected",
                ));
            }
            let envelope: Envelope = serde_json::from_slice(&req.vanilla_proof).map_err(|e| {
                invalid(
                    "vanilla_proof",
                    format!("not the PoRep envelope (SectorNum, Phase1Out, SectorSize): {e}"),
                )
            })?;
            if envelope.sector_size != size {
                return Err(invalid(
                    "vanilla_proof",
                    format!(
                        "the envelope's SectorSize is {}; registered proof {} is {size} bytes",
                        envelope.sector_size, req.registered_proof
                    ),
                ));
            }
            let c1_json = base64::engine::general_purpose::STANDARD
                .decode(envelope.phase1_out.as_bytes())
                .map_err(|e| invalid("vanilla_proof", format!("Phase1Out is not base64: {e}")))?;
            if c1_json.first() != Some(&b'{') {
                return Err(invalid(
                    "vanilla_proof",
                    "Phase1Out does not decode to a JSON object (the C1 output)",
                ));
            }
            (size, Work::Porep { variant, c1_json })
        }
        ProofKind::SnapDealsUpdate => {
            let size = registered::update(req.registered_proof).ok_or_else(|| unknown("update"))?;
            let commitments = [
                scalar_field("comm_r_old", &req.comm_r_old)?,
                scalar_field("comm_r_new", &req.comm_r_new)?,
                scalar_field("comm_d_new", &req.comm_d_new)?,
            ];
            let partition_proofs = entries(
                "vanilla_proofs",
                &req.vanilla_proofs,
                limits,
                "PartitionProof",
            )?;
            (
                size,
                Work::SnapDeals {
                    commitments,
                    partition_proofs,
                },
            )
        }
        ProofKind::WindowPostPartition | ProofKind::WinningPost => {
            let (post, size) =
                registered::post(req.registered_proof).ok_or_else(|| unknown("PoSt"))?;
            let matches = matches!(
                (kind, post),
                (ProofKind::WinningPost, PostKind::Winning)
                    | (ProofKind::WindowPostPartition, PostKind::Window(_))
            );
            if !matches {
                return Err(invalid(
                    "registered_proof",
                    format!(
                        "{} is a {} proof; the request's proof_kind is {}",
                        req.registered_proof,
                        match post {
                            PostKind::Winning => "WinningPoSt",
                            PostKind::Window(_) => "WindowPoSt",
                        },
                        kind.as_str_name()
                    ),
                ));
            }
            let randomness = scalar_field("randomness", &req.randomness)?;
            match post {
                PostKind::Winning if req.partition_index != 0 => {
                    return Err(invalid("partition_index", "WinningPoSt has no partitions"));
                }
                // Partition k is proven as the one-partition PoSt of its own sectors, which is
                // filecoin-proofs' partition k only where a challenge does not depend on the
                // sector's place (API 1.2).
                PostKind::Window(api) if req.partition_index != 0 && api != ApiVersion::V1_2_0 => {
                    return Err(invalid(
                        "partition_index",
                        format!(
                            "{}, but a WindowPoSt of registered proof {} (API {api}) is proven \
                             whole: send partition 0",
                            req.partition_index, req.registered_proof
                        ),
                    ));
                }
                _ => {}
            }
            let sector_proofs = entries(
                "vanilla_proofs",
                &req.vanilla_proofs,
                limits,
                "FallbackPoStSectorProof",
            )?;
            (
                size,
                Work::Post {
                    kind: post,
                    randomness,
                    partition: req.partition_index,
                    sector_proofs,
                },
            )
        }
    };
    if req.sector_size != sector_size {
        return Err(invalid(
            "sector_size",
            format!(
                "{}; registered proof {} is {sector_size} bytes",
                req.sector_size, req.registered_proof
            ),
        ));
    }
    if req.miner_id == 0 {
        return Err(invalid("miner_id", "0: the prover id is made from it"));
    }
    Ok(Accepted {
        request_id: req.request_id.clone(),
        priority,
        sector_size,
        sector_number: req.sector_number,
        miner_id: req.miner_id,
        digest: digest(req),
        work,
    })
}

/// BLAKE2b-256 over every field that changes what is proved (not `request_id` or `priority`).
fn digest(req: &SubmitProofRequest) -> [u8; 32] {
    let mut h = blake2b_simd::Params::new().hash_length(32).to_state();
    let mut bytes = |b: &[u8]| {
        h.update(&(b.len() as u64).to_le_bytes());
        h.update(b);
    };
    bytes(&req.proof_kind.to_le_bytes());
    bytes(&req.sector_size.to_le_bytes());
    bytes(&req.registered_proof.to_le_bytes());
    bytes(&req.vanilla_proof);
    bytes(&(req.vanilla_proofs.len() as u64).to_le_bytes());
    for p in &req.vanilla_proofs {
        bytes(p);
    }
    bytes(&req.sector_number.to_le_bytes());
    bytes(&req.miner_id.to_le_bytes());
    bytes(&req.randomness);
    bytes(&req.partition_index.to_le_bytes());
    bytes(&req.comm_r_old);
    bytes(&req.comm_r_new);
    bytes(&req.comm_d_new);
    let mut out = [0u8; 32];
    out.copy_from_slice(h.finalize().as_bytes());
    out
}
