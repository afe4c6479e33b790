//! The program binary cache of both APIs: building the kernels takes seconds on POCL, most of
//! two minutes on NVIDIA's OpenCL and minutes through NVRTC (one CUBIN per kernel), so each
//! built program is kept on disk under a key the API crate makes (the source's or the unit's
//! digest with the platform, device or architecture, and driver or compiler version).
//!
//! Each file is an entry: a header with the name it was stored under (`{api}-{key}`), the
//! binary's length and its SHA-256, then the binary. Loading checks all three, so a damaged,
//! truncated or foreign file, one copied from another key, or one of an older cache (a bare
//! binary) is a miss, reported on stderr with the file and what was wrong: the caller builds
//! the program again and stores it over.
//!
//! Location: `$PROOFLINE_KERNEL_CACHE`, else `$XDG_CACHE_HOME/proofline/kernels`, else
//! `$HOME/.cache/proofline/kernels` ([`folder`], from a lookup the binary gives); [`KernelCache::new`]
//! takes any folder. Deleting the folder clears it.

use std::fmt;
use std::path::{Path, PathBuf};

use prover_core::files::InputKind;
use sha2::{Digest, Sha256};

/// The environment variable naming the cache folder.
pub const CACHE_VAR: &str = "PROOFLINE_KERNEL_CACHE";

/// The first bytes of every entry (the last one is the format's version).
const MAGIC: &[u8; 8] = b"PLKCACH\x01";

/// Header bytes before the name: the magic, the name's length (u32), the binary's length (u64)
/// and its SHA-256.
const HEADER: usize = MAGIC.len() + 4 + 8 + 32;

/// The cache folder the environment names, if one can be named: `lookup` gives a variable's
/// value by name (`None` when unset); an empty value counts as unset.
pub fn folder(lookup: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |k| lookup(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(CACHE_VAR)
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("proofline/kernels")))
        .or_else(|| var("HOME").map(|p| p.join(".cache/proofline/kernels")))
}

/// Why a cache file is not the entry its name promises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It does not start with an entry's header: an older cache's bare binary, or another
    /// program's file.
    NotAnEntry,
    /// It ends before its header, its name or its binary does.
    Truncated {
        /// Bytes the header says the file has (or the header's own size).
        stated: u64,
        /// Bytes it has.
        found: u64,
    },
    /// It has bytes after its binary.
    Trailing {
        /// Bytes the header says the file has.
        stated: u64,
        /// Bytes it has.
        found: u64,
    },
    /// It was stored under another name (a file copied or renamed).
    OtherKey {
        /// The name it was stored under.
        stored: String,
    },
    /// The binary's SHA-256 is not the one stored with it (damaged).
    Digest,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotAnEntry => write!(
                f,
                "not a cache entry (no header: an older cache's file, or another program's)"
            ),
            Refusal::Truncated { stated, found } => {
                write!(f, "truncated: {found} bytes of {stated}")
            }
            Refusal::Trailing { stated, found } => {
                write!(f, "{found} bytes where its header says {stated}")
            }
            Refusal::OtherKey { stored } => write!(f, "stored under another key ({stored})"),
            Refusal::Digest => write!(f, "damaged: the binary's SHA-256 differs from its header's"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Why [`KernelCache::fetch`] found no binary.
#[derive(Debug)]
pub enum Miss {
    /// No file at the key.
    Absent,
    /// A file that could not be read (not a regular file, too large, an I/O error); the error
    /// names the file.
    Unreadable(prover_core::Error),
    /// A file that is not the entry its name promises.
    Refused(Refusal),
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Miss::Absent => write!(f, "no entry"),
            Miss::Unreadable(e) => e.fmt(f),
            Miss::Refused(r) => r.fmt(f),
        }
    }
}

/// The entry of `binary` stored under `name`: the header, the name, the binary.
pub fn encode(name: &str, binary: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + name.len() + binary.len());
    out.extend_from_slice(MAGIC);
    // A name is a key the API crate makes (a hex digest and the API): far below 4 GiB.
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&(binary.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(binary));
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(binary);
    out
}

/// The binary of `entry` if it is a whole, undamaged entry stored under `name`.
pub fn decode<'a>(name: &str, entry: &'a [u8]) -> Result<&'a [u8], Refusal> {
    let found = entry.len() as u64;
    if !entry.starts_with(MAGIC) {
        // A file shorter than the magic that is its start is a cut entry, not a foreign file.
        return Err(if !entry.is_empty() && MAGIC.starts_with(entry) {
            Refusal::Truncated {
                stated: HEADER as u64,
                found,
            }
        } else {
            Refusal::NotAnEntry
        });
    }
    let Some(header) = entry.get(..HEADER) else {
        return Err(Refusal::Truncated {
            stated: HEADER as u64,
            found,
        });
    };
    let (lengths, digest) = header[MAGIC.len()..].split_at(12);
    let (name_len, binary_len) = lengths.split_at(4);
    let mut name_len_le = [0u8; 4];
    name_len_le.copy_from_slice(name_len);
    let mut binary_len_le = [0u8; 8];
    binary_len_le.copy_from_slice(binary_len);
    let name_len = u32::from_le_bytes(name_len_le) as usize;
    let binary_len = u64::from_le_bytes(binary_len_le);
    // Lengths from the file are not trusted: their sum may overflow (then no file is as long).
    let stated = (HEADER as u64 + name_len as u64).saturating_add(binary_len);
    let Some(stored) = entry[HEADER..].get(..name_len) else {
        return Err(Refusal::Truncated { stated, found });
    };
    if stored != name.as_bytes() {
        return Err(Refusal::OtherKey {
            stored: String::from_utf8_lossy(stored).into_owned(),
        });
    }
    if found < stated {
        return Err(Refusal::Truncated { stated, found });
    }
    if found > stated {
        return Err(Refusal::Trailing { stated, found });
    }
    let binary = &entry[HEADER + stored.len()..];
    if Sha256::digest(binary).as_slice() != digest {
        return Err(Refusal::Digest);
    }
    Ok(binary)
}

/// A program binary cache in one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCache {
    folder: PathBuf,
}

impl KernelCache {
    /// The cache in `folder` (made when the first binary is stored).
    pub fn new(folder: impl Into<PathBuf>) -> Self {
        KernelCache {
            folder: folder.into(),
        }
    }

    /// Its folder.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The name an entry of `api` for `key` is stored under (its file's stem).
    fn name(api: &str, key: &str) -> String {
        format!("{api}-{key}")
    }

    /// Where the binary of `api` (`opencl`, `cuda`) for `key` is kept.
    pub fn path(&self, api: &str, key: &str) -> PathBuf {
        self.folder.join(format!("{}.bin", Self::name(api, key)))
    }

    /// The cached binary of `api` for `key`, or why there is none.
    pub fn fetch(&self, api: &str, key: &str) -> Result<Vec<u8>, Miss> {
        let path = self.path(api, key);
        let entry = match prover_core::files::read_input(&path, InputKind::KernelBinary) {
            Ok(entry) => entry,
            Err(prover_core::Error::Io { error, .. })
                if error.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(Miss::Absent)
            }
            Err(e) => return Err(Miss::Unreadable(e)),
        };
        decode(&Self::name(api, key), &entry)
            .map(<[u8]>::to_vec)
            .map_err(Miss::Refused)
    }

    /// The cached binary of `api` for `key`, if there is a sound one. A file that is not (see
    /// [`Refusal`]) or cannot be read is reported on stderr, naming it and what was wrong, and
    /// is a miss: the caller builds the program and stores it over.
    pub fn load(&self, api: &str, key: &str) -> Option<Vec<u8>> {
        match self.fetch(api, key) {
            Ok(binary) => Some(binary),
            Err(Miss::Absent) => None,
            Err(miss) => {
                eprintln!(
                    "warning: the {api} program cache file {} is not used ({miss}); building \
                     the program again",
                    self.path(api, key).display()
                );
                None
            }
        }
    }

    /// Stores `binary` under `key` (atomically: a reader never sees half a file). Failing to
    /// store is not an error for the prover: it is reported and the next start builds again.
    pub fn store(&self, api: &str, key: &str, binary: &[u8]) {
        let path = self.path(api, key);
        let entry = encode(&Self::name(api, key), binary);
        let result = prover_core::files::create_dir_all(&self.folder).and_then(|()| {
            prover_core::groth16::params::write_atomically(&path, |w| {
                use std::io::Write;
                w.write_all(&entry)
                    .map_err(|e| prover_core::Error::io(format!("writing {}", path.display()), e))
            })
        });
        if let Err(e) = result {
            eprintln!("warning: the {api} program cache could not be written: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own under the system's temporary folder, removed when dropped.
    struct TempFolder(PathBuf);

    impl TempFolder {
        fn new(test: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "proofline-cache-{test}-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            ));
            TempFolder(p)
        }
    }

    impl Drop for TempFolder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn binary() -> Vec<u8> {
        (0..1000u32).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn stored_binaries_load_back_and_a_missing_one_is_absent() {
        let dir = TempFolder::new("roundtrip");
        let cache = KernelCache::new(&dir.0);
        assert!(matches!(cache.fetch("cuda", "k1"), Err(Miss::Absent)));
        assert_eq!(cache.load("cuda", "k1"), None);
        cache.store("cuda", "k1", &binary());
        assert_eq!(cache.load("cuda", "k1"), Some(binary()));
        assert!(cache.path("cuda", "k1").starts_with(&dir.0));
        // An empty binary round-trips too; another API's entry at the same key is not it.
        cache.store("opencl", "k2", &[]);
        assert_eq!(cache.load("opencl", "k2"), Some(Vec::new()));
        assert!(matches!(cache.fetch("cuda", "k2"), Err(Miss::Absent)));
    }

    #[test]
    fn damaged_truncated_moved_and_old_files_are_refused_and_stored_over() {
        let dir = TempFolder::new("refused");
        let cache = KernelCache::new(&dir.0);
        let path = cache.path("cuda", "k1");
        let refused = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            match cache.fetch("cuda", "k1") {
                Err(Miss::Refused(r)) => {
                    assert_eq!(cache.load("cuda", "k1"), None, "{r}");
                    r
                }
                other => panic!("not refused: {other:?}"),
            }
        };
        cache.store("cuda", "k1", &binary());
        let good = std::fs::read(&path).unwrap();
        assert_eq!(decode("cuda-k1", &good), Ok(&binary()[..]));

        // A flipped byte in the binary, in its digest, in its length.
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(refused(&flipped), Refusal::Digest);
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 12] ^= 0x80;
        assert_eq!(refused(&flipped), Refusal::Digest);
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 4] ^= 1;
        assert!(
            matches!(refused(&flipped), Refusal::Truncated { .. }),
            "a length one more"
        );
        // Truncated: in the binary, in the name, in the header, in the magic; and one byte more.
        for cut in [good.len() - 1, HEADER + 3, HEADER - 1, 3] {
            let r = refused(&good[..cut]);
            assert!(
                matches!(r, Refusal::Truncated { found, .. } if found == cut as u64),
                "{cut}: {r}"
            );
            assert!(r.to_string().starts_with("truncated"), "{r}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(refused(&longer), Refusal::Trailing { .. }));
        // An entry of another key (or API) copied to this one.
        cache.store("cuda", "k2", &binary());
        let other = std::fs::read(cache.path("cuda", "k2")).unwrap();
        assert_eq!(
            refused(&other),
            Refusal::OtherKey {
                stored: "cuda-k2".into()
            }
        );
        cache.store("opencl", "k1", &binary());
        let other = std::fs::read(cache.path("opencl", "k1")).unwrap();
        assert!(matches!(refused(&other), Refusal::OtherKey { .. }));
        // An older cache's file: the bare binary (an ELF image), and an empty file.
        let mut elf = b"\x7fELF".to_vec();
        elf.extend(binary());
        assert_eq!(refused(&elf), Refusal::NotAnEntry);
        assert_eq!(refused(&[]), Refusal::NotAnEntry);
        assert!(refused(&binary()).to_string().contains("older cache"));

        // Stored over, it loads again.
        cache.store("cuda", "k1", &binary());
        assert_eq!(cache.load("cuda", "k1"), Some(binary()));
    }

    #[test]
    fn lengths_from_a_file_cannot_overflow_or_panic() {
        let mut entry = encode("cuda-k1", b"abc");
        entry[MAGIC.len() + 4..MAGIC.len() + 12].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode("cuda-k1", &entry),
            Err(Refusal::Truncated {
                stated: u64::MAX,
                ..
            })
        ));
        let mut entry = encode("cuda-k1", b"abc");
        entry[MAGIC.len()..MAGIC.len() + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode("cuda-k1", &entry),
            Err(Refusal::Truncated { .. })
        ));
        // Twin: the entry as written decodes.
        assert_eq!(
            decode("cuda-k1", &encode("cuda-k1", b"abc")),
            Ok(&b"abc"[..])
        );
    }
}
