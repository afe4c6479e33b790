//! Point and length-prefix codecs in bellperson's byte layout.
//!
//! Keys and parameters hold uncompressed points (G1: 96 bytes, G2: 192 bytes) in sections
//! preceded by a u32 big-endian element count; proofs hold compressed points (48 and 96 bytes).
//! Decoding always rejects bad encodings and points off the curve; [`PointCheck::Checked`] also
//! runs the (expensive) prime-order subgroup check.

use std::borrow::Cow;
use std::io::{Read, Write};

use blstrs::{G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use crate::error::{Error, PointError, Result};

/// How much to check when decoding points from keys and parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PointCheck {
    /// Encoding, curve equation and subgroup membership (for untrusted files).
    #[default]
    Checked,
    /// Encoding and curve equation only; skips the subgroup check (for trusted files, faster).
    Unchecked,
}

/// A curve point in bellperson's encodings.
pub trait EncodedPoint: Sized + Copy + Send + Sync + PrimeCurveAffine {
    /// Size of the uncompressed encoding in bytes.
    const UNCOMPRESSED: usize;
    /// Size of the compressed encoding in bytes.
    const COMPRESSED: usize;
    /// Decodes an uncompressed point; the identity is rejected.
    fn decode_uncompressed(bytes: &[u8], check: PointCheck) -> Result<Self, PointError>;
    /// Decodes a compressed point, fully checked; the identity is rejected.
    fn decode_compressed(bytes: &[u8]) -> Result<Self, PointError>;
    /// Appends the uncompressed encoding.
    fn encode_uncompressed(&self, out: &mut Vec<u8>);
    /// Appends the compressed encoding.
    fn encode_compressed(&self, out: &mut Vec<u8>);
}

fn blst_reason(err: blst::BLST_ERROR) -> PointError {
    match err {
        blst::BLST_ERROR::BLST_POINT_NOT_ON_CURVE => PointError::NotOnCurve,
        blst::BLST_ERROR::BLST_POINT_NOT_IN_GROUP => PointError::NotInSubgroup,
        _ => PointError::BadEncoding,
    }
}

macro_rules! impl_encoded_point {
    ($affine:ty, $raw:ty, $unc:expr, $comp:expr, $deser:path, $uncomp:path) => {
        impl EncodedPoint for $affine {
            const UNCOMPRESSED: usize = $unc;
            const COMPRESSED: usize = $comp;

            fn decode_uncompressed(bytes: &[u8], check: PointCheck) -> Result<Self, PointError> {
                let arr: &[u8; $unc] = bytes.try_into().map_err(|_| PointError::BadEncoding)?;
                // blst's deserializer would read a point with the compression flag as a
                // compressed one; in an uncompressed field that is a bad encoding.
                if arr[0] & 0x80 != 0 {
                    return Err(PointError::BadEncoding);
                }
                let p = Option::<$affine>::from(<$affine>::from_uncompressed_unchecked(arr))
                    .ok_or_else(|| {
                        let mut raw = <$raw>::default();
                        // SAFETY: `arr` holds exactly the bytes blst reads; `raw` is a plain struct.
                        blst_reason(unsafe { $deser(&mut raw, arr.as_ptr()) })
                    })?;
                finish(p, check)
            }

            fn decode_compressed(bytes: &[u8]) -> Result<Self, PointError> {
                let arr: &[u8; $comp] = bytes.try_into().map_err(|_| PointError::BadEncoding)?;
                let p = Option::<$affine>::from(<$affine>::from_compressed_unchecked(arr))
                    .ok_or_else(|| {
                        let mut raw = <$raw>::default();
                        // SAFETY: as above.
                        blst_reason(unsafe { $uncomp(&mut raw, arr.as_ptr()) })
                    })?;
                finish(p, PointCheck::Checked)
            }

            fn encode_uncompressed(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_uncompressed());
            }

            fn encode_compressed(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_compressed());
            }
        }

        impl Finish for $affine {
            fn torsion_free(&self) -> bool {
                self.is_torsion_free().into()
            }
        }
    };
}

trait Finish: PrimeCurveAffine {
    fn torsion_free(&self) -> bool;
}

/// The checks after blst decoded a point. blst's deserializer has checked that it is on its
/// curve (`BLST_POINT_NOT_ON_CURVE` otherwise; its decompression finds y on the curve), so that
/// is not computed twice: a point is refused as the identity, and with `Checked` outside the
/// subgroup.
fn finish<P: Finish>(p: P, check: PointCheck) -> Result<P, PointError> {
    if bool::from(p.is_identity()) {
        return Err(PointError::Identity);
    }
    if check == PointCheck::Checked && !p.torsion_free() {
        return Err(PointError::NotInSubgroup);
    }
    Ok(p)
}

impl_encoded_point!(
    G1Affine,
    blst::blst_p1_affine,
    96,
    48,
    blst::blst_p1_deserialize,
    blst::blst_p1_uncompress
);
impl_encoded_point!(
    G2Affine,
    blst::blst_p2_affine,
    192,
    96,
    blst::blst_p2_deserialize,
    blst::blst_p2_uncompress
);

/// Where encoded bytes come from: a slice (memory map) or a stream.
pub(crate) trait Source {
    /// Takes exactly `n` bytes.
    fn take(&mut self, n: usize, what: &'static str) -> Result<Cow<'_, [u8]>>;
    /// Bytes left, when known.
    fn remaining(&self) -> Option<u64>;

    fn u32_be(&mut self, what: &'static str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn point<P: EncodedPoint>(&mut self, what: &'static str, check: PointCheck) -> Result<P> {
        let b = self.take(P::UNCOMPRESSED, what)?;
        P::decode_uncompressed(&b, check).map_err(|reason| Error::InvalidPoint {
            what,
            index: 0,
            reason,
        })
    }

    /// A u32 big-endian count followed by that many uncompressed points, decoded in parallel.
    fn points<P: EncodedPoint>(&mut self, what: &'static str, check: PointCheck) -> Result<Vec<P>> {
        const CHUNK: usize = 1 << 18;
        let len = self.u32_be(what)? as usize;
        let claimed_bytes = len as u64 * P::UNCOMPRESSED as u64;
        if let Some(available) = self.remaining() {
            if claimed_bytes > available {
                return Err(Error::LengthExceedsData {
                    what,
                    claimed: len as u64,
                    claimed_bytes,
                    available,
                });
            }
        }
        // With a stream the count is not yet backed by data: do not trust it for the allocation.
        let mut out = Vec::with_capacity(if self.remaining().is_some() {
            len
        } else {
            len.min(CHUNK)
        });
        // Points a rayon task decodes.
        const TASK: usize = 1 << 10;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(CHUNK);
            let bytes = self.take(n * P::UNCOMPRESSED, what)?;
            // Decoded straight into the vector's free capacity, no copy in between.
            out.reserve(n);
            out.spare_capacity_mut()[..n]
                .par_chunks_mut(TASK)
                .zip(bytes.par_chunks(TASK * P::UNCOMPRESSED))
                .enumerate()
                .try_for_each(|(task, (slots, encoded))| {
                    for (i, (slot, b)) in slots
                        .iter_mut()
                        .zip(encoded.chunks_exact(P::UNCOMPRESSED))
                        .enumerate()
                    {
                        let p = P::decode_uncompressed(b, check).map_err(|reason| {
                            Error::InvalidPoint {
                                what,
                                index: done + task * TASK + i,
                                reason,
                            }
                        })?;
                        slot.write(p);
                    }
                    Ok::<(), Error>(())
                })?;
            // SAFETY: the `n` slots after the length were each written above (`try_for_each`
            // returns `Ok` only when every task wrote all of its slots).
            unsafe { out.set_len(out.len() + n) };
            done += n;
        }
        Ok(out)
    }
}

/// A byte slice with a position.
pub(crate) struct SliceSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SliceSource<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        SliceSource { data, pos: 0 }
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(&self, what: &'static str) -> Result<()> {
        match self.data.len() - self.pos {
            0 => Ok(()),
            extra => Err(Error::TrailingBytes {
                what,
                extra: extra as u64,
            }),
        }
    }
}

impl Source for SliceSource<'_> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<Cow<'_, [u8]>> {
        let available = self.data.len() - self.pos;
        if n > available {
            return Err(Error::Truncated {
                what,
                offset: self.pos as u64,
                needed: n as u64,
                available: available as u64,
            });
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(Cow::Borrowed(s))
    }

    fn remaining(&self) -> Option<u64> {
        Some((self.data.len() - self.pos) as u64)
    }
}

/// A stream with a byte counter, and its total length when known (a file).
pub(crate) struct ReadSource<R> {
    inner: R,
    pos: u64,
    len: Option<u64>,
    /// The buffer `take` reads into, kept from one call to the next: a chunk of points reuses
    /// the pages of the last one instead of faulting in fresh zeroed ones.
    scratch: Vec<u8>,
}

impl<R: Read> ReadSource<R> {
    pub(crate) fn new(inner: R) -> Self {
        ReadSource {
            inner,
            pos: 0,
            len: None,
            scratch: Vec::new(),
        }
    }

    /// A stream of known length: length prefixes are checked against it before allocating.
    pub(crate) fn with_len(inner: R, len: u64) -> Self {
        ReadSource {
            inner,
            pos: 0,
            len: Some(len),
            scratch: Vec::new(),
        }
    }

    /// Bytes left in a stream of known length.
    pub(crate) fn left(&self) -> Option<u64> {
        self.len.map(|l| l.saturating_sub(self.pos))
    }
}

impl<R: Read> Source for ReadSource<R> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<Cow<'_, [u8]>> {
        if self.scratch.len() != n {
            self.scratch.resize(n, 0);
        }
        let buf = &mut self.scratch;
        let mut filled = 0;
        while filled < n {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => {
                    return Err(Error::Truncated {
                        what,
                        offset: self.pos,
                        needed: n as u64,
                        available: filled as u64,
                    })
                }
                Ok(k) => filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(format!("reading {what}"), e)),
            }
        }
        self.pos += n as u64;
        Ok(Cow::Borrowed(&self.scratch[..n]))
    }

    fn remaining(&self) -> Option<u64> {
        self.left()
    }
}

/// Writes a u32 big-endian count and the uncompressed points.
pub(crate) fn write_points<P: EncodedPoint + Sync, W: Write>(
    w: &mut W,
    what: &'static str,
    points: &[P],
) -> Result<()> {
    write_len(w, what, points.len())?;
    for chunk in points.chunks(1 << 20) {
        write_point_run(w, what, chunk)?;
    }
    Ok(())
}

/// Writes a section's `u32` big-endian point count.
pub(crate) fn write_len<W: Write>(w: &mut W, what: &'static str, len: usize) -> Result<()> {
    let len = u32::try_from(len).map_err(|_| Error::Malformed {
        what,
        detail: format!("{len} points do not fit a u32 length prefix"),
    })?;
    w.write_all(&len.to_be_bytes())
        .map_err(|e| Error::io(format!("writing {what}"), e))
}

/// Writes points uncompressed, one buffer for the run, without a count.
pub(crate) fn write_point_run<P: EncodedPoint + Sync, W: Write>(
    w: &mut W,
    what: &'static str,
    points: &[P],
) -> Result<()> {
    use rayon::prelude::*;
    // Encoded in pieces on every thread (a point's encoding leaves Montgomery form: a GPU
    // generator's millions of points would wait on one thread), written in order.
    let pieces: Vec<Vec<u8>> = points
        .par_chunks(1 << 12)
        .map(|piece| {
            let mut buf = Vec::with_capacity(piece.len() * P::UNCOMPRESSED);
            for p in piece {
                p.encode_uncompressed(&mut buf);
            }
            buf
        })
        .collect();
    for buf in &pieces {
        w.write_all(buf)
            .map_err(|e| Error::io(format!("writing {what}"), e))?;
    }
    Ok(())
}

/// Writes one uncompressed point.
pub(crate) fn write_point<P: EncodedPoint, W: Write>(
    w: &mut W,
    what: &'static str,
    p: &P,
) -> Result<()> {
    let mut buf = Vec::with_capacity(P::UNCOMPRESSED);
    p.encode_uncompressed(&mut buf);
    w.write_all(&buf)
        .map_err(|e| Error::io(format!("writing {what}"), e))
}
