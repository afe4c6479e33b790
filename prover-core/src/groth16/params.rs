//! Groth16 verifying keys and proving parameters, in bellperson's byte layout.
//!
//! Layout (all points uncompressed, every count a u32 big-endian prefix):
//! `vk = alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2 |ic| ic*`,
//! `params = vk |h| h* |l| l* |a| a* |b_g1| b_g1* |b_g2| b_g2*`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use blstrs::{G1Affine, G2Affine};

use crate::error::{Error, Result};
use crate::files::{open_regular_file, read_input, InputKind};
use crate::groth16::encoding::{
    write_point, write_points, PointCheck, ReadSource, SliceSource, Source,
};
use crate::groth16::points::Points;
use crate::write_behind::WriteBehind;

/// The Groth16 verifying key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKey {
    /// `alpha * G1`.
    pub alpha_g1: G1Affine,
    /// `beta * G1`.
    pub beta_g1: G1Affine,
    /// `beta * G2`.
    pub beta_g2: G2Affine,
    /// `gamma * G2`.
    pub gamma_g2: G2Affine,
    /// `delta * G1`.
    pub delta_g1: G1Affine,
    /// `delta * G2`.
    pub delta_g2: G2Affine,
    /// `(beta * u_i(tau) + alpha * v_i(tau) + w_i(tau)) / gamma * G1` for every public input
    /// `i`, the constant ONE first.
    pub ic: Vec<G1Affine>,
}

impl VerifyingKey {
    /// Number of public inputs a proof takes (without the implicit ONE).
    pub fn num_public_inputs(&self) -> usize {
        self.ic.len().saturating_sub(1)
    }

    /// Writes the key in bellperson's layout.
    pub fn write<W: Write>(&self, mut w: W) -> Result<()> {
        write_point(&mut w, "vk.alpha_g1", &self.alpha_g1)?;
        write_point(&mut w, "vk.beta_g1", &self.beta_g1)?;
        write_point(&mut w, "vk.beta_g2", &self.beta_g2)?;
        write_point(&mut w, "vk.gamma_g2", &self.gamma_g2)?;
        write_point(&mut w, "vk.delta_g1", &self.delta_g1)?;
        write_point(&mut w, "vk.delta_g2", &self.delta_g2)?;
        write_points(&mut w, "vk.ic", &self.ic)
    }

    /// Serializes the key to a byte vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out).expect("writing to a Vec cannot fail");
        out
    }

    /// Writes the key to a file (a Filecoin `.vk` file), through a temporary file renamed into
    /// place.
    pub fn write_file(&self, path: &Path) -> Result<()> {
        write_atomically(path, |w| self.write(w))
    }

    /// Reads a key from a stream.
    pub fn read<R: Read>(r: R, check: PointCheck) -> Result<Self> {
        Self::read_from(&mut ReadSource::new(r), check)
    }

    /// Reads a key that fills `bytes` exactly.
    pub fn from_bytes(bytes: &[u8], check: PointCheck) -> Result<Self> {
        let mut src = SliceSource::new(bytes);
        let vk = Self::read_from(&mut src, check)?;
        src.finish("verifying key")?;
        Ok(vk)
    }

    /// Reads a key file (for example a Filecoin `.vk` file); an error in its contents names
    /// the file ([`Error::InFile`]).
    pub fn read_file(path: &Path, check: PointCheck) -> Result<Self> {
        let bytes = read_input(path, InputKind::VerifyingKey)?;
        Self::from_bytes(&bytes, check).map_err(|e| e.in_file(path))
    }

    pub(crate) fn read_from<S: Source>(src: &mut S, check: PointCheck) -> Result<Self> {
        let vk = VerifyingKey {
            alpha_g1: src.point("vk.alpha_g1", check)?,
            beta_g1: src.point("vk.beta_g1", check)?,
            beta_g2: src.point("vk.beta_g2", check)?,
            gamma_g2: src.point("vk.gamma_g2", check)?,
            delta_g1: src.point("vk.delta_g1", check)?,
            delta_g2: src.point("vk.delta_g2", check)?,
            ic: src.points("vk.ic", check)?,
        };
        if vk.ic.is_empty() {
            return Err(Error::Malformed {
                what: "verifying key",
                detail: "ic is empty: it needs at least the entry for the constant ONE".into(),
            });
        }
        Ok(vk)
    }
}

/// The sizes of a proving key's queries: what a partition's shape is checked against, and all
/// that an MSM plan needs (a key whose bases live only on a device, such as a synthetic timing
/// workload's, has a shape and no host vectors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyShape {
    /// The evaluation domain (the H query's points plus one).
    pub domain: usize,
    /// Public inputs, ONE included (`vk.ic`).
    pub inputs: usize,
    /// L query points (one per aux variable).
    pub l: usize,
    /// A query points.
    pub a: usize,
    /// B query points in G1.
    pub b_g1: usize,
    /// B query points in G2.
    pub b_g2: usize,
}

/// Groth16 proving parameters: the verifying key and the five query vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameters {
    /// The verifying key.
    pub vk: VerifyingKey,
    /// `tau^i * t(tau) / delta * G1` for `i` in `0..domain - 1`: the H query (dense).
    pub h: Points<G1Affine>,
    /// `(beta * u_j(tau) + alpha * v_j(tau) + w_j(tau)) / delta * G1` for every aux
    /// variable `j`: the L query (dense; bellperson rejects unconstrained variables).
    pub l: Points<G1Affine>,
    /// `u_j(tau) * G1` for every input, then every aux variable with a nonzero A
    /// polynomial (points at infinity filtered out).
    pub a: Points<G1Affine>,
    /// `v_j(tau) * G1` for the inputs and aux variables with a nonzero B polynomial.
    pub b_g1: Points<G1Affine>,
    /// `v_j(tau) * G2`, the same variables as `b_g1`.
    pub b_g2: Points<G2Affine>,
}

impl Parameters {
    /// Writes the parameters in bellperson's layout.
    pub fn write<W: Write>(&self, mut w: W) -> Result<()> {
        self.vk.write(&mut w)?;
        write_points(&mut w, "params.h", &self.h)?;
        write_points(&mut w, "params.l", &self.l)?;
        write_points(&mut w, "params.a", &self.a)?;
        write_points(&mut w, "params.b_g1", &self.b_g1)?;
        write_points(&mut w, "params.b_g2", &self.b_g2)
    }

    /// Writes the parameters to a file, through a temporary file renamed into place (so that a
    /// reader never sees half a file, and concurrent writers of the same file do not collide).
    pub fn write_file(&self, path: &Path) -> Result<()> {
        write_atomically(path, |w| self.write(w))
    }

    /// Reads parameters from a stream, decoding points in parallel chunks.
    pub fn read<R: Read>(r: R, check: PointCheck) -> Result<Self> {
        Self::read_from(&mut ReadSource::new(r), check)
    }

    /// Reads parameters that fill `bytes` exactly.
    pub fn from_bytes(bytes: &[u8], check: PointCheck) -> Result<Self> {
        let mut src = SliceSource::new(bytes);
        let params = Self::read_from(&mut src, check)?;
        src.finish("parameters")?;
        Ok(params)
    }

    /// Reads a parameter file through a buffered stream of known length: length prefixes are
    /// checked against the file size before anything is allocated, points are decoded in
    /// parallel chunks, and only one chunk of the file is held at a time, so the resident set
    /// never holds the file and the decoded points at once (a memory map does, until it is
    /// dropped). An error in its contents names the file ([`Error::InFile`]).
    pub fn read_file(path: &Path, check: PointCheck) -> Result<Self> {
        let file = open_regular_file(path)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?
            .len();
        let mut src = ReadSource::with_len(std::io::BufReader::with_capacity(1 << 20, file), len);
        let params = Self::read_from(&mut src, check).map_err(|e| e.in_file(path))?;
        match src.left() {
            Some(0) | None => Ok(params),
            Some(extra) => Err(Error::TrailingBytes {
                what: "parameters",
                extra,
            }
            .in_file(path)),
        }
    }

    /// Reads a parameter file through a memory map: no copy of the file is held, length
    /// prefixes are checked against the file size before anything is allocated, and points are
    /// decoded in parallel. An error in its contents names the file ([`Error::InFile`]).
    pub fn read_mmap(path: &Path, check: PointCheck) -> Result<Self> {
        let file = open_regular_file(path)?;
        // SAFETY: the map is read-only and dropped before this function returns; a file truncated
        // underneath us by another process is outside what any reader can defend against.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| Error::io(format!("mapping {}", path.display()), e))?;
        Self::from_bytes(&map, check).map_err(|e| e.in_file(path))
    }

    fn read_from<S: Source>(src: &mut S, check: PointCheck) -> Result<Self> {
        Ok(Parameters {
            vk: VerifyingKey::read_from(src, check)?,
            h: src.points("params.h", check)?.into(),
            l: src.points("params.l", check)?.into(),
            a: src.points("params.a", check)?.into(),
            b_g1: src.points("params.b_g1", check)?.into(),
            b_g2: src.points("params.b_g2", check)?.into(),
        })
    }

    /// The evaluation domain size these parameters were made for (`h.len() + 1`).
    pub fn domain_size(&self) -> usize {
        self.h.len() + 1
    }

    /// The sizes a partition proven with these parameters must agree with.
    pub fn shape(&self) -> KeyShape {
        KeyShape {
            domain: self.domain_size(),
            inputs: self.vk.ic.len(),
            l: self.l.len(),
            a: self.a.len(),
            b_g1: self.b_g1.len(),
            b_g2: self.b_g2.len(),
        }
    }

    /// Bytes of the query vectors held in memory.
    /// (A native file's mapped queries count their mapped bytes.)
    pub fn heap_bytes(&self) -> usize {
        self.h.heap_bytes()
            + self.l.heap_bytes()
            + self.a.heap_bytes()
            + self.b_g1.heap_bytes()
            + self.b_g2.heap_bytes()
            + self.vk.ic.capacity() * std::mem::size_of::<G1Affine>()
    }
}

/// Whether the temporary file name `name` (`<file>.<pid>.<n>.tmp`, as [`write_atomically`] makes
/// them) belongs to `target`'s name and to a process that is no longer running. Without
/// `/proc` nothing is known to be dead, so nothing is removed.
fn stale_temporary(name: &str, target: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(target)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(".tmp"))
    else {
        return false;
    };
    let mut parts = rest.split('.');
    let (Some(pid), Some(n), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
        return false;
    };
    pid != std::process::id()
        && Path::new("/proc/self").exists()
        && !Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the temporary files that killed writers of `path` left behind (a parameter file's
/// is as large as the file); another live process's are left alone. Returns how many.
pub fn remove_stale_temporaries(path: &Path) -> usize {
    let (Some(dir), Some(target)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return 0;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_str().is_some_and(|n| stale_temporary(n, target))
            && std::fs::remove_file(entry.path()).is_ok()
        {
            tracing::info!(file = %entry.path().display(), "removed a stale temporary file");
            removed += 1;
        }
    }
    removed
}

/// The temporary files [`write_atomically`] is writing now, for [`remove_temporaries`].
static TEMPORARIES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A temporary file listed in [`TEMPORARIES`] while it is written.
struct Temporary(PathBuf);

impl Temporary {
    fn register(path: &Path) -> Self {
        let mut list = TEMPORARIES.lock().unwrap_or_else(|p| p.into_inner());
        list.push(path.to_path_buf());
        Temporary(path.to_path_buf())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let mut list = TEMPORARIES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = list.iter().position(|p| *p == self.0) {
            list.swap_remove(i);
        }
    }
}

/// Removes the temporary files this process's writers have open now (a process about to end on
/// a signal calls it, so that an interrupted run leaves no partial parameter file behind).
/// Returns how many were removed.
pub fn remove_temporaries() -> usize {
    let list = TEMPORARIES.lock().unwrap_or_else(|p| p.into_inner());
    list.iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// Writes a file through a buffered temporary file in the same folder, synced and renamed into
/// place, so that a reader never sees half a file and concurrent writers of the same file do not
/// collide; the temporary file is removed on error. The file goes to its disk while it is
/// written ([`WriteBehind`]), so the closing sync waits for its last few hundred MiB only.
pub fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<WriteBehind>) -> Result<T>,
) -> Result<T> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    remove_stale_temporaries(path);
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_os_string());
    let mut tmp_name = name;
    tmp_name.push(format!(".{}.{unique}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let ctx = |what: &str| format!("{what} {}", tmp.display());
    let file = std::fs::File::create(&tmp).map_err(|e| Error::io(ctx("creating"), e))?;
    let _registered = Temporary::register(&tmp);
    let mut w = std::io::BufWriter::with_capacity(1 << 20, WriteBehind::new(file));
    let finish = |w: std::io::BufWriter<WriteBehind>| -> Result<()> {
        let file = w
            .into_inner()
            .map_err(|e| Error::io(ctx("flushing"), e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(ctx("syncing"), e))?;
        std::fs::rename(&tmp, path)
            .map_err(|e| Error::io(format!("renaming into {}", path.display()), e))
    };
    let result = write(&mut w).and_then(|t| finish(w).map(|()| t));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
