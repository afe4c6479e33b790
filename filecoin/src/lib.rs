//! Filecoin's proof-of-spacetime circuits (filecoin-proofs 19.1, unpatched) proven by proofline's
//! engine, with parameters from proofline's generator in the production file layout, so that
//! filecoin-proofs' own verifiers (`verify_winning_post`, `verify_window_post`) check the proofs.
//!
//! A third-party prover's path, as Lotus or Curio would drive it: filecoin-proofs makes the
//! vanilla proofs; for each partition `FallbackPoStCompound::circuit` gives the bellpepper circuit
//! and `generate_public_inputs` its inputs; the partitions' 192-byte proofs, concatenated, are the
//! `MultiProof` bytes the verifier takes.
#![warn(missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use backend_cpu::CpuBackend;
use filecoin_hashers::Hasher;
use filecoin_proofs::{
    as_safe_commitment, generate_fallback_sector_challenges, generate_single_vanilla_proof,
    partition_vanilla_proofs, ChallengeSeed, FallbackPoStSectorProof, PoStConfig, PoStType,
    PrivateReplicaInfo, ProverId, SectorShape2KiB,
};
use prover_core::bellpepper_core::Circuit;
use prover_core::{
    write_parameters_with_progress, Accelerator, CpuSynthesizer, Engine, GenProgress, Parameters,
    PointCheck, Proof, Trapdoor,
};
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{parameter_id, verifying_key_id, CacheableParameters};
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

pub mod aggregate;
pub mod any_circuit;
pub mod c1;
mod field_elements;
pub mod plan;
pub mod porep;
mod porep_circuit;
pub mod seal;
pub mod shape;
pub mod snap;
pub mod vanilla_post;
pub mod variant;

pub use filecoin_proofs;
pub use storage_proofs_core;

/// The 2 KiB sector shape.
pub type Tree2KiB = SectorShape2KiB;

/// The circuit of one PoSt partition.
pub type PostCircuit<Tree> = FallbackPoStCircuit<Tree>;

/// Where parameters live: `FIL_PROOFS_PARAMETER_CACHE`, as filecoin-proofs reads it.
pub fn parameter_cache_dir() -> PathBuf {
    storage_proofs_core::parameter_cache::parameter_cache_dir()
}

fn public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    sectors: usize,
) -> Result<compound_proof::PublicParams<'static, FallbackPoSt<'static, Tree>>> {
    let (vanilla_params, partitions) = match config.typ {
        PoStType::Winning => (
            filecoin_proofs::parameters::winning_post_setup_params(config)?,
            None,
        ),
        PoStType::Window => {
            let partitions = sectors.div_ceil(config.sector_count.max(1));
            (
                filecoin_proofs::parameters::window_post_setup_params(config),
                (partitions > 1).then_some(partitions),
            )
        }
    };
    let setup = compound_proof::SetupParams {
        vanilla_params,
        partitions,
        priority: config.priority,
    };
    FallbackPoStCompound::<Tree>::setup(&setup)
}

/// Parameters in the production file layout, and where they came from.
pub struct CachedParameters {
    /// The parameters.
    pub params: Parameters,
    /// Their `.params` file.
    pub path: PathBuf,
    /// Whether proofline generated them just now (otherwise they were read as found).
    pub generated: bool,
    /// Seconds spent generating (0 when read).
    pub generate_seconds: f64,
    /// Seconds spent reading the file.
    pub read_seconds: f64,
    /// Why the file was trusted as it was read.
    pub trust: Trust,
    /// The native copy written after this read (when there was none, or it did not match), or
    /// why it could not be written.
    pub native_written: Option<std::result::Result<PathBuf, String>>,
    /// Why a native copy found beside the file was not used.
    pub native_unused: Option<String>,
}

/// How a parameter file was trusted.
#[derive(Debug, Clone, PartialEq)]
pub enum Trust {
    /// proofline generated it (now or in an earlier run: the marker file next to it says so).
    Generated,
    /// Its BLAKE2b digest matches filecoin-proofs' published `parameters.json`, computed at
    /// `bytes_per_second`.
    Digest {
        /// Hashing rate.
        bytes_per_second: f64,
    },
    /// Every point was checked (on the curve and in the subgroup), at `points_per_second`.
    Checked {
        /// Checking rate.
        points_per_second: f64,
    },
    /// Read as found, unchecked (not listed in `parameters.json`, no `--check-params`).
    AsFound,
    /// Mapped from its native copy (`prover_core::groth16::native`), written after an earlier
    /// read of this same file with the checks above; `checked` when that read checked every
    /// point's subgroup.
    Native {
        /// Whether every point's subgroup was checked when the copy was made.
        checked: bool,
    },
}

/// How [`cached_parameters`] loads a file it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// The point checks of a decoding read.
    pub check: PointCheck,
    /// Map the file's native copy when it has a good one (its checksums are checked), and
    /// write one after decoding the file when it has none: later loads then run at the page
    /// cache's speed, for the disk space of a second copy.
    pub native: bool,
}

impl From<PointCheck> for Load {
    /// Decoding with `check`, through a native copy.
    fn from(check: PointCheck) -> Self {
        Load {
            check,
            native: true,
        }
    }
}

impl std::fmt::Display for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trust::Generated => f.write_str("generated by proofline"),
            Trust::Digest { bytes_per_second } => write!(
                f,
                "matches the digest published in filecoin-proofs' parameters.json (hashed at {:.0} MB/s)",
                bytes_per_second / 1e6
            ),
            Trust::Checked { points_per_second } => write!(
                f,
                "every point checked (curve and subgroup) at {:.0} points/s",
                points_per_second
            ),
            Trust::AsFound => f.write_str("read as found (not a published file; --check-params checks every point)"),
            Trust::Native { checked } => write!(
                f,
                "mapped from its native copy, made on an earlier read of this file{}",
                if *checked {
                    " that checked every point"
                } else {
                    ""
                }
            ),
        }
    }
}

/// The marker proofline leaves next to a parameter file it generated (the published digest
/// cannot match such a file, and it needs no check).
pub(crate) fn generated_marker(params_path: &std::path::Path) -> PathBuf {
    let mut name = params_path.file_name().unwrap_or_default().to_os_string();
    name.push(".generated-by-proofline");
    params_path.with_file_name(name)
}

/// Leaves the marker next to a parameter file proofline generated, so that it is read without
/// the published-digest check (which such a file cannot pass).
pub fn mark_generated(params_path: &std::path::Path) -> Result<()> {
    let marker = generated_marker(params_path);
    std::fs::write(
        &marker,
        "generated by proofline's test generator; not a production file\n",
    )
    .with_context(|| format!("writing {}", marker.display()))
}

/// Checks a parameter file against the digest filecoin-proofs publishes for its name, as its
/// fetcher does (BLAKE2b-512, the first 32 hex digits). `Ok(None)`: the name is not listed.
pub fn check_published_digest(path: &std::path::Path) -> Result<Option<f64>> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .context("a parameter file name")?;
    let Some(entry) = storage_proofs_core::parameter_cache::PARAMETERS.get(name) else {
        return Ok(None);
    };
    let t = Instant::now();
    let mut file = prover_core::files::open_regular_file(path)?;
    let mut state = blake2b_simd::Params::new().to_state();
    let bytes = std::io::copy(&mut file, &mut state)
        .with_context(|| format!("reading {}", path.display()))?;
    let hash = state.finalize();
    let digest = &hash.to_hex()[..32];
    ensure!(
        digest == entry.digest,
        "{} does not match the digest filecoin-proofs publishes for it ({digest}, expected {}): \
         the file is damaged or not the production one; delete it and fetch it again (or let \
         proofline generate a test file in its place)",
        path.display(),
        entry.digest
    );
    Ok(Some(bytes as f64 / t.elapsed().as_secs_f64().max(1e-9)))
}

/// Sectors from this size up are only proven with the published parameter files: generating one
/// takes hours and gives proofs no chain accepts.
pub(crate) const PRODUCTION_ONLY_SECTOR_SIZE: u64 = 32 << 30;

/// An error when `params_path` is missing and names a published file of a production-only
/// size (32 GiB and 64 GiB): which files are missing, their published digests, and how to fetch
/// them.
fn refuse_to_generate_production(params_path: &std::path::Path) -> Result<()> {
    let name = params_path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let published = &storage_proofs_core::parameter_cache::PARAMETERS;
    let Some(entry) = published.get(name) else {
        return Ok(());
    };
    if entry.sector_size < PRODUCTION_ONLY_SECTOR_SIZE {
        return Ok(());
    }
    let vk = params_path.with_extension("vk");
    let vk_name = vk.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let mut missing = vec![format!(
        "{} (digest {}, cid {})",
        params_path.display(),
        entry.digest,
        entry.cid
    )];
    if let (false, Some(v)) = (vk.exists(), published.get(vk_name)) {
        missing.push(format!(
            "{} (digest {}, cid {})",
            vk.display(),
            v.digest,
            v.cid
        ));
    }
    anyhow::bail!(
        "the published parameters for {}-byte sectors are missing from the parameter cache \
         (FIL_PROOFS_PARAMETER_CACHE): {}. Fetch them as Lotus and Curio do (`curio fetch-params \
         {}` or `lotus fetch-params {}`), or point FIL_PROOFS_PARAMETER_CACHE at the folder that \
         holds them; proofline does not generate parameters at this size (hours of work, and no \
         chain accepts proofs made with them)",
        entry.sector_size,
        missing.join("; "),
        shape::size_name(entry.sector_size),
        shape::size_name(entry.sector_size)
    )
}

/// The parameters of the circuit with cache id `cache_id` (see `CacheableParameters`), at the
/// production file name under the parameter cache (`FIL_PROOFS_PARAMETER_CACHE`): read when
/// present (with `check`: downloaded parameters can be read as they are, their digest having
/// been checked by the fetcher), otherwise generated by proofline's generator straight into that
/// file, with the matching `.vk` next to it so that filecoin-proofs' verifiers find it, and read
/// back.
pub fn cached_parameters<C: Circuit<blstrs::Scalar>>(
    cache_id: &str,
    blank: impl FnOnce() -> Result<C>,
    load: impl Into<Load>,
    progress: &dyn GenProgress,
) -> Result<CachedParameters> {
    let Load { check, native } = load.into();
    // One load at a time per process: two threads finding the same file missing would both
    // generate it, and the `.params` of one could end up beside the `.vk` of the other (each
    // file is replaced atomically, the pair is not). Found by two PoSt tests running at once.
    // Separate processes sharing a cache are not serialised (noted in docs/filecoin.md).
    static LOADING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = LOADING.lock().unwrap_or_else(|p| p.into_inner());
    let dir = parameter_cache_dir();
    let params_path = dir.join(parameter_id(cache_id));
    let vk_path = dir.join(verifying_key_id(cache_id));
    let mut generate_seconds = 0.0;
    let generated = !params_path.exists();
    let marker = generated_marker(&params_path);
    if generated {
        refuse_to_generate_production(&params_path)?;
        prover_core::files::create_dir_all(&dir)?;
        let t = Instant::now();
        let trapdoor = Trapdoor::random(&mut rand::rngs::OsRng);
        let vk = write_parameters_with_progress(blank()?, &trapdoor, &params_path, progress)
            .with_context(|| format!("generating {}", params_path.display()))?;
        vk.write_file(&vk_path)?;
        mark_generated(&params_path)?;
        generate_seconds = t.elapsed().as_secs_f64();
    }
    // A file written just now needs no check; `check` (--check-params) applies to every file
    // found, proofline's own from an earlier run included.
    let check = if generated {
        PointCheck::Unchecked
    } else {
        check
    };
    let ours = marker.exists();
    let native_path = prover_core::groth16::native::beside(&params_path);
    let mut native_unused = None;
    if native && !generated {
        let t = Instant::now();
        match prover_core::groth16::native::open(&native_path, &params_path, check)? {
            Ok(params) => {
                if !vk_path.exists() {
                    params.vk.write_file(&vk_path)?;
                }
                return Ok(CachedParameters {
                    params,
                    path: params_path,
                    generated,
                    generate_seconds,
                    read_seconds: t.elapsed().as_secs_f64(),
                    trust: Trust::Native {
                        checked: check == PointCheck::Checked,
                    },
                    native_written: None,
                    native_unused: None,
                });
            }
            Err(why) => native_unused = Some(why),
        }
    }
    // A production file read unchecked is checked by its published digest (seconds) first.
    let digest = if check == PointCheck::Unchecked && !ours {
        check_published_digest(&params_path)?
    } else {
        None
    };
    let t = Instant::now();
    // Its errors name the file.
    let params = Parameters::read_file(&params_path, check)?;
    let read_seconds = t.elapsed().as_secs_f64();
    let trust = match (check, digest) {
        (PointCheck::Checked, _) => {
            let points = params.h.len()
                + params.l.len()
                + params.a.len()
                + params.b_g1.len()
                + params.b_g2.len()
                + params.vk.ic.len();
            Trust::Checked {
                points_per_second: points as f64 / read_seconds.max(1e-9),
            }
        }
        _ if ours => Trust::Generated,
        (_, Some(bytes_per_second)) => Trust::Digest { bytes_per_second },
        (_, None) => Trust::AsFound,
    };
    if !vk_path.exists() {
        params.vk.write_file(&vk_path)?;
    }
    // A copy that cannot be written (a read-only cache, a full disk) costs only the next load's
    // speed: it is reported, not an error.
    let native_written = native.then(|| {
        prover_core::groth16::native::write(&params, &params_path, check, &native_path)
            .map(|()| native_path)
            .map_err(|e| e.to_string())
    });
    Ok(CachedParameters {
        params,
        path: params_path,
        generated,
        generate_seconds,
        read_seconds,
        trust,
        native_written,
        native_unused,
    })
}

/// filecoin-proofs' PoSt config for a sector size: its challenge and sector counts per partition
/// (filecoin-proofs' constants), the PoSt type and the API version (`V1_0_0`, or `V1_2_0` for
/// the `StackedDrgWindow*V1_2` proofs that Curio's and Lotus' V1_1 numbers map to).
pub fn post_config(sector_size: u64, typ: PoStType, api_version: ApiVersion) -> Result<PoStConfig> {
    shape::Shape::of(sector_size)?;
    let (challenge_count, sector_count) = match typ {
        PoStType::Winning => (
            filecoin_proofs::WINNING_POST_CHALLENGE_COUNT,
            filecoin_proofs::WINNING_POST_SECTOR_COUNT,
        ),
        PoStType::Window => (
            filecoin_proofs::WINDOW_POST_CHALLENGE_COUNT,
            *filecoin_proofs::WINDOW_POST_SECTOR_COUNT
                .read()
                .map_err(|_| anyhow::anyhow!("filecoin-proofs' sector counts are poisoned"))?
                .get(&sector_size)
                .with_context(|| format!("no WindowPoSt sector count for {sector_size} bytes"))?,
        ),
    };
    Ok(PoStConfig {
        sector_size: sector_size.into(),
        challenge_count,
        sector_count,
        typ,
        priority: false,
        api_version,
    })
}

/// The parameter cache id of a PoSt and its circuit without witness.
pub fn post_public_params<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
) -> Result<(String, PostCircuit<Tree>)> {
    let pub_params = public_params::<Tree>(config, config.sector_count)?;
    let id =
        <FallbackPoStCompound<Tree> as CacheableParameters<PostCircuit<Tree>, _>>::cache_identifier(
            &pub_params.vanilla_params,
        );
    let blank = <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::blank_circuit(
        &pub_params.vanilla_params,
    );
    Ok((id, blank))
}

/// The PoSt parameters for `config` (see [`cached_parameters`]; files found are fully checked).
pub fn post_parameters<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
) -> Result<(Parameters, PathBuf)> {
    let (id, blank) = post_public_params::<Tree>(config)?;
    let cached = cached_parameters(&id, || Ok(blank), PointCheck::Checked, &())?;
    Ok((cached.params, cached.path))
}

/// The circuits of a PoSt, one per partition, with their public inputs.
pub fn post_circuits<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[FallbackPoStSectorProof<Tree>],
) -> Result<Vec<(PostCircuit<Tree>, Vec<blstrs::Scalar>)>> {
    if config.typ == PoStType::Window {
        ensure!(
            vanilla_proofs
                .windows(2)
                .all(|w| w[0].sector_id < w[1].sector_id),
            "WindowPoSt vanilla proofs must be in increasing sector-id order, the order in which \
             verify_window_post takes the sectors"
        );
    }
    let pub_params = public_params::<Tree>(config, vanilla_proofs.len())?;
    let randomness_safe: <Tree::Hasher as Hasher>::Domain =
        as_safe_commitment(randomness, "randomness")?;
    let prover_id_safe: <Tree::Hasher as Hasher>::Domain =
        as_safe_commitment(&prover_id, "prover_id")?;
    let pub_inputs = fallback::PublicInputs {
        randomness: randomness_safe,
        prover_id: prover_id_safe,
        sectors: vanilla_proofs
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect(),
        k: None,
    };
    let partitions = pub_params.partitions.unwrap_or(1);
    let partitioned = partition_vanilla_proofs(
        config,
        &pub_params.vanilla_params,
        &pub_inputs,
        partitions,
        vanilla_proofs,
    )?;
    partitioned
        .iter()
        .enumerate()
        .map(|(k, proof)| {
            let circuit = <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::circuit(
                &pub_inputs,
                Default::default(),
                proof,
                &pub_params.vanilla_params,
                Some(k),
            )?;
            let inputs =
                <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::generate_public_inputs(
                    &pub_inputs,
                    &pub_params.vanilla_params,
                    Some(k),
                )?;
            Ok((circuit, inputs))
        })
        .collect()
}

/// The vanilla proofs of `sectors` for a PoSt, made by filecoin-proofs (for WindowPoSt in
/// sector-id order, the order in which `verify_window_post` takes the sectors).
pub fn vanilla_proofs<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    sectors: &[(SectorId, PrivateReplicaInfo<Tree>)],
) -> Result<Vec<FallbackPoStSectorProof<Tree>>> {
    // The verifier takes WindowPoSt sectors as a map ordered by sector id: prove them in that
    // order.
    let mut sectors: Vec<&(SectorId, PrivateReplicaInfo<Tree>)> = sectors.iter().collect();
    if config.typ == PoStType::Window {
        sectors.sort_by_key(|s| s.0);
    }
    let ids: Vec<SectorId> = sectors.iter().map(|s| s.0).collect();
    let challenges =
        generate_fallback_sector_challenges::<Tree>(config, randomness, &ids, prover_id)?;
    sectors
        .iter()
        .map(|(id, replica)| {
            let c = challenges
                .get(id)
                .with_context(|| format!("no challenges for sector {id:?}"))?;
            generate_single_vanilla_proof::<Tree>(config, *id, replica, c)
        })
        .collect()
}

/// What [`prove_circuits`] gives back.
pub struct EngineRun {
    /// The partitions' proofs, in order.
    pub proofs: Vec<Proof>,
    /// The engine's figures (stage times and the rest).
    pub stats: prover_core::EngineStats,
    /// The ledger after the engine shut down (every peak; everything released).
    pub ledger: prover_core::accounting::ledger::Snapshot,
}

/// Proves `circuits` as one job through proofline's engine on the CPU backend with
/// `synthesis_workers` synthesis workers.
pub fn prove_circuits<C: Circuit<blstrs::Scalar> + Send + 'static>(
    circuits: Vec<C>,
    params: Arc<Parameters>,
    synthesis_workers: usize,
) -> Result<EngineRun> {
    prove_circuits_on(
        circuits,
        params,
        synthesis_workers,
        Arc::new(CpuBackend),
        None,
    )
}

/// Proves `circuits` as one job on `backend` (its first device), handing failed partitions to
/// `fallback` when there is one (without, a device failure fails the job).
pub fn prove_circuits_on<C: Circuit<blstrs::Scalar> + Send + 'static>(
    circuits: Vec<C>,
    params: Arc<Parameters>,
    synthesis_workers: usize,
    backend: Arc<dyn Accelerator>,
    fallback: Option<Arc<dyn Accelerator>>,
) -> Result<EngineRun> {
    ensure!(!circuits.is_empty(), "a job without partitions");
    let engine: Engine<C, CpuSynthesizer> = Engine::new(
        prover_core::Config {
            synthesis_workers,
            fallback,
            ..Default::default()
        },
        CpuSynthesizer,
        backend,
        Arc::new(CpuBackend),
    )?;
    let prepared = engine.prepare(params)?;
    let proofs = engine
        .submit(&prepared, circuits, &mut rand::thread_rng())?
        .wait();
    let stats = engine.stats();
    // The deallocation stage may still hold the last partition: snapshot after shutdown.
    let ledger = engine.ledger().clone();
    engine.shutdown();
    Ok(EngineRun {
        proofs: proofs?,
        stats,
        ledger: ledger.snapshot(),
    })
}

/// Proves a PoSt with proofline's engine (CPU backend): one engine partition per PoSt partition,
/// with the parameters from [`post_parameters`]. Returns the proof bytes in the layout
/// filecoin-proofs' verifiers take.
pub fn prove_post<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[FallbackPoStSectorProof<Tree>],
    params: Arc<Parameters>,
    synthesis_workers: usize,
) -> Result<Vec<u8>> {
    let run = prove_post_on::<Tree>(
        config,
        randomness,
        prover_id,
        vanilla_proofs,
        params,
        synthesis_workers,
        Arc::new(CpuBackend),
    )?;
    Ok(Proof::many_to_bytes(&run.proofs))
}

/// [`prove_post`] on `backend` with no fallback (a device failure is an error), returning the
/// engine's run: its proofs (in the order filecoin-proofs' verifiers take) and figures.
pub fn prove_post_on<Tree: 'static + MerkleTreeTrait>(
    config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[FallbackPoStSectorProof<Tree>],
    params: Arc<Parameters>,
    synthesis_workers: usize,
    backend: Arc<dyn Accelerator>,
) -> Result<EngineRun> {
    let circuits = post_circuits::<Tree>(config, randomness, prover_id, vanilla_proofs)?;
    let (circuits, _inputs): (Vec<_>, Vec<_>) = circuits.into_iter().unzip();
    prove_circuits_on(circuits, params, synthesis_workers, backend, None)
}
