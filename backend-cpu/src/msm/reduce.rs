//! A window's bucket reduction, `sum_b (b + 1) B_b`, in batch-affine steps.
//!
//! The usual running sum (`R += B_b; T += R` from the top bucket down) is one chain of
//! dependent projective additions. Here the buckets are cut into `k` segments of `L` buckets,
//! each with its own chain, and the chains advance in lockstep: each step is two batches of up
//! to `k` independent affine additions with one inversion each. Segment `j` ends with
//! `R_j = sum B_b` and `T_j = sum (b - j L + 1) B_b` over its buckets, and the window's sum is
//! `sum_j T_j + L sum_j j R_j`, the last a short projective running sum over the segments.

use group::Group;

use super::batch::{add_pairs, Additions};
use super::curve::MsmGroup;
use super::field::Coord;

/// Segments (chains) at most: one inversion per step is shared by this many additions.
const MAX_SEGMENTS: usize = 256;

/// One step's additions: `acc[s] += operands[o]` for each `(s, o)` in `list`.
struct Step<'a, F> {
    acc: &'a mut [(F, F)],
    filled: &'a mut [bool],
    operands: &'a [(F, F)],
    list: &'a [(u32, u32)],
}

impl<F: Coord> Additions<F> for Step<'_, F> {
    fn count(&self) -> usize {
        self.list.len()
    }

    #[inline]
    fn pair(&self, i: usize) -> (&(F, F), &(F, F)) {
        let (s, o) = self.list[i];
        (&self.acc[s as usize], &self.operands[o as usize])
    }

    #[inline]
    fn store(&mut self, i: usize, sum: Option<&(F, F)>) {
        let s = self.list[i].0 as usize;
        match sum {
            Some(v) => self.acc[s] = *v,
            None => self.filled[s] = false,
        }
    }
}

/// `acc[s] += operands[o]` for every segment `s` whose operand `o = pick(s)` is present: an
/// empty accumulator takes the operand, the others are added in one batch.
fn step<F: Coord>(
    acc: &mut [(F, F)],
    filled: &mut [bool],
    operands: &[(F, F)],
    pick: impl Fn(usize) -> Option<usize>,
    list: &mut Vec<(u32, u32)>,
    prefix: &mut Vec<F>,
) {
    list.clear();
    for s in 0..acc.len() {
        let Some(o) = pick(s) else { continue };
        if filled[s] {
            list.push((s as u32, o as u32));
        } else {
            acc[s] = operands[o];
            filled[s] = true;
        }
    }
    add_pairs(
        &mut Step {
            acc,
            filled,
            operands,
            list,
        },
        prefix,
    );
}

/// `sum_b (b + 1) B_b` over `points`, bucket `b` present where `present[b]`; the number of
/// buckets is a power of two.
pub fn weighted_sum<G: MsmGroup>(
    points: &[(G::Base, G::Base)],
    present: &[bool],
    prefix: &mut Vec<G::Base>,
) -> G::Projective {
    let m = points.len();
    if m == 0 {
        return G::Projective::identity();
    }
    debug_assert!(m.is_power_of_two() && present.len() == m);
    let k = m.min(MAX_SEGMENTS);
    let len = m / k;
    let zero = (G::Base::ZERO, G::Base::ZERO);
    let (mut r, mut t) = (vec![zero; k], vec![zero; k]);
    let (mut r_in, mut t_in) = (vec![false; k], vec![false; k]);
    let mut list = Vec::with_capacity(k);
    for i in 0..len {
        // Bucket `s L + (L - 1 - i)` of each segment `s`, from its top down.
        step(
            &mut r,
            &mut r_in,
            points,
            |s| {
                let b = s * len + len - 1 - i;
                present[b].then_some(b)
            },
            &mut list,
            prefix,
        );
        step(
            &mut t,
            &mut t_in,
            &r,
            |s| r_in[s].then_some(s),
            &mut list,
            prefix,
        );
    }
    // sum_s T_s + L sum_s s R_s.
    let affine = |p: &(G::Base, G::Base), here: bool| here.then(|| G::from_coords(p.0, p.1));
    let mut total = G::Projective::identity();
    let mut running = G::Projective::identity();
    let mut weighted = G::Projective::identity();
    for s in (0..k).rev() {
        if let Some(p) = affine(&t[s], t_in[s]) {
            total += &p;
        }
        if s > 0 {
            if let Some(p) = affine(&r[s], r_in[s]) {
                running += &p;
            }
            weighted += running;
        }
    }
    for _ in 0..len.trailing_zeros() {
        weighted = weighted.double();
    }
    total + weighted
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G1Projective, Scalar};
    use group::Curve;
    use rand::Rng;

    fn naive(points: &[G1Affine], present: &[bool]) -> G1Projective {
        points
            .iter()
            .zip(present)
            .enumerate()
            .filter(|(_, (_, &here))| here)
            .map(|(b, (p, _))| G1Projective::from(p) * Scalar::from(b as u64 + 1))
            .sum()
    }

    #[test]
    fn segments_give_the_running_sum() {
        let mut rng = rand::thread_rng();
        let p = G1Projective::random(&mut rng);
        let q = G1Projective::random(&mut rng);
        // Few distinct points, so the chains meet doublings (R == B) and cancellations
        // (R == -B) as well as chords.
        let choices: Vec<G1Affine> = [p, -p, p.double(), q, -q, p + q]
            .iter()
            .map(|x| x.to_affine())
            .collect();
        for m in [1usize, 2, 8, 256, 1024, 4096] {
            for _ in 0..3 {
                let points: Vec<G1Affine> = (0..m)
                    .map(|_| choices[rng.gen_range(0..choices.len())])
                    .collect();
                let present: Vec<bool> = (0..m).map(|_| rng.gen_range(0..4) != 0).collect();
                let coords: Vec<_> = points.iter().map(MsmGroup::coords).collect();
                let want = naive(&points, &present);
                let got = weighted_sum::<G1Affine>(&coords, &present, &mut Vec::new());
                assert_eq!(got, want, "m = {m}");
                // Negative twin: one more bucket present changes the sum.
                if let Some(b) = present.iter().position(|&h| !h) {
                    let mut more = present.clone();
                    more[b] = true;
                    let got = weighted_sum::<G1Affine>(&coords, &more, &mut Vec::new());
                    assert_ne!(got, want, "m = {m}");
                }
            }
        }
    }
}
