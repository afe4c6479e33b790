//! proofline's Pippenger: signed-digit windows, batch-affine buckets, and tasks of one window
//! over one range of points, as many as the plan finds best for the length and thread count.

use group::Group;
use rayon::prelude::*;

use super::buckets::Buckets;
use super::curve::MsmGroup;
use super::window::{Plan, Windows};

/// Queued additions per inversion, at most; fewer for few buckets, so that collisions (a point
/// for a bucket already queued) stay rare.
const MAX_QUEUE: usize = 512;

/// The pointer arrays, read by tasks on other threads.
struct Shared<'a, G> {
    points: &'a [*const G],
    scalars: &'a [*const u8],
}

impl<'a, G> Shared<'a, G> {
    /// The pairs in `r` (a method, so that closures capture the whole `Sync` struct).
    fn range(&self, r: std::ops::Range<usize>) -> (&'a [*const G], &'a [*const u8]) {
        (&self.points[r.clone()], &self.scalars[r])
    }
}

// SAFETY: the pointers are only read, and what they point to is only read, for the whole call
// (the caller keeps it alive and unchanged: see `pippenger`).
unsafe impl<G: Sync> Sync for Shared<'_, G> {}

/// The little-endian limbs of a canonical scalar's 32 bytes.
///
/// # Safety
/// `p` points to 32 readable bytes.
#[inline]
unsafe fn limbs(p: *const u8) -> [u64; 4] {
    std::ptr::read_unaligned(p.cast::<[u64; 4]>()).map(u64::from_le)
}

/// `sum_i scalars[i] * points[i]`, the scalars canonical (below the group order), no point the
/// identity. Every pointer must be valid for the call: points to affine points, scalars to 32
/// bytes.
pub fn pippenger<G: MsmGroup>(points: &[*const G], scalars: &[*const u8]) -> G::Projective {
    assert_eq!(points.len(), scalars.len(), "MSM: points and scalars");
    let n = points.len();
    if n == 0 {
        return G::Projective::identity();
    }
    let plan = Plan::choose(n, rayon::current_num_threads(), G::REDUCE_COST);
    let windows = Windows::new(plan.width);
    let per = n.div_ceil(plan.chunks);
    let tasks: Vec<(u32, usize)> = (0..windows.count())
        .flat_map(|w| (0..n).step_by(per).map(move |s| (w, s)))
        .collect();
    let shared = Shared { points, scalars };
    let shared = &shared;
    let sums: Vec<(u32, G::Projective)> = tasks
        .into_par_iter()
        .map(|(w, s)| {
            let e = (s + per).min(n);
            let (p, s) = shared.range(s..e);
            (w, window_sum(&windows, w, p, s))
        })
        .collect();
    let mut by_window = vec![G::Projective::identity(); windows.count() as usize];
    for (w, s) in sums {
        by_window[w as usize] += s;
    }
    by_window
        .into_iter()
        .rev()
        .fold(G::Projective::identity(), |acc, s| {
            (0..windows.width()).fold(acc, |a, _| a.double()) + s
        })
}

/// `sum_i d_w(scalars[i]) points[i]` for window `w`.
fn window_sum<G: MsmGroup>(
    windows: &Windows,
    w: u32,
    points: &[*const G],
    scalars: &[*const u8],
) -> G::Projective {
    let count = windows.buckets();
    let mut buckets = Buckets::<G>::new(count, (count / 8).clamp(16, MAX_QUEUE));
    for (&p, &s) in points.iter().zip(scalars) {
        // SAFETY: the caller's pointers are valid for the call (see `pippenger`).
        let d = windows.digit(&unsafe { limbs(s) }, w);
        if d == 0 {
            continue;
        }
        // SAFETY: as above.
        let point = unsafe { &*p };
        buckets.add(d.unsigned_abs() as usize - 1, point, d < 0);
    }
    buckets.finish()
}
