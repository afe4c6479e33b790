//! The output policy every command follows: a file is written through a temporary file in its
//! own folder and renamed into place only when complete; a path that is an existing non-regular
//! file (a device, FIFO, socket or folder), or that is one of the run's inputs, is refused before
//! any work starts; an output folder is claimed atomically, so two runs never share one.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The lock file a run holds in its output folder while it writes there. It is created with
/// `create_new`, so of two runs started together on one folder exactly one gets it.
pub const LOCK_NAME: &str = ".proofline.lock";

/// Writes `bytes` to `path` through a temporary file renamed into place: a full disk or a kill
/// never leaves a half-written file under the real name, and the error names the file.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    prover_core::groth16::params::write_atomically(path, |w| {
        w.write_all(bytes)
            .map_err(|e| prover_core::Error::io(format!("writing {}", path.display()), e))
    })
    .map_err(|e| e.to_string())
}

/// Whether two paths name the same file (the same device and inode), following links.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Checks the path of an output file before any work: valid UTF-8 (results record their paths
/// as text), not an existing folder, device, FIFO or socket, not one of `inputs`, and in a
/// folder that exists and takes a new file (probed with an empty file, removed at once).
/// `what` names the option (`--out`, `--device-trace`) in the errors.
pub fn check_file(what: &str, path: &Path, inputs: &[&Path]) -> Result<(), String> {
    let shown = path.display();
    if path.to_str().is_none() {
        return Err(format!(
            "{what} {shown}: the path is not valid UTF-8; give a path in UTF-8"
        ));
    }
    if path.as_os_str().is_empty() || path.file_name().is_none() {
        return Err(format!("{what} {shown}: give the path of a file"));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(format!(
                "{what} {shown} is a folder: give the path of the file to write"
            ))
        }
        Ok(m) if !m.is_file() => {
            return Err(format!(
                "{what} {shown} exists and is not a regular file (a device, FIFO or socket): \
                 refusing to replace it"
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(describe(what, path, &e)),
    }
    for input in inputs {
        if same_file(path, input) || path == *input {
            return Err(format!(
                "{what} {shown} is the input {}: the output would replace it; give another path",
                input.display()
            ));
        }
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(format!(
                "{what} {shown}: {} is not a folder",
                parent.display()
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{what} {shown}: the folder {} does not exist",
                parent.display()
            ))
        }
        Err(e) => return Err(describe(what, parent, &e)),
    }
    probe_folder(what, parent)
}

/// Checks that `folder` takes a new file: an empty probe file is created there and removed.
fn probe_folder(what: &str, folder: &Path) -> Result<(), String> {
    let probe = folder.join(format!(".proofline-probe.{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "{what}: cannot write in {}: {}",
            folder.display(),
            reason(&e)
        )),
    }
}

/// An I/O error's reason, with the cases whose stock wording misleads said plainly.
pub use prover_core::error::io_reason as reason;

fn describe(what: &str, path: &Path, e: &std::io::Error) -> String {
    format!("{what} {}: {}", path.display(), reason(e))
}

/// An output folder held by this run: its lock file is removed when the claim is dropped.
#[derive(Debug)]
pub struct FolderClaim {
    folder: PathBuf,
}

impl FolderClaim {
    /// The claimed folder.
    pub fn path(&self) -> &Path {
        &self.folder
    }
}

impl Drop for FolderClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.folder.join(LOCK_NAME));
    }
}

/// Claims `folder` for this run: creates it if missing, then takes its lock file with
/// `create_new`. Another run holding the lock is refused by name; `empty` also refuses a folder
/// that holds anything besides the lock (a sweep never mixes its files with another's).
pub fn claim_folder(what: &str, folder: &Path, empty: bool) -> Result<FolderClaim, String> {
    if folder.to_str().is_none() {
        return Err(format!(
            "{what} {}: the path is not valid UTF-8; give a path in UTF-8",
            folder.display()
        ));
    }
    match std::fs::metadata(folder) {
        Ok(m) if !m.is_dir() => {
            return Err(format!(
                "{what} {} exists and is not a folder",
                folder.display()
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            prover_core::files::create_dir_all(folder).map_err(|e| e.to_string())?;
        }
        Err(e) => return Err(describe(what, folder, &e)),
    }
    let lock = folder.join(LOCK_NAME);
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let holder =
                prover_core::files::read_input_text(&lock, prover_core::files::InputKind::Document)
                    .unwrap_or_default();
            let holder = holder.trim();
            return Err(format!(
                "{what} {}: another run is writing there (its lock file {} names process {}); \
                 give another folder, or remove the lock file if that run is gone",
                folder.display(),
                lock.display(),
                if holder.is_empty() { "?" } else { holder }
            ));
        }
        Err(e) => {
            return Err(format!(
                "{what}: cannot write in {}: {}",
                folder.display(),
                reason(&e)
            ))
        }
    };
    let claim = FolderClaim {
        folder: folder.to_path_buf(),
    };
    file.write_all(format!("{}\n", std::process::id()).as_bytes())
        .map_err(|e| format!("writing {}: {}", lock.display(), reason(&e)))?;
    if empty {
        let entries = std::fs::read_dir(folder)
            .map_err(|e| format!("{what} {}: {}", folder.display(), reason(&e)))?;
        let other = entries
            .filter_map(Result::ok)
            .any(|e| e.file_name() != LOCK_NAME);
        if other {
            return Err(format!(
                "{what} {} is not empty: a sweep writes its own results.json, timelines and \
                 report there and would mix them with what is there; give a new or empty folder",
                folder.display()
            ));
        }
    }
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_is_an_input_or_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("c1.json");
        std::fs::write(&input, b"{}").unwrap();
        let e = check_file("--out", &input, &[&input]).unwrap_err();
        assert!(e.contains("is the input"), "{e}");
        // Another name for the same file (a hard link) is the same input.
        let link = dir.path().join("other.json");
        std::fs::hard_link(&input, &link).unwrap();
        assert!(check_file("--out", &link, &[&input]).is_err());
        // A new file beside it is fine; so is an existing regular file that is no input.
        check_file("--out", &dir.path().join("proof.bin"), &[&input]).unwrap();
        check_file("--out", &link, &[]).unwrap();
        let e = check_file("--out", Path::new("/dev/null"), &[]).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = check_file("--out", dir.path(), &[]).unwrap_err();
        assert!(e.contains("is a folder"), "{e}");
        let e = check_file("--out", &dir.path().join("no/such/x"), &[]).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn a_folder_is_claimed_by_one_run_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("sweep");
        let claim = claim_folder("--out", &out, true).unwrap();
        let e = claim_folder("--out", &out, true).unwrap_err();
        assert!(e.contains("another run"), "{e}");
        drop(claim);
        assert!(!out.join(LOCK_NAME).exists());
        // Released and still empty: claimed again; with a file in it, refused as not empty.
        let claim = claim_folder("--out", &out, true).unwrap();
        std::fs::write(out.join("results.json"), b"{}").unwrap();
        drop(claim);
        let e = claim_folder("--out", &out, true).unwrap_err();
        assert!(e.contains("not empty"), "{e}");
        assert!(!out.join(LOCK_NAME).exists());
        claim_folder("--out", &out, false).unwrap();
    }
}
