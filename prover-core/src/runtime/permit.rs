//! One permit type for the engine: a weighted counting semaphore with RAII permits. Synthesis
//! permits (weight 1 of `synthesis_workers`), accelerator queue slots (1 of `queue_depth`), fallback slots and
//! budget bytes (weight = bytes, counted in a `u64`: no unit conversion, no overflow at hundreds
//! of GiB) are all this type.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

struct Inner {
    capacity: u64,
    available: Mutex<u64>,
    freed: Condvar,
}

/// A weighted semaphore. Cloning gives another handle to the same one.
#[derive(Clone)]
pub struct Semaphore {
    inner: Arc<Inner>,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("capacity", &self.inner.capacity)
            .field("available", &self.available())
            .finish()
    }
}

impl Semaphore {
    /// A semaphore of `capacity` units, all free.
    pub fn new(capacity: u64) -> Self {
        Semaphore {
            inner: Arc::new(Inner {
                capacity,
                available: Mutex::new(capacity),
                freed: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.inner
            .available
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The number of units.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Units not held now.
    pub fn available(&self) -> u64 {
        *self.lock()
    }

    /// Takes `n` units, waiting until they are free. `None` when `n` exceeds the capacity: such
    /// a request could never be granted, so it is refused at once instead of waiting forever.
    pub fn acquire(&self, n: u64) -> Option<Permit> {
        if n > self.inner.capacity {
            return None;
        }
        let mut available = self.lock();
        while *available < n {
            available = self
                .inner
                .freed
                .wait(available)
                .unwrap_or_else(|e| e.into_inner());
        }
        *available -= n;
        Some(self.permit(n))
    }

    /// Takes `n` units if they are free now, without waiting.
    pub fn try_acquire(&self, n: u64) -> Option<Permit> {
        let mut available = self.lock();
        if *available < n {
            return None;
        }
        *available -= n;
        Some(self.permit(n))
    }

    fn permit(&self, amount: u64) -> Permit {
        Permit {
            sem: self.clone(),
            amount,
        }
    }

    fn give_back(&self, n: u64) {
        if n == 0 {
            return;
        }
        let mut available = self.lock();
        *available += n;
        debug_assert!(*available <= self.inner.capacity, "permit given back twice");
        drop(available);
        self.inner.freed.notify_all();
    }
}

/// Units held; given back when dropped, or in parts with [`Permit::release`].
#[must_use = "dropping the permit gives its units back at once"]
pub struct Permit {
    sem: Semaphore,
    amount: u64,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("amount", &self.amount)
            .finish()
    }
}

impl Permit {
    /// Units still held.
    pub fn amount(&self) -> u64 {
        self.amount
    }

    /// Gives back up to `n` of the units now, keeping the rest.
    pub fn release(&mut self, n: u64) {
        let n = n.min(self.amount);
        self.amount -= n;
        self.sem.give_back(n);
    }

    /// Merges another permit of the same semaphore into this one.
    pub fn absorb(&mut self, mut other: Permit) {
        debug_assert!(Arc::ptr_eq(&self.sem.inner, &other.sem.inner));
        self.amount += std::mem::take(&mut other.amount);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.sem.give_back(self.amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_wait_and_release_in_parts() {
        let s = Semaphore::new(100);
        let mut p = s.acquire(80).unwrap();
        assert_eq!(s.available(), 20);
        assert!(s.try_acquire(21).is_none());
        let s2 = s.clone();
        let waiter = std::thread::spawn(move || s2.acquire(50).map(|p| p.amount()));
        p.release(30);
        // 50 free now: the waiter gets through.
        assert_eq!(waiter.join().unwrap(), Some(50));
        assert_eq!(s.available(), 50);
        let q = s.try_acquire(10).unwrap();
        p.absorb(q);
        assert_eq!(p.amount(), 60);
        drop(p);
        assert_eq!(s.available(), 100);
    }

    #[test]
    fn more_than_the_capacity_is_refused_not_awaited() {
        let s = Semaphore::new(3);
        assert!(s.acquire(4).is_none());
        // Twin: exactly the capacity is granted.
        assert_eq!(s.acquire(3).unwrap().amount(), 3);
        assert_eq!(s.available(), 3);
    }
}
