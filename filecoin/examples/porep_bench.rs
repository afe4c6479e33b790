//! PoRep C2 at any sector shape side by side with filecoin-proofs / bellperson, one step per
//! process so that each step's peak RSS is its own (`scripts/porep-bench.sh` runs them all and
//! prints the table):
//!
//! ```sh
//! porep_bench seal DIR [SIZE [VARIANT]] # a sector through C1: DIR/c1-raw.json, DIR/sector.json
//! porep_bench params-proofline DIR     # proofline's generator into FIL_PROOFS_PARAMETER_CACHE
//! porep_bench params-bellperson DIR    # filecoin-proofs' groth_params (bellperson) into it
//! porep_bench c2-proofline DIR [PW]    # C2 through proofline's engine, verify_seal
//! porep_bench c2-filecoin DIR          # filecoin-proofs' seal_commit_phase2, twice (verifies inside)
//! porep_bench snap-filecoin DIR        # filecoin-proofs' update prover on `filecoin snap`'s DIR, twice
//! ```
//!
//! SIZE is a sector size in bytes (default 2048: 2 KiB; 4096, 16384 and 32768 are the test sizes
//! of the production shapes); VARIANT is v1, v1_1 (default) or synthetic. Every step but `seal`
//! takes the sector's size and variant from DIR/sector.json. Every step prints one line:
//! `step <name> seconds <s> peak_rss_bytes <n> [detail]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use filecoin_proofs::{DefaultPieceHasher, PoRepConfig, SealCommitPhase1Output};
use proofline_filecoin::c1::{read_c1, AnyC1, C1File};
use proofline_filecoin::porep::{self, SectorInfo};
use proofline_filecoin::shape::Shape;
use proofline_filecoin::storage_proofs_core::merkle::MerkleTreeTrait;
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_filecoin::{cached_parameters, parameter_cache_dir, prove_circuits, with_tree};
use prover_core::runtime::sampler::peak_rss;
use prover_core::{write_parameters_with_progress, PointCheck, Trapdoor};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::{parameter_id, verifying_key_id};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::StackedCompound;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::PartitionProof;

fn report(step: &str, t: Instant, detail: String) {
    println!(
        "step {step} seconds {:.2} peak_rss_bytes {} {detail}",
        t.elapsed().as_secs_f64(),
        peak_rss().unwrap_or(0)
    );
}

fn sector_info(dir: &Path) -> Result<(SealSpec, SectorInfo)> {
    let info: SectorInfo = serde_json::from_slice(&std::fs::read(dir.join("sector.json"))?)?;
    Ok((info.spec()?, info))
}

fn read_c1_as<Tree: 'static + MerkleTreeTrait>(
    dir: &Path,
) -> Result<(PoRepConfig, SealCommitPhase1Output<Tree>, SectorInfo)> {
    let (spec, info) = sector_info(dir)?;
    let c1 = match read_c1(&dir.join("c1-raw.json"), Some(spec.sector_size))? {
        C1File::Wrapped(w) => AnyC1::from_wrapped(*w)?,
        C1File::Raw(r) => r,
    };
    let c1 = c1.into_tree::<Tree>()?;
    Ok((spec.config()?, c1, info))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(args.get(1).context("missing DIR")?);
    if args.first().map(String::as_str) == Some("seal") {
        let t = Instant::now();
        let size: u64 = args.get(2).map_or(Ok(2048), |s| s.parse())?;
        let variant = SealVariant::parse(args.get(3).map_or("v1_1", String::as_str))?;
        std::fs::create_dir_all(&dir)?;
        let spec = SealSpec::new(size, variant, None)?;
        let sealed = porep::seal_c1(&spec, &dir.join("sector"), &mut rand::thread_rng())?;
        std::fs::write(dir.join("c1-raw.json"), sealed.c1.to_json()?)?;
        std::fs::write(
            dir.join("sector.json"),
            serde_json::to_vec_pretty(&sealed.info)?,
        )?;
        report(
            "seal",
            t,
            format!("sector {} {}", sealed.info.sector_id, spec.describe()),
        );
        return Ok(());
    }
    if args.first().map(String::as_str) == Some("snap-filecoin") {
        // DIR is what `proofline filecoin snap` writes (snap.json, vanilla-<k>.bin).
        let updated = proofline_filecoin::snap::read_update(&dir)?;
        let size = updated.info.sector_size;
        return with_tree!(Shape::of(size)?, Tree => snap_filecoin::<Tree>(&updated));
    }
    let (spec, _) = sector_info(&dir)?;
    with_tree!(spec.shape(), Tree => step::<Tree>(&args, &dir, &spec.config()?))
}

/// filecoin-proofs' own update prover on the same vanilla proofs, twice in one process (cold,
/// then with its parameters in memory), each proof checked by its verifier.
fn snap_filecoin<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    updated: &proofline_filecoin::snap::Updated,
) -> Result<()> {
    let size = updated.info.sector_size;
    let c = updated.info.commitments()?;
    let config = proofline_filecoin::snap::update_config(size)?;
    for step in ["snap-filecoin-first", "snap-filecoin-second"] {
        let t = Instant::now();
        let proofs = updated
            .vanilla_proofs
            .iter()
            .map(|b| bincode::deserialize::<PartitionProof<Tree>>(b))
            .collect::<Result<Vec<_>, _>>()?;
        let out = filecoin_proofs::generate_empty_sector_update_proof_with_vanilla::<Tree>(
            &config,
            proofs,
            c.comm_r_old,
            c.comm_r_new,
            c.comm_d_new,
        )?;
        ensure!(
            proofline_filecoin::snap::verify_update(size, &c, &out.0)?,
            "filecoin-proofs' update proof did not verify"
        );
        report(step, t, format!("proof_bytes {}", out.0.len()));
    }
    Ok(())
}

fn step<Tree: 'static + MerkleTreeTrait>(
    args: &[String],
    dir: &Path,
    config: &PoRepConfig,
) -> Result<()> {
    let t = Instant::now();
    match args.first().map(String::as_str) {
        Some("params-proofline") => {
            let id = porep::cache_id::<Tree>(config)?;
            let cache = parameter_cache_dir();
            std::fs::create_dir_all(&cache)?;
            let path = cache.join(parameter_id(&id));
            ensure!(!path.exists(), "{} exists: use an empty cache", path.display());
            let vk = write_parameters_with_progress(
                porep::blank_circuit::<Tree>(config)?,
                &Trapdoor::random(&mut rand::rngs::OsRng),
                &path,
                &(),
            )?;
            vk.write_file(&cache.join(verifying_key_id(&id)))?;
            // Without the marker, `c2-proofline` would check the file against the published
            // digest and refuse it.
            proofline_filecoin::mark_generated(&path)?;
            report(
                "params-proofline",
                t,
                format!("bytes {}", std::fs::metadata(&path)?.len()),
            );
        }
        Some("params-bellperson") => {
            let pp = porep::public_params::<Tree>(config)?;
            let id = porep::cache_id::<Tree>(config)?;
            let path = parameter_cache_dir().join(parameter_id(&id));
            ensure!(!path.exists(), "{} exists: use an empty cache", path.display());
            let mut rng = rand::rngs::OsRng;
            <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::groth_params(
                Some(&mut rng),
                &pp.vanilla_params,
            )?;
            report(
                "params-bellperson",
                t,
                format!("bytes {}", std::fs::metadata(&path)?.len()),
            );
        }
        Some("c2-proofline") => {
            let (config, c1, info) = read_c1_as::<Tree>(dir)?;
            let pw: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
            let cached = cached_parameters(
                &porep::cache_id::<Tree>(&config)?,
                || -> Result<porep::PorepCircuit<Tree>> {
                    bail!("no parameters: run params-proofline first")
                },
                PointCheck::Unchecked,
                &(),
            )?;
            report("c2-proofline-params-read", t, String::new());
            let cold = t;
            let t = Instant::now();
            let (circuits, _): (Vec<_>, Vec<_>) =
                porep::porep_circuits::<Tree>(&config, &c1)?.into_iter().unzip();
            let run = prove_circuits(circuits, Arc::new(cached.params), pw)?;
            let proof = prover_core::Proof::many_to_bytes(&run.proofs);
            let prove_s = t.elapsed().as_secs_f64();
            let statement = porep::SealStatement::of(&config, &AnyC1::new(c1)?, info.prover_id()?, info.sector_id);
            let ok = statement.verify(&proof)?;
            ensure!(ok, "verify_seal rejected proofline's proof");
            report("c2-proofline-cold", cold, "parameters read + prove + verify".into());
            report(
                "c2-proofline",
                t,
                format!(
                    "prove_seconds {prove_s:.2} synthesis {:.2} accelerator {:.2} finalize {:.2} verify_seal accepted",
                    run.stats.synthesis_seconds, run.stats.accelerator_seconds, run.stats.finalize_seconds
                ),
            );
        }
        Some("c2-filecoin") => {
            // seal_commit_phase2 reads its parameters itself (memory-mapped, points decoded as
            // they are used) and verifies the proof before it returns. Twice in one process:
            // the second call finds the parameter file in filecoin-proofs' in-memory cache.
            for step in ["c2-filecoin-first", "c2-filecoin-second"] {
                let t = Instant::now();
                let (config, c1, info) = read_c1_as::<Tree>(dir)?;
                let out = filecoin_proofs::seal_commit_phase2::<Tree>(
                    &config,
                    c1,
                    info.prover_id()?,
                    SectorId::from(info.sector_id),
                )?;
                report(step, t, format!("proof_bytes {}", out.proof.len()));
            }
        }
        _ => bail!("usage: porep_bench seal DIR [SIZE [VARIANT]] | params-proofline DIR | params-bellperson DIR | c2-proofline DIR [PW] | c2-filecoin DIR | snap-filecoin DIR"),
    }
    Ok(())
}
