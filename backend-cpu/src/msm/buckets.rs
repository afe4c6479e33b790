//! Batch-affine bucket accumulation.
//!
//! Buckets hold affine points. Additions into distinct buckets are queued, and a full queue is
//! applied with one field inversion for all of them ([`super::batch`]: `5M + 1S` per addition,
//! against `8M + 2S` or more for a mixed projective one).
//! A point for a bucket that already waits in the queue is held back until the queue is
//! applied; if it collides again it is added to a projective side sum for its bucket, so every
//! point is queued at most twice and a run of equal digits costs no more than blst's additions.

use std::collections::HashMap;

use group::Group;

use super::batch::{add_pairs, prefetch, Additions};
use super::curve::MsmGroup;
use super::field::Coord;
use super::reduce::weighted_sum;

const EMPTY: u8 = 0;
const FILLED: u8 = 1;
/// Filled, with an addition waiting in the queue.
const QUEUED: u8 = 2;

struct Pending<F> {
    bucket: u32,
    point: (F, F),
}

/// The queue as a batch of additions: bucket + queued point, stored back into the bucket.
struct Queued<'a, F> {
    points: &'a mut [(F, F)],
    state: &'a mut [u8],
    queue: &'a [Pending<F>],
}

impl<F: Coord> Additions<F> for Queued<'_, F> {
    fn count(&self) -> usize {
        self.queue.len()
    }

    #[inline]
    fn pair(&self, i: usize) -> (&(F, F), &(F, F)) {
        let p = &self.queue[i];
        (&self.points[p.bucket as usize], &p.point)
    }

    #[inline]
    fn prefetch(&self, i: usize) {
        if let Some(p) = self.queue.get(i) {
            prefetch(&self.points[p.bucket as usize]);
        }
    }

    #[inline]
    fn store(&mut self, i: usize, sum: Option<&(F, F)>) {
        let b = self.queue[i].bucket as usize;
        match sum {
            Some(s) => {
                self.points[b] = *s;
                self.state[b] = FILLED;
            }
            None => self.state[b] = EMPTY,
        }
    }
}

/// One window's buckets over one range of points.
pub struct Buckets<G: MsmGroup> {
    points: Vec<(G::Base, G::Base)>,
    state: Vec<u8>,
    queue: Vec<Pending<G::Base>>,
    held: Vec<Pending<G::Base>>,
    prefix: Vec<G::Base>,
    side: HashMap<u32, G::Projective>,
    capacity: usize,
}

impl<G: MsmGroup> Buckets<G> {
    /// `count` empty buckets, additions applied `capacity` at a time.
    pub fn new(count: usize, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Buckets {
            points: vec![(G::Base::ZERO, G::Base::ZERO); count],
            state: vec![EMPTY; count],
            queue: Vec::with_capacity(capacity),
            held: Vec::new(),
            prefix: Vec::with_capacity(capacity),
            side: HashMap::new(),
            capacity,
        }
    }

    /// Adds the point (not the identity), negated if `negate`, to bucket `bucket`.
    #[inline]
    pub fn add(&mut self, bucket: usize, point: &G, negate: bool) {
        let mut point = point.coords();
        if negate {
            point.1.neg_assign();
        }
        self.place(bucket, point, true);
        // A full queue is applied; so is a full hold list, which bounds its memory when most
        // points fall in few buckets (equal scalars: one queued addition, the rest held).
        if self.queue.len() == self.capacity || self.held.len() == self.capacity {
            self.apply();
        }
    }

    /// Queues, stores, holds back (`hold`) or side-sums one addition.
    #[inline]
    fn place(&mut self, bucket: usize, point: (G::Base, G::Base), hold: bool) {
        match self.state[bucket] {
            EMPTY => {
                self.points[bucket] = point;
                self.state[bucket] = FILLED;
            }
            FILLED => {
                self.state[bucket] = QUEUED;
                self.queue.push(Pending {
                    bucket: bucket as u32,
                    point,
                });
            }
            _ if hold => self.held.push(Pending {
                bucket: bucket as u32,
                point,
            }),
            _ => {
                *self
                    .side
                    .entry(bucket as u32)
                    .or_insert_with(G::Projective::identity) += &G::from_coords(point.0, point.1);
            }
        }
    }

    /// Applies the queue, then places what was held back (colliding again goes to the side).
    fn apply(&mut self) {
        self.apply_queue();
        let held = std::mem::take(&mut self.held);
        for p in &held {
            self.place(p.bucket as usize, p.point, false);
            if self.queue.len() == self.capacity {
                self.apply_queue();
            }
        }
        self.held = held;
        self.held.clear();
    }

    /// All queued additions with one inversion.
    fn apply_queue(&mut self) {
        let mut batch = Queued {
            points: &mut self.points,
            state: &mut self.state,
            queue: &self.queue,
        };
        add_pairs(&mut batch, &mut self.prefix);
        self.queue.clear();
    }

    /// `sum_b (b + 1) B_b` over the buckets, after every addition is applied.
    pub fn finish(mut self) -> G::Projective {
        while !self.queue.is_empty() || !self.held.is_empty() {
            self.apply();
        }
        // The side sums (points that collided twice; at most one per bucket) go into their
        // buckets: one normalization each, then one batch.
        for (b, s) in std::mem::take(&mut self.side) {
            let p = G::from_projective(&s);
            if !p.is_infinity() {
                self.place(b as usize, p.coords(), true);
            }
        }
        self.apply_queue();
        let present: Vec<bool> = self.state.iter().map(|&s| s != EMPTY).collect();
        weighted_sum::<G>(&self.points, &present, &mut self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Affine, G1Projective, Scalar};
    use group::Curve;

    #[test]
    fn one_bucket_stays_bounded_and_sums_right() {
        let p = G1Projective::random(&mut rand::thread_rng());
        let pa = p.to_affine();
        let q = p.double().to_affine();
        let mut buckets = Buckets::<G1Affine>::new(8, 4);
        for i in 0..100 {
            // Bucket 0 (weight 1) takes p a hundred times; bucket 2 (weight 3) takes 2p once in
            // ten, negated every other time.
            buckets.add(0, &pa, false);
            if i % 10 == 0 {
                buckets.add(2, &q, i % 20 == 0);
            }
            assert!(buckets.held.len() <= 4, "held {}", buckets.held.len());
            assert!(buckets.queue.len() <= 4, "queue {}", buckets.queue.len());
        }
        let want = p * Scalar::from(100u64);
        assert_eq!(buckets.finish(), want);
        // Negative twin: one addition fewer is another sum.
        let mut fewer = Buckets::<G1Affine>::new(8, 4);
        for _ in 0..99 {
            fewer.add(0, &pa, false);
        }
        assert_ne!(fewer.finish(), want);
    }
}
