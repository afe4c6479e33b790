//! `--synthesis pce`: the workload's recorded matrices, from their cache file beside the
//! parameters (`<params-dir>/<parameter file name>.pce`), recorded there from the first
//! partition's circuit when missing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use prover_core::synthesis::pce::Origin;
use prover_core::{PceSynthesizer, Precompiled};

use crate::config::RunConfig;
use crate::workloads::WorkloadCircuit;

/// Where the matrices of the workload whose parameters are at `params_path` are cached.
pub fn cache_path(cfg: &RunConfig, params_path: &Path) -> PathBuf {
    let name = params_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "params".into());
    cfg.params_dir.join(format!("{name}.pce"))
}

/// The pre-compiled synthesizer of the workload, its matrices loaded or recorded from `circuit`
/// (any partition of the workload: the shape is what is recorded); says which on stderr.
pub fn synthesizer(
    cfg: &RunConfig,
    params_path: &Path,
    circuit: WorkloadCircuit,
) -> anyhow::Result<Arc<PceSynthesizer>> {
    let path = cache_path(cfg, params_path);
    prover_core::files::create_dir_all(&cfg.params_dir)?;
    let start = Instant::now();
    let (pce, origin) = Precompiled::load_or_record(&path, circuit)?;
    let m = pce.matrices();
    crate::tell!(
        "pre-compiled constraints {} in {:.1} s: {} constraints, {} nonzeros, {} coefficients in \
         the table, {:.1} MiB in memory ({:.1} bytes per nonzero) [{}]",
        match origin {
            Origin::Loaded => "loaded",
            Origin::Recorded => "recorded",
        },
        start.elapsed().as_secs_f64(),
        m.constraints(),
        m.nonzeros(),
        m.table_len(),
        pce.heap_bytes() as f64 / (1 << 20) as f64,
        m.bytes_per_nonzero(),
        path.display()
    );
    Ok(Arc::new(PceSynthesizer::new(Arc::new(pce))))
}
