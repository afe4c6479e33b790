//! Fault injection, a documented test hook: the device "fails" on chosen accelerator calls, so
//! that tests (and users checking their set-up) can see a partition handed back and proved by
//! the engine's fallback, with nothing lost.
//!
//! Calls are numbered from 0 per backend, in the order they start. Set them with
//! [`Faults::fail_calls`], or in the environment: `PROOFLINE_GPU_FAIL_CALLS=0,3` (read by the
//! binary, [`crate::options::GpuOptions::from_lookup`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that lists the calls to fail.
pub const FAIL_CALLS_VAR: &str = "PROOFLINE_GPU_FAIL_CALLS";

/// Which accelerator calls fail.
#[derive(Debug, Default)]
pub struct Faults {
    fail: BTreeSet<u64>,
    calls: AtomicU64,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Faults::default()
    }

    /// Fails the calls numbered in `calls`.
    pub fn fail_calls(calls: impl IntoIterator<Item = u64>) -> Self {
        Faults {
            fail: calls.into_iter().collect(),
            calls: AtomicU64::new(0),
        }
    }

    /// Parses `0,3,7`.
    pub fn parse(v: &str) -> Result<Self, String> {
        let calls = v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| format!("{FAIL_CALLS_VAR}: {s:?} is not a call number"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Faults::fail_calls(calls))
    }

    /// Counts a call; `Some(number)` when it is to fail.
    pub fn next_call(&self) -> Option<u64> {
        let n = self.calls.fetch_add(1, Ordering::AcqRel);
        self.fail.contains(&n).then_some(n)
    }

    /// Whether any of the calls is to fail.
    pub fn is_empty(&self) -> bool {
        self.fail.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_calls_fail_and_others_do_not() {
        let f = Faults::parse("1, 3").unwrap();
        let got: Vec<_> = (0..5).map(|_| f.next_call()).collect();
        assert_eq!(got, [None, Some(1), None, Some(3), None]);
        assert!(Faults::parse("1,x").is_err());
        assert!(Faults::parse("").unwrap().is_empty());
        let none = Faults::none();
        assert!((0..10).all(|_| none.next_call().is_none()));
    }
}
