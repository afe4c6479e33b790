//! A store's payload files: one per queued or running job (`<job id>.bin`), written and synced
//! before the row that points at it, removed when the job ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{hex, io, now_ms, JobRecord, Result};

/// The directory of a store's payload files.
pub(super) struct Payloads {
    dir: PathBuf,
}

impl Payloads {
    /// The directory `dir`, created if missing.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        Ok(Payloads {
            dir: dir.to_path_buf(),
        })
    }

    /// A new job id: the time, the payload digest's first bytes, a counter (unique in a
    /// process) and a random part (unique across the servers sharing a blob directory).
    pub fn new_id(&self, digest: &[u8; 32]) -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let salt: u32 = rand::random();
        format!("{}-{}-{n}-{salt:08x}", now_ms(), hex(&digest[..6]))
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.bin"))
    }

    /// Writes `id`'s payload and syncs it (through a temporary file, renamed).
    pub fn write(&self, id: &str, payload: &[u8]) -> Result<()> {
        use std::io::Write;
        let path = self.path(id);
        let tmp = path.with_extension("tmp");
        {
            let mut f =
                std::fs::File::create(&tmp).map_err(io(format!("creating {}", tmp.display())))?;
            f.write_all(payload)
                .and_then(|()| f.sync_all())
                .map_err(io(format!("writing {}", tmp.display())))?;
        }
        std::fs::rename(&tmp, &path).map_err(io(format!("renaming {}", path.display())))
    }

    /// Reads `id`'s payload.
    pub fn read(&self, id: &str) -> Result<Vec<u8>> {
        let path = self.path(id);
        std::fs::read(&path).map_err(io(format!("reading {}", path.display())))
    }

    /// The payload of `job` while it has not ended (an ended job's is gone).
    pub fn of_live(&self, job: Option<JobRecord>) -> Result<Option<Vec<u8>>> {
        match job {
            Some(j) if !j.state.is_final() => self.read(&j.id).map(Some),
            _ => Ok(None),
        }
    }

    /// Removes `id`'s payload; one already gone (a purge racing an end) is not an error.
    pub fn remove(&self, id: &str) {
        let _ = std::fs::remove_file(self.path(id));
    }
}
