//! WinningPoSt and WindowPoSt on fresh 2 KiB sectors, proven by proofline and checked by
//! filecoin-proofs, with the time of each step:
//!
//! ```sh
//! FIL_PROOFS_PARAMETER_CACHE=target/fil-params cargo run --release -p proofline-filecoin --example post
//! ```

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{ensure, Result};
use filecoin_proofs::{
    verify_window_post, verify_winning_post, PoStConfig, PoStType, SECTOR_SIZE_2_KIB,
    WINDOW_POST_CHALLENGE_COUNT, WINNING_POST_CHALLENGE_COUNT, WINNING_POST_SECTOR_COUNT,
};
use proofline_filecoin::porep::field_bytes;
use proofline_filecoin::seal::seal_random_sector;
use proofline_filecoin::{post_circuits, post_parameters, prove_post, vanilla_proofs, Tree2KiB};
use prover_core::{CpuSynthesizer, Synthesizer};
use storage_proofs_core::api_version::ApiVersion;

fn run(typ: PoStType, sectors: usize, sector_count: usize, challenge_count: usize) -> Result<()> {
    let mut rng = rand::thread_rng();
    let prover_id = field_bytes(&mut rng);
    let randomness = field_bytes(&mut rng);
    let config = PoStConfig {
        sector_size: SECTOR_SIZE_2_KIB.into(),
        challenge_count,
        sector_count,
        typ: typ.clone(),
        priority: false,
        api_version: ApiVersion::V1_1_0,
    };
    let dir = tempfile::tempdir()?;
    let t = Instant::now();
    let sealed = (0..sectors)
        .map(|_| seal_random_sector::<Tree2KiB>(dir.path(), SECTOR_SIZE_2_KIB, prover_id, &mut rng))
        .collect::<Result<Vec<_>>>()?;
    let seal_s = t.elapsed().as_secs_f64();
    let private = sealed
        .iter()
        .map(|s| Ok((s.sector_id, s.private_info()?)))
        .collect::<Result<Vec<_>>>()?;
    let t = Instant::now();
    let vanilla = vanilla_proofs::<Tree2KiB>(&config, &randomness, prover_id, &private)?;
    let vanilla_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (params, path) = post_parameters::<Tree2KiB>(&config)?;
    let params_s = t.elapsed().as_secs_f64();
    let circuits = post_circuits::<Tree2KiB>(&config, &randomness, prover_id, &vanilla)?;
    let shape = CpuSynthesizer
        .synthesize(circuits.into_iter().next().expect("a partition").0)?
        .shape();
    let t = Instant::now();
    let heap_mib = params.heap_bytes() >> 20;
    let proof = prove_post::<Tree2KiB>(
        &config,
        &randomness,
        prover_id,
        &vanilla,
        std::sync::Arc::new(params),
        2,
    )?;
    let prove_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let ok = match &typ {
        PoStType::Winning => {
            let public: Vec<_> = sealed
                .iter()
                .map(|s| Ok((s.sector_id, s.public_info()?)))
                .collect::<Result<_>>()?;
            verify_winning_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &proof)?
        }
        PoStType::Window => {
            let public: BTreeMap<_, _> = sealed
                .iter()
                .map(|s| Ok((s.sector_id, s.public_info()?)))
                .collect::<Result<_>>()?;
            verify_window_post::<Tree2KiB>(&config, &randomness, &public, prover_id, &proof)?
        }
    };
    let verify_s = t.elapsed().as_secs_f64();
    ensure!(ok, "filecoin-proofs rejected the proof");
    println!(
        "{typ:?}PoSt 2 KiB: {} constraints ({} inputs, {} aux) per partition, {} partition(s), {} byte proof",
        shape.constraints,
        shape.inputs,
        shape.aux,
        proof.len() / 192,
        proof.len()
    );
    println!(
        "  seal {sectors} sector(s) {seal_s:.2} s, vanilla proofs {vanilla_s:.2} s, parameters {params_s:.2} s (generated or read and fully checked; {} MiB, {}), SNARK {prove_s:.2} s, filecoin-proofs verify {verify_s:.3} s: accepted",
        heap_mib,
        path.display()
    );
    Ok(())
}

fn main() -> Result<()> {
    run(
        PoStType::Winning,
        WINNING_POST_SECTOR_COUNT,
        WINNING_POST_SECTOR_COUNT,
        WINNING_POST_CHALLENGE_COUNT,
    )?;
    run(PoStType::Window, 2, 2, WINDOW_POST_CHALLENGE_COUNT)
}
