//! What the filecoin test binaries share.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The test binary's parameter cache, set as `FIL_PROOFS_PARAMETER_CACHE` before filecoin-proofs
/// reads its settings: `<target>/tmp/<name>-params`, emptied when the binary starts and removed
/// when it exits (the shape tests generate about 16 GB there). A static is never dropped, so a
/// temporary directory held in one would outlive every run; a process killed before its exit
/// leaves this folder to the next run, which empties it first.
pub fn param_cache(name: &str) -> &'static Path {
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-params"));
        remove(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
        // SAFETY: `remove_at_exit` is an `extern "C" fn()` that neither unwinds (its errors are
        // printed) nor calls `exit`.
        let registered = unsafe { libc::atexit(remove_at_exit) };
        assert_eq!(registered, 0, "registering the parameter cache's removal");
        dir
    })
}

extern "C" fn remove_at_exit() {
    if let Some(dir) = DIR.get() {
        let _ = std::panic::catch_unwind(|| remove(dir));
    }
}

fn remove(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => eprintln!("warning: removing {}: {e}", dir.display()),
    }
}
