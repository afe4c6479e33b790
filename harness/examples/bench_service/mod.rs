//! What the service's benchmarks share: a sealed 2 KiB sector and a WinningPoSt's inputs (each
//! proof checked by filecoin-proofs' verifiers), a server process, waits and figures.

// Each benchmark uses its own part of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::{ensure, Context, Result};
use proofline_filecoin::c1::AnyC1;
use proofline_filecoin::filecoin_proofs::{
    verify_winning_post, PoStType, PublicReplicaInfo, SECTOR_SIZE_2_KIB,
};
use proofline_filecoin::porep::{self, SealStatement, SectorInfo};
use proofline_filecoin::seal::seal_random_sector;
use proofline_filecoin::storage_proofs_core::api_version::ApiVersion;
use proofline_filecoin::{post_config, vanilla_proofs, Tree2KiB};
use proofline_service::client::{connect, Client};
use proofline_service::listen::Listen;
use proofline_service::proto::{
    AwaitProofRequest, PreloadSrsRequest, ProofKind, SubmitProofRequest,
};

/// The miner every sector is sealed for.
pub const MINER: u64 = 1000;

/// A 2 KiB sector sealed through C1 for [`MINER`], and what its C2 proof must satisfy.
pub struct Sector {
    /// The folder of its C1 output.
    pub c1_dir: PathBuf,
    /// Its C1 output, as Curio holds it.
    pub c1_json: Vec<u8>,
    /// The sector.
    pub info: SectorInfo,
    /// What `verify_seal` checks.
    pub statement: SealStatement,
}

impl Sector {
    /// Seals the sector under `dir/c1` with `proofline filecoin seal` (once per folder), the
    /// parameters under `dir/params`.
    pub fn prepare(proofline: &Path, dir: &Path) -> Result<Sector> {
        let c1_dir = dir.join("c1");
        if !c1_dir.join("c1.json").exists() {
            run(Command::new(proofline)
                .env("FIL_PROOFS_PARAMETER_CACHE", dir.join("params"))
                .args(["filecoin", "seal", "--sector-size", "2KiB", "--miner-id"])
                .arg(MINER.to_string())
                .arg("--out")
                .arg(&c1_dir))?;
        }
        let c1_json = std::fs::read(c1_dir.join("c1.json"))?;
        let info: SectorInfo = serde_json::from_slice(&std::fs::read(c1_dir.join("sector.json"))?)?;
        let c1 = AnyC1::from_json(&std::fs::read(c1_dir.join("c1-raw.json"))?, 2048)?;
        let statement = SealStatement::of(
            &info.spec()?.config()?,
            &c1,
            info.prover_id()?,
            info.sector_id,
        );
        Ok(Sector {
            c1_dir,
            c1_json,
            info,
            statement,
        })
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank percentile `p` (0-100).
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

pub fn run(cmd: &mut Command) -> Result<String> {
    let o = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    ensure!(o.status.success(), "{cmd:?} failed:\n{text}");
    Ok(text)
}

/// A server process, killed when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn peak_rss_of(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

pub async fn prove(c: &mut Client, request: SubmitProofRequest) -> Result<Vec<u8>> {
    let id = c.submit_proof(request).await?.into_inner().job_id;
    await_proof(c, id).await
}

pub async fn await_proof(c: &mut Client, id: String) -> Result<Vec<u8>> {
    let r = c
        .await_proof(AwaitProofRequest {
            job_id: id.clone(),
            timeout_ms: 0,
        })
        .await?
        .into_inner();
    ensure!(r.status == 1, "job {id}: {r:?}");
    Ok(r.proof)
}

pub struct Post {
    randomness: [u8; 32],
    winning: Vec<Vec<u8>>,
    public: Vec<(
        proofline_filecoin::storage_proofs_core::sector::SectorId,
        PublicReplicaInfo,
    )>,
}

impl Post {
    /// Seals a sector under `dir` and makes its WinningPoSt vanilla proofs.
    pub fn new(dir: &Path) -> Result<Post> {
        let prover_id = porep::actor_prover_id(MINER);
        let mut rng = rand::thread_rng();
        let sealed = seal_random_sector::<Tree2KiB>(dir, SECTOR_SIZE_2_KIB, prover_id, &mut rng)?;
        let randomness = porep::field_bytes(&mut rng);
        let config = post_config(SECTOR_SIZE_2_KIB, PoStType::Winning, ApiVersion::V1_0_0)?;
        let private = [(sealed.sector_id, sealed.private_info()?)];
        let winning = vanilla_proofs::<Tree2KiB>(&config, &randomness, prover_id, &private)?
            .iter()
            .map(bincode::serialize)
            .collect::<Result<_, _>>()?;
        Ok(Post {
            randomness,
            winning,
            public: vec![(sealed.sector_id, sealed.public_info()?)],
        })
    }

    /// The WinningPoSt request.
    pub fn request(&self, id: &str) -> SubmitProofRequest {
        SubmitProofRequest {
            request_id: id.into(),
            proof_kind: ProofKind::WinningPost as i32,
            sector_size: 2048,
            registered_proof: 0, // StackedDrgWinning2KiBV1
            vanilla_proofs: self.winning.clone(),
            miner_id: MINER,
            randomness: self.randomness.to_vec(),
            ..Default::default()
        }
    }

    /// filecoin-proofs' verifier on `proof`.
    pub fn verify(&self, proof: &[u8]) -> Result<()> {
        let config = post_config(SECTOR_SIZE_2_KIB, PoStType::Winning, ApiVersion::V1_0_0)?;
        ensure!(
            verify_winning_post::<Tree2KiB>(
                &config,
                &self.randomness,
                &self.public,
                porep::actor_prover_id(MINER),
                proof,
            )?,
            "a WinningPoSt proof does not verify"
        );
        Ok(())
    }
}

/// A client of the server at `socket`, with the 2 KiB PoRep and WinningPoSt parameters
/// preloaded there.
pub async fn warm_client(socket: &Path) -> Result<Client> {
    let mut c = connect(&Listen::Unix(socket.to_path_buf()), None, 256 << 20)
        .await
        .map_err(anyhow::Error::msg)?;
    for id in ["porep-2k", "winning-2k"] {
        c.preload_srs(PreloadSrsRequest {
            circuit_id: id.into(),
        })
        .await?;
    }
    Ok(c)
}
