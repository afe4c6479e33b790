//! One transform on the device: its passes (`ntt.cl`'s Stockham passes, up to 2^10 points a
//! pass, natural order in and out, out of place), the last one finishing as it stores
//! (`Finish`: scaling, a product or a difference into another vector).

use blstrs::Scalar;
use ff::Field;

use crate::context::GpuDevice;
use crate::device::{Arg, Device, DeviceResult, Queue};
use crate::memory::DeviceBuffer;
use crate::ntt::shape::{local_bytes, NttShape};
use crate::ntt::tables::{split, NttTables, Powers};

/// The last pass's store modes, as `ntt.cl` numbers them (`PL_NTT_*`; a test checks).
const MODE_STORE: u32 = 0;
const MODE_SCALE: u32 = 1;
const MODE_MUL_INTO: u32 = 2;
const MODE_SUB_INTO: u32 = 3;
const MODE_SCALE_CANONICAL: u32 = 4;

/// What the last pass of a transform does as it stores.
pub(super) enum Finish<'a, D: Device> {
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
pub(super) fn transform<D: Device>(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_modes_match_the_kernel() {
        let source = include_str!("../kernels/ntt.cl");
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
}
