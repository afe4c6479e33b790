//! The H pipeline on a device ([`quotient`]): iNTT of a, b and c, coset NTT,
//! `(a b - c) / Z(g)`, coset iNTT, the element-wise steps riding on the transforms' last
//! passes; the result stays on the device as canonical MSM exponents. [`NttMode`] says how much
//! of the work the device's memory holds.

use blstrs::Scalar;
use ff::Field;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};
use prover_core::Domain;

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of, bytes_of_mut, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::{free_counted, DeviceBuffer};
use crate::ntt::shape::{NttShape, FR};
use crate::ntt::tables::{table_bytes_bound, NttTables, Powers};
use crate::ntt::transform::{transform, Finish};

/// How the H pipeline uses the device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NttMode {
    /// Four domain-sized vectors on the device: b and c are uploaded into their own beside the
    /// transforms of a (and b) ([`crate::device::Queue::write_beside`]), not between them.
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

/// Writes `values` into `x` and zeroes the rest of its `n` elements; `beside`: the copy goes
/// beside the queue's kernels ([`crate::device::Queue::write_beside`]).
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
}
