//! Scalars that are public (a circuit's coefficients, drawn from its shape seed), drawn and
//! tested without the constant-time cost blstrs pays for secrets.
//!
//! [`random_scalar`] gives `Scalar::random`'s values: the same words of the stream, the same
//! attempts kept, the same scalars in the same order. `Scalar::random` takes four `u64`s per
//! attempt, masks the top bit and keeps the attempt if it is below the modulus (about 91% are);
//! blstrs checks and converts every attempt in constant time (`blst_scalar_fr_check`, a
//! conversion that a refused attempt drops, a zeroized temporary). Here the check is a plain
//! comparison and the conversion one Montgomery multiplication of a kept attempt: a draw took
//! 88 ns instead of 117 ns on a 2-core CI-like machine (27 ns of either is the ChaCha stream).
//! [`is_zero`] compares the limbs, where `Scalar::is_zero` goes through `subtle`'s barriers.

use std::sync::OnceLock;

use blstrs::Scalar;
use ff::Field;
use rand_core::RngCore;

/// The scalar field's modulus r, little-endian `u64`s.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// The next scalar `Scalar::random(rng)` would return, drawn from the same words of `rng`.
pub fn random_scalar(rng: &mut impl RngCore) -> Scalar {
    loop {
        let mut raw = [0u64; 4];
        for word in raw.iter_mut() {
            *word = rng.next_u64();
        }
        raw[3] &= u64::MAX >> 1;
        if below_modulus(&raw) {
            return from_canonical(raw);
        }
    }
}

/// Whether `s` is zero, compared limb by limb (not in constant time: for public values only).
pub fn is_zero(s: &Scalar) -> bool {
    blst::blst_fr::from(*s).l == [0; 4]
}

/// `raw < r`, compared from the top limb (not in constant time: for public values only).
fn below_modulus(raw: &[u64; 4]) -> bool {
    for (a, m) in raw.iter().rev().zip(MODULUS.iter().rev()) {
        if a != m {
            return a < m;
        }
    }
    false
}

/// The scalar whose canonical value is `raw` (`raw < r`). Read as Montgomery limbs, `raw` is
/// the scalar `raw / R`; one multiplication by the scalar `R` (that is, 2^256 mod r) gives `raw`.
fn from_canonical(raw: [u64; 4]) -> Scalar {
    static R: OnceLock<Scalar> = OnceLock::new();
    let r = R.get_or_init(|| Scalar::from(2u64).pow_vartime([256]));
    Scalar::from(blst::blst_fr { l: raw }) * r
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::PrimeField;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn zero_is_zero_and_nothing_else() {
        assert!(is_zero(&Scalar::ZERO));
        assert!(is_zero(&(Scalar::ONE - Scalar::ONE)));
        let seed = rand::random::<u64>();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        for x in [Scalar::ONE, -Scalar::ONE, random_scalar(&mut rng)] {
            assert!(!is_zero(&x), "{x:?}, seed {seed}");
        }
    }

    #[test]
    fn the_modulus_is_the_fields() {
        // r - 1 is the largest canonical value: its bytes are the modulus's, less one.
        let top = (-Scalar::ONE).to_repr();
        let mut limbs = [0u64; 4];
        for (limb, bytes) in limbs.iter_mut().zip(top.as_ref().chunks(8)) {
            *limb = u64::from_le_bytes(bytes.try_into().unwrap());
        }
        limbs[0] += 1;
        assert_eq!(limbs, MODULUS);
    }

    #[test]
    fn the_same_scalars_as_scalar_random_from_the_same_stream() {
        let seed = rand::random::<u64>();
        let mut ours = ChaCha20Rng::seed_from_u64(seed);
        let mut theirs = ChaCha20Rng::seed_from_u64(seed);
        for i in 0..100_000 {
            assert_eq!(
                random_scalar(&mut ours),
                Scalar::random(&mut theirs),
                "draw {i}, seed {seed}"
            );
        }
        // Both took the same words: the streams are at the same place.
        assert_eq!(ours.get_word_pos(), theirs.get_word_pos());
        // Twin: a stream one draw behind gives another value.
        let mut behind = ChaCha20Rng::seed_from_u64(seed);
        assert_ne!(random_scalar(&mut behind), Scalar::random(&mut theirs));
    }

    /// A stream that returns the given words, again and again.
    struct Words(Vec<u64>, usize);

    impl RngCore for Words {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.1 += 1;
            self.0[(self.1 - 1) % self.0.len()]
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            rand_core::impls::fill_bytes_via_next(self, dest)
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    #[test]
    fn the_same_attempts_kept_and_refused_at_the_modulus() {
        let [m0, m1, m2, m3] = MODULUS;
        let kept_after = |refused: [u64; 4], kept: [u64; 4]| {
            let words: Vec<u64> = refused.into_iter().chain(kept).collect();
            let ours = random_scalar(&mut Words(words.clone(), 0));
            let theirs = Scalar::random(&mut Words(words, 0));
            assert_eq!(ours, theirs, "refused {refused:x?}, then {kept:x?}");
            ours
        };
        // r itself, r + 1, and 2^255 - 1 (all ones under the mask) are refused; the top bit is
        // masked, so r with it set is refused too.
        for refused in [
            [m0, m1, m2, m3],
            [m0 + 1, m1, m2, m3],
            [u64::MAX; 4],
            [m0, m1, m2, m3 | 1 << 63],
        ] {
            let kept = kept_after(refused, [5, 0, 0, 0]);
            assert_eq!(kept, Scalar::from(5u64));
        }
        // r - 1 and 0 are kept, and are what they say.
        assert_eq!(kept_after([m0 - 1, m1, m2, m3], [0; 4]), -Scalar::ONE);
        assert_eq!(kept_after([0; 4], [1, 0, 0, 0]), Scalar::ZERO);
        // A lower limb decides only where the limbs above it equal the modulus's: r - 2^64 + 1
        // is kept although its lowest limb is above r's.
        let two_64 = Scalar::from(u64::MAX) + Scalar::ONE;
        assert_eq!(
            kept_after([m0 + 1, m1 - 1, m2, m3], [0; 4]),
            Scalar::ONE - two_64
        );
    }
}
