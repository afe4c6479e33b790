//! The H pipeline on a device, with the CPU backend's semantics: iNTT of a, b and c, coset
//! NTT, `(a b - c) / Z(g)`, coset iNTT; the result stays on the device as canonical MSM
//! exponents. The transforms are proofline's Stockham passes (`ntt.cl`: up to 2^10 points a
//! pass, twiddles from tables, natural order in and out, out of place). The element-wise steps
//! ride on the last pass of a transform as it stores: the move to the coset (`g^i / n`) on each
//! inverse transform, `A B` and `(A B - C) / Z` on the forward transforms of b and c, the move
//! back and the canonical form on the last. Resident at 2^27: 21 passes over memory, against 28
//! for seven separate transforms and their element-wise kernels.
//!
//! Memory: three vectors of the domain's size when they fit (a's transform stays on the device
//! while b and c are transformed); otherwise two, with the product kept on the host between
//! steps (one host vector more, more copies, separate element-wise kernels). Below two vectors
//! the device cannot hold the work, and the partition is handed back for the fallback.

use blstrs::Scalar;
use ff::Field;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::Domain;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{
    bytes_of, bytes_of_mut, Arg, Device, DeviceError, DeviceInfo, DeviceResult, Queue,
};
use crate::memory::{free_counted, DeviceBuffer};
use crate::source::NTT_MAX_G;

const FR: u64 = 32;
/// The largest tile a group transforms (2^10 elements: 33 KiB of local memory with its
/// padding, under CUDA's 48 KiB without opting in).
const MAX_LOG_TILE: u32 = 10;
/// Elements a thread holds in the rounds, by default (log2).
const DEFAULT_LOG_PER_THREAD: u32 = 2;
/// A group's tile, by default (log2).
const DEFAULT_LOG_TILE: u32 = 9;
/// The last pass's store modes, as `ntt.cl` numbers them (`PL_NTT_*`; a test checks).
const MODE_STORE: u32 = 0;
const MODE_SCALE: u32 = 1;
const MODE_MUL_INTO: u32 = 2;
const MODE_SUB_INTO: u32 = 3;
const MODE_SCALE_CANONICAL: u32 = 4;

/// How the H pipeline uses the device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NttMode {
    /// Four domain-sized vectors on the device: b and c are uploaded into their own beside the
    /// transforms of a (and b) ([`crate::Queue::write_beside`]), not between them.
    Ahead,
    /// Three domain-sized vectors on the device.
    Resident,
    /// Two on the device, one on the host.
    Split,
}

impl NttMode {
    /// The mode that fits in `available` device bytes for a domain of `n`, if any; [`Ahead`]
    /// only where the queue's copies can overlap its kernels (`beside`).
    ///
    /// [`Ahead`]: NttMode::Ahead
    pub fn choose(n: usize, available: u64, beside: bool) -> Option<Self> {
        let v = n as u64 * FR;
        // The pipeline's tables beside the vectors.
        let slack = table_bytes_bound(n.max(1).ilog2());
        if beside && available >= 4 * v + slack {
            Some(NttMode::Ahead)
        } else if available >= 3 * v + slack {
            Some(NttMode::Resident)
        } else if available >= 2 * v + slack {
            Some(NttMode::Split)
        } else {
            None
        }
    }
}

/// At least the device bytes of an [`HPipeline`]'s tables for a domain of 2^log_n: four
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

/// How a transform's passes are cut: the most points a column of one pass holds, the
/// elements of one group's tile and the elements a thread holds in the rounds (all powers of
/// two, as logarithms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NttShape {
    /// log2 of the largest radix of a pass.
    pub max_log_radix: u32,
    /// log2 of a group's tile (columns times radix).
    pub log_tile: u32,
    /// log2 of the elements a thread holds in the rounds (G: 1 to [`NTT_MAX_G`]); a pass takes
    /// ceil(radix / G) exchanges through local memory.
    pub log_per_thread: u32,
}

impl NttShape {
    /// The default: tiles of 2^9 elements (or the largest the device's local memory and group
    /// size allow), four elements a thread, passes of up to a tile's points. Measured on the
    /// H200 (`docs/design-decisions.md#ntt`): against tiles of 2^10 with eight elements a
    /// thread and four columns, 4% faster at 2^24 and 7% at 2^27, the H pipeline 5-7%; two
    /// elements a thread were slower in every shape tried. Passes of up to
    /// 2^9 points rather than 2^8 change only the sizes they take in fewer passes (the radices
    /// are spread evenly over as few passes as the largest allows), where a pass of 2^9 points
    /// has one column a tile: 2^27 in three passes instead of four was 2.2% faster, its H
    /// pipeline 1.3%; 2^24 is three passes of 2^8 either way.
    pub fn for_device<D: Device>(gpu: &GpuDevice<D>) -> Self {
        let info = gpu.device.info();
        let log_per_thread = DEFAULT_LOG_PER_THREAD;
        let mut log_tile = DEFAULT_LOG_TILE;
        while log_tile > log_per_thread && group_fit(info, log_tile, log_per_thread).is_err() {
            log_tile -= 1;
        }
        NttShape {
            max_log_radix: log_tile,
            log_tile,
            log_per_thread,
        }
    }

    /// The shape as `RADIX/TILE/G` (the logarithms), as benchmarks name it.
    pub fn name(&self) -> String {
        format!(
            "{}/{}/{}",
            self.max_log_radix, self.log_tile, self.log_per_thread
        )
    }

    /// A shape from `RADIX/TILE/G` (the logarithms); `G` defaults to the device default's.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not RADIX/TILE[/G] (logarithms)");
        let parts: Vec<u32> = s
            .split('/')
            .map(|x| x.trim().parse::<u32>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        let shape = match parts[..] {
            [max_log_radix, log_tile] => NttShape {
                max_log_radix,
                log_tile,
                log_per_thread: DEFAULT_LOG_PER_THREAD,
            },
            [max_log_radix, log_tile, log_per_thread] => NttShape {
                max_log_radix,
                log_tile,
                log_per_thread,
            },
            _ => return Err(bad()),
        };
        shape.check().map(|()| shape)
    }

    /// Whether the kernels can run this shape.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=NTT_MAX_G).contains(&self.log_per_thread) {
            return Err(format!(
                "an NTT thread holds 2^1 to 2^{NTT_MAX_G} elements, not 2^{}",
                self.log_per_thread
            ));
        }
        if self.max_log_radix == 0 || self.max_log_radix > MAX_LOG_TILE {
            return Err(format!(
                "an NTT pass's radix is 2^1 to 2^{MAX_LOG_TILE}, not 2^{}",
                self.max_log_radix
            ));
        }
        if self.log_tile > MAX_LOG_TILE {
            return Err(format!(
                "an NTT tile holds at most 2^{MAX_LOG_TILE} elements, not 2^{}",
                self.log_tile
            ));
        }
        Ok(())
    }

    /// The radices of a transform of 2^log_n points: as few passes as the largest radix allows,
    /// as even as they can be. One point takes one pass of radix 1 (a copy), so that the last
    /// pass's finishing step runs at every size.
    pub fn radices(&self, log_n: u32) -> Vec<u32> {
        if log_n == 0 {
            return vec![0];
        }
        let passes = log_n.div_ceil(self.max_log_radix.max(1));
        (0..passes)
            .map(|i| log_n / passes + u32::from(i < log_n % passes))
            .collect()
    }
}

/// Whether a group transforming a tile of 2^log_tile elements, 2^log_per_thread a thread, fits
/// the device's group size and local memory (else what it needs and what the device allows).
fn group_fit(info: &DeviceInfo, log_tile: u32, log_per_thread: u32) -> Result<(), String> {
    let threads = 1usize << log_tile.saturating_sub(log_per_thread);
    let bytes = local_bytes(1 << log_tile);
    if bytes > info.local_memory_bytes || threads > info.max_group_size {
        return Err(format!(
            "groups of {threads} threads and {bytes} bytes of local memory; the device allows {} \
             and {}",
            info.max_group_size, info.local_memory_bytes
        ));
    }
    Ok(())
}

/// Local memory of a tile of `elements`: one plane per limb, one word of padding per 32.
fn local_bytes(elements: u64) -> u64 {
    (elements + elements / 32) * FR
}

/// A table of `r^e` for `e < 2^log_n` in two levels split at `s`: `lo[i] = c r^i`,
/// `hi[i] = r^(i 2^s)` (`c` scales every entry).
struct Powers<D: Device> {
    lo: DeviceBuffer<D>,
    hi: DeviceBuffer<D>,
}

/// Where the two-level tables of a domain of 2^log_n split.
fn split(log_n: u32) -> u32 {
    log_n.div_ceil(2)
}

impl<D: Device> Powers<D> {
    fn new(
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
fn powers(c: Scalar, r: Scalar, n: usize) -> Vec<Scalar> {
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
    log_n: u32,
    omega: Scalar,
    shape: NttShape,
    roots: Powers<D>,
    inner: DeviceBuffer<D>,
    log_inner: u32,
    /// Per pass, its single-lookup twiddle table where it has one ([`MAX_LOG_SINGLE`]).
    singles: Vec<Option<DeviceBuffer<D>>>,
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

/// What the last pass of a transform does as it stores.
enum Finish<'a, D: Device> {
    /// Nothing: the result ends in the transform's vector.
    Store,
    /// Scales element `a` by the table's entry `a`; optionally to canonical form too.
    Scale(&'a Powers<D>, bool),
    /// `into[a] *= result[a]`.
    MulInto(&'a DeviceBuffer<D>),
    /// `into[a] = (into[a] - result[a]) * k`.
    SubInto(&'a DeviceBuffer<D>, Scalar),
}

/// The transform of `x` by `tables` (`tmp`: scratch of the same size; the two are swapped pass
/// by pass, and the result ends in `x` unless `finish` sends it elsewhere).
fn transform<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &mut DeviceBuffer<D>,
    tmp: &mut DeviceBuffer<D>,
    t: &NttTables<D>,
    finish: Finish<'_, D>,
) -> DeviceResult<()> {
    let log_n = t.log_n;
    let radices = t.shape.radices(log_n);
    let s = split(log_n);
    let mut lgp = 0;
    for (i, &d) in radices.iter().enumerate() {
        let last = i + 1 == radices.len();
        let log_c = (t.shape.log_tile.max(d) - d).min(log_n - d);
        let tile = 1u64 << (log_c + d);
        let threads = (tile >> t.shape.log_per_thread).max(1) as usize;
        let groups = (1usize << (log_n - d)) >> log_c;
        let (mode, scale, into, k) = match (&finish, last) {
            (Finish::Scale(p, false), true) => (MODE_SCALE, Some(*p), None, Scalar::ZERO),
            (Finish::Scale(p, true), true) => (MODE_SCALE_CANONICAL, Some(*p), None, Scalar::ZERO),
            (Finish::MulInto(z), true) => (MODE_MUL_INTO, None, Some(*z), Scalar::ZERO),
            (Finish::SubInto(z, k), true) => (MODE_SUB_INTO, None, Some(*z), *k),
            _ => (MODE_STORE, None, None, Scalar::ZERO),
        };
        let scale = scale.unwrap_or(&t.roots);
        let out = into.unwrap_or(&*tmp);
        let z = into.unwrap_or(&t.inner);
        // The pass's twiddles w^(i k): from its single table (w = omega^(N / (R p)), exponent
        // i k below 2^tw_s), or from the two-level table of omega (exponent (i k) N / (R p)).
        let (tw_lo, tw_s, log_step) = match &t.singles[i] {
            Some(table) => (table, d + lgp, 0),
            None => (&t.roots.lo, s, log_n - d - lgp),
        };
        q.launch(
            &gpu.names.ntt_pass[t.shape.log_per_thread as usize - 1],
            groups,
            threads,
            &[
                Arg::Buffer(x.raw()),
                Arg::Buffer(out.raw()),
                Arg::Buffer(tw_lo.raw()),
                Arg::Buffer(t.roots.hi.raw()),
                Arg::Buffer(t.inner.raw()),
                Arg::Buffer(scale.lo.raw()),
                Arg::Buffer(scale.hi.raw()),
                Arg::Buffer(z.raw()),
                Arg::Scalar(k),
                Arg::Local(local_bytes(tile) as usize),
                Arg::U32(log_n),
                Arg::U32(lgp),
                Arg::U32(d),
                Arg::U32(log_c),
                Arg::U32(s),
                Arg::U32(t.log_inner),
                Arg::U32(mode),
                Arg::U32(tw_s),
                Arg::U32(log_step),
            ],
        )?;
        lgp += d;
        if into.is_none() {
            std::mem::swap(x, tmp);
        }
    }
    Ok(())
}

/// In-place NTT of the `2^log_n` elements in `x` with root `omega`; `tmp` is scratch of the
/// same size (the two are swapped pass by pass, and the result ends in `x`).
pub fn ntt<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &mut DeviceBuffer<D>,
    tmp: &mut DeviceBuffer<D>,
    log_n: u32,
    omega: Scalar,
) -> DeviceResult<()> {
    let tables = NttTables::new(gpu, q, log_n, omega, NttShape::for_device(gpu))?;
    ntt_with(gpu, q, x, tmp, &tables)
}

/// [`ntt`] with tables made beforehand (what a benchmark times, and what the H pipeline reuses).
pub fn ntt_with<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &mut DeviceBuffer<D>,
    tmp: &mut DeviceBuffer<D>,
    tables: &NttTables<D>,
) -> DeviceResult<()> {
    transform(gpu, q, x, tmp, tables, Finish::Store)
}

/// Writes `values` into `x` and zeroes the rest of its `n` elements; `beside`: the copy goes
/// beside the queue's kernels ([`crate::Queue::write_beside`]).
fn load<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &DeviceBuffer<D>,
    values: &[Scalar],
    n: usize,
    beside: bool,
) -> DeviceResult<()> {
    if values.len() > n {
        return Err(DeviceError::new(
            "loading evaluations",
            format!("{} values for a domain of {n}", values.len()),
        ));
    }
    if !values.is_empty() {
        if beside {
            q.write_beside(x.raw(), 0, bytes_of(values))?;
        } else {
            q.write(x.raw(), 0, bytes_of(values))?;
        }
    }
    launch_threads(
        q,
        &gpu.names.fill_zero,
        n - values.len(),
        &[
            Arg::Buffer(x.raw()),
            Arg::U32(values.len() as u32),
            Arg::U32(n as u32),
        ],
    )
}

/// The H pipeline's steps on device vectors, with their tables (built once per domain). Each
/// step transforms its vector in place or into another, using `tmp` (a vector of the same
/// size) as scratch.
pub struct HPipeline<D: Device> {
    forward: NttTables<D>,
    inverse: NttTables<D>,
    /// `g^i / n`: the inverse transform's last pass moves to the coset.
    to_coset: Powers<D>,
    /// `g^-i / n`: the last inverse transform's moves back.
    from_coset: Powers<D>,
    z_inv: Scalar,
}

impl<D: Device> HPipeline<D> {
    /// The tables of `domain`'s pipeline, its transforms cut as `shape` says, on `q`.
    pub fn new(
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        domain: &Domain,
        shape: NttShape,
    ) -> DeviceResult<Self> {
        let log_n = domain.log2;
        let n_inv = domain.size_inv();
        Ok(HPipeline {
            forward: NttTables::new(gpu, q, log_n, domain.omega, shape)?,
            inverse: NttTables::new(gpu, q, log_n, domain.omega_inv(), shape)?,
            to_coset: Powers::new(gpu, q, log_n, Domain::coset_shift(), n_inv)?,
            from_coset: Powers::new(gpu, q, log_n, Domain::coset_shift_inv(), n_inv)?,
            z_inv: domain.z_on_coset_inv(),
        })
    }

    /// The device bytes of its tables.
    pub fn bytes(&self) -> u64 {
        [&self.forward, &self.inverse]
            .iter()
            .map(|t| t.roots.lo.bytes() + t.roots.hi.bytes() + t.inner.bytes())
            .chain(
                [&self.to_coset, &self.from_coset]
                    .iter()
                    .map(|p| p.lo.bytes() + p.hi.bytes()),
            )
            .sum()
    }

    /// `x` from evaluations over the domain to evaluations over the coset `g H`, the last
    /// pass doing `finish`.
    fn to_coset(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        x: &mut DeviceBuffer<D>,
        tmp: &mut DeviceBuffer<D>,
        finish: Finish<'_, D>,
    ) -> DeviceResult<()> {
        let scale = Finish::Scale(&self.to_coset, false);
        transform(gpu, q, x, tmp, &self.inverse, scale)?;
        transform(gpu, q, x, tmp, &self.forward, finish)
    }

    /// `a`'s step: `x` (evaluations of a) becomes A, a's evaluations over the coset.
    pub fn coset(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        x: &mut DeviceBuffer<D>,
        tmp: &mut DeviceBuffer<D>,
    ) -> DeviceResult<()> {
        self.to_coset(gpu, q, x, tmp, Finish::Store)
    }

    /// `b`'s step: `into *= ` y's evaluations over the coset (`y` is used up).
    pub fn mul_coset(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        y: &mut DeviceBuffer<D>,
        tmp: &mut DeviceBuffer<D>,
        into: &DeviceBuffer<D>,
    ) -> DeviceResult<()> {
        self.to_coset(gpu, q, y, tmp, Finish::MulInto(into))
    }

    /// `c`'s step: `into = (into - ` y's evaluations over the coset`) / Z(g)` (`y` is used up).
    pub fn sub_coset_div_z(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        y: &mut DeviceBuffer<D>,
        tmp: &mut DeviceBuffer<D>,
        into: &DeviceBuffer<D>,
    ) -> DeviceResult<()> {
        self.to_coset(gpu, q, y, tmp, Finish::SubInto(into, self.z_inv))
    }

    /// The last step: `x` (the quotient over the coset) becomes its coefficients, as canonical
    /// exponents.
    pub fn coefficients(
        &self,
        gpu: &GpuDevice<D>,
        q: &mut D::Queue,
        x: &mut DeviceBuffer<D>,
        tmp: &mut DeviceBuffer<D>,
    ) -> DeviceResult<()> {
        let back = Finish::Scale(&self.from_coset, true);
        transform(gpu, q, x, tmp, &self.inverse, back)
    }
}

/// `x = x * y` (element-wise, n elements).
fn mul_assign<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &DeviceBuffer<D>,
    y: &DeviceBuffer<D>,
    n: usize,
) -> DeviceResult<()> {
    launch_threads(
        q,
        &gpu.names.mul_assign,
        n,
        &[
            Arg::Buffer(x.raw()),
            Arg::Buffer(y.raw()),
            Arg::U32(n as u32),
        ],
    )
}

/// `x = (x - y) / Z(g)` (element-wise).
fn sub_div_z<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &DeviceBuffer<D>,
    y: &DeviceBuffer<D>,
    domain: &Domain,
) -> DeviceResult<()> {
    let n = domain.size();
    launch_threads(
        q,
        &gpu.names.sub_scaled,
        n,
        &[
            Arg::Buffer(x.raw()),
            Arg::Buffer(y.raw()),
            Arg::Scalar(domain.z_on_coset_inv()),
            Arg::U32(n as u32),
        ],
    )
}

/// The quotient's `n - 1` coefficients as canonical exponents, left in the returned buffer
/// (of `n` elements), the transforms cut as `shape` says. `a`, `b`, `c` are read, never
/// changed. Device and host buffers are registered in `ledger` while they live.
#[allow(clippy::too_many_arguments)]
pub fn quotient<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    [a, b, c]: [&[Scalar]; 3],
    domain: &Domain,
    mode: NttMode,
    shape: NttShape,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<DeviceBuffer<D>> {
    let n = domain.size();
    if domain.log2 > 31 {
        return Err(DeviceError::new("H", "the domain is larger than 2^31"));
    }
    let p = HPipeline::new(gpu, q, domain, shape)?;
    let tables = p.bytes();
    ledger.register(BackendBuffer::DeviceScratch, tables);
    let v = n as u64 * FR;
    let mut x = gpu.scratch(q, v, "H vector")?;
    ledger.register(BackendBuffer::DeviceAbc, v);
    let mut tmp = gpu.scratch(q, v, "H scratch")?;
    ledger.register(BackendBuffer::DeviceAbc, v);
    // Ahead: b's and c's vectors exist before a's transforms are queued, so that their
    // uploads (beside) wait for nothing but their allocation.
    let ahead = if mode == NttMode::Ahead {
        let y = gpu.scratch(q, v, "H second vector")?;
        ledger.register(BackendBuffer::DeviceAbc, v);
        let z = gpu.scratch(q, v, "H third vector")?;
        ledger.register(BackendBuffer::DeviceAbc, v);
        Some((y, z))
    } else {
        None
    };
    load(gpu, q, &x, a, n, false)?;
    p.coset(gpu, q, &mut x, &mut tmp)?;
    let mut x = match mode {
        NttMode::Ahead => {
            let (mut y, mut z) = ahead.expect("made above for this mode");
            // The host copies b while a's transforms run, then c while b's run.
            load(gpu, q, &y, b, n, true)?;
            p.mul_coset(gpu, q, &mut y, &mut tmp, &x)?;
            load(gpu, q, &z, c, n, true)?;
            p.sub_coset_div_z(gpu, q, &mut z, &mut tmp, &x)?;
            free_counted(ledger, BackendBuffer::DeviceAbc, [y, z]);
            x
        }
        NttMode::Resident => {
            let mut y = gpu.scratch(q, v, "H second vector")?;
            ledger.register(BackendBuffer::DeviceAbc, v);
            load(gpu, q, &y, b, n, false)?;
            p.mul_coset(gpu, q, &mut y, &mut tmp, &x)?;
            load(gpu, q, &y, c, n, false)?;
            p.sub_coset_div_z(gpu, q, &mut y, &mut tmp, &x)?;
            free_counted(ledger, BackendBuffer::DeviceAbc, [y]);
            x
        }
        NttMode::Split => {
            let mut host = vec![Scalar::ZERO; n];
            ledger.register(BackendBuffer::HostTemp, v);
            q.read(x.raw(), 0, bytes_of_mut(&mut host))?;
            load(gpu, q, &x, b, n, false)?;
            p.coset(gpu, q, &mut x, &mut tmp)?;
            q.write(tmp.raw(), 0, bytes_of(&host))?;
            mul_assign(gpu, q, &x, &tmp, n)?;
            q.read(x.raw(), 0, bytes_of_mut(&mut host))?;
            load(gpu, q, &x, c, n, false)?;
            p.coset(gpu, q, &mut x, &mut tmp)?;
            // tmp = (a b - c) / Z, then it is the result.
            q.write(tmp.raw(), 0, bytes_of(&host))?;
            sub_div_z(gpu, q, &tmp, &x, domain)?;
            drop(host);
            ledger.release_one(BackendBuffer::HostTemp, v);
            std::mem::swap(&mut x, &mut tmp);
            x
        }
    };
    p.coefficients(gpu, q, &mut x, &mut tmp)?;
    free_counted(ledger, BackendBuffer::DeviceAbc, [tmp]);
    ledger.release_one(BackendBuffer::DeviceScratch, tables);
    drop(p);
    Ok(x)
}

/// Elements of a chunk of the host checks' loops on every core.
const CHECK_CHUNK: usize = 1 << 14;

/// The value at `x` of the polynomial whose coefficients are `coeffs` (lowest first):
/// `sum_j coeffs_j x^j`, on the host (Horner's rule in chunks, on every core).
pub fn evaluate(coeffs: &[Scalar], x: Scalar) -> Scalar {
    use rayon::prelude::*;
    let step = x.pow_vartime([CHECK_CHUNK as u64]);
    coeffs
        .par_chunks(CHECK_CHUNK)
        .enumerate()
        .map(|(k, chunk)| {
            let horner = chunk.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
            horner * step.pow_vartime([k as u64])
        })
        .reduce(|| Scalar::ZERO, |a, b| a + b)
}

/// The values at `r` of the polynomials of degree below the domain's size whose evaluations
/// over `domain` (at `omega^i`, `i` in order; missing ones zero) are each of `evals`, on the
/// host, by the barycentric formula `f(r) = (r^n - 1) / n sum_i f(omega^i) omega^i /
/// (r - omega^i)`; `None` where `r` is a point of the domain.
pub fn interpolate_at<const K: usize>(
    evals: [&[Scalar]; K],
    domain: &Domain,
    r: Scalar,
) -> Option<[Scalar; K]> {
    use ff::BatchInvert;
    use rayon::prelude::*;
    let n = domain.size();
    let z = r.pow_vartime([n as u64]) - Scalar::ONE;
    if bool::from(z.is_zero()) || evals.iter().any(|e| e.len() > n) {
        return None;
    }
    let sums = (0..n.div_ceil(CHECK_CHUNK))
        .into_par_iter()
        .map(|k| {
            let start = k * CHECK_CHUNK;
            let len = CHECK_CHUNK.min(n - start);
            // omega^i and 1 / (r - omega^i) for the chunk's points.
            let w = powers(domain.omega.pow_vartime([start as u64]), domain.omega, len);
            let mut inv: Vec<Scalar> = w.iter().map(|w| r - w).collect();
            inv.iter_mut().batch_invert();
            evals.map(|e| {
                let e = e.get(start..).unwrap_or(&[]);
                e.iter()
                    .zip(w.iter().zip(&inv))
                    .map(|(f, (w, inv))| *f * w * inv)
                    .sum::<Scalar>()
            })
        })
        .reduce(
            || [Scalar::ZERO; K],
            |a, b| std::array::from_fn(|j| a[j] + b[j]),
        );
    let scale = z * domain.size_inv();
    Some(sums.map(|s| s * scale))
}

/// Checks the quotient's coefficients `h` (the H pipeline's output, `n - 1` of them or `n`, the
/// last zero) for evaluations `a`, `b`, `c` with `a b = c` at every point of `domain` (a
/// satisfied system): then `A B - C` vanishes on the domain and `H = (A B - C) / Z` exactly, so
/// that `H(r) Z(r) = A(r) B(r) - C(r)` at the point `r` off the domain. On the host; a random
/// `r` catches a wrong coefficient but with probability about `n / |Fr|`.
pub fn check_quotient_at(
    h: &[Scalar],
    [a, b, c]: [&[Scalar]; 3],
    domain: &Domain,
    r: Scalar,
) -> Result<(), String> {
    let [ar, br, cr] = interpolate_at([a, b, c], domain, r)
        .ok_or_else(|| "the check's point is on the domain, or an input is too long".to_string())?;
    let z = r.pow_vartime([domain.size() as u64]) - Scalar::ONE;
    let got = evaluate(h, r) * z;
    if got == ar * br - cr {
        Ok(())
    } else {
        Err(format!(
            "the quotient of 2^{} is wrong: H(r) Z(r) != A(r) B(r) - C(r) at r = {r:?}",
            domain.log2
        ))
    }
}

/// Checks `output`, a transform of `input` with root `omega`, at the indices `spots` against
/// direct evaluation of `input` as a polynomial on the host: the value at `omega^i` is
/// `sum_j input_j omega^(i j)`. The first difference, as text.
pub fn check_values(
    input: &[Scalar],
    output: &[Scalar],
    omega: Scalar,
    spots: &[usize],
) -> Result<(), String> {
    let n = input.len();
    if output.len() != n {
        return Err(format!("{} values for {n} inputs", output.len()));
    }
    for &i in spots {
        if i >= n {
            return Err(format!("no point {i} in a domain of {n}"));
        }
        let want = evaluate(input, omega.pow_vartime([i as u64]));
        if output[i] != want {
            return Err(format!(
                "the value at omega^{i} is {:?}, the polynomial's {want:?}",
                output[i]
            ));
        }
    }
    Ok(())
}

/// Checks that `back`, the inverse transform (unscaled) of `input`'s transform, is `input`
/// times its size, at every point, on the host (on every core). The first difference, as text.
pub fn check_round_trip(input: &[Scalar], back: &[Scalar]) -> Result<(), String> {
    use rayon::prelude::*;
    let n = input.len();
    if back.len() != n {
        return Err(format!("{} values back for {n} inputs", back.len()));
    }
    let size = Scalar::from(n as u64);
    match (0..n)
        .into_par_iter()
        .find_first(|&j| back[j] != input[j] * size)
    {
        None => Ok(()),
        Some(j) => Err(format!(
            "the inverse transform does not give the input back (element {j} of {n})"
        )),
    }
}

/// Checks the device's transform by `forward` of `input` (its domain's size) against the host:
/// its values at the indices `spots` ([`check_values`]), then its transform by `inverse` (the
/// inverse root's) back to the input ([`check_round_trip`]). The first difference, or the
/// device's error, as text.
pub fn check_ntt<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    input: &[Scalar],
    forward: &NttTables<D>,
    inverse: &NttTables<D>,
    spots: &[usize],
) -> Result<(), String> {
    let (log_n, omega) = (forward.log_n, forward.omega);
    let n = 1usize << log_n;
    let what = format!("NTT 2^{log_n} ({})", forward.shape.name());
    if inverse.log_n != log_n || omega * inverse.omega != Scalar::ONE {
        return Err(format!(
            "{what}: the inverse tables are not the inverse root's"
        ));
    }
    if input.len() != n {
        return Err(format!("{what}: {} inputs", input.len()));
    }
    let device = |e: DeviceError| format!("{what}: {e}");
    let mut x = gpu.upload(q, input, "NTT check").map_err(device)?;
    let mut tmp = gpu
        .alloc(n as u64 * FR, "NTT check scratch")
        .map_err(device)?;
    let mut out = vec![Scalar::ZERO; n];
    ntt_with(gpu, q, &mut x, &mut tmp, forward).map_err(device)?;
    q.read(x.raw(), 0, bytes_of_mut(&mut out)).map_err(device)?;
    check_values(input, &out, omega, spots).map_err(|e| format!("{what}: {e}"))?;
    ntt_with(gpu, q, &mut x, &mut tmp, inverse).map_err(device)?;
    q.read(x.raw(), 0, bytes_of_mut(&mut out)).map_err(device)?;
    check_round_trip(input, &out).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_mode_fits_the_room_left() {
        let n = 1usize << 20;
        let v = n as u64 * FR;
        let slack = table_bytes_bound(20);
        let choose = |room: u64, beside| NttMode::choose(n, room, beside);
        assert_eq!(choose(4 * v + slack, true), Some(NttMode::Ahead));
        assert_eq!(choose(4 * v + slack - 1, true), Some(NttMode::Resident));
        assert_eq!(choose(3 * v + slack - 1, true), Some(NttMode::Split));
        assert_eq!(choose(2 * v + slack - 1, true), None);
        // Negative twin: without copies beside the kernels, a fourth vector is never taken.
        assert_eq!(choose(100 * v, false), Some(NttMode::Resident));
    }

    #[test]
    fn radices_cover_the_size_in_few_even_passes() {
        for max_log_radix in 1..=10 {
            let shape = NttShape {
                max_log_radix,
                log_tile: 10,
                log_per_thread: 3,
            };
            for log_n in 1..=31 {
                let r = shape.radices(log_n);
                assert_eq!(r.iter().sum::<u32>(), log_n, "{shape:?} 2^{log_n}");
                assert_eq!(r.len() as u32, log_n.div_ceil(max_log_radix));
                assert!(r.iter().all(|&d| d >= 1 && d <= max_log_radix));
                assert!(r.iter().max().unwrap() - r.iter().min().unwrap() <= 1);
            }
            // One point: one copying pass, so that a finishing step still runs.
            assert_eq!(shape.radices(0), vec![0]);
        }
        // Negative twin: 2^24 in radix 2^8 is three passes, not two of 12.
        let r = NttShape {
            max_log_radix: 8,
            log_tile: 10,
            log_per_thread: 3,
        }
        .radices(24);
        assert_eq!(r, vec![8, 8, 8]);
        assert_ne!(r.len(), 2);
    }

    #[test]
    fn shapes_parse_and_the_kernels_bound_them() {
        let s = NttShape::parse("8/10/1").unwrap();
        assert_eq!((s.max_log_radix, s.log_tile, s.log_per_thread), (8, 10, 1));
        assert_eq!(NttShape::parse(&s.name()), Ok(s));
        let d = NttShape::parse("9/9").unwrap();
        assert_eq!(d.log_per_thread, DEFAULT_LOG_PER_THREAD);
        // Negative twins: a thread of 2^0 or 2^4 elements has no kernel; radices and tiles
        // past 2^10 and malformed names are refused.
        for bad in [
            "8/10/0", "8/10/4", "0/10/2", "11/10/2", "8/11/2", "8", "8/10/1/1", "a/b",
        ] {
            assert!(NttShape::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_group_fits_the_devices_group_size_and_local_memory() {
        let info = |max_group_size, local_memory_bytes| DeviceInfo {
            name: "test".into(),
            platform: "test".into(),
            driver: "0".into(),
            compute_units: 1,
            memory_bytes: 1 << 30,
            max_alloc_bytes: 1 << 30,
            local_memory_bytes,
            max_group_size,
            program_from_cache: false,
        };
        // 2^10 elements, 2 a thread: 512 threads, 33 KiB.
        let big = info(1024, 48 << 10);
        assert!(group_fit(&big, 10, 1).is_ok());
        assert_eq!(local_bytes(1 << 10), 33 << 10);
        // Negative twins: too few threads a group, too little local memory, each alone.
        let few_threads = group_fit(&info(256, 48 << 10), 10, 1).unwrap_err();
        assert!(few_threads.contains("512 threads"), "{few_threads}");
        assert!(group_fit(&info(1024, 32 << 10), 10, 1).is_err());
        // Four a thread halves the threads: fits 256.
        assert!(group_fit(&info(256, 48 << 10), 10, 2).is_ok());
    }

    #[test]
    fn store_modes_match_the_kernel() {
        let source = include_str!("ntt.cl");
        for (name, mode) in [
            ("PL_NTT_STORE", MODE_STORE),
            ("PL_NTT_SCALE", MODE_SCALE),
            ("PL_NTT_MUL_INTO", MODE_MUL_INTO),
            ("PL_NTT_SUB_INTO", MODE_SUB_INTO),
            ("PL_NTT_SCALE_CANONICAL", MODE_SCALE_CANONICAL),
        ] {
            let line = format!("#define {name} {mode}\n");
            assert!(source.contains(&line), "{line:?} not in ntt.cl");
        }
        // Negative twin: a wrong number is not found.
        assert!(!source.contains("#define PL_NTT_SCALE 2\n"));
    }

    fn random(n: usize, rng: &mut impl rand::RngCore) -> Vec<Scalar> {
        (0..n).map(|_| Scalar::random(&mut *rng)).collect()
    }

    #[test]
    fn evaluation_is_the_polynomials_sum_in_and_across_chunks() {
        let mut rng = rand::thread_rng();
        // Across chunks: CHECK_CHUNK + 3 coefficients.
        for n in [0, 1, 5, CHECK_CHUNK + 3] {
            let c = random(n, &mut rng);
            let x = Scalar::random(&mut rng);
            let mut want = Scalar::ZERO;
            let mut p = Scalar::ONE;
            for v in &c {
                want += *v * p;
                p *= x;
            }
            assert_eq!(evaluate(&c, x), want, "{n} coefficients");
            // Negative twin: one coefficient changed changes the value.
            if n > 0 {
                let mut bad = c.clone();
                bad[n - 1] += Scalar::ONE;
                assert_ne!(evaluate(&bad, x), want, "{n} coefficients, twin");
            }
        }
    }

    /// The evaluations of `coeffs` over `domain` (at `omega^i`), directly.
    fn evaluations(coeffs: &[Scalar], domain: &Domain) -> Vec<Scalar> {
        (0..domain.size())
            .map(|i| evaluate(coeffs, domain.omega.pow_vartime([i as u64])))
            .collect()
    }

    #[test]
    fn interpolation_at_a_point_is_the_polynomials_value_there() {
        let mut rng = rand::thread_rng();
        for log in [0, 3, 15] {
            let d = Domain::new(log).unwrap();
            let n = d.size();
            // Cheap evaluations at 2^15: those of x^3 + 7 (short inputs: the rest are zero).
            let (f, g) = if log < 15 {
                (random(n, &mut rng), random(n, &mut rng))
            } else {
                let mut f = vec![Scalar::ZERO; 4];
                f[0] = Scalar::from(7u64);
                f[3] = Scalar::ONE;
                (f, Vec::new())
            };
            let (fe, ge) = if log < 15 {
                (evaluations(&f, &d), evaluations(&g, &d))
            } else {
                let fe = (0..n)
                    .map(|i| d.omega.pow_vartime([3 * i as u64]) + Scalar::from(7u64))
                    .collect();
                (fe, Vec::new())
            };
            let r = Scalar::random(&mut rng);
            let [fr, gr] = interpolate_at([&fe, &ge], &d, r).expect("r off the domain");
            assert_eq!(fr, evaluate(&f, r), "2^{log}");
            assert_eq!(gr, evaluate(&g, r), "2^{log}");
            // Negative twins: a point of the domain has no barycentric value; another
            // evaluation gives another polynomial.
            assert!(interpolate_at([&fe], &d, d.omega.pow_vartime([n as u64 - 1])).is_none());
            let mut bad = fe.clone();
            bad[n / 2] += Scalar::ONE;
            assert_ne!(interpolate_at([&bad], &d, r).unwrap()[0], fr, "2^{log}");
        }
    }

    #[test]
    fn the_quotient_of_a_satisfied_system_checks_at_a_point() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(4).unwrap();
        let n = d.size();
        let (a, b) = (random(n, &mut rng), random(n, &mut rng));
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        // A and B's coefficients (the inverse transform, directly), their product, less C's:
        // (A B - C) = H (x^n - 1), so H's coefficients are its upper half.
        let inv = d.omega_inv();
        let coeffs = |e: &[Scalar]| -> Vec<Scalar> {
            (0..n)
                .map(|j| evaluate(e, inv.pow_vartime([j as u64])) * d.size_inv())
                .collect()
        };
        let (ca, cb, cc) = (coeffs(&a), coeffs(&b), coeffs(&c));
        let mut p = vec![Scalar::ZERO; 2 * n];
        for i in 0..n {
            for j in 0..n {
                p[i + j] += ca[i] * cb[j];
            }
            p[i] -= cc[i];
        }
        let h: Vec<Scalar> = p[n..2 * n - 1].to_vec();
        assert!(
            (0..n - 1).all(|j| p[j] == -h[j]),
            "A B - C divisible by x^n - 1"
        );
        let r = Scalar::random(&mut rng);
        assert_eq!(check_quotient_at(&h, [&a, &b, &c], &d, r), Ok(()));
        // Negative twins: a changed coefficient; an unsatisfied system (c changed at one point);
        // a point of the domain.
        let mut bad = h.clone();
        bad[3] += Scalar::ONE;
        let err = check_quotient_at(&bad, [&a, &b, &c], &d, r).unwrap_err();
        assert!(err.contains("quotient of 2^4 is wrong"), "{err}");
        let mut c2 = c.clone();
        c2[5] += Scalar::ONE;
        assert!(check_quotient_at(&h, [&a, &b, &c2], &d, r).is_err());
        assert!(check_quotient_at(&h, [&a, &b, &c], &d, d.omega).is_err());
    }

    #[test]
    fn a_transforms_spot_values_and_round_trip_check_on_the_host() {
        let mut rng = rand::thread_rng();
        let d = Domain::new(5).unwrap();
        let input = random(d.size(), &mut rng);
        let out = evaluations(&input, &d);
        let spots = [0, 1, 17, 31];
        assert_eq!(check_values(&input, &out, d.omega, &spots), Ok(()));
        let back: Vec<Scalar> = evaluations(
            &out,
            &Domain {
                omega: d.omega_inv(),
                ..d
            },
        );
        assert_eq!(check_round_trip(&input, &back), Ok(()));
        // Negative twins: a wrong value at a spot, the transform of another root, a point past
        // the domain; a round trip off at one element, or scaled to the input (not times n).
        let mut bad = out.clone();
        bad[17] += Scalar::ONE;
        let err = check_values(&input, &bad, d.omega, &spots).unwrap_err();
        assert!(err.contains("omega^17"), "{err}");
        let other = evaluations(
            &input,
            &Domain {
                omega: d.omega.square(),
                ..d
            },
        );
        assert!(check_values(&input, &other, d.omega, &spots).is_err());
        assert!(check_values(&input, &out, d.omega, &[32]).is_err());
        let mut off = back.clone();
        off[9] += Scalar::ONE;
        let err = check_round_trip(&input, &off).unwrap_err();
        assert!(err.contains("element 9 of 32"), "{err}");
        assert!(check_round_trip(&input, &input).is_err());
    }
}
