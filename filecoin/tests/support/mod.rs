//! What the filecoin test binaries share.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The test binary's parameter cache, set as `FIL_PROOFS_PARAMETER_CACHE` before filecoin-proofs
/// reads its settings: `<target>/tmp/<name>-params`, emptied when the binary starts. A static
/// is never dropped, so a temporary directory here would outlive every run (gigabytes each); one
/// fixed folder under the target directory is bounded instead, and goes with `cargo clean`.
pub fn param_cache(name: &str) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-params"));
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("emptying {}: {e}", dir.display()),
        }
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
        dir
    })
}
