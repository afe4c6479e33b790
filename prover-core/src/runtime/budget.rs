//! The memory budget: weighted RAII permits over bytes (the engine's one [`Semaphore`] type).
//!
//! A partition's estimated bytes are reserved before its synthesis starts and given back in two
//! steps: the a/b/c share when the accelerator stage ends, the rest when the partition leaves the
//! ledger. Permits count bytes in a `u64` (no unit conversion, no overflow at hundreds of GiB).

use std::path::Path;

use crate::error::{Error, Result};
use crate::runtime::permit::{Permit, Semaphore};

/// How the budget's size is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSize {
    /// A fixed number of bytes.
    Bytes(u64),
    /// The cgroup's `memory.max` (v2) or `memory.limit_in_bytes` (v1), else the available RAM,
    /// minus a margin of a tenth (at least 1 GiB) for the parameters, allocator and stacks.
    Auto,
}

impl BudgetSize {
    /// Resolves the size in bytes.
    pub fn resolve(self) -> Result<u64> {
        match self {
            BudgetSize::Bytes(b) => Ok(b),
            BudgetSize::Auto => {
                let limit =
                    cgroup_limit()
                        .or_else(mem_available)
                        .ok_or_else(|| {
                            Error::Resource {
                    what: "the memory budget",
                    detail: "auto: neither a cgroup memory limit nor /proc/meminfo could be read"
                        .into(),
                }
                        })?;
                let margin = (limit / 10).max(1 << 30);
                Ok(limit.saturating_sub(margin))
            }
        }
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The memory limit of this process's cgroup, if one is set.
pub fn cgroup_limit() -> Option<u64> {
    // cgroup v2: find our group from /proc/self/cgroup ("0::/path").
    let rel = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
        })
        .unwrap_or_default();
    let v2 = Path::new("/sys/fs/cgroup")
        .join(rel.trim_start_matches('/'))
        .join("memory.max");
    let candidates = [
        v2,
        Path::new("/sys/fs/cgroup/memory.max").to_path_buf(),
        Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").to_path_buf(),
    ];
    // "max" (no limit) does not parse; v1's "no limit" is a huge number.
    candidates
        .iter()
        .filter_map(|p| read_u64(p))
        .find(|&b| b < (1u64 << 60))
}

/// `MemAvailable` from /proc/meminfo, in bytes.
pub fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A byte budget shared by every partition of an engine: a [`Semaphore`] over bytes.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    bytes: Semaphore,
}

/// Reserved budget bytes (a [`Permit`] whose units are bytes).
pub type BudgetPermit = Permit;

impl MemoryBudget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        MemoryBudget {
            bytes: Semaphore::new(capacity),
        }
    }

    /// The size of the budget.
    pub fn capacity(&self) -> u64 {
        self.bytes.capacity()
    }

    /// Bytes not reserved now.
    pub fn available(&self) -> u64 {
        self.bytes.available()
    }

    /// Reserves `bytes`, waiting until they are free. More than the whole budget is an error at
    /// once (it could never be granted), never a wait.
    pub fn acquire(&self, bytes: u64) -> Result<BudgetPermit> {
        self.bytes.acquire(bytes).ok_or(Error::OverBudget {
            needed: bytes,
            budget: self.capacity(),
        })
    }

    /// Reserves `bytes` if they are free now, without waiting.
    pub fn try_acquire(&self, bytes: u64) -> Option<BudgetPermit> {
        self.bytes.try_acquire(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_wait_and_release_in_two_steps() {
        let b = MemoryBudget::new(100);
        let mut p = b.acquire(80).unwrap();
        assert_eq!(b.available(), 20);
        let b2 = b.clone();
        let waiter = std::thread::spawn(move || b2.acquire(50).map(|p| p.amount()));
        p.release(30);
        // 50 free now: the waiter gets through.
        assert_eq!(waiter.join().unwrap().unwrap(), 50);
        assert_eq!(b.available(), 50);
        drop(p);
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn more_than_the_whole_budget_is_an_error_not_a_wait() {
        let b = MemoryBudget::new(100);
        assert!(matches!(
            b.acquire(101),
            Err(Error::OverBudget {
                needed: 101,
                budget: 100
            })
        ));
        // Twin: exactly the budget is fine.
        assert_eq!(b.acquire(100).unwrap().amount(), 100);
    }

    #[test]
    fn auto_resolves_below_the_limit() {
        let auto = BudgetSize::Auto.resolve().unwrap();
        let limit = cgroup_limit().or_else(mem_available).unwrap();
        assert!(auto < limit, "auto {auto} >= limit {limit}");
        assert_eq!(BudgetSize::Bytes(5).resolve().unwrap(), 5);
    }
}
