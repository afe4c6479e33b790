//! Scalars drawn from a ChaCha20 stream on all cores: the same values, in the same order, as
//! `Scalar::random` called again and again on that stream.
//!
//! `Scalar::random` takes four `u64`s (eight 32-bit words of the stream) per attempt, masks the
//! top bit and keeps the attempt if it is below the modulus (about 91% are). An attempt's words
//! are where the stream's word position says, so attempts are made in batches on all cores, each
//! chunk from its own copy of the stream set to its position, and the kept ones are taken in order.

use blstrs::Scalar;
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use rayon::prelude::*;

/// Words of the stream one attempt takes.
const WORDS_PER_ATTEMPT: u128 = 8;
/// Attempts made per batch (2 MiB of candidates).
const BATCH: u64 = 1 << 16;
/// Attempts per parallel chunk.
const CHUNK: u64 = 1 << 12;

/// A stream of scalars, drawn in batches.
pub struct ScalarStream {
    rng: ChaCha20Rng,
    /// The stream's word position of the next attempt to make.
    next_attempt: u128,
    batch: Vec<Scalar>,
    taken: usize,
}

impl ScalarStream {
    /// The scalars `Scalar::random(&mut rng)` would give from `rng`'s current position on.
    pub fn new(rng: ChaCha20Rng) -> Self {
        ScalarStream {
            next_attempt: rng.get_word_pos(),
            rng,
            batch: Vec::new(),
            taken: 0,
        }
    }

    /// The next scalar.
    pub fn next_scalar(&mut self) -> Scalar {
        while self.taken == self.batch.len() {
            self.refill();
        }
        self.taken += 1;
        self.batch[self.taken - 1]
    }

    fn refill(&mut self) {
        let start = self.next_attempt;
        let rng = &self.rng;
        let chunks: Vec<Vec<Scalar>> = (0..BATCH / CHUNK)
            .into_par_iter()
            .map(|c| {
                let mut r = rng.clone();
                r.set_word_pos(start + u128::from(c * CHUNK) * WORDS_PER_ATTEMPT);
                (0..CHUNK).filter_map(|_| attempt(&mut r)).collect()
            })
            .collect();
        self.batch.clear();
        self.batch.extend(chunks.into_iter().flatten());
        self.taken = 0;
        self.next_attempt = start + u128::from(BATCH) * WORDS_PER_ATTEMPT;
    }
}

/// One attempt of `Scalar::random`: four `u64`s, the top bit masked, kept if below the modulus.
fn attempt(rng: &mut ChaCha20Rng) -> Option<Scalar> {
    let mut raw = [0u64; 4];
    for w in raw.iter_mut() {
        *w = rng.next_u64();
    }
    raw[3] &= u64::MAX >> 1;
    Scalar::from_u64s_le(&raw).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use rand_core::SeedableRng;

    #[test]
    fn the_same_scalars_as_scalar_random_one_after_another() {
        let seed = rand::random::<u64>();
        let n = 3 * BATCH as usize + 17;
        let mut one = ChaCha20Rng::seed_from_u64(seed);
        // Start somewhere other than the stream's beginning, as after other draws.
        let _ = Scalar::random(&mut one);
        let mut stream = ScalarStream::new(one.clone());
        for i in 0..n {
            assert_eq!(
                stream.next_scalar(),
                Scalar::random(&mut one),
                "draw {i}, seed {seed}"
            );
        }
        // Twin: a stream one draw ahead gives other values.
        let mut ahead = ChaCha20Rng::seed_from_u64(seed);
        let _ = Scalar::random(&mut ahead);
        let _ = Scalar::random(&mut ahead);
        let mut behind = ChaCha20Rng::seed_from_u64(seed);
        let _ = Scalar::random(&mut behind);
        let mut ahead = ScalarStream::new(ahead);
        assert_ne!(ahead.next_scalar(), Scalar::random(&mut behind));
    }
}
