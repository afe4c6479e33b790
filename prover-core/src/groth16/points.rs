//! A query vector of curve points, held in memory or mapped from a native parameter file.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// A parameter query's points: a vector, or a private copy-on-write map of a native parameter
/// file's section (see [`crate::groth16::native`]), which reads its pages from the page cache as
/// they are used instead of decoding them. Either way it reads and writes as a slice; writing to
/// a mapped one changes this process's copy of the pages only, never the file.
pub struct Points<P> {
    store: Store<P>,
}

enum Store<P> {
    Owned(Vec<P>),
    Mapped { map: memmap2::MmapMut, len: usize },
}

impl<P> Points<P> {
    /// A mapped section of `len` points. The map must hold at least `len` points' bytes, start
    /// at an address aligned for `P`, and hold points in their in-memory representation.
    pub(crate) fn mapped(map: memmap2::MmapMut, len: usize) -> Self {
        assert!(map.len() >= len * std::mem::size_of::<P>());
        assert_eq!(map.as_ptr() as usize % std::mem::align_of::<P>(), 0);
        Points {
            store: Store::Mapped { map, len },
        }
    }

    /// Whether the points are mapped from a native parameter file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.store, Store::Mapped { .. })
    }

    /// Bytes the points take (a vector's capacity, or the mapped section).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<P>()
            * match &self.store {
                Store::Owned(v) => v.capacity(),
                Store::Mapped { len, .. } => *len,
            }
    }
}

impl<P> Deref for Points<P> {
    type Target = [P];

    fn deref(&self) -> &[P] {
        match &self.store {
            Store::Owned(v) => v,
            // SAFETY: `mapped` checked the size and alignment; the points are plain integers
            // (blst's field elements), valid for any bytes, and the native file's checksums were
            // checked before the map was handed over.
            Store::Mapped { map, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().cast::<P>(), *len)
            },
        }
    }
}

impl<P> DerefMut for Points<P> {
    fn deref_mut(&mut self) -> &mut [P] {
        match &mut self.store {
            Store::Owned(v) => v,
            // SAFETY: as in `deref`; the map is private, so writes stay in this process.
            Store::Mapped { map, len } => unsafe {
                std::slice::from_raw_parts_mut(map.as_mut_ptr().cast::<P>(), *len)
            },
        }
    }
}

impl<P> From<Vec<P>> for Points<P> {
    fn from(v: Vec<P>) -> Self {
        Points {
            store: Store::Owned(v),
        }
    }
}

impl<P> Default for Points<P> {
    fn default() -> Self {
        Vec::new().into()
    }
}

impl<P: Clone> Clone for Points<P> {
    /// A copy in memory (a mapped section is copied out of its map).
    fn clone(&self) -> Self {
        self.to_vec().into()
    }
}

impl<P: PartialEq> PartialEq for Points<P> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<P: Eq> Eq for Points<P> {}

impl<P: fmt::Debug> fmt::Debug for Points<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<P> FromIterator<P> for Points<P> {
    fn from_iter<I: IntoIterator<Item = P>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<P>>().into()
    }
}

impl<'a, P> IntoIterator for &'a Points<P> {
    type Item = &'a P;
    type IntoIter = std::slice::Iter<'a, P>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
