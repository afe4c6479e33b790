//! Native parameter files: a parameter file's points in their in-memory representation, so that
//! a later load maps them instead of decoding them.
//!
//! Decoding a parameter file converts every coordinate into Montgomery form and checks every
//! point (at least its curve equation): about 1.4 s a GB on two cores, minutes for a 32 GiB
//! sector's files. A native file is written once, after a load of the source file with the
//! checks asked for, and holds the points exactly as they were in memory then. A later load
//! maps each query from it (private, copy-on-write) and checks each section's checksum
//! (xxh3, in parallel chunks), which runs at the speed of reading the page cache.
//!
//! The file is bound to its source: the header holds the source file's length, modification
//! time and inode, the point check that was applied, and the in-memory layout of this build's
//! points (sizes and the generators' bytes). A native file that does not match, is damaged or
//! is truncated is not used: the source is decoded again and the native file rewritten.
//!
//! Layout: a 4096-byte header (little-endian; magic, version, the binding above, one entry per
//! section with its offset, point count and checksum, and the header's own checksum), then the
//! sections at page-aligned offsets: the verifying key's G1 points (alpha, beta, delta), its G2
//! points (beta, gamma, delta), `ic`, `h`, `l`, `a`, `b_g1`, `b_g2`.

use std::io::{Read, Write};
use std::path::Path;

use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::error::{Error, Result};
use crate::groth16::encoding::PointCheck;
use crate::groth16::params::{write_atomically, Parameters, VerifyingKey};
use crate::groth16::points::Points;

const MAGIC: &[u8; 16] = b"proofline-native";
const VERSION: u32 = 1;
const HEADER: usize = 4096;
const PAGE: u64 = 4096;
const SECTIONS: usize = 8;
/// Bytes a checksum task covers.
const CHUNK: usize = 1 << 24;

/// What the header binds a native file to: the source file as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SourceId {
    len: u64,
    mtime_s: i64,
    mtime_ns: u32,
    inode: u64,
}

impl SourceId {
    fn of(path: &Path) -> Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)
            .map_err(|e| Error::io(format!("reading the metadata of {}", path.display()), e))?;
        Ok(SourceId {
            len: m.len(),
            mtime_s: m.mtime(),
            mtime_ns: m.mtime_nsec() as u32,
            inode: m.ino(),
        })
    }
}

/// The in-memory layout of this build's points: their sizes and the generators' bytes.
fn layout_probe() -> u64 {
    let g1 = G1Affine::generator();
    let g2 = G2Affine::generator();
    let mut bytes = bytes_of(std::slice::from_ref(&g1)).to_vec();
    bytes.extend_from_slice(bytes_of(std::slice::from_ref(&g2)));
    xxh3_64(&bytes)
}

fn check_code(check: PointCheck) -> u32 {
    match check {
        PointCheck::Unchecked => 0,
        PointCheck::Checked => 1,
    }
}

/// A slice of points as its bytes.
fn bytes_of<P>(points: &[P]) -> &[u8] {
    // SAFETY: the points are plain integers (blst's field elements) with no padding.
    unsafe {
        std::slice::from_raw_parts(points.as_ptr().cast::<u8>(), std::mem::size_of_val(points))
    }
}

/// A section's checksum: each chunk hashed with its index as the seed (in parallel), then the
/// chunks' hashes hashed together.
fn checksum(bytes: &[u8]) -> u64 {
    let parts: Vec<u64> = bytes
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(i, c)| xxh3_64_with_seed(c, i as u64))
        .collect();
    xxh3_64(bytes_of(&parts))
}

struct Section<'a> {
    bytes: &'a [u8],
    count: u64,
}

fn sections(params: &Parameters) -> ([G1Affine; 3], [G2Affine; 3]) {
    let vk = &params.vk;
    (
        [vk.alpha_g1, vk.beta_g1, vk.delta_g1],
        [vk.beta_g2, vk.gamma_g2, vk.delta_g2],
    )
}

/// Writes `params`, read from `source` with `check`, as the native file `native` (through a
/// temporary file renamed into place).
pub fn write(params: &Parameters, source: &Path, check: PointCheck, native: &Path) -> Result<()> {
    let id = SourceId::of(source)?;
    let (vk_g1, vk_g2) = sections(params);
    let list = [
        Section {
            bytes: bytes_of(&vk_g1),
            count: 3,
        },
        Section {
            bytes: bytes_of(&vk_g2),
            count: 3,
        },
        Section {
            bytes: bytes_of(&params.vk.ic),
            count: params.vk.ic.len() as u64,
        },
        Section {
            bytes: bytes_of(&params.h),
            count: params.h.len() as u64,
        },
        Section {
            bytes: bytes_of(&params.l),
            count: params.l.len() as u64,
        },
        Section {
            bytes: bytes_of(&params.a),
            count: params.a.len() as u64,
        },
        Section {
            bytes: bytes_of(&params.b_g1),
            count: params.b_g1.len() as u64,
        },
        Section {
            bytes: bytes_of(&params.b_g2),
            count: params.b_g2.len() as u64,
        },
    ];
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&check_code(check).to_le_bytes());
    header.extend_from_slice(&(std::mem::size_of::<G1Affine>() as u32).to_le_bytes());
    header.extend_from_slice(&(std::mem::size_of::<G2Affine>() as u32).to_le_bytes());
    header.extend_from_slice(&layout_probe().to_le_bytes());
    header.extend_from_slice(&id.len.to_le_bytes());
    header.extend_from_slice(&id.mtime_s.to_le_bytes());
    header.extend_from_slice(&u64::from(id.mtime_ns).to_le_bytes());
    header.extend_from_slice(&id.inode.to_le_bytes());
    let mut offset = HEADER as u64;
    let mut offsets = Vec::with_capacity(SECTIONS);
    for s in &list {
        offsets.push(offset);
        header.extend_from_slice(&offset.to_le_bytes());
        header.extend_from_slice(&s.count.to_le_bytes());
        header.extend_from_slice(&checksum(s.bytes).to_le_bytes());
        offset = (offset + s.bytes.len() as u64).div_ceil(PAGE) * PAGE;
    }
    let sum = xxh3_64(&header);
    header.extend_from_slice(&sum.to_le_bytes());
    header.resize(HEADER, 0);
    write_atomically(native, |w| {
        let io = |e| Error::io(format!("writing {}", native.display()), e);
        w.write_all(&header).map_err(io)?;
        let mut at = HEADER as u64;
        for (s, &start) in list.iter().zip(&offsets) {
            let pad = vec![0u8; (start - at) as usize];
            w.write_all(&pad).map_err(io)?;
            w.write_all(s.bytes).map_err(io)?;
            at = start + s.bytes.len() as u64;
        }
        Ok(())
    })
}

/// Why a native file was not used.
pub type Refusal = String;

struct Entry {
    offset: u64,
    count: u64,
    sum: u64,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Opens the native file `native` for the parameter file `source`, when it exists, matches the
/// source as it is now, was made with at least `check`, and every section's checksum holds.
/// `Ok(Err(reason))` says why it was not used (the caller decodes the source instead).
pub fn open(
    native: &Path,
    source: &Path,
    check: PointCheck,
) -> Result<std::result::Result<Parameters, Refusal>> {
    let mut file = match std::fs::File::open(native) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err("no native copy yet".into()))
        }
        Err(e) => return Ok(Err(format!("cannot open it: {e}"))),
    };
    let file_len = file
        .metadata()
        .map_err(|e| Error::io(format!("reading the size of {}", native.display()), e))?
        .len();
    let mut h = vec![0u8; HEADER];
    if file.read_exact(&mut h).is_err() {
        return Ok(Err("its header is truncated".into()));
    }
    if &h[..16] != MAGIC || le_u32(&h, 16) != VERSION {
        return Ok(Err(
            "it is not a native parameter file of this version".into()
        ));
    }
    let body = 72 + SECTIONS * 24;
    if le_u64(&h, body) != xxh3_64(&h[..body]) {
        return Ok(Err("its header's checksum does not hold".into()));
    }
    if le_u32(&h, 24) as usize != std::mem::size_of::<G1Affine>()
        || le_u32(&h, 28) as usize != std::mem::size_of::<G2Affine>()
        || le_u64(&h, 32) != layout_probe()
    {
        return Ok(Err(
            "it was written by a build with another point layout".into()
        ));
    }
    if le_u32(&h, 20) < check_code(check) {
        return Ok(Err(
            "it was made without the subgroup checks asked for".into()
        ));
    }
    let made_from = SourceId {
        len: le_u64(&h, 40),
        mtime_s: le_u64(&h, 48) as i64,
        mtime_ns: le_u64(&h, 56) as u32,
        inode: le_u64(&h, 64),
    };
    if made_from != SourceId::of(source)? {
        return Ok(Err(format!(
            "it was made from another version of {}",
            source.display()
        )));
    }
    let entries: Vec<Entry> = (0..SECTIONS)
        .map(|i| {
            let at = 72 + i * 24;
            Entry {
                offset: le_u64(&h, at),
                count: le_u64(&h, at + 8),
                sum: le_u64(&h, at + 16),
            }
        })
        .collect();
    let sizes = [
        std::mem::size_of::<G1Affine>(),
        std::mem::size_of::<G2Affine>(),
    ];
    let size_of = |i: usize| if i == 1 || i == 7 { sizes[1] } else { sizes[0] };
    for (i, e) in entries.iter().enumerate() {
        let end = e
            .count
            .checked_mul(size_of(i) as u64)
            .and_then(|b| b.checked_add(e.offset));
        if e.offset % PAGE != 0 || !matches!(end, Some(end) if end <= file_len) {
            return Ok(Err("it is truncated or its section table is damaged".into()));
        }
    }
    if entries[0].count != 3 || entries[1].count != 3 || entries[2].count == 0 {
        return Ok(Err("its verifying key is damaged".into()));
    }
    let map = |e: &Entry, size: usize| -> Result<memmap2::MmapMut> {
        let len = e.count as usize * size;
        // SAFETY: a private map of a file proofline wrote and replaces only by renaming a new
        // one into place; a process truncating it in place underneath is outside what a reader
        // can defend against (the same holds for filecoin-proofs' mapped parameters).
        unsafe {
            memmap2::MmapOptions::new()
                .offset(e.offset)
                .len(len)
                .map_copy(&file)
        }
        .map_err(|err| Error::io(format!("mapping {}", native.display()), err))
    };
    // An empty section has nothing to map (a map cannot be empty).
    let mut maps = Vec::with_capacity(SECTIONS);
    for (i, e) in entries.iter().enumerate() {
        if e.count == 0 {
            if checksum(&[]) != e.sum {
                return Ok(Err(format!("section {i}'s checksum does not hold")));
            }
            maps.push(None);
            continue;
        }
        let m = map(e, size_of(i))?;
        if checksum(&m) != e.sum {
            return Ok(Err(format!("section {i}'s checksum does not hold")));
        }
        maps.push(Some(m));
    }
    let mut maps = maps.into_iter().zip(&entries);
    fn points<P>(section: Option<(Option<memmap2::MmapMut>, &Entry)>) -> Points<P> {
        match section.expect("one map per section") {
            (Some(m), e) => Points::mapped(m, e.count as usize),
            (None, _) => Points::default(),
        }
    }
    let g1s: Points<G1Affine> = points(maps.next());
    let g2s: Points<G2Affine> = points(maps.next());
    let ic: Points<G1Affine> = points(maps.next());
    let vk = VerifyingKey {
        alpha_g1: g1s[0],
        beta_g1: g1s[1],
        beta_g2: g2s[0],
        gamma_g2: g2s[1],
        delta_g1: g1s[2],
        delta_g2: g2s[2],
        ic: ic.to_vec(),
    };
    Ok(Ok(Parameters {
        vk,
        h: points(maps.next()),
        l: points(maps.next()),
        a: points(maps.next()),
        b_g1: points(maps.next()),
        b_g2: points(maps.next()),
    }))
}

/// The native copy of the parameter file `source`: the file's name with `.native` added, in the
/// same folder.
pub fn beside(source: &Path) -> std::path::PathBuf {
    let mut name = source.file_name().unwrap_or_default().to_os_string();
    name.push(".native");
    source.with_file_name(name)
}
