//! The stock bucket MSM (`msm.cl`, ec-gpu-gen-style): each thread fills its own buckets for a
//! group of terms and a window; the host combines the partial sums. What runs where the
//! sorted MSM's buckets do not fit, or where it is asked for (`PROOFLINE_GPU_MSM=stock`).

use group::Group;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};

use crate::context::{GpuDevice, GROUP};
use crate::device::{bytes_of_mut, Arg, Device, DeviceError, DeviceResult, Queue};
use crate::memory::{free_counted, DeviceBuffer};
use crate::msm::curve::DeviceCurve;

/// Exponent bits the kernels read (Fr's limbs).
const EXP_BITS: usize = 256;
/// The largest window.
const MAX_WINDOW: usize = 12;
/// Threads per compute unit the MSM aims to keep busy.
pub(crate) const THREADS_PER_UNIT: usize = 128;

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

/// The stock kernel's MSM over `n` terms (at least one; the caller has checked the buffers):
/// exponents `exps[exp_offset..]`, bases `bases[idx[i]]` (or `bases[i]` without `idx`), its
/// buckets within `budget` bytes.
#[allow(clippy::too_many_arguments)]
pub fn msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    bases: &DeviceBuffer<D>,
    idx: Option<&DeviceBuffer<D>>,
    exps: &DeviceBuffer<D>,
    exp_offset: usize,
    n: usize,
    budget: u64,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    let info = gpu.device.info();
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
        plan.threads().div_ceil(GROUP),
        GROUP,
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

#[cfg(test)]
mod tests {
    use super::*;

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
