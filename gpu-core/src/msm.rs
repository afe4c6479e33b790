//! MSMs on a device, executing prover-core's query plan: the host scans each query's scalars
//! (density filtering; zeros dropped, ones listed for a batch addition, the rest listed with
//! their exponents), the device sums the listed bases of ones and runs a bucket MSM over the
//! rest, gathering bases by index from the query's bases: resident when they fit, streamed in
//! chunks when they do not. Window and chunk sizes come from the device's compute units and the
//! memory left under its limit.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::stages::density::ScalarBytes;
use prover_core::stages::plan::MsmTerm;
use prover_core::stages::Witness;
use rayon::prelude::*;

use crate::classify::DeviceScan;
use crate::context::{launch_threads, GpuDevice};
use crate::device::{
    bytes_of_mut, check_elements, Arg, Device, DeviceCopy, DeviceError, DeviceResult, Queue,
};
use crate::memory::{free_counted, DeviceBuffer};

/// Exponent bits the kernels read (Fr's limbs).
const EXP_BITS: usize = 256;
/// The largest window.
const MAX_WINDOW: usize = 12;
/// Threads per compute unit the MSM aims to keep busy.
const THREADS_PER_UNIT: usize = 128;
/// Bytes per listed term on the device: a u32 index and a 32-byte exponent.
const TERM_BYTES: u64 = 36;

/// A curve the device MSMs run on.
pub trait DeviceCurve: DeviceCopy {
    /// The projective (jacobian) sum type, with the device's layout.
    type Projective: DeviceCopy + Group + Send + Sync;
    /// Bytes of a jacobian point.
    const JACOBIAN_BYTES: u64 = std::mem::size_of::<Self::Projective>() as u64;
    /// Bytes of an affine base.
    const AFFINE_BYTES: u64 = std::mem::size_of::<Self>() as u64;
    /// The name in messages.
    const NAME: &'static str;
    /// The batch-addition kernel.
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The bucket MSM kernel.
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The sorted MSM's kernels: adding runs, their heads and tails made jacobian, completing
    /// the buckets.
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3];
    /// The sorted MSM's reduction kernel.
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// The sorted MSM's kernel adding groups of partial sums.
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Parameter generation's fixed-base products.
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Parameter generation: jacobian products made affine.
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
    /// Timing workloads' synthetic bases.
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str;
}

/// Which MSM kernel runs the listed and dense terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MsmKernel {
    /// ec-gpu-gen-style: each thread fills its own buckets for a group of terms and a window.
    Stock,
    /// proofline's own (`pippenger.cl`): signed windows, terms sorted by bucket on the device,
    /// equal runs of sorted entries added in XYZZ coordinates. The default.
    #[default]
    Sorted,
}

/// The environment variable choosing the MSM kernel (`stock` or `sorted`).
pub const MSM_VAR: &str = "PROOFLINE_GPU_MSM";

impl MsmKernel {
    /// From `PROOFLINE_GPU_MSM` (`stock`, `sorted`; unset: the default); anything else is an
    /// error naming the choices.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(MSM_VAR) {
            Err(_) => Ok(Self::default()),
            Ok(v) => Self::parse(&v),
        }
    }

    /// `stock` or `sorted`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "stock" => Ok(MsmKernel::Stock),
            "sorted" => Ok(MsmKernel::Sorted),
            other => Err(format!("{MSM_VAR}={other}: expected `stock` or `sorted`")),
        }
    }
}

impl DeviceCurve for G1Affine {
    type Projective = G1Projective;
    const NAME: &'static str = "G1";
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_sum_indexed
    }
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_msm
    }
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3] {
        let n = &gpu.names;
        [&n.g1_pl_runs, &n.g1_pl_edges, &n.g1_pl_fixup]
    }
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_pl_reduce
    }
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_pl_sum
    }
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_fixed_base
    }
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_to_affine
    }
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g1_synthetic
    }
}

impl DeviceCurve for G2Affine {
    type Projective = G2Projective;
    const NAME: &'static str = "G2";
    fn sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_sum_indexed
    }
    fn msm_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_msm
    }
    fn pl_kernels<D: Device>(gpu: &GpuDevice<D>) -> [&str; 3] {
        let n = &gpu.names;
        [&n.g2_pl_runs, &n.g2_pl_edges, &n.g2_pl_fixup]
    }
    fn pl_reduce_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_pl_reduce
    }
    fn pl_sum_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_pl_sum
    }
    fn fixed_base_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_fixed_base
    }
    fn to_affine_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_to_affine
    }
    fn synthetic_kernel<D: Device>(gpu: &GpuDevice<D>) -> &str {
        &gpu.names.g2_synthetic
    }
}

/// The shape of one bucket MSM launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmPlan {
    /// Bits per window.
    pub window: usize,
    /// Windows over the 256 exponent bits.
    pub windows: usize,
    /// Groups the terms are split into (one thread per group and window).
    pub groups: usize,
}

impl MsmPlan {
    /// Threads (= partial sums) of the launch.
    pub fn threads(&self) -> usize {
        self.windows * self.groups
    }

    /// Device bytes of the buckets and the partial sums, for jacobian points of `jac` bytes.
    pub fn scratch_bytes(&self, jac: u64) -> u64 {
        self.threads() as u64 * ((1u64 << self.window) - 1 + 1) * jac
    }

    /// The plan for `n` terms on a device of `compute_units`, whose buckets fit in `budget`
    /// bytes: the window that minimises the rounds of threads times each thread's additions
    /// (its share of the terms, and twice its buckets for the summation by parts).
    pub fn new(n: usize, compute_units: u32, jac: u64, budget: u64) -> Option<Self> {
        let units = (compute_units.max(1) as usize) * THREADS_PER_UNIT;
        let mut best: Option<(usize, MsmPlan)> = None;
        for window in 1..=MAX_WINDOW {
            let windows = EXP_BITS.div_ceil(window);
            let mut groups = (units / windows).clamp(1, n.max(1));
            // Fewer groups when the buckets do not fit.
            loop {
                let plan = MsmPlan {
                    window,
                    windows,
                    groups,
                };
                if plan.scratch_bytes(jac) <= budget {
                    let rounds = plan.threads().div_ceil(units);
                    let cost = rounds * (n.div_ceil(groups) + (2 << window));
                    if best.map_or(true, |(c, _)| cost < c) {
                        best = Some((cost, plan));
                    }
                    break;
                }
                if groups == 1 {
                    break;
                }
                groups /= 2;
            }
        }
        best.map(|(_, p)| p)
    }

    /// Combines the partial sums (`results[g * windows + w]`) into the MSM's value: window by
    /// window from the most significant, doubling in between.
    pub fn combine<P: Group>(&self, results: &[P]) -> P {
        let mut acc = P::identity();
        let mut bits = 0;
        for w in 0..self.windows {
            let width = self.window.min(EXP_BITS - bits);
            for _ in 0..width {
                acc = acc.double();
            }
            for g in 0..self.groups {
                acc += results[g * self.windows + w];
            }
            bits += width;
        }
        acc
    }
}

/// A query's scalars as the device takes them: base indices of the ones, and base indices and
/// exponents of the rest (zeros and unused variables dropped). Indices are into the query's
/// bases, ascending.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Bases whose scalar is one.
    pub ones: Vec<u32>,
    /// Bases of the other nonzero scalars.
    pub idx: Vec<u32>,
    /// Their exponents.
    pub exps: Vec<ScalarBytes>,
}

impl Scan {
    /// Scans the terms of one query (their bases ranges are disjoint and ascending).
    pub fn new<'a>(
        terms: impl IntoIterator<Item = &'a MsmTerm>,
        witness: &Witness,
    ) -> DeviceResult<Self> {
        const CHUNK: usize = 1 << 14;
        let mut out = Scan::default();
        for t in terms {
            if t.bases.end > u32::MAX as usize {
                return Err(DeviceError::new("scanning scalars", "more than 2^32 bases"));
            }
            let scalars = t.scalars(witness);
            let density = t.density(witness);
            // The base index of each chunk's first used variable.
            let mut starts = Vec::with_capacity(scalars.len().div_ceil(CHUNK));
            let mut k = t.bases.start;
            for s in (0..scalars.len()).step_by(CHUNK) {
                starts.push((s, k));
                let e = (s + CHUNK).min(scalars.len());
                k += density.map_or(e - s, |d| (s..e).filter(|&j| d.get(j)).count());
            }
            if k != t.bases.end {
                return Err(DeviceError::new(
                    "scanning scalars",
                    format!(
                        "{} used scalars for {} bases",
                        k - t.bases.start,
                        t.bases.len()
                    ),
                ));
            }
            let parts: Vec<Scan> = starts
                .into_par_iter()
                .map(|(s, mut k)| {
                    let mut part = Scan::default();
                    let e = (s + CHUNK).min(scalars.len());
                    for (j, sc) in scalars[s..e].iter().enumerate() {
                        if density.is_some_and(|d| !d.get(s + j)) {
                            continue;
                        }
                        if sc.is_one() {
                            part.ones.push(k as u32);
                        } else if !sc.is_zero() {
                            part.idx.push(k as u32);
                            part.exps.push(*sc);
                        }
                        k += 1;
                    }
                    part
                })
                .collect();
            for p in parts {
                out.ones.extend_from_slice(&p.ones);
                out.idx.extend_from_slice(&p.idx);
                out.exps.extend_from_slice(&p.exps);
            }
        }
        Ok(out)
    }

    /// Host bytes it holds.
    pub fn heap_bytes(&self) -> u64 {
        (self.ones.capacity() * 4 + self.idx.capacity() * 4 + self.exps.capacity() * 32) as u64
    }
}

/// Where a query's bases are.
pub enum Bases<'a, D: Device, G> {
    /// On the device, the whole query.
    Resident(&'a DeviceBuffer<D>),
    /// On the host: uploaded chunk by chunk.
    Streamed(&'a [G]),
}

/// Bytes of an exponent on the device.
const EXP_BYTES: u64 = std::mem::size_of::<ScalarBytes>() as u64;

/// Whether `n` terms fit an MSM's operands, given in elements: exponents
/// `exp_offset..exp_offset + n` of the `exps` held, and either the first `n` of the `bases`
/// held (dense: `idx` is `None`) or the first `n` of the `idx` indices held (gathered: the
/// indices' values are checked against the bases on the host, where they are listed). The
/// error names every length.
pub fn check_terms(
    what: &str,
    n: u64,
    exp_offset: u64,
    bases: u64,
    idx: Option<u64>,
    exps: u64,
) -> DeviceResult<()> {
    let fits = exp_offset.checked_add(n).is_some_and(|end| end <= exps)
        && match idx {
            None => n <= bases,
            Some(idx) => n <= idx,
        };
    if fits {
        return Ok(());
    }
    let idx = idx.map_or(String::new(), |i| format!(", {i} indices"));
    Err(DeviceError::new(
        what,
        format!(
            "{n} terms from exponent {exp_offset} do not fit the buffers: {bases} bases{idx}, \
             {exps} exponents"
        ),
    ))
}

/// [`check_terms`] for buffers on the device: `bases` of `G`, `idx` of u32, `exps` of
/// [`ScalarBytes`].
pub(crate) fn check_buffers<D: Device, G: DeviceCurve>(
    bases: &DeviceBuffer<D>,
    idx: Option<&DeviceBuffer<D>>,
    exps: &DeviceBuffer<D>,
    exp_offset: usize,
    n: usize,
) -> DeviceResult<()> {
    check_terms(
        &format!("{} MSM of {n} terms", G::NAME),
        n as u64,
        exp_offset as u64,
        bases.bytes() / G::AFFINE_BYTES,
        idx.map(|i| i.bytes() / 4),
        exps.bytes() / EXP_BYTES,
    )
}

/// Runs a bucket MSM over `n` terms whose exponents are `exps[exp_offset..]` and whose bases are
/// `bases[idx[i]]` (or `bases[i]` without `idx`); `n` past any buffer is an error.
#[allow(clippy::too_many_arguments)]
fn bucket_msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &DeviceBuffer<D>,
    idx: Option<&DeviceBuffer<D>>,
    exps: &DeviceBuffer<D>,
    exp_offset: usize,
    n: usize,
    kernel: MsmKernel,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    check_buffers::<D, G>(bases, idx, exps, exp_offset, n)?;
    if n == 0 {
        return Ok(G::Projective::identity());
    }
    let info = gpu.device.info();
    let budget = gpu.gauge.available().min(info.max_alloc_bytes);
    // The sorted MSM's buckets for every window at once need more room than the stock
    // kernel's smallest plan: under a limit too tight for them, the stock kernel runs.
    if kernel == MsmKernel::Sorted {
        if let Some(plan) =
            crate::pippenger::Plan::new(n, G::JACOBIAN_BYTES, budget, info.compute_units)
        {
            return crate::pippenger::msm::<D, G>(
                gpu, q, &plan, bases, idx, exps, exp_offset, n, ledger,
            );
        }
    }
    let plan = MsmPlan::new(n, info.compute_units, G::JACOBIAN_BYTES, budget).ok_or_else(|| {
        DeviceError::new(
            format!("{} MSM of {n} terms", G::NAME),
            "no room for even one bucket set under the memory limit",
        )
    })?;
    let jac = G::JACOBIAN_BYTES;
    let threads = plan.threads() as u64;
    let buckets = gpu.scratch(q, threads * ((1 << plan.window) - 1) * jac, "MSM buckets")?;
    let results = gpu.scratch(q, threads * jac, "MSM partial sums")?;
    ledger.register(
        BackendBuffer::DeviceScratch,
        buckets.bytes() + results.bytes(),
    );
    q.launch(
        G::msm_kernel(gpu),
        plan.threads().div_ceil(crate::context::GROUP),
        crate::context::GROUP,
        &[
            Arg::Buffer(bases.raw()),
            Arg::Buffer(idx.unwrap_or(exps).raw()),
            Arg::U32(idx.is_some() as u32),
            Arg::Buffer(exps.raw()),
            Arg::U32(exp_offset as u32),
            Arg::U32(n as u32),
            Arg::Buffer(buckets.raw()),
            Arg::Buffer(results.raw()),
            Arg::U32(plan.groups as u32),
            Arg::U32(plan.windows as u32),
            Arg::U32(plan.window as u32),
        ],
    )?;
    let mut partial = vec![G::Projective::identity(); plan.threads()];
    q.read(results.raw(), 0, bytes_of_mut(&mut partial))?;
    free_counted(ledger, BackendBuffer::DeviceScratch, [buckets, results]);
    Ok(plan.combine(&partial))
}

/// The sum of `bases[idx[i]]` over the `n` listed indices (more than `idx` holds is an error).
fn sum_indexed<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &DeviceBuffer<D>,
    idx: &DeviceBuffer<D>,
    n: usize,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    check_elements(
        idx.bytes(),
        0,
        n as u64,
        4,
        &format!("{} batch addition of {n} indices", G::NAME),
    )?;
    if n == 0 {
        return Ok(G::Projective::identity());
    }
    let units = gpu.device.info().compute_units.max(1) as usize * THREADS_PER_UNIT;
    // At least 64 additions per thread: fewer partial sums for the host to add.
    let threads = units.min(n.div_ceil(64)).max(1);
    let per = n.div_ceil(threads);
    let threads = n.div_ceil(per);
    let results = gpu.scratch(q, threads as u64 * G::JACOBIAN_BYTES, "batch addition sums")?;
    ledger.register(BackendBuffer::DeviceScratch, results.bytes());
    launch_threads(
        q,
        G::sum_kernel(gpu),
        threads,
        &[
            Arg::Buffer(bases.raw()),
            Arg::Buffer(idx.raw()),
            Arg::U32(n as u32),
            Arg::U32(per as u32),
            Arg::U32(threads as u32),
            Arg::Buffer(results.raw()),
        ],
    )?;
    let sum = crate::pippenger::sum_on_device::<D, G>(gpu, q, &results, threads, ledger)?;
    free_counted(ledger, BackendBuffer::DeviceScratch, [results]);
    Ok(sum)
}

/// How many listed terms one launch takes, given the bytes left beside the MSM's own scratch
/// (half of what is available: the rest is for the buckets).
fn terms_per_launch<D: Device>(gpu: &GpuDevice<D>) -> usize {
    ((gpu.gauge.available() / 2) / TERM_BYTES).max(1) as usize
}

/// Executes a scanned query against its bases: the batch addition of the ones plus the bucket
/// MSM of the rest. Streamed bases are uploaded in chunks that fit beside the work.
pub fn query_msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: Bases<'_, D, G>,
    scan: &Scan,
    kernel: MsmKernel,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    let len = match &bases {
        Bases::Resident(buf) => (buf.bytes() / G::AFFINE_BYTES) as usize,
        Bases::Streamed(host) => host.len(),
    };
    let last = scan.ones.last().max(scan.idx.last()).copied();
    if last.is_some_and(|i| i as usize >= len) {
        return Err(DeviceError::new(
            format!("{} MSM", G::NAME),
            format!("a term uses base {} of {len}", last.unwrap_or(0)),
        ));
    }
    let mut total = G::Projective::identity();
    match bases {
        Bases::Resident(buf) => {
            total += listed_msm::<D, G>(
                gpu, q, buf, &scan.ones, &scan.idx, &scan.exps, kernel, ledger,
            )?;
        }
        Bases::Streamed(host) => {
            let chunk = stream_chunk::<D, G>(gpu, host.len())?;
            for start in (0..host.len()).step_by(chunk) {
                let end = (start + chunk).min(host.len());
                let range = |v: &[u32]| {
                    v.partition_point(|&i| (i as usize) < start)
                        ..v.partition_point(|&i| (i as usize) < end)
                };
                let (ro, rd) = (range(&scan.ones), range(&scan.idx));
                if ro.is_empty() && rd.is_empty() {
                    continue;
                }
                let rebase = |v: &[u32]| v.iter().map(|&i| i - start as u32).collect::<Vec<_>>();
                let buf = gpu.upload_scratch(q, &host[start..end], "streamed bases")?;
                ledger.register(BackendBuffer::DeviceScratch, buf.bytes());
                total += listed_msm::<D, G>(
                    gpu,
                    q,
                    &buf,
                    &rebase(&scan.ones[ro]),
                    &rebase(&scan.idx[rd.clone()]),
                    &scan.exps[rd],
                    kernel,
                    ledger,
                )?;
                free_counted(ledger, BackendBuffer::DeviceScratch, [buf]);
            }
        }
    }
    Ok(total)
}

/// Bases per streamed chunk: a third of what is left, so that the listed terms and the buckets
/// fit beside it.
fn stream_chunk<D: Device, G: DeviceCurve>(gpu: &GpuDevice<D>, len: usize) -> DeviceResult<usize> {
    let room = gpu.gauge.available().min(gpu.device.info().max_alloc_bytes) / 3;
    let chunk = (room / G::AFFINE_BYTES) as usize;
    if chunk == 0 {
        return Err(DeviceError::new(
            format!("streaming {} bases", G::NAME),
            "no room for a chunk under the memory limit",
        ));
    }
    Ok(chunk.min(len.max(1)))
}

/// The ones and the listed terms against bases already on the device, in launches that fit.
#[allow(clippy::too_many_arguments)]
fn listed_msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &DeviceBuffer<D>,
    ones: &[u32],
    idx: &[u32],
    exps: &[ScalarBytes],
    kernel: MsmKernel,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    let mut total = G::Projective::identity();
    let per = terms_per_launch(gpu);
    for part in ones.chunks(per * 9) {
        let buf = gpu.upload_scratch(q, part, "indices of ones")?;
        ledger.register(BackendBuffer::DeviceScratch, buf.bytes());
        total += sum_indexed::<D, G>(gpu, q, bases, &buf, part.len(), ledger)?;
        free_counted(ledger, BackendBuffer::DeviceScratch, [buf]);
    }
    for (i, e) in idx.chunks(per).zip(exps.chunks(per)) {
        let ib = gpu.upload_scratch(q, i, "MSM indices")?;
        let eb = gpu.upload_scratch(q, e, "MSM exponents")?;
        ledger.register(BackendBuffer::DeviceScratch, ib.bytes() + eb.bytes());
        total += bucket_msm::<D, G>(gpu, q, bases, Some(&ib), &eb, 0, i.len(), kernel, ledger)?;
        free_counted(ledger, BackendBuffer::DeviceScratch, [ib, eb]);
    }
    Ok(total)
}

/// Executes a query classified on the device ([`DeviceScan`]) against its resident bases: the
/// batch addition of the ones plus the bucket MSM of the rest.
pub fn scanned_msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &DeviceBuffer<D>,
    scan: &DeviceScan<D>,
    kernel: MsmKernel,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    let len = (bases.bytes() / G::AFFINE_BYTES) as usize;
    if scan.bases_end > len {
        return Err(DeviceError::new(
            format!("{} MSM", G::NAME),
            format!("the terms use bases up to {} of {len}", scan.bases_end),
        ));
    }
    let ones = sum_indexed::<D, G>(gpu, q, bases, &scan.ones, scan.n_ones, ledger)?;
    let rest = bucket_msm::<D, G>(
        gpu,
        q,
        bases,
        Some(&scan.idx),
        &scan.exps,
        0,
        scan.n_others,
        kernel,
        ledger,
    )?;
    Ok(ones + rest)
}

/// The dense MSM of the first `n` exponents in `exps` (on the device) against `bases`; `n`
/// past the bases or the exponents is an error naming both lengths.
pub fn dense_msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: Bases<'_, D, G>,
    exps: &DeviceBuffer<D>,
    n: usize,
    kernel: MsmKernel,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    match bases {
        Bases::Resident(buf) => bucket_msm::<D, G>(gpu, q, buf, None, exps, 0, n, kernel, ledger),
        Bases::Streamed(host) => {
            check_terms(
                &format!("dense {} MSM of {n} terms", G::NAME),
                n as u64,
                0,
                host.len() as u64,
                None,
                exps.bytes() / EXP_BYTES,
            )?;
            let chunk = stream_chunk::<D, G>(gpu, n)?;
            let mut total = G::Projective::identity();
            for start in (0..n).step_by(chunk) {
                let end = (start + chunk).min(n);
                let buf = gpu.upload_scratch(q, &host[start..end], "streamed bases")?;
                ledger.register(BackendBuffer::DeviceScratch, buf.bytes());
                total += bucket_msm::<D, G>(
                    gpu,
                    q,
                    &buf,
                    None,
                    exps,
                    start,
                    end - start,
                    kernel,
                    ledger,
                )?;
                free_counted(ledger, BackendBuffer::DeviceScratch, [buf]);
            }
            Ok(total)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan's lists, one variable at a time.
    fn naive_scan(terms: &[&MsmTerm], w: &Witness) -> Scan {
        let mut out = Scan::default();
        for t in terms {
            let d = t.density(w);
            let mut k = t.bases.start as u32;
            for (j, sc) in t.scalars(w).iter().enumerate() {
                if d.is_some_and(|d| !d.get(j)) {
                    continue;
                }
                if sc.is_one() {
                    out.ones.push(k);
                } else if !sc.is_zero() {
                    out.idx.push(k);
                    out.exps.push(*sc);
                }
                k += 1;
            }
        }
        out
    }

    #[test]
    fn scan_lists_what_a_one_by_one_scan_lists() {
        use ff::Field;
        use prover_core::stages::density::Density;
        use prover_core::stages::plan::{Filter, ScalarSource};
        use rand::Rng;
        let mut rng = rand::thread_rng();
        // Sizes around the chunk (2^14), the A query's density on the aux (one in three unused).
        for n in [
            0usize,
            1,
            5,
            (1 << 14) - 1,
            1 << 14,
            (1 << 14) + 7,
            3 * (1 << 14) + 11,
        ] {
            let aux: Vec<ScalarBytes> = (0..n)
                .map(|_| {
                    let s = match rng.gen_range(0..4) {
                        0 => blstrs::Scalar::ZERO,
                        1 => blstrs::Scalar::ONE,
                        _ => blstrs::Scalar::random(&mut rng),
                    };
                    ScalarBytes::from_scalar(&s)
                })
                .collect();
            let input = vec![ScalarBytes::from_scalar(&blstrs::Scalar::ONE); 3];
            let mut density = Density::default();
            for j in 0..n {
                density.push_unset();
                if j % 3 != 2 {
                    density.set(j);
                }
            }
            let used = density.count_ones();
            let w = Witness {
                input,
                aux,
                a_aux_density: density,
                b_input_density: Density::default(),
                b_aux_density: Density::default(),
            };
            let inputs = MsmTerm {
                bases: 0..3,
                source: ScalarSource::Input,
                filter: Filter::All,
            };
            let aux_term = MsmTerm {
                bases: 3..3 + used,
                source: ScalarSource::Aux,
                filter: Filter::AAux,
            };
            let got = Scan::new([&inputs, &aux_term], &w).unwrap();
            assert_eq!(got, naive_scan(&[&inputs, &aux_term], &w), "n {n}");
            // Negative twin: a term whose bases do not match its used scalars is refused.
            let wrong = MsmTerm {
                bases: 3..4 + used,
                ..aux_term.clone()
            };
            let err = Scan::new([&wrong], &w).unwrap_err().to_string();
            assert!(err.contains("used scalars for"), "{err}");
        }
    }

    #[test]
    fn terms_past_the_bases_or_the_exponents_are_refused() {
        // Dense: n up to both lengths; gathered: n up to the indices (the bases may be fewer).
        assert_eq!(check_terms("msm", 10, 0, 10, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 6, 4, 6, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 0, 10, 0, None, 10), Ok(()));
        assert_eq!(check_terms("msm", 10, 0, 3, Some(10), 10), Ok(()));
        // Negative twins: one term past the bases, past the exponents (from an offset), past
        // the indices, and an offset whose end overflows; each error names every length.
        for (n, off, bases, idx, exps, says) in [
            (
                11u64,
                0u64,
                10u64,
                None,
                20u64,
                "11 terms from exponent 0 do not fit the buffers: 10 bases, 20 exponents",
            ),
            (11, 0, 20, None, 10, "20 bases, 10 exponents"),
            (7, 4, 6, None, 10, "7 terms from exponent 4"),
            (11, 0, 3, Some(10), 20, "3 bases, 10 indices, 20 exponents"),
            (1, u64::MAX, 10, None, 10, "10 bases, 10 exponents"),
        ] {
            let e = check_terms("msm", n, off, bases, idx, exps).unwrap_err();
            assert_eq!(e.during, "msm");
            assert!(e.detail.contains(says), "{e}");
        }
    }

    #[test]
    fn msm_kernel_names_parse_and_anything_else_is_refused() {
        assert_eq!(MsmKernel::parse("stock"), Ok(MsmKernel::Stock));
        assert_eq!(MsmKernel::parse(" sorted\n"), Ok(MsmKernel::Sorted));
        for bad in ["", "Sorted", "fast", "stock,sorted", "\u{0}"] {
            let err = MsmKernel::parse(bad).unwrap_err();
            assert!(
                err.contains("expected `stock` or `sorted`"),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn plans_fit_their_budget_and_cover_every_bit() {
        for n in [1usize, 10, 1000, 1 << 20] {
            for units in [1u32, 2, 132] {
                let p = MsmPlan::new(n, units, 144, 1 << 30).unwrap();
                assert!(p.windows * p.window >= EXP_BITS);
                assert!((p.windows - 1) * p.window < EXP_BITS);
                assert!(p.groups >= 1 && p.groups <= n);
                assert!(p.scratch_bytes(144) <= 1 << 30);
                // A tight budget gives a smaller plan that still fits, or none.
                let tight = p.scratch_bytes(144) / 4;
                if let Some(q) = MsmPlan::new(n, units, 144, tight) {
                    assert!(q.scratch_bytes(144) <= tight);
                }
            }
        }
        assert_eq!(MsmPlan::new(100, 1, 144, 10), None, "no room at all");
    }
}
