//! What the service's test binaries share: the `proofline` binary, a server process, its
//! client, a sealed 2 KiB sector and the request for it, waits, and the test PostgreSQL server.

// Each test binary uses its own part of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use proofline_filecoin::c1::AnyC1;
use proofline_filecoin::filecoin_proofs::{
    verify_window_post, verify_winning_post, PoStType, PublicReplicaInfo, SECTOR_SIZE_2_KIB,
};
use proofline_filecoin::porep::{self, SealStatement, SectorInfo};
use proofline_filecoin::seal::seal_random_sector;
use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::storage_proofs_core::sector::SectorId;
use proofline_filecoin::{post_config, vanilla_proofs, Tree2KiB};
use proofline_service::proto::{AwaitProofRequest, ProofKind, SubmitProofRequest};

/// The miner every test sector is sealed for.
pub const MINER: u64 = 1000;
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proofline"))
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A server process, killed if the test ends before it stops.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start(data: &Path, cache: &Path, extra: &[&str]) -> Server {
    let child = bin()
        .args(["serve", "--pw", "1", "--data-dir"])
        .arg(data)
        .args(extra)
        .env("FIL_PROOFS_PARAMETER_CACHE", cache)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let socket = data.join("proofline.sock");
    let t = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        if let Some(status) = server.0.try_wait().unwrap() {
            let mut e = String::new();
            std::io::Read::read_to_string(server.0.stderr.as_mut().unwrap(), &mut e).unwrap();
            panic!("the server ended at start ({status}): {e}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no socket after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

pub fn client(socket: &Path, args: &[&str]) -> Output {
    bin()
        .arg("client")
        .arg("--connect")
        .arg(format!("unix://{}", socket.display()))
        .args(args)
        .output()
        .unwrap()
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The request `proofline client` sends for a C1 file, built here from the wire page.
pub fn porep_request(c1_json: &[u8], request_id: &str, sector: u64) -> SubmitProofRequest {
    use base64::Engine as _;
    let envelope = serde_json::json!({
        "SectorNum": sector,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(c1_json),
        "SectorSize": 2048,
    });
    SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: 5, // StackedDrg2KiBV1_1
        vanilla_proof: serde_json::to_vec(&envelope).unwrap(),
        sector_number: sector,
        miner_id: MINER,
        ..Default::default()
    }
}

pub struct Sealed {
    pub c1_path: PathBuf,
    pub c1_json: Vec<u8>,
    pub statement: SealStatement,
    pub sector: u64,
}

pub fn seal(dir: &Path, cache: &Path) -> Sealed {
    let out = dir.join("c1");
    let o = bin()
        .args(["filecoin", "seal", "--sector-size", "2KiB", "--miner-id"])
        .arg(MINER.to_string())
        .arg("--out")
        .arg(&out)
        .env("FIL_PROOFS_PARAMETER_CACHE", cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let info: SectorInfo =
        serde_json::from_slice(&std::fs::read(out.join("sector.json")).unwrap()).unwrap();
    assert_eq!(info.miner_id, Some(MINER));
    assert_eq!(info.prover_id().unwrap(), porep::actor_prover_id(MINER));
    let spec = info.spec().unwrap();
    let c1 = AnyC1::from_json(&std::fs::read(out.join("c1-raw.json")).unwrap(), 2048).unwrap();
    let statement = SealStatement::of(
        &spec.config().unwrap(),
        &c1,
        info.prover_id().unwrap(),
        info.sector_id,
    );
    Sealed {
        c1_path: out.join("c1.json"),
        c1_json: std::fs::read(out.join("c1.json")).unwrap(),
        statement,
        sector: info.sector_id,
    }
}

/// Waits for a job to end (at most five minutes).
pub async fn await_done(
    c: &mut proofline_service::client::Client,
    job: &str,
) -> proofline_service::proto::AwaitProofResponse {
    c.await_proof(AwaitProofRequest {
        job_id: job.into(),
        timeout_ms: 300_000,
    })
    .await
    .unwrap()
    .into_inner()
}

/// Submits `request` and waits for its job to end (at most `timeout_ms`).
pub async fn submit_and_await(
    c: &mut proofline_service::client::Client,
    request: SubmitProofRequest,
    timeout_ms: u64,
) -> proofline_service::proto::AwaitProofResponse {
    let job_id = c.submit_proof(request).await.unwrap().into_inner().job_id;
    c.await_proof(AwaitProofRequest { job_id, timeout_ms })
        .await
        .unwrap()
        .into_inner()
}

/// Waits until the server reports a job running.
pub fn wait_running(socket: &Path) {
    let t = Instant::now();
    loop {
        let o = client(socket, &["status"]);
        if text(&o).contains("1 running") {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "{}", text(&o));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The PostgreSQL server `PROOFLINE_TEST_POSTGRES` names (`.ci/run` starts one); `None`, the
/// skip printed, without one unless CI must have it.
pub fn test_postgres() -> Option<String> {
    match std::env::var("PROOFLINE_TEST_POSTGRES") {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must test the PostgreSQL store: PROOFLINE_TEST_POSTGRES is not set"
            );
            eprintln!("skipped: PROOFLINE_TEST_POSTGRES is not set (no PostgreSQL server)");
            None
        }
    }
}

/// The S3-compatible endpoint and bucket `PROOFLINE_TEST_S3` names (`http://HOST:PORT/BUCKET`),
/// or `None` (the skip printed) unless CI must have one.
pub fn s3_bucket() -> Option<(String, String)> {
    let Ok(url) = std::env::var("PROOFLINE_TEST_S3") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must test the S3 blob store: PROOFLINE_TEST_S3 is not set"
        );
        eprintln!("PROOFLINE_TEST_S3 is not set (no S3-compatible server): a blob directory");
        return None;
    };
    let (endpoint, bucket) = url
        .rsplit_once('/')
        .filter(|(e, b)| e.starts_with("http") && !b.is_empty())
        .unwrap_or_else(|| panic!("PROOFLINE_TEST_S3={url:?}: expected http://HOST:PORT/BUCKET"));
    Some((endpoint.to_string(), bucket.to_string()))
}

/// A metric's value in a server's Prometheus text (0 when absent).
pub fn metric(socket: &Path, name: &str) -> f64 {
    let o = client(socket, &["metrics"]);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Borrowed arguments.
pub fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Two 2 KiB sectors sealed for [`MINER`] and their vanilla proofs for one randomness, bincode
/// as Curio sends them: the first sector's for WinningPoSt, both for a WindowPoSt partition.
pub struct PostInputs {
    pub randomness: [u8; 32],
    pub winning: Vec<Vec<u8>>,
    pub window: Vec<Vec<u8>>,
    pub public: Vec<(SectorId, PublicReplicaInfo)>,
}

pub fn post_inputs(dir: &Path) -> PostInputs {
    let prover_id = porep::actor_prover_id(MINER);
    let mut rng = rand::thread_rng();
    // Three sectors: a WindowPoSt of two partitions at 2 KiB.
    let sealed: Vec<_> = (0..3)
        .map(|_| {
            seal_random_sector::<Tree2KiB>(dir, SECTOR_SIZE_2_KIB, prover_id, &mut rng).unwrap()
        })
        .collect();
    let randomness = porep::field_bytes(&mut rng);
    let private: Vec<_> = sealed
        .iter()
        .map(|s| (s.sector_id, s.private_info().unwrap()))
        .collect();
    let encode = |typ, api, sectors: &[_]| -> Vec<Vec<u8>> {
        let config = post_config(SECTOR_SIZE_2_KIB, typ, api).unwrap();
        vanilla_proofs::<Tree2KiB>(&config, &randomness, prover_id, sectors)
            .unwrap()
            .iter()
            .map(|p| bincode::serialize(p).unwrap())
            .collect()
    };
    PostInputs {
        randomness,
        winning: encode(PoStType::Winning, ApiVersion::V1_0_0, &private[..1]),
        window: encode(PoStType::Window, ApiVersion::V1_2_0, &private),
        public: sealed
            .iter()
            .map(|s| (s.sector_id, s.public_info().unwrap()))
            .collect(),
    }
}

impl PostInputs {
    pub fn request(&self, kind: ProofKind, id: &str, proofs: &[Vec<u8>]) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: id.into(),
            proof_kind: kind as i32,
            sector_size: 2048,
            // StackedDrgWinning2KiBV1; StackedDrgWindow2KiBV1_1 (served as V1_2).
            registered_proof: if kind == ProofKind::WinningPost {
                0
            } else {
                10
            },
            vanilla_proofs: proofs.to_vec(),
            miner_id: MINER,
            randomness: self.randomness.to_vec(),
            ..Default::default()
        }
    }

    /// filecoin-proofs' verifier on `proof`.
    pub fn verify(&self, typ: PoStType, proof: &[u8]) -> bool {
        let prover_id = porep::actor_prover_id(MINER);
        match typ {
            PoStType::Winning => {
                let config = post_config(SECTOR_SIZE_2_KIB, typ, ApiVersion::V1_0_0).unwrap();
                verify_winning_post::<Tree2KiB>(
                    &config,
                    &self.randomness,
                    &self.public[..1],
                    prover_id,
                    proof,
                )
                .unwrap_or(false)
            }
            PoStType::Window => {
                let config = post_config(SECTOR_SIZE_2_KIB, typ, ApiVersion::V1_2_0).unwrap();
                let public: BTreeMap<_, _> = self.public.iter().cloned().collect();
                verify_window_post::<Tree2KiB>(&config, &self.randomness, &public, prover_id, proof)
                    .unwrap_or(false)
            }
        }
    }
}
