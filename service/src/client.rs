//! A client of the service over a unix socket or TCP, with the bearer token when one is set.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::listen::Listen;
use crate::proto::proving_engine_client::ProvingEngineClient;

/// Adds `authorization: Bearer <token>` to every call when a token is set.
#[derive(Clone)]
pub struct Bearer(Option<MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// The client type [`connect`] returns.
pub type Client = ProvingEngineClient<InterceptedService<Channel, Bearer>>;

/// Connects to a server at `addr`, sending `token` (when given) with every call; messages up
/// to `max_message_bytes` either way.
pub async fn connect(
    addr: &Listen,
    token: Option<&str>,
    max_message_bytes: usize,
) -> Result<Client, String> {
    let channel = match addr {
        Listen::Unix(path) => {
            let path: PathBuf = path.clone();
            // The URI is not used: every connection goes to the socket.
            Endpoint::try_from("http://[::1]:50051")
                .map_err(|e| e.to_string())?
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(
                            tokio::net::UnixStream::connect(path).await?,
                        ))
                    }
                }))
                .await
                .map_err(|e| format!("connecting to {addr}: {e}"))?
        }
        Listen::Tcp(a) => Endpoint::try_from(format!("http://{a}"))
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?,
    };
    let bearer = match token {
        Some(t) => Some(
            format!("Bearer {t}")
                .parse()
                .map_err(|_| "the token holds characters a header cannot carry".to_string())?,
        ),
        None => None,
    };
    Ok(
        ProvingEngineClient::with_interceptor(channel, Bearer(bearer))
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes),
    )
}

/// The request Curio sends for a PoRep C2 of `c1_json` (filecoin-proofs-api's
/// `SealCommitPhase1Output`, which names its registered proof): the envelope of the wire
/// contract around it, base64-encoded.
pub fn porep_request(
    c1_json: &[u8],
    request_id: String,
    sector_number: u64,
    miner_id: u64,
    priority: crate::proto::Priority,
) -> Result<crate::proto::SubmitProofRequest, String> {
    use base64::Engine as _;
    #[derive(serde::Deserialize)]
    struct Named {
        registered_proof: filecoin_proofs_api::RegisteredSealProof,
    }
    let named: Named = serde_json::from_slice(c1_json).map_err(|e| {
        format!(
            "not filecoin-proofs-api's C1 output (the wrapper naming its registered proof): {e}"
        )
    })?;
    let spec = proofline_filecoin::variant::SealSpec::registered(named.registered_proof);
    let number = crate::registered::seal_number(spec.variant, spec.sector_size)
        .ok_or_else(|| format!("{:?} has no registered number", named.registered_proof))?;
    let envelope = serde_json::json!({
        "SectorNum": sector_number,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(c1_json),
        "SectorSize": spec.sector_size,
    });
    Ok(crate::proto::SubmitProofRequest {
        request_id,
        proof_kind: crate::proto::ProofKind::PorepSealCommit as i32,
        sector_size: spec.sector_size,
        registered_proof: number,
        priority: priority as i32,
        vanilla_proof: serde_json::to_vec(&envelope).map_err(|e| e.to_string())?,
        sector_number,
        miner_id,
        ..Default::default()
    })
}

/// The request Curio sends for a SnapDeals update: one bincode `PartitionProof` per partition
/// and the three commitments (`comm_r_old`, `comm_r_new`, `comm_d_new`).
pub fn snap_request(
    sector_size: u64,
    commitments: [[u8; 32]; 3],
    partition_proofs: Vec<Vec<u8>>,
    request_id: String,
    sector_number: u64,
    miner_id: u64,
    priority: crate::proto::Priority,
) -> Result<crate::proto::SubmitProofRequest, String> {
    let number = crate::registered::SECTOR_SIZES
        .iter()
        .position(|&s| s == sector_size)
        .ok_or_else(|| {
            format!("SnapDeals has no registered update proof of {sector_size} bytes")
        })?;
    let [comm_r_old, comm_r_new, comm_d_new] = commitments;
    Ok(crate::proto::SubmitProofRequest {
        request_id,
        proof_kind: crate::proto::ProofKind::SnapDealsUpdate as i32,
        sector_size,
        registered_proof: number as u64,
        priority: priority as i32,
        vanilla_proofs: partition_proofs,
        sector_number,
        miner_id,
        comm_r_old: comm_r_old.to_vec(),
        comm_r_new: comm_r_new.to_vec(),
        comm_d_new: comm_d_new.to_vec(),
        ..Default::default()
    })
}
