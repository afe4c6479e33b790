//! Signed-digit windows of 255-bit scalars, and the choice of window width and point chunks
//! for a length and a thread count.
//!
//! A scalar `s` is written `s = sum_w d_w 2^(c w)` with digits `d_w` in `[-2^(c-1), 2^(c-1))`,
//! so a window needs `2^(c-1)` buckets (bucket `|d| - 1`, the point negated when `d < 0`).
//! The digits come without a carry chain: with `H = sum_w 2^(c-1) 2^(c w)`, the plain base-2^c
//! digits `t_w` of `t = s + H` give `d_w = t_w - 2^(c-1)`, so any window's digit is one
//! 320-bit addition and a bit extraction away.

/// The narrowest window: below 4 bits, `s + H` can overflow the windows' 256 bits.
pub const MIN_WIDTH: u32 = 4;
/// The widest window considered: 2^15 buckets per window, 3 MiB of G1 buckets (6 MiB in G2)
/// per task. Wider windows save a few percent of additions on paper for very long MSMs, but
/// the cost model ignores cache misses, and the bucket arrays (and the memory of a task per
/// thread) would grow 16-fold.
pub const MAX_WIDTH: u32 = 16;

/// Signed-digit windows of width `c` over 256 bits (255-bit scalars plus the last carry).
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    width: u32,
    count: u32,
    offset: [u64; 5],
}

impl Windows {
    /// Windows of `width` bits, `MIN_WIDTH <= width <= MAX_WIDTH`. Every scalar below 2^255
    /// has its digits: `t = s + H < 0.91 * 2^255 + 2^255 * 16/15 < 2^256` for the BLS12-381
    /// scalar field's order and `width >= 4`.
    pub fn new(width: u32) -> Self {
        assert!(
            (MIN_WIDTH..=MAX_WIDTH).contains(&width),
            "window width {width} out of {MIN_WIDTH}..={MAX_WIDTH}"
        );
        let count = 256u32.div_ceil(width);
        let mut offset = [0u64; 5];
        for w in 0..count {
            let bit = (w * width + width - 1) as usize;
            offset[bit / 64] |= 1 << (bit % 64);
        }
        Windows {
            width,
            count,
            offset,
        }
    }

    /// The window width `c`.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The number of windows, `ceil(256 / c)`.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Buckets per window, `2^(c-1)`.
    pub fn buckets(&self) -> usize {
        1 << (self.width - 1)
    }

    /// The digit of window `w` of the scalar whose little-endian limbs are `s` (below 2^255).
    #[inline]
    pub fn digit(&self, s: &[u64; 4], w: u32) -> i32 {
        let mut t = [0u64; 5];
        let mut carry = false;
        for (i, t) in t.iter_mut().enumerate() {
            let limb = if i < 4 { s[i] } else { 0 };
            let (a, c1) = limb.overflowing_add(self.offset[i]);
            let (b, c2) = a.overflowing_add(carry as u64);
            *t = b;
            carry = c1 | c2;
        }
        let bit = (w * self.width) as usize;
        let (limb, shift) = (bit / 64, bit % 64);
        let mut v = t[limb] >> shift;
        if shift + self.width as usize > 64 && limb + 1 < 5 {
            v |= t[limb + 1] << (64 - shift);
        }
        let v = (v & ((1u64 << self.width) - 1)) as i32;
        v - (1 << (self.width - 1))
    }
}

/// How one MSM is cut into tasks: every window of width `width` over each of `chunks` equal
/// ranges of the points, one bucket set per task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The window width `c`.
    pub width: u32,
    /// Point ranges per window.
    pub chunks: usize,
}

impl Plan {
    /// The plan with the least estimated time for `n` points on `threads` threads, where one
    /// bucket's share of a window's reduction costs `reduce_cost` bucket additions: each task
    /// adds its points into buckets and reduces its buckets, and the tasks run `threads` at a
    /// time (so the estimate is the number of rounds times one task's cost).
    pub fn choose(n: usize, threads: usize, reduce_cost: f64) -> Plan {
        let threads = threads.max(1);
        let mut best = (
            f64::INFINITY,
            Plan {
                width: MIN_WIDTH,
                chunks: 1,
            },
        );
        for width in MIN_WIDTH..=MAX_WIDTH {
            let windows = 256usize.div_ceil(width as usize);
            for chunks in 1..=4 * threads {
                if chunks > 1 && n / chunks < 1024 {
                    break;
                }
                let per = n.div_ceil(chunks) as f64;
                let task = per + (1u64 << (width - 1)) as f64 * reduce_cost;
                let rounds = (windows * chunks).div_ceil(threads) as f64;
                let cost = rounds * task;
                if cost < best.0 {
                    best = (cost, Plan { width, chunks });
                }
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Scalar;
    use ff::{Field, PrimeField};

    fn limbs(s: &Scalar) -> [u64; 4] {
        let r = s.to_repr();
        std::array::from_fn(|i| u64::from_le_bytes(r[8 * i..8 * i + 8].try_into().unwrap()))
    }

    /// `sum_w d_w 2^(c w)` in the scalar field.
    fn recompose(win: &Windows, digits: &[i32]) -> Scalar {
        let base = Scalar::from(2u64).pow_vartime([win.width() as u64]);
        digits.iter().rev().fold(Scalar::ZERO, |acc, &d| {
            let m = Scalar::from(d.unsigned_abs() as u64);
            acc * base + if d < 0 { -m } else { m }
        })
    }

    #[test]
    fn digits_recompose_the_scalar() {
        let mut rng = rand::thread_rng();
        let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2u64)];
        scalars.extend((0..20).map(|_| Scalar::random(&mut rng)));
        for c in MIN_WIDTH..=MAX_WIDTH {
            let win = Windows::new(c);
            assert!(win.count() * c >= 256);
            for s in &scalars {
                let l = limbs(s);
                let digits: Vec<i32> = (0..win.count()).map(|w| win.digit(&l, w)).collect();
                let half = 1i32 << (c - 1);
                assert!(digits.iter().all(|d| (-half..half).contains(d)), "c = {c}");
                assert_eq!(recompose(&win, &digits), *s, "c = {c}");
                // Negative twin: one digit off by one no longer recomposes the scalar.
                let mut bad = digits.clone();
                let at = c as usize % bad.len();
                bad[at] += 1;
                assert_ne!(recompose(&win, &bad), *s, "c = {c}");
            }
        }
    }

    #[test]
    fn plan_widens_with_length_and_splits_for_threads() {
        let small = Plan::choose(1 << 10, 2, 4.0);
        let large = Plan::choose(1 << 20, 2, 4.0);
        assert!(large.width > small.width, "{small:?} {large:?}");
        // Many threads and a long MSM: points are split as well as windows.
        let wide = Plan::choose(1 << 22, 64, 4.0);
        assert!(wide.chunks > 1, "{wide:?}");
        // One thread never splits points (splitting only repeats reductions).
        assert_eq!(Plan::choose(1 << 20, 1, 4.0).chunks, 1);
    }
}
