//! What `prepare` leaves on each device: a query's bases when they fit beside a partition's
//! working memory (uploaded from the parameters, or made on the device for a synthetic key),
//! each counted in the ledger as resident device bases.

use blstrs::{G1Affine, G2Affine};
use prover_core::accounting::ledger::{ResidentKind, ResidentToken, StageLedger};
use prover_core::{KeyShape, Parameters};

use crate::context::GpuDevice;
use crate::device::{Device, DeviceCopy, DeviceResult, Queue};
use crate::memory::DeviceBuffer;
use crate::synthetic::{synthetic_bases, Query, SyntheticKey};

/// A query's bases on one device, when they fit.
pub(super) struct Resident<D: Device> {
    pub(super) h: Option<DeviceBuffer<D>>,
    pub(super) l: Option<DeviceBuffer<D>>,
    pub(super) a: Option<DeviceBuffer<D>>,
    pub(super) b_g1: Option<DeviceBuffer<D>>,
    pub(super) b_g2: Option<DeviceBuffer<D>>,
    _tokens: Vec<ResidentToken>,
}

/// What `prepare` keeps: the resident bases of every device, and the key's shape (a synthetic
/// key's parameters carry no host bases to read it from).
pub(super) struct PreparedState<D: Device> {
    pub(super) devices: Vec<Resident<D>>,
    pub(super) key: KeyShape,
}

/// Device bytes a partition of a `2^log2` domain needs beside the bases (three H vectors, and
/// as much again for the MSMs' buckets and lists): what `prepare` leaves free.
pub(super) fn working_bytes(domain: usize) -> u64 {
    4 * domain as u64 * 32 + (64 << 20)
}

fn upload_if_room<D: Device, G: DeviceCopy>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &[G],
    keep: u64,
    ledger: &StageLedger,
    tokens: &mut Vec<ResidentToken>,
    what: &str,
) -> DeviceResult<Option<DeviceBuffer<D>>> {
    let bytes = std::mem::size_of_val(bases) as u64;
    if bases.is_empty()
        || bytes > gpu.device.info().max_alloc_bytes
        || gpu.gauge.available() < bytes.saturating_add(keep)
    {
        return Ok(None);
    }
    let buf = gpu.upload(q, bases, what)?;
    tokens.push(ledger.resident(ResidentKind::DeviceBases, bytes));
    Ok(Some(buf))
}

pub(super) fn prepare_device<D: Device>(
    gpu: &GpuDevice<D>,
    params: &Parameters,
    ledger: &StageLedger,
) -> DeviceResult<Resident<D>> {
    let mut q = gpu.device.queue()?;
    let keep = working_bytes(params.domain_size());
    let mut tokens = Vec::new();
    let mut up = |bases: &[G1Affine], what| {
        upload_if_room(gpu, &mut q, bases, keep, ledger, &mut tokens, what)
    };
    let h = up(&params.h, "H bases")?;
    let l = up(&params.l, "L bases")?;
    let a = up(&params.a, "A bases")?;
    let b_g1 = up(&params.b_g1, "B G1 bases")?;
    let b_g2 = upload_if_room(
        gpu,
        &mut q,
        &params.b_g2,
        keep,
        ledger,
        &mut tokens,
        "B G2 bases",
    )?;
    q.synchronize()?;
    Ok(Resident {
        h,
        l,
        a,
        b_g1,
        b_g2,
        _tokens: tokens,
    })
}

pub(super) fn synthetic_resident<D: Device>(
    gpu: &GpuDevice<D>,
    key: &SyntheticKey,
    (t1, t2): (&[G1Affine], &[G2Affine]),
    ledger: &StageLedger,
) -> DeviceResult<Resident<D>> {
    let mut q = gpu.device.queue()?;
    let mut tokens = Vec::new();
    let mut make = |query, what| -> DeviceResult<Option<DeviceBuffer<D>>> {
        let (n, seed) = (key.len(query), key.query_seed(query));
        let buf = match query {
            Query::BG2 => synthetic_bases(gpu, &mut q, t2, seed, n, None, what)?,
            _ => synthetic_bases(gpu, &mut q, t1, seed, n, None, what)?,
        };
        tokens.push(ledger.resident(ResidentKind::DeviceBases, buf.bytes()));
        Ok(Some(buf))
    };
    Ok(Resident {
        h: make(Query::H, "synthetic H bases")?,
        l: make(Query::L, "synthetic L bases")?,
        a: make(Query::A, "synthetic A bases")?,
        b_g1: make(Query::BG1, "synthetic B G1 bases")?,
        b_g2: make(Query::BG2, "synthetic B G2 bases")?,
        _tokens: tokens,
    })
}
