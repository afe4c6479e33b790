//! The program binary cache of both APIs: building the kernels takes seconds on POCL, most of
//! two minutes on NVIDIA's OpenCL and minutes through NVRTC (one CUBIN per kernel), so each
//! built program is kept on disk under a key the API crate makes (the source's or the unit's
//! digest with the platform, device or architecture, and driver or compiler version). A
//! damaged or foreign file is rebuilt over.
//!
//! Location: `$PROOFLINE_KERNEL_CACHE`, else `$XDG_CACHE_HOME/proofline/kernels`, else
//! `$HOME/.cache/proofline/kernels`. Deleting the folder clears it.

use std::path::PathBuf;

/// The environment variable naming the cache folder.
pub const CACHE_VAR: &str = "PROOFLINE_KERNEL_CACHE";

/// The cache folder, if one can be named.
pub fn folder() -> Option<PathBuf> {
    let env = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env(CACHE_VAR)
        .or_else(|| env("XDG_CACHE_HOME").map(|p| p.join("proofline/kernels")))
        .or_else(|| env("HOME").map(|p| p.join(".cache/proofline/kernels")))
}

/// Where the binary of `api` (`opencl`, `cuda`) for `key` is kept.
pub fn path(api: &str, key: &str) -> Option<PathBuf> {
    Some(folder()?.join(format!("{api}-{key}.bin")))
}

/// The cached binary of `api` (`opencl`, `cuda`) for `key`, if there is one.
pub fn load(api: &str, key: &str) -> Option<Vec<u8>> {
    std::fs::read(path(api, key)?)
        .ok()
        .filter(|b| !b.is_empty())
}

/// Stores `binary` under `key` (atomically: a reader never sees half a file). Failing to
/// store is not an error for the prover: it is reported and the next start builds again.
pub fn store(api: &str, key: &str, binary: &[u8]) {
    let (Some(dir), Some(path)) = (folder(), path(api, key)) else {
        return;
    };
    let result = std::fs::create_dir_all(&dir)
        .map_err(|e| prover_core::Error::io(format!("creating {}", dir.display()), e))
        .and_then(|()| {
            prover_core::params::write_atomically(&path, |w| {
                use std::io::Write;
                w.write_all(binary)
                    .map_err(|e| prover_core::Error::io(format!("writing {}", path.display()), e))
            })
        });
    if let Err(e) = result {
        eprintln!("warning: the {api} program cache could not be written: {e}");
    }
}
