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

use super::batch::{add_pairs, Additions};
use super::curve::MsmGroup;
use super::field::Coord;

const EMPTY: u8 = 0;
const FILLED: u8 = 1;
/// Filled, with an addition waiting in the queue.
const QUEUED: u8 = 2;

struct Pending<F> {
    bucket: u32,
    x: F,
    y: F,
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
    fn pair(&self, i: usize) -> ((F, F), (F, F)) {
        let p = &self.queue[i];
        (self.points[p.bucket as usize], (p.x, p.y))
    }

    #[inline]
    fn store(&mut self, i: usize, sum: Option<(F, F)>) {
        let b = self.queue[i].bucket as usize;
        match sum {
            Some(s) => {
                self.points[b] = s;
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

    /// Adds the point `(x, y)` (not the identity) to bucket `bucket`.
    #[inline]
    pub fn add(&mut self, bucket: usize, x: G::Base, y: G::Base) {
        self.place(bucket, x, y, true);
        if self.queue.len() == self.capacity {
            self.apply();
        }
    }

    /// Queues, stores, holds back (`hold`) or side-sums one addition.
    #[inline]
    fn place(&mut self, bucket: usize, x: G::Base, y: G::Base, hold: bool) {
        match self.state[bucket] {
            EMPTY => {
                self.points[bucket] = (x, y);
                self.state[bucket] = FILLED;
            }
            FILLED => {
                self.state[bucket] = QUEUED;
                self.queue.push(Pending {
                    bucket: bucket as u32,
                    x,
                    y,
                });
            }
            _ if hold => self.held.push(Pending {
                bucket: bucket as u32,
                x,
                y,
            }),
            _ => {
                *self
                    .side
                    .entry(bucket as u32)
                    .or_insert_with(G::Projective::identity) += &G::from_coords(x, y);
            }
        }
    }

    /// Applies the queue, then places what was held back (colliding again goes to the side).
    fn apply(&mut self) {
        self.apply_queue();
        let held = std::mem::take(&mut self.held);
        for p in &held {
            self.place(p.bucket as usize, p.x, p.y, false);
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
        let mut side: Vec<(u32, G::Projective)> = self.side.into_iter().collect();
        side.sort_unstable_by_key(|(b, _)| *b);
        let mut running = G::Projective::identity();
        let mut total = G::Projective::identity();
        let mut started = false;
        for b in (0..self.points.len()).rev() {
            if self.state[b] != EMPTY {
                let (x, y) = self.points[b];
                running += &G::from_coords(x, y);
                started = true;
            }
            if side.last().is_some_and(|(s, _)| *s as usize == b) {
                running += side.pop().unwrap().1;
                started = true;
            }
            if started {
                total += running;
            }
        }
        total
    }
}
