//! proofline's Pippenger: signed-digit windows, batch-affine buckets, and tasks of one window
//! over one range of points, as many as the plan finds best for the length and thread count.

use group::Group;
use rayon::prelude::*;

use super::buckets::Buckets;
use super::curve::MsmGroup;
use super::window::{Plan, Windows};
use super::Pairs;

/// Queued additions per inversion, at most; fewer for few buckets, so that collisions (a point
/// for a bucket already queued) stay rare.
const MAX_QUEUE: usize = 512;

/// The little-endian limbs of a canonical scalar's 32 bytes.
///
/// # Safety
/// `p` points to 32 readable bytes.
#[inline]
unsafe fn limbs(p: *const u8) -> [u64; 4] {
    std::ptr::read_unaligned(p.cast::<[u64; 4]>()).map(u64::from_le)
}

/// `sum_i scalars[i] * points[i]` over `all`'s pairs, the scalars canonical (below the group
/// order), no point the identity.
pub(super) fn pippenger<G: MsmGroup>(all: &Pairs<G>) -> G::Projective {
    let n = all.points.len();
    assert_eq!(n, all.scalars.len(), "MSM: points and scalars");
    if n == 0 {
        return G::Projective::identity();
    }
    let plan = Plan::choose(n, rayon::current_num_threads(), G::REDUCE_COST);
    let windows = Windows::new(plan.width);
    let per = n.div_ceil(plan.chunks);
    let tasks: Vec<(u32, usize)> = (0..windows.count())
        .flat_map(|w| (0..n).step_by(per).map(move |s| (w, s)))
        .collect();
    let sums: Vec<(u32, G::Projective)> = tasks
        .into_par_iter()
        .map(|(w, s)| {
            let e = (s + per).min(n);
            (
                w,
                window_sum(&windows, w, &all.points[s..e], &all.scalars[s..e]),
            )
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
        // SAFETY: the pointers of `Pairs` are valid for the whole MSM (see `Pairs`).
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
