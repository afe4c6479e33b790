//! The transforms' twiddles on the device ([`NttTables`]): the root's powers in a two-level
//! table, the inner roots of one pass, and single-lookup tables for the passes whose twiddles
//! fit one ([`MAX_LOG_SINGLE`]). Built once per root and domain.

use blstrs::Scalar;
use ff::Field;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{Arg, Device, DeviceError, DeviceResult};
use crate::memory::DeviceBuffer;
use crate::ntt::shape::{group_fit, NttShape, FR, MAX_LOG_TILE};

/// At least the device bytes of an [`HPipeline`](crate::ntt::HPipeline)'s tables for a domain of 2^log_n: four
/// two-level power tables, two tables of inner roots (at most 2^(MAX_LOG_TILE - 1) each), and
/// two transforms' single-lookup twiddle tables (each transform's at most 2^(k + 1) entries
/// for k = min(log_n, [`MAX_LOG_SINGLE`]): they double pass by pass).
pub fn table_bytes_bound(log_n: u32) -> u64 {
    let s = split(log_n);
    let powers = (1u64 << s) + (1u64 << (log_n - s));
    let singles = 1u64 << (log_n.min(MAX_LOG_SINGLE) + 1);
    (4 * powers + 2 * (1u64 << (MAX_LOG_TILE - 1)) + 2 * singles) * FR
}

/// The largest single-lookup twiddle table of a pass, log2 of its entries (2^24: 512 MiB). A
/// pass after the first multiplies element `i` of column `k` by `w^(i k)`, `i k < R p` (its
/// radix R, the earlier passes' product p); where `R p` is at most this, the pass reads that
/// power from a table of `R p` entries instead of multiplying two entries of the two-level
/// table: one multiplication of about five an element fewer, for one more 32-byte read. At
/// 2^24 in passes of 2^8 that is the second and third pass of three, at 2^27 the second and
/// third of four. Larger than 2^16 (tables that stay in the L2 cache) because the passes wait
/// on their multiplications, not on memory: on the H200, 2^24 against 2^16 gives NTT 2^24 5.17
/// against 5.45 ms, 2^27 52.2 against 54.4 ms, H pipeline 2^27 393 against 408 ms
/// (`docs/design-decisions.md#ntt`).
pub const MAX_LOG_SINGLE: u32 = 24;

/// A table of `r^e` for `e < 2^log_n` in two levels split at `s`: `lo[i] = c r^i`,
/// `hi[i] = r^(i 2^s)` (`c` scales every entry).
pub(super) struct Powers<D: Device> {
    pub(super) lo: DeviceBuffer<D>,
    pub(super) hi: DeviceBuffer<D>,
}

/// Where the two-level tables of a domain of 2^log_n split.
pub(super) fn split(log_n: u32) -> u32 {
    log_n.div_ceil(2)
}

impl<D: Device> Powers<D> {
    pub(super) fn new(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        log_n: u32,
        r: Scalar,
        c: Scalar,
    ) -> DeviceResult<Self> {
        let s = split(log_n);
        let lo = powers(c, r, 1 << s);
        let hi = powers(Scalar::ONE, r.pow_vartime([1u64 << s]), 1 << (log_n - s));
        Ok(Powers {
            lo: gpu.upload_scratch(q, &lo, "NTT power table")?,
            hi: gpu.upload_scratch(q, &hi, "NTT power table")?,
        })
    }
}

/// `c, c r, c r^2, ...` (`n` of them).
pub(super) fn powers(c: Scalar, r: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(n);
    let mut p = c;
    for _ in 0..n {
        out.push(p);
        p *= r;
    }
    out
}

/// The single table of 2^`log_len` entries `omega^(x << (log_n - log_len))`, made on the device
/// from the two-level table `roots` of omega's powers (of a domain of 2^`log_n`).
fn single_table<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    roots: &Powers<D>,
    log_n: u32,
    log_len: u32,
) -> DeviceResult<DeviceBuffer<D>> {
    let n = 1usize << log_len;
    let table = gpu.scratch(q, n as u64 * FR, "NTT pass twiddles")?;
    launch_threads(
        q,
        &gpu.names.ntt_table,
        n,
        &[
            Arg::Buffer(table.raw()),
            Arg::Buffer(roots.lo.raw()),
            Arg::Buffer(roots.hi.raw()),
            Arg::U32(split(log_n)),
            Arg::U32(log_n - log_len),
            Arg::U32(n as u32),
        ],
    )?;
    Ok(table)
}

/// What a transform's twiddles need on the device: the root's powers and the inner roots of
/// one pass. Built once per root and domain, reused by every transform with them.
pub struct NttTables<D: Device> {
    pub(super) log_n: u32,
    pub(super) omega: Scalar,
    pub(super) shape: NttShape,
    pub(super) roots: Powers<D>,
    pub(super) inner: DeviceBuffer<D>,
    pub(super) log_inner: u32,
    /// Per pass, its single-lookup twiddle table where it has one ([`MAX_LOG_SINGLE`]).
    pub(super) singles: Vec<Option<DeviceBuffer<D>>>,
}

impl<D: Device> NttTables<D> {
    /// How many passes read their twiddles from a single table ([`MAX_LOG_SINGLE`]); the
    /// others make them from the two-level table.
    pub fn single_table_passes(&self) -> usize {
        self.singles.iter().filter(|t| t.is_some()).count()
    }

    /// The tables of the transforms of 2^log_n points with root `omega` (a primitive 2^log_n-th
    /// root of unity), cut as `shape` says.
    pub fn new(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        log_n: u32,
        omega: Scalar,
        shape: NttShape,
    ) -> DeviceResult<Self> {
        Self::with_single_limit(gpu, q, log_n, omega, shape, MAX_LOG_SINGLE)
    }

    /// [`NttTables::new`] with single-lookup tables up to 2^`max_log_single` entries where that
    /// is below [`MAX_LOG_SINGLE`] (a higher limit is held to it, which [`table_bytes_bound`]
    /// counts on); the conformance check lowers it, so a small transform has passes of both
    /// kinds.
    pub fn with_single_limit(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        log_n: u32,
        omega: Scalar,
        shape: NttShape,
        max_log_single: u32,
    ) -> DeviceResult<Self> {
        if log_n > 31 {
            return Err(DeviceError::new("NTT", "the domain is larger than 2^31"));
        }
        shape.check().map_err(|e| DeviceError::new("NTT", e))?;
        // A pass's tile: at least one column of its largest radix.
        let log_tile = shape.log_tile.max(shape.max_log_radix);
        group_fit(gpu.device.info(), log_tile, shape.log_per_thread).map_err(|e| {
            DeviceError::new("NTT", format!("the pass shape {}: {e}", shape.name()))
        })?;
        let roots = Powers::new(gpu, q, log_n, omega, Scalar::ONE)?;
        let log_inner = shape.radices(log_n).into_iter().max().unwrap_or(0).max(1);
        let w = omega.pow_vartime([1u64 << (log_n.max(log_inner) - log_inner)]);
        let inner = powers(Scalar::ONE, w, 1 << (log_inner - 1));
        let inner = gpu.upload_scratch(q, &inner, "NTT inner roots")?;
        let mut singles = Vec::new();
        let mut lgp = 0;
        for d in shape.radices(log_n) {
            let single = lgp > 0 && d + lgp <= max_log_single.min(MAX_LOG_SINGLE);
            singles.push(if single {
                // w^x for x < R p, w = omega^(N / (R p)): omega^(x << (log_n - d - lgp)), made
                // on the device from the two-level table.
                Some(single_table(gpu, q, &roots, log_n, d + lgp)?)
            } else {
                None
            });
            lgp += d;
        }
        Ok(NttTables {
            log_n,
            omega,
            shape,
            roots,
            inner,
            log_inner,
            singles,
        })
    }
}
