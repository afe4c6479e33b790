//! Density bitmaps (which variables a query uses) and canonical scalar bytes.

use blstrs::Scalar;
use ff::PrimeField;
use rayon::prelude::*;

use crate::parallel;

/// A bitmap over variables: bit `i` is set when variable `i` appears with a nonzero coefficient
/// in some constraint of the query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
    ones: usize,
}

impl Density {
    /// `len` bits from little-endian words (bit `i` is bit `i % 64` of word `i / 64`); bits
    /// past `len` are cleared.
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        words.resize(len.div_ceil(64), 0);
        if len % 64 != 0 {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        let ones = words.iter().map(|w| w.count_ones() as usize).sum();
        Density { words, len, ones }
    }

    /// Appends an unset bit.
    pub fn push_unset(&mut self) {
        if self.len % 64 == 0 {
            self.words.push(0);
        }
        self.len += 1;
    }

    /// Sets bit `i` (which must exist).
    pub fn set(&mut self, i: usize) {
        assert!(i < self.len, "density index {i} out of range {}", self.len);
        let (w, b) = (i / 64, i % 64);
        if self.words[w] & (1 << b) == 0 {
            self.words[w] |= 1 << b;
            self.ones += 1;
        }
    }

    /// Whether bit `i` is set.
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// The bits as little-endian 64-bit words (bit `i` is bit `i % 64` of word `i / 64`; bits
    /// past the length are zero).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the bitmap has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> usize {
        self.ones
    }

    /// Appends the bits of `other`, skipping its first `skip` bits.
    pub fn extend_from(&mut self, other: &Density, skip: usize) {
        for i in skip..other.len {
            self.push_unset();
            if other.get(i) {
                let last = self.len - 1;
                self.set(last);
            }
        }
    }

    /// Real heap bytes (capacity x element size).
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * std::mem::size_of::<u64>()
    }

    /// Gives back the words' spare capacity (after the bitmap was grown bit by bit).
    pub fn shrink_to_fit(&mut self) {
        self.words.shrink_to_fit();
    }
}

/// A scalar in canonical (not Montgomery) little-endian form, as MSMs take it.
///
/// Same size and alignment as [`Scalar`], so that a `Vec<Scalar>` converts in place.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScalarBytes(pub [u8; 32]);

const _: () = assert!(std::mem::size_of::<ScalarBytes>() == std::mem::size_of::<Scalar>());
const _: () = assert!(std::mem::align_of::<ScalarBytes>() == std::mem::align_of::<Scalar>());

impl ScalarBytes {
    /// The canonical form of `s`.
    pub fn from_scalar(s: &Scalar) -> Self {
        ScalarBytes(s.to_repr())
    }

    /// Whether the scalar is zero.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 32]
    }

    /// Whether the scalar is one.
    pub fn is_one(&self) -> bool {
        self.0[0] == 1 && self.0[1..] == [0; 31]
    }

    /// Back to a field element (None if the bytes are not canonical).
    pub fn to_scalar(&self) -> Option<Scalar> {
        Scalar::from_repr(self.0).into()
    }
}

/// Converts scalars to canonical bytes in place, in parallel, without a second buffer.
pub fn into_canonical(v: Vec<Scalar>) -> Vec<ScalarBytes> {
    let mut v = std::mem::ManuallyDrop::new(v);
    parallel::install(|| {
        v.par_iter_mut().for_each(|s| {
            let bytes = ScalarBytes::from_scalar(s);
            // SAFETY: `Scalar` is four plain u64 limbs with no invalid bit patterns, and the two
            // types have the same size; the slot is reinterpreted as `ScalarBytes` right below.
            *s = unsafe { std::mem::transmute::<ScalarBytes, Scalar>(bytes) };
        })
    });
    let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
    // SAFETY: same size and alignment (asserted above), so the allocation's layout is unchanged;
    // every element was written as `ScalarBytes` bytes.
    unsafe { Vec::from_raw_parts(ptr.cast::<ScalarBytes>(), len, cap) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    #[test]
    fn from_words_clears_the_tail_and_counts_the_rest() {
        let d = Density::from_words(vec![u64::MAX, u64::MAX], 70);
        assert_eq!((d.len(), d.count_ones()), (70, 70));
        assert!(d.get(69) && !d.get(70));
        assert_eq!(d.words(), [u64::MAX, 0x3f]);
        let mut pushed = Density::default();
        for i in 0..70 {
            pushed.push_unset();
            pushed.set(i);
        }
        assert_eq!(d, pushed);
        // Missing words read as unset bits.
        let short = Density::from_words(vec![1], 130);
        assert_eq!(
            (short.len(), short.count_ones(), short.words().len()),
            (130, 1, 3)
        );
    }

    #[test]
    fn density_counts_and_extends() {
        let mut d = Density::default();
        for _ in 0..130 {
            d.push_unset();
        }
        d.set(0);
        d.set(64);
        d.set(64);
        d.set(129);
        assert_eq!(d.count_ones(), 3);
        assert!(d.get(64) && !d.get(65) && !d.get(500));
        let mut e = Density::default();
        e.extend_from(&d, 1);
        assert_eq!(e.len(), 129);
        assert_eq!(e.count_ones(), 2);
        assert!(e.get(63) && e.get(128) && !e.get(0));
    }

    #[test]
    fn canonical_conversion_round_trips() {
        let mut rng = rand::thread_rng();
        let v: Vec<Scalar> = (0..1000).map(|_| Scalar::random(&mut rng)).collect();
        let mut expected = v.clone();
        expected.push(Scalar::ZERO);
        expected.push(Scalar::ONE);
        let mut w = v.clone();
        w.push(Scalar::ZERO);
        w.push(Scalar::ONE);
        let bytes = into_canonical(w);
        let back: Vec<Scalar> = bytes.iter().map(|b| b.to_scalar().unwrap()).collect();
        assert_eq!(back, expected);
        assert!(bytes[1000].is_zero() && !bytes[1000].is_one());
        assert!(bytes[1001].is_one() && !bytes[1001].is_zero());
        assert!(!bytes[0].is_one() || expected[0] == Scalar::ONE);
    }
}
