//! The query MSMs: a query's terms, scanned on the host ([`Scan`]) or classified on the device
//! ([`DeviceScan`]), against its bases, resident on the device or streamed from the host in
//! chunks that fit: the batch addition of the ones plus a bucket MSM of the rest, by the
//! sorted kernel ([`crate::msm::pippenger`]) or the stock one ([`crate::msm::stock`]).

use group::Group;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::stages::density::ScalarBytes;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{check_elements, Arg, Device, DeviceError, DeviceResult};
use crate::memory::{free_counted, DeviceBuffer};
use crate::msm::classify::DeviceScan;
use crate::msm::curve::{check_buffers, check_terms, DeviceCurve, EXP_BYTES};
use crate::msm::pippenger::{self, sum_on_device};
use crate::msm::scan::Scan;
use crate::msm::stock::{self, THREADS_PER_UNIT};

/// Bytes per listed term on the device: a u32 index and a 32-byte exponent.
const TERM_BYTES: u64 = 36;

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
    /// `stock` or `sorted`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "stock" => Ok(MsmKernel::Stock),
            "sorted" => Ok(MsmKernel::Sorted),
            other => Err(format!("{MSM_VAR}={other}: expected `stock` or `sorted`")),
        }
    }
}

/// Where a query's bases are.
pub enum Bases<'a, D: Device, G> {
    /// On the device, the whole query.
    Resident(&'a DeviceBuffer<D>),
    /// On the host: uploaded chunk by chunk.
    Streamed(&'a [G]),
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
        if let Some(plan) = pippenger::Plan::new(n, G::JACOBIAN_BYTES, budget, info.compute_units) {
            return pippenger::msm::<D, G>(gpu, q, &plan, bases, idx, exps, exp_offset, n, ledger);
        }
    }
    stock::msm::<D, G>(gpu, q, bases, idx, exps, exp_offset, n, budget, ledger)
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
    let sum = sum_on_device::<D, G>(gpu, q, &results, threads, ledger)?;
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
}
