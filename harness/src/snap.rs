//! SnapDeals: `proofline filecoin snap` (a sealed sector updated with new data through
//! filecoin-proofs, its vanilla partition proofs written as Curio sends them) and `proofline
//! snap-prove` (the update's SNARK through the engine, checked by filecoin-proofs'
//! `verify_empty_sector_update_proof` before it is written).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use proofline_filecoin::porep::field_bytes;
use proofline_filecoin::shape::{size_name, Shape};
use proofline_filecoin::snap::{self, Updated};
use proofline_filecoin::variant::{SealSpec, SealVariant};
use proofline_filecoin::with_tree;

use crate::commands::{print_outcome, say_parameters, verify_then_write};
use crate::config::RunConfig;
use crate::filecoin::Job;
use crate::params_cache::Bar;
use crate::point::{run_jobs, Prepared};
use crate::preflight::RunFiles;
use crate::say;
use crate::units::parse_pw;
use crate::workloads::{Workload, WorkloadCircuit};

/// `proofline snap-prove`'s options.
#[derive(clap::Args, Debug)]
pub struct SnapProveArgs {
    /// The update's folder: snap.json and vanilla-<k>.bin (what `filecoin snap` writes).
    #[arg(long)]
    pub dir: PathBuf,
    /// Where to write the proof (the partitions' 192-byte proofs, concatenated: the bytes
    /// verify_empty_sector_update_proof takes).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Synthesis workers.
    #[arg(long, default_value_t = 1, value_parser = parse_pw)]
    pub pw: usize,
    /// How the parameter file is read.
    #[command(flatten)]
    pub params: crate::commands::ParamsLoad,
    /// The engine options.
    #[command(flatten)]
    pub run: RunConfig,
}

/// `proofline filecoin snap`: a sector of random data sealed (pre-commit) and updated with new
/// random data; the update's files written to `out`.
pub fn snap(sector_size: u64, out: &Path, force: bool) -> anyhow::Result<()> {
    // The size first: nothing is sealed for an update that cannot be made.
    snap::update_config(sector_size)?;
    let _claim = crate::outputs::claim_folder("--out", out, false).map_err(anyhow::Error::msg)?;
    let sector_dir = out.join("sector");
    if out.join("snap.json").exists() || sector_dir.exists() {
        anyhow::ensure!(
            force,
            "{} holds an update already: pass --force to replace it, or give another --out",
            out.display()
        );
        if sector_dir.is_dir() {
            std::fs::remove_dir_all(&sector_dir)
                .with_context(|| format!("removing {}", sector_dir.display()))?;
        }
    }
    let t = Instant::now();
    let mut rng = rand::thread_rng();
    let spec = SealSpec::new(sector_size, SealVariant::V1_1, None)?;
    let config = spec.config()?;
    let prover_id = field_bytes(&mut rng);
    let sealed = with_tree!(spec.shape(), Tree => proofline_filecoin::seal::seal_sector::<Tree>(
        &config, &sector_dir, prover_id, &mut rng
    ))?;
    let updated = snap::update_sector(&sealed, sector_size, &sector_dir, &mut rng)?;
    snap::write_update(out, &updated)?;
    say!(
        "sealed and updated a {} sector (tree shape {}) in {:.1} s: {} vanilla partition proofs",
        size_name(sector_size),
        spec.shape().name(),
        t.elapsed().as_secs_f64(),
        updated.vanilla_proofs.len()
    );
    say!(
        "  {}  sizes, commitments; vanilla-<k>.bin: one bincode PartitionProof per partition",
        out.join("snap.json").display()
    );
    Ok(())
}

/// `proofline snap-prove`: the update's files read and checked, the partitions proven
/// through the engine, the proof checked by filecoin-proofs and written.
pub fn snap_prove(args: SnapProveArgs) -> anyhow::Result<()> {
    let cfg = RunConfig {
        circuit: Workload::Porep2k,
        partitions: 1,
        jobs: 1,
        ..args.run.clone().normalized()
    };
    let info_path = args.dir.join("snap.json");
    let mut files = RunFiles {
        inputs: vec![info_path.as_path()],
        ..RunFiles::default()
    };
    if let Some(out) = &args.out {
        files.outputs.push(("--out", out));
    }
    crate::preflight::check(&cfg, &files)?;
    let Updated {
        info,
        vanilla_proofs,
    } = snap::read_update(&args.dir)?;
    let size = info.sector_size;
    let commitments = info.commitments()?;
    let circuits = snap::circuits(size, &commitments, &vanilla_proofs)?;
    // The vanilla proofs' bincode bytes, held until the job ends.
    let input_bytes = vanilla_proofs.iter().map(|p| p.len() as u64).sum();
    let partitions = circuits.len();
    say!(
        "SnapDeals update proof of a {} sector ({}, tree shape {}, {partitions} partitions) from {}",
        size_name(size),
        info.update_proof
            .map_or("test size".to_string(), |p| format!("{p:?}")),
        Shape::of(size)?.name(),
        args.dir.display()
    );
    let t = Instant::now();
    let bar = Bar::new("snap", true);
    let cached = snap::update_parameters(size, args.params.load(), &bar)?;
    bar.finish(format!("{}", cached.path.display()));
    say_parameters(&cached);
    let (circuits, inputs) = circuits
        .into_iter()
        .map(|(c, x)| (WorkloadCircuit::Update(Box::new(c)), x))
        .unzip();
    let prepared = Prepared {
        params: cached.params,
        params_load_seconds: t.elapsed().as_secs_f64(),
        params_path: cached.path.clone(),
        jobs: vec![Job {
            circuits,
            inputs,
            seal: None,
            input_bytes,
        }],
    };
    let cfg = RunConfig { partitions, ..cfg };
    let (o, mut proofs) = run_jobs(&cfg, args.pw, prepared, &mut |_, _| {})?;
    print_outcome(&o);
    let proofs = proofs.pop().context("one job")??;
    let bytes = prover_core::Proof::many_to_bytes(&proofs);
    verify_then_write(
        "verify_empty_sector_update_proof",
        &bytes,
        args.out.as_deref(),
        |b| snap::verify_update(size, &commitments, b),
    )
}
