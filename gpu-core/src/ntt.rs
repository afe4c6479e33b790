//! The H pipeline on a device, with the CPU backend's semantics: iNTT of a, b and c, coset
//! NTT, `(a b - c) / Z(g)`, coset iNTT; the result stays on the device as canonical MSM
//! exponents. The transforms are ec-gpu-gen's radix FFT (radix up to 2^8 per pass, out of
//! place, natural order in and out); the rest are proofline's kernels.
//!
//! Memory: three vectors of the domain's size when they fit (a's transform stays on the device
//! while b and c are transformed); otherwise two, with the product kept on the host between
//! steps (one host vector more, more copies). Below two vectors the device cannot hold the
//! work, and the partition is handed back for the fallback.

use blstrs::Scalar;
use ff::Field;
use prover_core::ledger::{BackendBuffer, BackendBuffers};
use prover_core::Domain;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of, bytes_of_mut, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::{free_counted, DeviceBuffer};

const MAX_LOG2_RADIX: u32 = 8;
const MAX_LOG2_GROUP: u32 = 7;
/// Elements per thread of the power scaling (one exponentiation each).
const SCALE_CHUNK: usize = 64;
const FR: u64 = 32;

/// How the H pipeline uses the device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NttMode {
    /// Three domain-sized vectors on the device.
    Resident,
    /// Two on the device, one on the host.
    Split,
}

impl NttMode {
    /// The mode that fits in `available` device bytes for a domain of `n`, if any.
    pub fn choose(n: usize, available: u64) -> Option<Self> {
        let v = n as u64 * FR;
        // A few KiB of twiddles beside the vectors.
        let slack = 1 << 16;
        if available >= 3 * v + slack {
            Some(NttMode::Resident)
        } else if available >= 2 * v + slack {
            Some(NttMode::Split)
        } else {
            None
        }
    }
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
    if log_n == 0 {
        return Ok(());
    }
    let n = 1u64 << log_n;
    let info = gpu.device.info();
    // The pass's local memory holds 2^deg elements.
    let local_log = (info.local_memory_bytes / FR).max(2).ilog2();
    let group_log = (info.max_group_size.max(1)).ilog2();
    let max_deg = MAX_LOG2_RADIX.min(log_n).min(local_log);
    // Twiddles: pq[i] = (omega^(n / 2^max_deg))^i, and omega^(2^i) for i < 32.
    let mut pq = vec![Scalar::ONE; (1usize << max_deg >> 1).max(1)];
    let tw = omega.pow_vartime([n >> max_deg]);
    for i in 1..pq.len() {
        pq[i] = pq[i - 1] * tw;
    }
    let mut omegas = vec![omega; 32];
    for i in 1..32 {
        omegas[i] = omegas[i - 1].square();
    }
    let pq = gpu.upload_scratch(q, &pq, "NTT twiddles")?;
    let omegas = gpu.upload_scratch(q, &omegas, "NTT root powers")?;
    let mut log_p = 0;
    while log_p < log_n {
        let deg = max_deg.min(log_n - log_p);
        let group = 1usize << (deg - 1).min(MAX_LOG2_GROUP).min(group_log);
        q.launch(
            &gpu.names.radix_fft,
            (n >> deg) as usize,
            group,
            &[
                Arg::Buffer(x.raw()),
                Arg::Buffer(tmp.raw()),
                Arg::Buffer(pq.raw()),
                Arg::Buffer(omegas.raw()),
                Arg::Local((1usize << deg) * FR as usize),
                Arg::U32(n as u32),
                Arg::U32(log_p),
                Arg::U32(deg),
                Arg::U32(max_deg),
            ],
        )?;
        log_p += deg;
        std::mem::swap(x, tmp);
    }
    Ok(())
}

/// `x[i] *= c * g^i` for the first `n` elements.
pub fn scale_by_powers<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &DeviceBuffer<D>,
    n: usize,
    g: Scalar,
    c: Scalar,
) -> DeviceResult<()> {
    launch_threads(
        q,
        &gpu.names.scale_by_powers,
        n.div_ceil(SCALE_CHUNK),
        &[
            Arg::Buffer(x.raw()),
            Arg::Scalar(g),
            Arg::Scalar(c),
            Arg::U32(n as u32),
            Arg::U32(SCALE_CHUNK as u32),
        ],
    )
}

/// Writes `values` into `x` and zeroes the rest of its `n` elements.
fn load<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &DeviceBuffer<D>,
    values: &[Scalar],
    n: usize,
) -> DeviceResult<()> {
    if values.len() > n {
        return Err(DeviceError::new(
            "loading evaluations",
            format!("{} values for a domain of {n}", values.len()),
        ));
    }
    if !values.is_empty() {
        q.write(x.raw(), 0, bytes_of(values))?;
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

/// From evaluations over the domain to evaluations over the coset `g H`.
fn to_coset<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    x: &mut DeviceBuffer<D>,
    tmp: &mut DeviceBuffer<D>,
    domain: &Domain,
) -> DeviceResult<()> {
    ntt(gpu, q, x, tmp, domain.log2, domain.omega_inv())?;
    scale_by_powers(
        gpu,
        q,
        x,
        domain.size(),
        Domain::coset_shift(),
        domain.size_inv(),
    )?;
    ntt(gpu, q, x, tmp, domain.log2, domain.omega)
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
/// (of `n` elements). `a`, `b`, `c` are read, never changed. Device and host buffers are
/// registered in `ledger` while they live.
pub fn quotient<D: Device>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    [a, b, c]: [&[Scalar]; 3],
    domain: &Domain,
    mode: NttMode,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<DeviceBuffer<D>> {
    let n = domain.size();
    if n > u32::MAX as usize {
        return Err(DeviceError::new("H", "the domain is larger than 2^32"));
    }
    let v = n as u64 * FR;
    let mut x = gpu.scratch(q, v, "H vector")?;
    ledger.register(BackendBuffer::DeviceAbc, v);
    let mut tmp = gpu.scratch(q, v, "H scratch")?;
    ledger.register(BackendBuffer::DeviceAbc, v);
    load(gpu, q, &x, a, n)?;
    to_coset(gpu, q, &mut x, &mut tmp, domain)?;
    let result = match mode {
        NttMode::Resident => {
            let mut y = gpu.scratch(q, v, "H second vector")?;
            ledger.register(BackendBuffer::DeviceAbc, v);
            load(gpu, q, &y, b, n)?;
            to_coset(gpu, q, &mut y, &mut tmp, domain)?;
            mul_assign(gpu, q, &x, &y, n)?;
            load(gpu, q, &y, c, n)?;
            to_coset(gpu, q, &mut y, &mut tmp, domain)?;
            sub_div_z(gpu, q, &x, &y, domain)?;
            free_counted(ledger, BackendBuffer::DeviceAbc, [y]);
            x
        }
        NttMode::Split => {
            let mut host = vec![Scalar::ZERO; n];
            ledger.register(BackendBuffer::HostTemp, v);
            q.read(x.raw(), 0, bytes_of_mut(&mut host))?;
            load(gpu, q, &x, b, n)?;
            to_coset(gpu, q, &mut x, &mut tmp, domain)?;
            q.write(tmp.raw(), 0, bytes_of(&host))?;
            mul_assign(gpu, q, &x, &tmp, n)?;
            q.read(x.raw(), 0, bytes_of_mut(&mut host))?;
            load(gpu, q, &x, c, n)?;
            to_coset(gpu, q, &mut x, &mut tmp, domain)?;
            // tmp = (a b - c) / Z, then it is the result.
            q.write(tmp.raw(), 0, bytes_of(&host))?;
            sub_div_z(gpu, q, &tmp, &x, domain)?;
            drop(host);
            ledger.release_one(BackendBuffer::HostTemp, v);
            std::mem::swap(&mut x, &mut tmp);
            x
        }
    };
    let mut x = result;
    ntt(gpu, q, &mut x, &mut tmp, domain.log2, domain.omega_inv())?;
    scale_by_powers(gpu, q, &x, n, Domain::coset_shift_inv(), domain.size_inv())?;
    launch_threads(
        q,
        &gpu.names.to_canonical,
        n,
        &[Arg::Buffer(x.raw()), Arg::U32(n as u32)],
    )?;
    free_counted(ledger, BackendBuffer::DeviceAbc, [tmp]);
    Ok(x)
}
