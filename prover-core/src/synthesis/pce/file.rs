//! The file that caches recorded matrices beside the parameters: a header with the shape and a
//! checksum, the matrices, then the constraint names (read only when a constraint must be
//! named). A file that does not match its header, its checksum or the circuit is an error, never
//! a wrong proof.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use blstrs::Scalar;
use ff::PrimeField;

use super::matrices::{Matrices, SparseMatrix};
use super::names::Names;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"PLPCE001";
/// Header: the magic, then ten u64 (see [`Header`]).
const HEADER_BYTES: u64 = 8 + 10 * 8;

/// The file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    inputs: u64,
    aux: u64,
    constraints: u64,
    table: u64,
    nnz: [u64; 3],
    names: u64,
    names_blob: u64,
    checksum: u64,
}

impl Header {
    fn of(m: &Matrices, names: &Names, checksum: u64) -> Self {
        Header {
            inputs: m.inputs as u64,
            aux: m.aux as u64,
            constraints: m.constraints() as u64,
            table: m.table.len() as u64,
            nnz: [m.a.nonzeros(), m.b.nonzeros(), m.c.nonzeros()].map(|n| n as u64),
            names: names.len() as u64,
            names_blob: names.blob.len() as u64,
            checksum,
        }
    }

    /// Bytes of the matrices section (table and three matrices).
    fn matrices_bytes(&self) -> Option<u64> {
        let rows = (self.constraints.checked_add(1)?).checked_mul(8 * 3)?;
        let entries = self.nnz.iter().try_fold(0u64, |a, n| a.checked_add(*n))?;
        self.table
            .checked_mul(32)?
            .checked_add(rows)?
            .checked_add(entries.checked_mul(8)?)
    }

    /// Bytes of the whole file.
    fn file_bytes(&self) -> Option<u64> {
        HEADER_BYTES
            .checked_add(self.matrices_bytes()?)?
            .checked_add(self.names.checked_mul(8)?)?
            .checked_add(self.names_blob)
    }
}

/// A running checksum over 64-bit words (not cryptographic: it catches damage, not forgery).
#[derive(Clone, Copy)]
struct Checksum(u64);

impl Checksum {
    fn new() -> Self {
        Checksum(0x9e37_79b9_7f4a_7c15)
    }

    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(0x0100_0000_01b3_0001);
    }
}

/// The checksum of the sizes and the matrices section (every header word but the names' sizes,
/// which the file's length and the constraint count check).
fn checksum(m: &Matrices) -> u64 {
    let mut h = Checksum::new();
    for w in [
        m.inputs,
        m.aux,
        m.constraints(),
        m.table.len(),
        m.a.nonzeros(),
        m.b.nonzeros(),
        m.c.nonzeros(),
    ] {
        h.word(w as u64);
    }
    for s in &m.table {
        for chunk in s.to_repr().chunks_exact(8) {
            h.word(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
    }
    for x in [&m.a, &m.b, &m.c] {
        x.starts.iter().for_each(|&s| h.word(s));
        x.cols.iter().for_each(|&c| h.word(c as u64));
        x.codes.iter().for_each(|&k| h.word(k as u64 | 1 << 40));
    }
    h.0
}

fn put<W: Write>(w: &mut W, bytes: impl Iterator<Item = u8>, path: &Path) -> Result<()> {
    let mut buf = Vec::with_capacity(1 << 20);
    for b in bytes {
        buf.push(b);
        if buf.len() == buf.capacity() {
            w.write_all(&buf).map_err(|e| io(path, "write", e))?;
            buf.clear();
        }
    }
    w.write_all(&buf).map_err(|e| io(path, "write", e))
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::io(
        format!("pre-compiled constraints {}: {what}", path.display()),
        e,
    )
}

/// Writes `m` and `names` to `path` (through a temporary file beside it, renamed when complete,
/// so a reader never sees half a file).
pub fn save(path: &Path, m: &Matrices, names: &Names) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp.{}", path.display(), std::process::id()));
    let result = (|| {
        let f = File::create(&tmp).map_err(|e| io(&tmp, "create", e))?;
        let mut w = BufWriter::new(f);
        let h = Header::of(m, names, checksum(m));
        let words = [
            h.inputs,
            h.aux,
            h.constraints,
            h.table,
            h.nnz[0],
            h.nnz[1],
            h.nnz[2],
            h.names,
            h.names_blob,
            h.checksum,
        ];
        w.write_all(MAGIC).map_err(|e| io(&tmp, "write", e))?;
        put(&mut w, words.iter().flat_map(|x| x.to_le_bytes()), &tmp)?;
        put(&mut w, m.table.iter().flat_map(|s| s.to_repr()), &tmp)?;
        for x in [&m.a, &m.b, &m.c] {
            put(&mut w, x.starts.iter().flat_map(|s| s.to_le_bytes()), &tmp)?;
            put(&mut w, x.cols.iter().flat_map(|c| c.to_le_bytes()), &tmp)?;
            put(&mut w, x.codes.iter().flat_map(|k| k.to_le_bytes()), &tmp)?;
        }
        put(
            &mut w,
            names.ends.iter().flat_map(|e| e.to_le_bytes()),
            &tmp,
        )?;
        w.write_all(&names.blob).map_err(|e| io(&tmp, "write", e))?;
        let f = w
            .into_inner()
            .map_err(|e| io(&tmp, "write", e.into_error()))?;
        f.sync_all().map_err(|e| io(&tmp, "sync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| io(path, "rename", e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn malformed(path: &Path, detail: impl Into<String>) -> Error {
    Error::Malformed {
        what: "pre-compiled constraints file",
        detail: format!(
            "{}: {} (delete it to have it recorded again)",
            path.display(),
            detail.into()
        ),
    }
}

fn read_words<R: Read, T>(
    r: &mut R,
    n: u64,
    width: usize,
    parse: impl Fn(&[u8]) -> T,
    path: &Path,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(n as usize);
    let mut buf = vec![0u8; width << 16];
    let mut left = n as usize;
    while left > 0 {
        let k = left.min(1 << 16);
        let bytes = &mut buf[..k * width];
        r.read_exact(bytes).map_err(|e| io(path, "read", e))?;
        out.extend(bytes.chunks_exact(width).map(&parse));
        left -= k;
    }
    Ok(out)
}

fn u64_le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().expect("4 bytes"))
}

/// Where the names of a loaded file are, to read one when needed.
#[derive(Debug, Clone)]
pub struct NamesInFile {
    path: PathBuf,
    offset: u64,
    count: u64,
}

impl NamesInFile {
    /// The name of constraint `i` (read from the file), if it can be read.
    pub fn get(&self, i: usize) -> Option<String> {
        let i = i as u64;
        if i >= self.count {
            return None;
        }
        let mut f = crate::files::open_regular_file(&self.path).ok()?;
        let ends_at = self.offset;
        let read_end = |f: &mut File, k: u64| -> Option<u64> {
            f.seek(SeekFrom::Start(ends_at + 8 * k)).ok()?;
            let mut b = [0u8; 8];
            f.read_exact(&mut b).ok()?;
            Some(u64::from_le_bytes(b))
        };
        let start = if i == 0 { 0 } else { read_end(&mut f, i - 1)? };
        let end = read_end(&mut f, i)?;
        let len = end.checked_sub(start).filter(|l| *l <= 1 << 20)?;
        f.seek(SeekFrom::Start(ends_at + 8 * self.count + start))
            .ok()?;
        let mut name = vec![0u8; len as usize];
        f.read_exact(&mut name).ok()?;
        Some(String::from_utf8_lossy(&name).into_owned())
    }
}

/// Reads the matrices of `path`, checked against its header and checksum; the names stay in the
/// file.
pub fn load(path: &Path) -> Result<(Matrices, NamesInFile)> {
    let f = crate::files::open_regular_file(path)?;
    let len = f.metadata().map_err(|e| io(path, "stat", e))?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| malformed(path, "shorter than its header"))?;
    if &magic != MAGIC {
        return Err(malformed(
            path,
            "not a proofline pre-compiled constraints file (v1)",
        ));
    }
    let w = read_words(&mut r, 10, 8, u64_le, path)
        .map_err(|_| malformed(path, "shorter than its header"))?;
    let h = Header {
        inputs: w[0],
        aux: w[1],
        constraints: w[2],
        table: w[3],
        nnz: [w[4], w[5], w[6]],
        names: w[7],
        names_blob: w[8],
        checksum: w[9],
    };
    match h.file_bytes() {
        Some(described) if described == len => {}
        Some(described) => {
            return Err(malformed(
                path,
                format!("{len} bytes, but its header describes {described} bytes"),
            ))
        }
        None => {
            return Err(malformed(
                path,
                format!("{len} bytes, but its header describes more than 2^64 bytes"),
            ))
        }
    }
    if h.names != h.constraints
        || h.inputs
            .checked_add(h.aux)
            .map_or(true, |v| v > u32::MAX as u64)
    {
        return Err(malformed(path, "its header's counts disagree"));
    }
    let reprs: Vec<[u8; 32]> = read_words(
        &mut r,
        h.table,
        32,
        |b| b.try_into().expect("32 bytes"),
        path,
    )?;
    let mut table = Vec::with_capacity(reprs.len());
    for repr in reprs {
        let s = Option::<Scalar>::from(Scalar::from_repr(repr))
            .ok_or_else(|| malformed(path, "a coefficient is not a canonical field element"))?;
        table.push(s);
    }
    let mut matrix = |nnz: u64| -> Result<SparseMatrix> {
        Ok(SparseMatrix {
            starts: read_words(&mut r, h.constraints + 1, 8, u64_le, path)?,
            cols: read_words(&mut r, nnz, 4, u32_le, path)?,
            codes: read_words(&mut r, nnz, 4, u32_le, path)?,
        })
    };
    let (a, b, c) = (matrix(h.nnz[0])?, matrix(h.nnz[1])?, matrix(h.nnz[2])?);
    let m = Matrices {
        inputs: h.inputs as usize,
        aux: h.aux as usize,
        a,
        b,
        c,
        table,
    };
    if checksum(&m) != h.checksum {
        return Err(malformed(
            path,
            "its checksum does not match: the file is damaged",
        ));
    }
    if !m.is_well_formed() {
        return Err(malformed(path, "a row or an entry is out of range"));
    }
    let names = NamesInFile {
        path: path.to_path_buf(),
        offset: HEADER_BYTES + h.matrices_bytes().expect("checked above"),
        count: h.names,
    };
    Ok((m, names))
}
