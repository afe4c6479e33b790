//! The one check `prove`, `sweep` and `c2` run before anything slow (loading or generating
//! parameters, sealing, proving): every option, every output path against the output policy
//! ([`crate::outputs`]) and the run's inputs, and the backend's devices.

use std::path::Path;

use crate::config::RunConfig;

/// What a run reads and writes, for [`check`].
#[derive(Default)]
pub struct RunFiles<'a> {
    /// Files the run reads (an output may not be one of them).
    pub inputs: Vec<&'a Path>,
    /// Files the run writes, each with the option that named it.
    pub outputs: Vec<(&'static str, &'a Path)>,
}

/// Checks `cfg` and `files`, then the backend's devices ([`crate::backend::preflight`]): an
/// error here costs the user seconds, not the minutes of parameter generation.
pub fn check(cfg: &RunConfig, files: &RunFiles) -> anyhow::Result<()> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    for (what, path) in &files.outputs {
        crate::outputs::check_file(what, path, &files.inputs).map_err(anyhow::Error::msg)?;
    }
    crate::backend::preflight(cfg)
}

/// The parameter file a dense workload reads (the Filecoin workloads' files are found by
/// filecoin-proofs' own cache): an input no output may replace.
pub fn parameter_file(cfg: &RunConfig) -> Option<std::path::PathBuf> {
    (!cfg.circuit.is_filecoin())
        .then(|| crate::params_cache::cache_path(&cfg.params_dir, &cfg.workload()))
}
