//! Where a store keeps its jobs' payloads, one blob per payload digest, never in a table row:
//! a directory (the embedded store's, or one shared by the servers of a PostgreSQL store) or an
//! S3-compatible object store. A blob is written whole before the row that points at it, and
//! goes when no job that has not ended still needs it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::on_thread::OnThread;
use super::{hex, io, Result, StoreError};

/// Where the blobs are.
#[derive(Clone, PartialEq, Eq)]
pub enum BlobLocation {
    /// A directory (created if missing): one file per blob, synced before it is used.
    Dir(PathBuf),
    /// An S3-compatible bucket: `s3://BUCKET[/PREFIX]`, with the `object_store` crate's S3
    /// options (`aws_endpoint`, `aws_region`, `aws_access_key_id`, `aws_secret_access_key`,
    /// `aws_allow_http`, ...).
    S3 {
        /// `s3://BUCKET[/PREFIX]`.
        url: String,
        /// Option name and value pairs.
        options: Vec<(String, String)>,
    },
}

/// The options' names only: their values may be credentials.
impl std::fmt::Debug for BlobLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlobLocation::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
            BlobLocation::S3 { url, options } => f
                .debug_struct("S3")
                .field("url", url)
                .field(
                    "options",
                    &options.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                )
                .finish(),
        }
    }
}

impl BlobLocation {
    /// The folder `name` of this location (a subdirectory, or a prefix in the bucket).
    pub fn child(&self, name: &str) -> BlobLocation {
        match self {
            BlobLocation::Dir(dir) => BlobLocation::Dir(dir.join(name)),
            BlobLocation::S3 { url, options } => BlobLocation::S3 {
                url: format!("{}/{name}", url.trim_end_matches('/')),
                options: options.clone(),
            },
        }
    }
}

impl std::fmt::Display for BlobLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlobLocation::Dir(dir) => write!(f, "the blob directory {}", dir.display()),
            BlobLocation::S3 { url, .. } => write!(f, "the blob store {url}"),
        }
    }
}

/// A blob's name: its payload digest in hex.
pub fn blob_key(digest: &[u8; 32]) -> String {
    format!("{}.bin", hex(digest))
}

/// The digest a blob's name holds (`None`: not a blob's name).
fn digest_of(key: &str) -> Option<[u8; 32]> {
    let hex = key.strip_suffix(".bin").filter(|h| h.len() == 64)?;
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// Offers `release` the digest of every blob last written before `before_ms` (milliseconds
/// since the epoch), for a store to remove those no job that has not ended needs: blobs no row
/// points at (a server died between a blob and its row), or whose removal failed when their
/// last job ended. A listing that fails is reported and left for the next sweep.
pub(super) fn sweep(blobs: &dyn Blobs, before_ms: u64, mut release: impl FnMut(&[u8; 32])) {
    let listed = match blobs.list() {
        Ok(listed) => listed,
        Err(e) => return eprintln!("warning: looking for payload blobs no job needs: {e}"),
    };
    for (key, _) in listed.iter().filter(|(_, written)| *written < before_ms) {
        if let Some(digest) = digest_of(key) {
            release(&digest);
        } else if key.ends_with(".tmp") {
            // A write that never finished (its server died).
            if let Err(e) = blobs.delete(key) {
                eprintln!("warning: removing an unfinished payload blob: {e}");
            }
        }
    }
}

/// The blob naming the job store whose payloads a location holds (not a payload's name, so a
/// sweep never takes it).
const OWNER_KEY: &str = "proofline-store";

/// Makes `blobs` the payload location of the store `store_id` (its database's own identity), or
/// refuses when it is another store's: two stores on one location would each remove the
/// other's payloads as blobs no job of theirs needs. A location without an owner (new, or
/// written before owners were kept) becomes this store's.
pub(super) fn claim_location(blobs: &dyn Blobs, store_id: &str) -> Result<()> {
    let owner = match blobs.get(OWNER_KEY)? {
        Some(owner) => Some(owner),
        None => {
            blobs.put(OWNER_KEY, Arc::new(store_id.as_bytes().to_vec()))?;
            // Read back: of two stores' servers claiming it at the same moment, the last write
            // won, and the other is refused below.
            blobs.get(OWNER_KEY)?
        }
    };
    match owner {
        Some(owner) if owner == store_id.as_bytes() => Ok(()),
        Some(owner) => Err(StoreError::Blob(format!(
            "{} holds the payloads of another job store ({}; this one is {store_id}): give each \
             database its own blob location (servers of one database share theirs)",
            blobs.location(),
            String::from_utf8_lossy(&owner).trim()
        ))),
        None => Err(StoreError::Blob(format!(
            "{}: the blob {OWNER_KEY} just written is not there",
            blobs.location()
        ))),
    }
}

/// Renames the payload files of an earlier layout (one per job, `<job id>.bin`) of the jobs
/// `live` (id and digest) to their digest's blob.
pub(super) fn adopt_job_files(blobs: &dyn Blobs, live: &[(String, [u8; 32])]) -> Result<()> {
    for (id, digest) in live {
        let old = format!("{id}.bin");
        if let Some(bytes) = blobs.get(&old)? {
            let key = blob_key(digest);
            if !blobs.exists(&key)? {
                blobs.put(&key, Arc::new(bytes))?;
            }
            blobs.delete(&old)?;
        }
    }
    Ok(())
}

/// A store of blobs by key.
pub trait Blobs: Send + Sync {
    /// Writes `key` whole (a reader sees all of it or none).
    fn put(&self, key: &str, bytes: Arc<Vec<u8>>) -> Result<()>;
    /// Reads `key`; `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// Whether `key` is there.
    fn exists(&self, key: &str) -> Result<bool>;
    /// Removes `key`; one already gone is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// Every blob's key, and when it was last written (milliseconds since the epoch).
    fn list(&self) -> Result<Vec<(String, u64)>>;
    /// Where they are, for messages.
    fn location(&self) -> &BlobLocation;
}

/// Opens the blobs at `location`.
pub fn open(location: &BlobLocation) -> Result<Box<dyn Blobs>> {
    Ok(match location {
        BlobLocation::Dir(dir) => Box::new(DirBlobs::open(dir)?),
        BlobLocation::S3 { .. } => Box::new(S3Blobs::open(location)?),
    })
}

/// Blobs as files of a directory.
struct DirBlobs {
    dir: PathBuf,
    location: BlobLocation,
}

impl DirBlobs {
    fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        Ok(DirBlobs {
            dir: dir.to_path_buf(),
            location: BlobLocation::Dir(dir.to_path_buf()),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }
}

impl Blobs for DirBlobs {
    fn put(&self, key: &str, bytes: Arc<Vec<u8>>) -> Result<()> {
        use std::io::Write;
        let path = self.path(key);
        // A temporary name of this writer's own, so that two servers writing one blob at once
        // each rename a whole file.
        let tmp = path.with_extension(format!("{:016x}.tmp", rand::random::<u64>()));
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            // The rename itself reaches the disk before the row that points at the blob.
            std::fs::File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io(format!("writing {}", path.display())))
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", path.display()))(e)),
        }
    }

    fn exists(&self, key: &str) -> Result<bool> {
        let path = self.path(key);
        path.try_exists()
            .map_err(io(format!("looking for {}", path.display())))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("removing {}", path.display()))(e))
            }
            _ => Ok(()),
        }
    }

    fn list(&self) -> Result<Vec<(String, u64)>> {
        let what = || format!("listing {}", self.dir.display());
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(io(what()))? {
            let entry = entry.map_err(io(what()))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // A blob removed since the listing began is no longer one.
            let Ok(written) = entry.metadata().and_then(|m| m.modified()) else {
                continue;
            };
            let ms = written
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            out.push((name, ms));
        }
        Ok(out)
    }

    fn location(&self) -> &BlobLocation {
        &self.location
    }
}

/// Blobs as objects of an S3-compatible bucket, through `object_store`, on a thread of their
/// own.
struct S3Blobs {
    store: OnThread<Arc<dyn ObjectStore>>,
    prefix: ObjectPath,
    location: BlobLocation,
}

/// How long one request to the object store may take.
const S3_TIMEOUT: &str = "120s";

impl S3Blobs {
    fn open(location: &BlobLocation) -> Result<Self> {
        let BlobLocation::S3 { url, options } = location else {
            unreachable!("S3Blobs::open is called with an S3 location");
        };
        let bad = |why: String| StoreError::Blob(format!("{location}: {why}"));
        let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if parsed.scheme() != "s3" || parsed.host_str().map_or(true, str::is_empty) {
            return Err(bad("expected s3://BUCKET[/PREFIX]".into()));
        }
        let mut options = options.clone();
        if !options.iter().any(|(k, _)| k == "timeout") {
            options.push(("timeout".into(), S3_TIMEOUT.into()));
        }
        let (store, prefix) =
            object_store::parse_url_opts(&parsed, options).map_err(|e| bad(e.to_string()))?;
        let store: Arc<dyn ObjectStore> = Arc::from(store);
        let store = OnThread::start(
            "proofline-blobs",
            "the blob store",
            move |_| Ok(store),
            |_, _| {},
        )?;
        let blobs = S3Blobs {
            store,
            prefix,
            location: location.clone(),
        };
        // A bucket that cannot be reached or is not there, or credentials it refuses, are an
        // error now rather than at the first job.
        let prefix = blobs.prefix.clone();
        let listed = blobs.store.run(move |rt, store| {
            // One page of the listing is enough to know.
            Ok(rt.block_on(async {
                use futures_util::StreamExt;
                match store.list(Some(&prefix)).next().await {
                    Some(Err(e)) => Err(e),
                    _ => Ok(()),
                }
            }))
        })?;
        listed.map_err(|e| bad(e.to_string()))?;
        Ok(blobs)
    }

    fn path(&self, key: &str) -> ObjectPath {
        self.prefix.child(key)
    }

    fn failed(&self, what: &str, key: &str, e: object_store::Error) -> StoreError {
        StoreError::Blob(format!("{}: {what} {key}: {e}", self.location))
    }
}

impl Blobs for S3Blobs {
    fn put(&self, key: &str, bytes: Arc<Vec<u8>>) -> Result<()> {
        let path = self.path(key);
        let put = self.store.run(move |rt, store| {
            let payload = PutPayload::from_bytes(bytes::Bytes::from_owner(OwnedBytes(bytes)));
            Ok(rt.block_on(store.put(&path, payload)).map(|_| ()))
        })?;
        put.map_err(|e| self.failed("writing", key, e))
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        let got = self.store.run(move |rt, store| {
            Ok(rt.block_on(async {
                match store.get(&path).await {
                    Ok(r) => r.bytes().await.map(|b| Some(b.to_vec())),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }))
        })?;
        got.map_err(|e| self.failed("reading", key, e))
    }

    fn exists(&self, key: &str) -> Result<bool> {
        let path = self.path(key);
        let found = self.store.run(move |rt, store| {
            Ok(match rt.block_on(store.head(&path)) {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            })
        })?;
        found.map_err(|e| self.failed("looking for", key, e))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        let deleted = self.store.run(move |rt, store| {
            Ok(match rt.block_on(store.delete(&path)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            })
        })?;
        deleted.map_err(|e| self.failed("removing", key, e))
    }

    fn list(&self) -> Result<Vec<(String, u64)>> {
        let prefix = self.prefix.clone();
        let listed = self
            .store
            .run(move |rt, store| Ok(rt.block_on(store.list_with_delimiter(Some(&prefix)))))?;
        let listed = listed.map_err(|e| self.failed("listing", "", e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let key = o.location.filename()?.to_string();
                Some((key, o.last_modified.timestamp_millis().max(0) as u64))
            })
            .collect())
    }

    fn location(&self) -> &BlobLocation {
        &self.location
    }
}

/// A payload shared with the caller, lent to the object store without a copy.
struct OwnedBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for OwnedBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
