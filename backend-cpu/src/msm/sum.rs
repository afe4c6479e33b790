//! The sum of many affine points (the bases whose scalar is one) by rounds of pairwise
//! batch-affine additions: `n - 1` additions at `5M + 1S` and one inversion per round, against
//! a mixed projective addition per point.

use group::Group;

use super::batch::{add_pairs, Additions};
use super::curve::MsmGroup;
use super::field::Coord;

/// Below this many points a round's inversion costs more than it saves: they are added
/// projectively.
const PROJECTIVE_BELOW: usize = 16;

/// One round: point `2i` plus point `2i + 1`, sums pushed to `next`.
struct Round<'a, F> {
    points: &'a [(F, F)],
    next: &'a mut Vec<(F, F)>,
}

impl<F: Coord> Additions<F> for Round<'_, F> {
    fn count(&self) -> usize {
        self.points.len() / 2
    }

    #[inline]
    fn pair(&self, i: usize) -> (&(F, F), &(F, F)) {
        (&self.points[2 * i], &self.points[2 * i + 1])
    }

    #[inline]
    fn store(&mut self, _: usize, sum: Option<&(F, F)>) {
        if let Some(s) = sum {
            self.next.push(*s);
        }
    }
}

/// `sum_i points[i]`, no point the identity.
pub fn sum<'a, G: MsmGroup>(points: impl IntoIterator<Item = &'a G>) -> G::Projective {
    let mut cur: Vec<(G::Base, G::Base)> = points.into_iter().map(G::coords).collect();
    let mut next = Vec::with_capacity(cur.len() / 2 + 1);
    let mut prefix = Vec::new();
    while cur.len() >= PROJECTIVE_BELOW {
        next.clear();
        if cur.len() % 2 == 1 {
            next.push(cur[cur.len() - 1]);
        }
        add_pairs(
            &mut Round {
                points: &cur,
                next: &mut next,
            },
            &mut prefix,
        );
        std::mem::swap(&mut cur, &mut next);
    }
    cur.into_iter()
        .fold(G::Projective::identity(), |mut acc, (x, y)| {
            acc += &G::from_coords(x, y);
            acc
        })
}
