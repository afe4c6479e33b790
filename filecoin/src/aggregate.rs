//! Non-Interactive PoRep's proof: its partitions' Groth16 proofs, proven by proofline's engine,
//! aggregated into one SnarkPack proof by filecoin-proofs (`aggregate_seal_commit_proofs`), with
//! the inner-product SRS that filecoin-proofs reads from the parameter cache
//! (`v28-fil-inner-product-v1.srs`, one file for every sector size).
//!
//! The production SRS comes from a ceremony and is fetched with the parameters. At the sizes
//! proofline generates parameters for (below 32 GiB), a missing SRS is generated in its place from
//! random powers (bellperson's `setup_fake_srs`: test material, as the generated parameters are)
//! with proofline's marker beside it; such a file is refused for a 32 GiB or 64 GiB sector, and a
//! missing SRS there is an error that says how to fetch it.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use bellperson027::groth16::aggregate::{setup_fake_srs, AggregateVersion};
use filecoin_proofs::{PoRepConfig, SealCommitOutput};
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::parameter_cache::parameter_cache_srs_key_path;

use crate::shape::{size_name, Shape};
use crate::{generated_marker, mark_generated, with_tree, PRODUCTION_ONLY_SECTOR_SIZE};

/// Proofs a generated SRS can aggregate (the production one: 2^19): NI-PoRep's partitions at
/// every size proofline generates parameters for (13, padded to 16) with room to spare.
const TEST_SRS_PROOFS: usize = 256;

/// Where filecoin-proofs reads the SRS.
pub fn srs_path() -> PathBuf {
    parameter_cache_srs_key_path("", 0)
}

/// Makes sure the SRS a C2 of `config` needs is there (see the module's text); returns whether
/// proofline generated it just now.
pub fn ensure_srs(config: &PoRepConfig) -> Result<bool> {
    let path = srs_path();
    let marker = generated_marker(&path);
    let size = u64::from(config.sector_size);
    let production = size >= PRODUCTION_ONLY_SECTOR_SIZE;
    if path.exists() {
        ensure!(
            !(production && marker.exists()),
            "{} is a test SRS that proofline generated (the marker {} says so); a {} sector's \
             Non-Interactive PoRep needs the ceremony's SRS: move the test file away and fetch the \
             published one (`curio fetch-params {}`)",
            path.display(),
            marker.display(),
            size_name(size),
            size_name(size)
        );
        return Ok(false);
    }
    ensure!(
        !production,
        "the inner-product SRS {} (SnarkPack's, from its ceremony) is missing from the parameter \
         cache (FIL_PROOFS_PARAMETER_CACHE): fetch it with the {} parameters (`curio fetch-params \
         {}`)",
        path.display(),
        size_name(size),
        size_name(size)
    );
    if let Some(dir) = path.parent() {
        prover_core::files::create_dir_all(dir)?;
    }
    let srs = setup_fake_srs::<blstrs::Bls12, _>(&mut rand::rngs::OsRng, TEST_SRS_PROOFS);
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    srs.write(&mut file)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming into {}", path.display()))?;
    mark_generated(&path)?;
    Ok(true)
}

/// The proof bytes `verify_seal` takes for `config` from the partitions' proofs (192 bytes each,
/// concatenated): the same bytes for interactive PoRep; for Non-Interactive PoRep, their
/// SnarkPack aggregate (the SRS made sure of by [`ensure_srs`]).
pub fn seal_proof(
    config: &PoRepConfig,
    comm_r: [u8; 32],
    seed: [u8; 32],
    partition_proofs: Vec<u8>,
) -> Result<Vec<u8>> {
    if !config.feature_enabled(ApiFeature::NonInteractivePoRep) {
        return Ok(partition_proofs);
    }
    ensure_srs(config)?;
    let shape = Shape::of(u64::from(config.sector_size))?;
    let output = SealCommitOutput {
        proof: partition_proofs,
    };
    with_tree!(shape, Tree => filecoin_proofs::aggregate_seal_commit_proofs::<Tree>(
        config,
        &[comm_r],
        &[seed],
        std::slice::from_ref(&output),
        AggregateVersion::V2,
    ))
}
