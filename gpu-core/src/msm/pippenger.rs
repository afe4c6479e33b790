//! The sorted-bucket MSM (`pippenger.cl`) driven from the host: signed windows of `c` bits, the
//! terms sorted by bucket on the device (a counting sort), the sorted entries added in equal
//! runs (one thread each: no thread waits on a crowded bucket), the buckets' weighted sums by
//! segments on the device, the segments and windows combined on the host. Terms are taken in
//! chunks that fit the memory left; bucket sums accumulate across chunks.

use group::Group;
use prover_core::accounting::ledger::{BackendBuffer, BackendBuffers};

use crate::context::{launch_threads, GpuDevice};
use crate::device::{bytes_of_mut, check_elements, Arg, Device, DeviceResult, Queue};
use crate::memory::{free_counted, DeviceBuffer};
use crate::msm::curve::{check_buffers, DeviceCurve};
use crate::msm::prefix::{exclusive_scan, scan_sums_bytes};

/// The largest window a plan takes (buckets per window: 2^(c-1)).
pub const MAX_C: u32 = 22;
/// The largest window chosen from the length alone.
const AUTO_MAX_C: u32 = 21;
/// The smallest window.
const MIN_C: u32 = 2;
/// Device bytes per term and window: its key, its value, its sorted slot and key.
const ENTRY_BYTES: u64 = 16;
/// Sorted entries per run (one thread each) at most, by default.
pub const RUN: u32 = 256;
/// The fewest entries per run the default picks.
const MIN_RUN: u32 = 16;
/// Threads per compute unit the runs should give at least (several waves of resident warps).
const RUN_THREADS_PER_UNIT: u64 = 256;
/// Reduction segments per window at most (a power of two).
const MAX_SEGS: u32 = 2048;
/// Partial sums added per thread when points are summed on the device, in passes. Small, so
/// that few serial additions lie on the path: the late passes have few threads, and a thread
/// adding 64 G2 points took 17.08 ms against 5.00 ms for 8 on the H200
/// (`docs/design-decisions.md#msm`).
const SUM_GROUP: u32 = 8;

/// The shape of one sorted MSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Bits per window.
    pub c: u32,
    /// Windows (Booth digits of `c` bits cover 256 bits in `ceil(256 / c)`).
    pub windows: u32,
    /// Buckets per window (`2^(c-1)`: digit magnitudes 1..=2^(c-1)).
    pub buckets: u32,
    /// Sorted entries per run (one thread each).
    pub run: u32,
    /// Buckets per reduction segment.
    pub per: u32,
    /// Terms per chunk.
    pub chunk: usize,
}

impl Plan {
    /// The window for `n` terms: about n / 16 buckets per window (narrow windows under tight
    /// memory: fewer buckets in all), at most 16 bits below 2^24 terms and 21 from there on, as
    /// the sweeps on the H200 found best (16 bits at 2^20 and 2^22, 20 at 2^24:
    /// `docs/design-decisions.md#msm`).
    pub fn window(n: usize) -> u32 {
        let lg = n.max(1).ilog2();
        let max = if lg >= 24 { AUTO_MAX_C } else { 16 };
        lg.saturating_sub(4).clamp(MIN_C, max)
    }

    /// Reduction segments per window.
    pub fn segments(&self) -> u32 {
        self.buckets.div_ceil(self.per)
    }

    /// The sizes of the device sums of each window's segments, down to one point per window:
    /// each pass adds groups of up to `SUM_GROUP` (segments are a power of two per window).
    fn sum_passes(&self) -> Vec<(u32, u32)> {
        let mut passes = Vec::new();
        let mut segs = self.segments();
        while segs > 1 {
            let g = segs.min(SUM_GROUP);
            passes.push((g, segs / g));
            segs /= g;
        }
        passes
    }

    /// Bucket counts (one unused slot per window).
    fn counts(&self) -> u64 {
        self.windows as u64 * (self.buckets as u64 + 1)
    }

    /// Device bytes per term of a chunk: its entries in every window, and its share of the runs'
    /// heads and tails (in XYZZ and jacobian coordinates) and of the heads' sums by 8 (scratch),
    /// 64 and 4096 (bounded by a third jacobian point per run).
    fn term_bytes(&self, jac: u64) -> u64 {
        let entries = self.windows as u64;
        let per_run = 3 * jac + 2 * xyzz_bytes(jac);
        ENTRY_BYTES * entries + (per_run * entries).div_ceil(self.run as u64)
    }

    /// Points of the first sum pass's output (0 with one segment per window).
    fn partials(&self) -> u64 {
        self.sum_passes()
            .first()
            .map_or(0, |&(_, out)| out as u64 * self.windows as u64)
    }

    /// Device bytes that do not depend on the chunk: counts, scan sums, bucket sums and the
    /// runs' parts of them, segments and their partial sums.
    fn fixed_bytes(&self, jac: u64) -> u64 {
        let counts = self.counts();
        let points = self.buckets as u64 + self.segments() as u64;
        4 * counts
            + scan_sums_bytes(counts as usize)
            + xyzz_bytes(jac) * self.windows as u64 * self.buckets as u64
            + jac * (self.windows as u64 * points + self.partials())
    }

    /// The plan for `n` terms whose scratch fits in `budget` bytes, for jacobian points of
    /// `jac` bytes, on a device of `units` compute units: the window from `n`, made smaller
    /// until the fixed part fits; runs of up to `RUN` entries, shorter when that would leave
    /// the device with too few threads.
    pub fn new(n: usize, jac: u64, budget: u64, units: u32) -> Option<Self> {
        let c = Self::window(n);
        let entries = n as u64 * 256u64.div_ceil(c as u64);
        let threads = units.max(1) as u64 * RUN_THREADS_PER_UNIT;
        let run = (entries / threads).clamp(MIN_RUN as u64, RUN as u64) as u32;
        Self::with_window(n, c, run, jac, budget)
    }

    /// The plan for `n` terms with windows of at most `c` bits (made smaller until the fixed
    /// part fits in `budget`) and runs of `run` entries (a benchmark's choice; `new` picks both).
    pub fn with_window(n: usize, c: u32, run: u32, jac: u64, budget: u64) -> Option<Self> {
        let mut c = c.clamp(MIN_C, MAX_C);
        let run = run.max(1);
        loop {
            let buckets = 1u32 << (c - 1);
            let windows = 256u32.div_ceil(c);
            // Enough segments to fill the device, each a few dozen buckets or more.
            let per = (buckets / MAX_SEGS).max(32).min(buckets);
            let mut plan = Plan {
                c,
                windows,
                buckets,
                run,
                per,
                chunk: 0,
            };
            // One run's head and tail and one sum of each level more than the terms' shares
            // (the last run and the last groups are partial).
            let fixed = plan.fixed_bytes(jac) + 4 * jac;
            let entry = plan.term_bytes(jac);
            if fixed < budget && (budget - fixed) / entry > 0 {
                // Entries are indexed by u32 on the device.
                let max_chunk = (u32::MAX as u64 / 2) / windows as u64;
                plan.chunk = ((budget - fixed) / entry)
                    .min(max_chunk)
                    .min(n.max(1) as u64) as usize;
                return Some(plan);
            }
            if c == MIN_C {
                return None;
            }
            c -= 1;
        }
    }

    /// The MSM's value from the windows' sums: combined from the most significant, `c`
    /// doublings apart.
    pub fn combine<P: Group>(&self, windows: &[P]) -> P {
        let mut acc = P::identity();
        for w in windows.iter().rev() {
            for _ in 0..self.c {
                acc = acc.double();
            }
            acc += w;
        }
        acc
    }
}

/// Bytes of a point in XYZZ coordinates (four field elements) for jacobian points of `jac`
/// bytes (three).
fn xyzz_bytes(jac: u64) -> u64 {
    jac / 3 * 4
}

/// The sorted MSM of `n` terms under `plan` (made for `n` and the memory left): exponents
/// `exps[exp_offset..]` (canonical, on the device), bases `bases[idx[i]]` (or `bases[i]`
/// without `idx`). Scratch is registered in `ledger` while it lives. `n` past the exponents, the
/// indices or (dense) the bases is an error naming their lengths.
#[allow(clippy::too_many_arguments)]
pub fn msm<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    plan: &Plan,
    bases: &DeviceBuffer<D>,
    idx: Option<&DeviceBuffer<D>>,
    exps: &DeviceBuffer<D>,
    exp_offset: usize,
    n: usize,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    check_buffers::<D, G>(bases, idx, exps, exp_offset, n)?;
    if n == 0 {
        return Ok(G::Projective::identity());
    }
    let jac = G::JACOBIAN_BYTES;
    let names = &gpu.names;
    let counts_len = plan.counts() as usize;
    let total_buckets = (plan.windows * plan.buckets) as usize;
    let total_segs = (plan.windows * plan.segments()) as usize;
    let counts = gpu.scratch(q, 4 * counts_len as u64, "MSM bucket counts")?;
    let sums = gpu.scratch(q, scan_sums_bytes(counts_len), "MSM scan sums")?;
    let buckets = gpu.scratch(q, jac * total_buckets as u64, "MSM bucket sums")?;
    let parts = gpu.scratch(
        q,
        xyzz_bytes(jac) * total_buckets as u64,
        "MSM runs' bucket parts",
    )?;
    let segments = gpu.scratch(q, jac * total_segs as u64, "MSM segment sums")?;
    let partials = gpu.scratch(q, jac * plan.partials().max(1), "MSM partial sums")?;
    let fixed = [counts, sums, buckets, parts, segments, partials];
    ledger.register(
        BackendBuffer::DeviceScratch,
        fixed.iter().map(DeviceBuffer::bytes).sum(),
    );
    let [counts, sums, buckets, parts, segments, partials] = &fixed;
    for start in (0..n).step_by(plan.chunk) {
        let len = plan.chunk.min(n - start);
        let entries = len * plan.windows as usize;
        let runs = entries.div_ceil(plan.run as usize);
        let keys = gpu.scratch(q, 4 * entries as u64, "MSM keys")?;
        let vals = gpu.scratch(q, 4 * entries as u64, "MSM values")?;
        let sorted = gpu.scratch(q, 4 * entries as u64, "MSM sorted terms")?;
        let skeys = gpu.scratch(q, 4 * entries as u64, "MSM sorted keys")?;
        let hx = gpu.scratch(q, xyzz_bytes(jac) * runs as u64, "MSM run heads (XYZZ)")?;
        let tx = gpu.scratch(q, xyzz_bytes(jac) * runs as u64, "MSM run tails (XYZZ)")?;
        let heads = gpu.scratch(q, jac * runs as u64, "MSM run heads")?;
        let tails = gpu.scratch(q, jac * runs as u64, "MSM run tails")?;
        let runs64 = runs.div_ceil(64);
        let runs4096 = runs.div_ceil(4096);
        let heads64 = gpu.scratch(q, jac * runs64 as u64, "MSM run heads by 64")?;
        let heads4096 = gpu.scratch(q, jac * runs4096 as u64, "MSM run heads by 4096")?;
        let heads8 = gpu.scratch(q, jac * runs.div_ceil(8) as u64, "MSM run heads by 8")?;
        let chunk_bufs = [
            keys, vals, sorted, skeys, hx, tx, heads, tails, heads64, heads4096, heads8,
        ];
        ledger.register(
            BackendBuffer::DeviceScratch,
            chunk_bufs.iter().map(DeviceBuffer::bytes).sum(),
        );
        let [keys, vals, sorted, skeys, hx, tx, heads, tails, heads64, heads4096, heads8] =
            &chunk_bufs;
        launch_threads(
            q,
            &names.pl_zero,
            counts_len,
            &[Arg::Buffer(counts.raw()), Arg::U32(counts_len as u32)],
        )?;
        launch_threads(
            q,
            &names.pl_digits,
            len,
            &[
                Arg::Buffer(exps.raw()),
                Arg::U32((exp_offset + start) as u32),
                Arg::U32(len as u32),
                Arg::U32(plan.windows),
                Arg::U32(plan.c),
                Arg::Buffer(keys.raw()),
                Arg::Buffer(vals.raw()),
                Arg::Buffer(counts.raw()),
            ],
        )?;
        exclusive_scan(gpu, q, counts, counts_len, sums)?;
        launch_threads(
            q,
            &names.pl_scatter,
            entries,
            &[
                Arg::Buffer(keys.raw()),
                Arg::Buffer(vals.raw()),
                Arg::U32(entries as u32),
                Arg::U32(plan.buckets),
                Arg::Buffer(counts.raw()),
                Arg::Buffer(sorted.raw()),
                Arg::Buffer(skeys.raw()),
            ],
        )?;
        // The terms of this chunk are bases[start..] (dense) or bases[idx[start..]].
        let (idx_arg, gather) = match idx {
            Some(i) => (i, 1),
            None => (bases, 0),
        };
        let [runs_kernel, edges_kernel, fixup_kernel] = G::pl_kernels(gpu);
        launch_threads(
            q,
            runs_kernel,
            runs,
            &[
                Arg::Buffer(bases.raw()),
                Arg::Buffer(idx_arg.raw()),
                Arg::U32(gather),
                Arg::Buffer(sorted.raw()),
                Arg::Buffer(skeys.raw()),
                Arg::Buffer(counts.raw()),
                Arg::U32(counts_len as u32 - 1),
                Arg::U32(plan.run),
                Arg::U32(runs as u32),
                Arg::U32(plan.buckets),
                Arg::U32(start as u32),
                Arg::Buffer(parts.raw()),
                Arg::Buffer(hx.raw()),
                Arg::Buffer(tx.raw()),
            ],
        )?;
        launch_threads(
            q,
            edges_kernel,
            runs,
            &[
                Arg::Buffer(hx.raw()),
                Arg::Buffer(tx.raw()),
                Arg::U32(runs as u32),
                Arg::Buffer(heads.raw()),
                Arg::Buffer(tails.raw()),
            ],
        )?;
        // The heads summed by 64 and by 4096 runs, for buckets spanning many runs: each by two
        // passes of 8 (through `heads8`).
        for (from, n, to) in [(heads, runs, heads64), (heads64, runs64, heads4096)] {
            let eighths = n.div_ceil(8);
            sum_groups::<D, G>(gpu, q, from, n, 8, eighths, heads8)?;
            sum_groups::<D, G>(gpu, q, heads8, eighths, 8, eighths.div_ceil(8), to)?;
        }
        launch_threads(
            q,
            fixup_kernel,
            total_buckets,
            &[
                Arg::Buffer(counts.raw()),
                Arg::U32(plan.run),
                Arg::U32(plan.buckets),
                Arg::U32(total_buckets as u32),
                Arg::Buffer(buckets.raw()),
                Arg::Buffer(parts.raw()),
                Arg::Buffer(heads.raw()),
                Arg::Buffer(tails.raw()),
                Arg::Buffer(heads64.raw()),
                Arg::Buffer(heads4096.raw()),
                // The first chunk's fixup sets every bucket's sum (no zeroing beforehand).
                Arg::U32(u32::from(start == 0)),
            ],
        )?;
        free_counted(ledger, BackendBuffer::DeviceScratch, chunk_bufs);
    }
    launch_threads(
        q,
        G::pl_reduce_kernel(gpu),
        total_segs,
        &[
            Arg::Buffer(buckets.raw()),
            Arg::U32(plan.buckets),
            Arg::U32(plan.per),
            Arg::U32(plan.segments()),
            Arg::U32(total_segs as u32),
            Arg::Buffer(segments.raw()),
        ],
    )?;
    // Each window's segment sums added on the device, in passes, ping-ponging between the
    // segments' buffer and the partials'.
    let mut from = segments;
    let mut to = partials;
    for (group, out) in plan.sum_passes() {
        let total = (out * plan.windows) as usize;
        sum_groups::<D, G>(gpu, q, from, total * group as usize, group, total, to)?;
        std::mem::swap(&mut from, &mut to);
    }
    let mut windows = vec![G::Projective::identity(); plan.windows as usize];
    q.read(from.raw(), 0, bytes_of_mut(&mut windows))?;
    free_counted(ledger, BackendBuffer::DeviceScratch, fixed);
    Ok(plan.combine(&windows))
}

/// `to[t] = from[t group] + ... + from[t group + group - 1]` (those below `n`) for `t < total`,
/// jacobian points, on the device (`{P}_pl_sum`); `n` points past `from` or `total` past `to`
/// is an error.
fn sum_groups<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    from: &DeviceBuffer<D>,
    n: usize,
    group: u32,
    total: usize,
    to: &DeviceBuffer<D>,
) -> DeviceResult<()> {
    let what = format!("adding {n} {} points in groups of {group}", G::NAME);
    check_elements(from.bytes(), 0, n as u64, G::JACOBIAN_BYTES, &what)?;
    check_elements(to.bytes(), 0, total as u64, G::JACOBIAN_BYTES, &what)?;
    launch_threads(
        q,
        G::pl_sum_kernel(gpu),
        total,
        &[
            Arg::Buffer(from.raw()),
            Arg::U32(n as u32),
            Arg::U32(group),
            Arg::U32(total as u32),
            Arg::Buffer(to.raw()),
        ],
    )
}

/// The sum of the first `n` jacobian points of `points`, added on the device in passes of up to
/// `SUM_GROUP` per thread (the host reads one point): for the many partial sums of a batch
/// addition.
pub fn sum_on_device<D: Device, G: DeviceCurve>(
    gpu: &GpuDevice<D>,
    q: &mut D::Queue,
    points: &DeviceBuffer<D>,
    n: usize,
    ledger: &mut BackendBuffers<'_>,
) -> DeviceResult<G::Projective> {
    let mut out = G::Projective::identity();
    if n == 0 {
        return Ok(out);
    }
    let first = n.div_ceil(SUM_GROUP as usize);
    let a = gpu.scratch(q, G::JACOBIAN_BYTES * first as u64, "partial sums")?;
    let b = gpu.scratch(
        q,
        G::JACOBIAN_BYTES * first.div_ceil(SUM_GROUP as usize) as u64,
        "partial sums",
    )?;
    ledger.register(BackendBuffer::DeviceScratch, a.bytes() + b.bytes());
    let scratch = [a, b];
    let (mut from, mut len, mut pass) = (points, n, 0);
    while len > 1 {
        let total = len.div_ceil(SUM_GROUP as usize);
        let to = &scratch[pass % 2];
        pass += 1;
        sum_groups::<D, G>(gpu, q, from, len, SUM_GROUP, total, to)?;
        from = to;
        len = total;
    }
    q.read(from.raw(), 0, bytes_of_mut(std::slice::from_mut(&mut out)))?;
    free_counted(ledger, BackendBuffer::DeviceScratch, scratch);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::G1Projective;

    #[test]
    fn plans_fit_their_budget_and_cover_every_bit() {
        for n in [1usize, 7, 1000, 1 << 16, 1 << 20, 1 << 24] {
            for budget in [64u64 << 10, 1 << 20, 64 << 20, 8 << 30] {
                let Some(p) = Plan::new(n, 144, budget, 132) else {
                    // Only a budget too small for the smallest window's buckets refuses.
                    let windows = 256u32.div_ceil(MIN_C);
                    let smallest = Plan {
                        c: MIN_C,
                        windows,
                        buckets: 1 << (MIN_C - 1),
                        run: RUN,
                        per: 1 << (MIN_C - 1),
                        chunk: 0,
                    };
                    let one = smallest.fixed_bytes(144) + 288 + smallest.term_bytes(144);
                    assert!(one > budget, "{n} {budget}");
                    continue;
                };
                assert!(p.c * p.windows >= 256, "{p:?}");
                assert!(p.chunk >= 1 && p.chunk <= n.max(1), "{p:?}");
                let used = p.fixed_bytes(144) + 288 + p.term_bytes(144) * p.chunk as u64;
                assert!(used <= budget, "{n} {budget} {p:?}");
            }
        }
        // Every window's segments are summed down to one point, in groups the kernel takes.
        for c in MIN_C..=MAX_C {
            let p = Plan::with_window(1 << 20, c, RUN, 144, u64::MAX).unwrap();
            assert_eq!(p.c, c);
            assert!(p.segments().is_power_of_two() && p.segments() <= MAX_SEGS);
            assert_eq!(p.segments() * p.per, p.buckets, "{p:?}");
            let mut segs = p.segments();
            for (g, out) in p.sum_passes() {
                assert!(g <= SUM_GROUP && g * out == segs, "{p:?}");
                segs = out;
            }
            assert_eq!(segs, 1, "{p:?}");
        }
        // A window past the largest is clamped; a tight budget narrows it.
        assert_eq!(
            Plan::with_window(1 << 20, 40, RUN, 144, u64::MAX)
                .unwrap()
                .c,
            MAX_C
        );
        assert!(
            Plan::with_window(1 << 20, 20, RUN, 144, 64 << 20)
                .unwrap()
                .c
                < 20
        );
        // Big MSMs get wide windows.
        assert_eq!(Plan::window(1 << 20), 16);
        assert_eq!(Plan::window(1 << 22), 16);
        assert_eq!(Plan::window(1 << 16), 12);
        assert_eq!(Plan::window(1 << 24), 20);
        assert_eq!(Plan::window(1 << 27), AUTO_MAX_C);
        assert_eq!(Plan::window(10), MIN_C);
        // Runs: long on a big MSM, shorter where the device would be left with few threads.
        assert_eq!(Plan::new(1 << 24, 144, u64::MAX, 132).unwrap().run, RUN);
        let small = Plan::new(1 << 16, 144, u64::MAX, 132).unwrap();
        assert!(small.run < RUN && small.run >= MIN_RUN, "{small:?}");
        assert_eq!(Plan::new(100, 144, u64::MAX, 132).unwrap().run, MIN_RUN);
    }

    #[test]
    fn combine_weighs_windows_by_their_position() {
        let g = G1Projective::generator();
        let plan = Plan {
            c: 5,
            windows: 3,
            buckets: 16,
            run: RUN,
            per: 16,
            chunk: 1,
        };
        // Window w's sum counts 2^(5w).
        let got = plan.combine(&[g, g.double(), g]);
        let want = g + g * blstrs::Scalar::from(2u64 << 5) + g * blstrs::Scalar::from(1u64 << 10);
        assert_eq!(got, want);
    }
}
