//! Constraint names, kept compactly (one string blob and offsets) so that an unsatisfied
//! constraint found by the pre-compiled synthesizer can still be named.

/// The name of every constraint, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub(crate) ends: Vec<u64>,
    pub(crate) blob: Vec<u8>,
}

impl Names {
    /// Appends the next constraint's name.
    pub fn push(&mut self, name: &str) {
        self.blob.extend_from_slice(name.as_bytes());
        self.ends.push(self.blob.len() as u64);
    }

    /// Appends another list.
    pub fn extend(&mut self, other: &Names) {
        let base = self.blob.len() as u64;
        self.blob.extend_from_slice(&other.blob);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The name of constraint `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<String> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let bytes = self.blob.get(start..end)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Real heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.ends.capacity() * 8 + self.blob.capacity()
    }
}
